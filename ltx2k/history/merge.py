"""Result files in and out of a shard's private results directory.

A shard run measures into private directories and lands the results in the
one results directory afterwards. :func:`copy_in` gives a shard the result
files the destination already holds for its commits, so ``asv run`` merges
into them exactly as it would in place; :func:`merge_results` brings the
shard's files back. A result file is per machine x commit x env, so merging
is a copy; a file the destination changed since it was copied in is a
:class:`Conflict`, reported and never overwritten.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ltx2k.runner import asv_compat


def copy_in(dest: Path, shard_results: Path, machine: str, commits: Iterable[str]) -> dict:
    """Copy *dest*'s result files of *commits* into the shard; {relative path: bytes}."""
    copied = {}
    for c in commits:
        for src in sorted((dest / machine).glob(f"{c[:8]}-*.json")):
            rel = f"{machine}/{src.name}"
            data = src.read_bytes()
            (shard_results / machine).mkdir(parents=True, exist_ok=True)
            (shard_results / rel).write_bytes(data)
            copied[rel] = data
    return copied


@dataclass(frozen=True)
class Conflict:
    path: str  # relative to the results dir
    kept: str  # where the shard's copy still is
    reason: str


@dataclass
class MergeReport:
    copied: list[str] = field(default_factory=list)  # new in the destination
    replaced: list[str] = field(default_factory=list)  # updated by asv (copied in, unchanged since)
    unchanged: list[str] = field(default_factory=list)
    conflicts: list[Conflict] = field(default_factory=list)


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)  # readers see the old file or the new one, never half of one
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _merge_benchmarks(dest: Path, shard_dirs: Sequence[Path], report: MergeReport) -> None:
    merged: dict = {}
    owner: dict[str, Path] = {}
    for d in shard_dirs:
        p = d / "benchmarks.json"
        if not p.exists():
            continue
        data = json.loads(p.read_text(encoding="utf-8"))
        for name, entry in data.items():
            if name == "version":
                continue
            if name in merged and merged[name] != entry:
                # The suite changed between two shards' discoveries.
                report.conflicts.append(
                    Conflict(
                        "benchmarks.json",
                        str(p),
                        f"shards describe {name} differently ({owner[name]} vs {p})",
                    )
                )
                continue
            merged[name], owner[name] = entry, p
    if not merged:
        return
    target = dest / "benchmarks.json"
    current = json.loads(target.read_text(encoding="utf-8")) if target.exists() else {}
    current.pop("version", None)
    # asv rewrites benchmarks.json on every run (it describes the current
    # suite); keep names only the destination knows, as the store does.
    new = {**current, **merged}
    if new == current:
        report.unchanged.append("benchmarks.json")
        return
    tmp = target.parent / f".benchmarks.json.{os.getpid()}.tmp"
    asv_compat.write_json(tmp, new, api_version=2)
    os.replace(tmp, target)
    (report.replaced if current else report.copied).append("benchmarks.json")


def accumulate(total: MergeReport, rep: MergeReport) -> None:
    """Fold one landing's report into the run's: a file counts once, as its strongest change.

    Copied (new in dest) beats replaced beats unchanged: a file a first landing copied
    and a second one updated is still new to whoever reads the report. A conflict is
    kept once per path, its latest reason.
    """
    rank = {"copied": 2, "replaced": 1, "unchanged": 0}
    where = {rel: kind for kind in rank for rel in getattr(total, kind)}
    for kind in rank:
        for rel in getattr(rep, kind):
            old = where.get(rel)
            if old is None or rank[kind] > rank[old]:
                if old is not None:
                    getattr(total, old).remove(rel)
                getattr(total, kind).append(rel)
                where[rel] = kind
    paths = {c.path for c in rep.conflicts}
    total.conflicts[:] = [c for c in total.conflicts if c.path not in paths] + rep.conflicts


def merge_results(
    dest: Path, shard_dirs: Sequence[Path], copied_in: Mapping[str, bytes] | None = None
) -> MergeReport:
    """Merge shard results dirs into *dest*; never overwrite a file changed behind our back.

    A result file is copied if *dest* lacks it, left alone if identical, and
    replaced only if *dest*'s copy is byte-identical to the one copied into the
    shard (asv updated it, as an in-place ``asv run`` would). Anything else is a
    :class:`Conflict`: reported, *dest* untouched, the shard's copy kept.
    ``machine.json`` follows asv (every run rewrites it) unless shards disagree.
    """
    copied_in = dict(copied_in or {})
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    report = MergeReport()
    _merge_benchmarks(dest, shard_dirs, report)
    seen: dict[str, tuple[bytes, Path]] = {}
    for d in shard_dirs:
        for src in sorted(d.glob("*/*.json")):
            rel = f"{src.parent.name}/{src.name}"
            data = src.read_bytes()
            if rel in seen:
                if seen[rel][0] != data:
                    report.conflicts.append(
                        Conflict(
                            rel, str(src), f"two shards wrote different {rel} ({seen[rel][1]})"
                        )
                    )
                continue
            seen[rel] = (data, src)
            target = dest / rel
            if not target.exists():
                _atomic_write(target, data)
                report.copied.append(rel)
                continue
            current = target.read_bytes()
            if current == data:
                report.unchanged.append(rel)
            elif src.name == "machine.json" or copied_in.get(rel) == current:
                _atomic_write(target, data)
                report.replaced.append(rel)
            else:
                why = (
                    "the destination changed since it was copied into the shard"
                    if rel in copied_in
                    else "the destination already holds a different file"
                )
                report.conflicts.append(Conflict(rel, str(src), why))
    return report
