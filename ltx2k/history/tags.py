"""Which GPU measured each benchmark of a result file: the tag ``ltx2k run`` and shard-run write.

Every benchmark measured on a GPU gets that GPU's identity and the phase it
ran in (a shard next to the other GPUs' shards, or alone) in the result file,
under the top-level key :data:`TAG_KEY` (named when shard-run was its only
writer; kept so older files read the same)::

    "ltx2k_shard": {"version": 1, "benchmarks": {"bench_kernels.SplitRope.time_host_latency":
        {"gpu_index": 1, "gpu_uuid": "GPU-...", "gpu_name": "NVIDIA H200",
         "mode": "exclusive", "concurrent_gpus": 1}}}

Not in the machine fields and not in asv's ``env_vars``: ``asv publish`` keys
its graphs on every machine parameter and env var (a ``gpu_index`` there would
split each GPU type's history into one series per GPU index), an env var also
changes the env name and so the result file name (``ltx2k regress`` could no
longer compare two commits measured on different GPUs), and ``machine.json``
has one value per machine, not per GPU. asv ignores keys it does not know, and
the file travels byte for byte through the store, so the tag survives; if asv
itself rewrites the file later (a plain ``asv run`` of the same commit), the
tag is dropped and the benchmark reads as "GPU unknown", never as the wrong GPU.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ltx2k.runner import asv_compat

if TYPE_CHECKING:
    from ltx2k.runner.machine import Gpu

TAG_KEY = "ltx2k_shard"
TAG_VERSION = 1
# The phase a benchmark ran in: next to the other GPUs' runs, or alone.
MODE_CONCURRENT = "concurrent"
MODE_EXCLUSIVE = "exclusive"


def result_files(results_dir: Path, machine: str) -> list[Path]:
    """The result files of *machine* under *results_dir* (machine.json excluded)."""
    d = results_dir / machine
    if not d.is_dir():
        return []
    return sorted(p for p in d.glob("*.json") if p.name != "machine.json")


def tags_of(data) -> dict[str, dict]:
    """Per-benchmark GPU identity in one parsed result file ({} if it carries none)."""
    tag = data.get(TAG_KEY) if isinstance(data, dict) else None
    benchmarks = tag.get("benchmarks") if isinstance(tag, dict) else None
    return dict(benchmarks) if isinstance(benchmarks, dict) else {}


def read_tags(path) -> dict[str, dict]:
    """Per-benchmark GPU identity of one result file ({} if it carries none)."""
    return tags_of(json.loads(Path(path).read_text(encoding="utf-8")))


def snapshot(results_dir: Path, machine: str) -> dict[str, bytes]:
    """The bytes of *machine*'s result files before a run, keyed ``machine/file``:
    what :func:`tag_results` compares with to find what the run measured."""
    return {f"{machine}/{p.name}": p.read_bytes() for p in result_files(results_dir, machine)}


def _started(data: Mapping) -> dict[str, object]:
    cols = data.get("result_columns") or []
    if "started_at" not in cols:
        return {}
    i = cols.index("started_at")
    return {
        k: (v[i] if isinstance(v, list) and len(v) > i else None)
        for k, v in data.get("results", {}).items()
    }


def tag_results(
    results_dir: Path,
    machine: str,
    gpu: Gpu,
    modes: Mapping[str, tuple[str, int]],
    copied_in: Mapping[str, bytes],
) -> list[Path]:
    """Write the GPU identity of every benchmark this run measured into its files.

    A benchmark counts as measured here when its ``started_at`` differs from the
    copied-in file's; the others keep the tag they had (asv drops unknown keys
    when it rewrites a file, so old tags are carried over from the copied-in file).
    *modes* maps benchmark name -> (mode, GPUs running at the same time).
    """
    tagged = []
    for path in result_files(results_dir, machine):
        rel = f"{machine}/{path.name}"
        data = json.loads(path.read_text(encoding="utf-8"))
        old = json.loads(copied_in[rel]) if rel in copied_in else {}
        old_tags = (old.get(TAG_KEY) or {}).get("benchmarks", {}) if isinstance(old, dict) else {}
        before = _started(old) if old else {}
        now = _started(data)
        tags = {}
        for name in data.get("results", {}):
            if name in before and before[name] == now.get(name):
                if name in old_tags:
                    tags[name] = old_tags[name]
                continue
            mode, n = modes.get(name, (MODE_EXCLUSIVE, 1))
            tags[name] = {
                "gpu_index": gpu.index,
                "gpu_uuid": gpu.uuid,
                "gpu_name": gpu.name,
                "mode": mode,
                "concurrent_gpus": n,
            }
        tag = {"version": TAG_VERSION, "benchmarks": tags}
        if data.get(TAG_KEY) == tag or (not tags and TAG_KEY not in data):
            continue  # nothing measured here and nothing to carry: leave the bytes alone
        data[TAG_KEY] = tag
        version = data.pop("version", 2)
        asv_compat.write_json(path, data, api_version=version, compact=True)  # asv's own writer
        tagged.append(path)
    return tagged
