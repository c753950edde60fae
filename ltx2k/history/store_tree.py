"""The results tree in the store: which local files a runner offers, how they land, and whose.

Push copies a runner's ``results/<machine>/`` files into a checkout of the store
(:func:`apply`), pull copies the store's into a local results directory
(:func:`assemble`); both merge ``benchmarks.json`` by benchmark name.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable, Mapping
from pathlib import Path

from ltx2k.history import store_kills
from ltx2k.history.jsonfile import BENCHMARKS_API_VERSION, is_regular

STORE_ROOT = "results"  # folder inside the branch, so `asv publish` can point at it
BENCHMARKS_JSON = "benchmarks.json"
MACHINE_JSON = "machine.json"

# results/<machine>/.runner names the runner that first pushed that machine (not
# .json, so neither asv nor the loader reads it). Another runner replacing one
# of its files with different content is two runners sharing one machine name.
RUNNER_FILE = ".runner"


# --- push: this runner's files -------------------------------------------------------------


def _own_machines(machine_file) -> set[str]:
    """Machine names in asv's machine file (~/.asv-machine.json): this runner's own."""
    from ltx2k.runner import asv_compat

    path = Path(machine_file or asv_compat.machine_file_path())
    data = _read_json_object(path) if path.is_file() else None
    return {k for k, v in (data or {}).items() if k != "version" and isinstance(v, dict)}


def check_machines(
    results_dir: Path, machine, machine_file, log: Callable[[str], None]
) -> list[str]:
    """The machine directories of *results_dir* a push offers (see ``push_results``)."""
    present = sorted(
        p.name
        for p in results_dir.iterdir()
        if p.is_dir() and not p.name.startswith(".") and any(p.glob("*.json"))
    )
    if machine is None:
        if len(present) == 1:
            return present
        if not present:
            raise ValueError(
                f"results_dir={str(results_dir)!r} holds no <machine>/ directory with results"
            )
        # Several machines, e.g. after `store pull` into the same folder. Pushing
        # them all could overwrite other runners' newer files with stale copies,
        # so push only the one asv itself would run as (its machine file entry).
        own = sorted(_own_machines(machine_file) & set(present))
        if len(own) == 1:
            log(f"pushing {own[0]!r}: this runner's machine in asv's machine file")
            return own
        raise ValueError(
            f"machine=None but results_dir={str(results_dir)!r} holds several machines "
            f"{present} and asv's machine file names {len(own)} of them; pass machine= "
            "to name this runner's own"
        )
    names = [machine] if isinstance(machine, str) else list(machine)
    if not names:
        raise ValueError(f"machine must be a name or a non-empty list of names, got {machine!r}")
    for name in names:
        if not isinstance(name, str) or name in ("", ".", "..") or "/" in name or "\\" in name:
            raise ValueError(f"machine={name!r} is not a machine directory name")
        if name not in present:
            raise ValueError(
                f"machine={name!r} has no result files in results_dir={str(results_dir)!r} "
                f"(machines there: {present})"
            )
    return names


def collect(results_dir: Path, machines: list[str], log: Callable[[str], None]):
    """([(local file, store path)], local benchmarks.json or None, skipped local files)."""
    files, skipped = [], []
    for m in machines:
        for src in sorted((results_dir / m).glob("*.json")):
            if not is_regular(src):
                if src.is_symlink() or src.exists():
                    log(f"skipping {src}: not a regular file (a link, FIFO or device)")
                    skipped.append(str(src))
                continue
            if _read_json_object(src) is None:
                log(f"skipping {src}: not a JSON object (truncated or corrupt)")
                skipped.append(str(src))
                continue
            files.append((src, f"{STORE_ROOT}/{m}/{src.name}"))
    bench = None
    bench_path = results_dir / BENCHMARKS_JSON
    if os.path.lexists(bench_path):
        bench = _read_json_object(bench_path)
        if bench is None:
            log(f"skipping {bench_path}: not a JSON object (truncated or corrupt)")
            skipped.append(str(bench_path))
    return files, bench, skipped


def runner_identity() -> str:
    """This runner's name: GitHub Actions' RUNNER_NAME, else the host name."""
    return (os.environ.get("RUNNER_NAME") or "").strip() or socket.gethostname()


def check_runner(work: Path, files, machines: list[str], runner: str) -> list[str]:
    """Refuse to replace another runner's files; return the .runner files to add."""
    added = []
    for m in machines:
        ident = work / STORE_ROOT / m / RUNNER_FILE
        owner = (
            ident.read_text(encoding="utf-8", errors="replace").strip()
            if is_regular(ident)
            else None
        )
        if owner is None:
            ident.parent.mkdir(parents=True, exist_ok=True)
            ident.write_text(runner + "\n", encoding="utf-8")
            added.append(f"{STORE_ROOT}/{m}/{RUNNER_FILE}")
            continue
        if owner == runner:
            continue
        clash = [
            rel
            for src, rel in files
            # machine.json describes the machine; the newest writer may update it
            if rel.startswith(f"{STORE_ROOT}/{m}/")
            and not rel.endswith("/machine.json")
            and is_regular(work / rel)
            and (work / rel).read_bytes() != src.read_bytes()
        ]
        if clash:
            raise RuntimeError(
                f"machine {m!r} in the store belongs to runner {owner!r}, and this runner "
                f"({runner!r}) would replace {len(clash)} of its file(s) with different "
                f"results ({', '.join(clash[:3])}): two runners share one machine name. "
                "Nothing was pushed; give each runner its own machine name "
                "(ltx2k machine --write)"
            )
    return added


def apply(work: Path, files, bench: dict | None) -> list[str]:
    """Copy this runner's files into the checkout; return the store paths that changed."""
    changed = []
    for src, rel in files:
        dst = work / rel
        data = src.read_bytes()
        if dst.exists() and dst.read_bytes() == data:
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_bytes(data)
        changed.append(rel)
    if bench is not None:
        rel = f"{STORE_ROOT}/{BENCHMARKS_JSON}"
        dst = work / rel
        current = _read_json_object(dst) if dst.exists() else None
        merged = merge_benchmarks(current, bench, lambda: newest_versions(work / STORE_ROOT))
        if current is None or merge_benchmarks(None, current) != merged:
            dst.parent.mkdir(parents=True, exist_ok=True)
            _write_benchmarks(dst, merged)
            changed.append(rel)
    return changed


# --- pull: the store's files ----------------------------------------------------------------


def assemble(
    src_root: Path, dest: Path, overwrite: bool, log: Callable[[str], None]
) -> tuple[list[str], list[str], int, list[str]]:
    """Copy the store's tree at *src_root* into the results directory *dest*.

    Returns (written, kept, unchanged, refused), as :func:`ltx2k.history.store.pull_results`
    describes them.
    """
    written, kept, unchanged = [], [], 0
    bench_src = None
    regular, refused = _store_files(src_root)
    for rel in refused:
        log(
            f"refusing {STORE_ROOT}/{rel} of the store: not a regular file (a symlink "
            "or a submodule); it is not followed or copied"
        )
    for src in regular:
        rel = src.relative_to(src_root)
        if rel.name == RUNNER_FILE:
            continue  # the store's own bookkeeping, not a result
        dst = dest / rel
        if rel.as_posix() == BENCHMARKS_JSON:
            bench_src = src  # merged after the results are in: their dates decide it
            continue
        data = src.read_bytes()
        if dst.exists():
            if dst.read_bytes() == data:
                unchanged += 1
                continue
            if _read_json_object(dst) is None:
                log(f"replacing {dst}: not a JSON object (truncated or corrupt)")
            elif not overwrite:
                kept.append(rel.as_posix())
                continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        store_kills.atomic_write(dst, data)
        written.append(rel.as_posix())
        store_kills.pause_point("written")
    if bench_src is not None:
        dst = dest / BENCHMARKS_JSON
        local = _read_json_object(dst) if dst.exists() else None
        merged = merge_benchmarks(
            local, _read_json_object(bench_src), lambda: newest_versions(dest)
        )
        if local is not None and merge_benchmarks(None, local) == merged:
            unchanged += 1
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            _write_benchmarks(dst, merged, atomic=True)
            written.append(BENCHMARKS_JSON)
            store_kills.pause_point("written")
    return written, kept, unchanged, refused


# --- files ----------------------------------------------------------------------------------


def merge_benchmarks(
    base: dict | None, incoming: dict | None, newest: Callable[[], Mapping] | None = None
) -> dict:
    """Union of two asv benchmarks.json mappings; names only one side knows are kept, so
    runners on different suite revisions never erase each other's benchmarks.

    On a shared name the description's version hash decides which results ``asv
    publish`` shows, so it must be the version of the newest results, not of the last
    writer: a runner that lags behind (benchmarking older commits) must not hide the
    others' newer results. Where the two versions differ, *newest* (called once, only
    then) gives each benchmark's version at its newest-dated result
    (:func:`newest_versions`), and the side with that version wins; without it, or
    where neither has it, *incoming* wins.
    """
    out = {k: v for k, v in (base or {}).items() if k != "version"}
    versions = None
    for name, desc in (incoming or {}).items():
        if name == "version":
            continue
        old = out.get(name)
        if newest is not None and _version(old) not in (None, _version(desc)):
            if versions is None:
                versions = newest()
            if versions.get(name) == _version(old):
                continue
        out[name] = desc
    return out


def _version(desc) -> str | None:
    return desc.get("version") if isinstance(desc, dict) else None


def newest_versions(root: Path) -> dict[str, str]:
    """benchmark -> the version hash of its newest-dated result under *root* (a results
    folder: ``<machine>/<result>.json``); unreadable files are passed over."""
    best: dict[str, tuple[int, str]] = {}
    for path in root.glob("*/*.json"):
        if path.name == MACHINE_JSON:
            continue
        data = _read_json_object(path)
        if data is None:
            continue
        date, columns, results = data.get("date"), data.get("result_columns"), data.get("results")
        if not isinstance(date, int) or not isinstance(columns, list) or "version" not in columns:
            continue
        at = columns.index("version")
        for name, row in (results if isinstance(results, dict) else {}).items():
            version = row[at] if isinstance(row, list) and len(row) > at else None
            if isinstance(version, str) and (name not in best or date > best[name][0]):
                best[name] = (date, version)
    return {name: version for name, (_, version) in best.items()}


def _store_files(src_root: Path) -> tuple[list[Path], list[str]]:
    """(regular files, everything else) under *src_root*, links never followed.

    A symlink in the store branch would make a pull copy whatever it points at
    on the puller's machine (and the next push publish it), so it is refused.
    """
    files, refused = [], []
    for top, dirs, names in os.walk(src_root):
        for name in sorted(dirs):
            if os.path.islink(os.path.join(top, name)):
                refused.append(os.path.join(top, name))
        for name in names:
            p = Path(top, name)
            (files if is_regular(p) else refused).append(p)
    return sorted(files), sorted(str(Path(r).relative_to(src_root).as_posix()) for r in refused)


def _read_json_object(path: Path) -> dict | None:
    if path.exists() and not is_regular(path):
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def _write_benchmarks(path: Path, data: dict, *, atomic: bool = False) -> None:
    from ltx2k.runner import asv_compat

    if not atomic:
        # asv's own writer (sorted, indented): identical content gives identical bytes.
        asv_compat.write_json(path, data, api_version=BENCHMARKS_API_VERSION)
        return
    tmp = store_kills.tmp_name(path)
    try:
        asv_compat.write_json(tmp, data, api_version=BENCHMARKS_API_VERSION)
        store_kills.pause_point("replace")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
