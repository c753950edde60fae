"""Synthetic multi-GPU asv history, for tests and for demonstrating reports.

Test data, not product: it lives in tools/, outside the installed package
(``scripts/synth_history.py`` is its command line).

It writes what ``asv run --record-samples`` on three GPU runners would have
written over ~20 commits of a real (throwaway) git repository: result files
built with asv's own :class:`asv.results.Results` (so samples, 99% CIs and
quartiles are computed by asv's ``compute_stats``, exactly as stored by a
real run), ``results/benchmarks.json`` with units, ``machine.json`` per
machine, and an ``asv.conf.json`` so that ``asv publish`` and
``git rev-list`` work on the output.

Values follow a small roofline model (launch floor + bytes / bandwidth) so
that the GPUs, kernels, variants and shapes differ the way they do on
hardware. Noise is lognormal per sample: ~1% on device time, ~5% on host
latency, 0.5% on the single-valued bandwidth percentage (itself a median
of many timings on a real runner), none on allocation counts. Injected
:class:`Step` changes multiply one metric's true value from a commit on;
they do not leak into other metrics, so a test knows exactly which cells
changed.
"""

from __future__ import annotations

import datetime
import fnmatch
import hashlib
import itertools
import json
import os
import re
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ltx2k import git
from ltx2k.workload import cases, metrics, shapes
from ltx2k.workload.variants import COMPILED_VARIANTS

MODULE = "bench_kernels"  # benchmarks/bench_kernels.py, the asv suite's module
# asv class name -> the kernel's spec (its name, variants and shapes).
_SPECS = {spec.asv_class: spec for spec in cases.KERNELS.values()}
KERNELS = tuple(_SPECS)
# The metrics the model below gives values for.
METRICS = (
    "time_device_cold",
    "time_device_warm",
    "time_host_latency",
    "track_allocations",
    "track_pct_copy_bandwidth",
)
UNITS = {m: metrics.METRICS[m].unit for m in METRICS}
ENV_NAME = "existing-py_opt_torch_.venv_bin_python"
TIMEOUT_S = 60.0

# Peak HBM bandwidth (bytes/s) and a host-speed factor per GPU runner. The
# machine.json fields mirror what `ltx2k machine --write` records.
MACHINES: dict[str, dict] = {
    "h200": {
        "bw": 4.8e12,
        "host": 1.0,
        "info": {"gpu": "NVIDIA H200", "cpu": "Intel(R) Xeon(R) Platinum 8480+", "num_cpu": "16"},
    },
    "h100-80gb-hbm3": {
        "bw": 3.35e12,
        "host": 1.05,
        "info": {"gpu": "NVIDIA H100 80GB HBM3", "cpu": "AMD EPYC 9454", "num_cpu": "16"},
    },
    "a100-sxm4-80gb": {
        "bw": 2.0e12,
        "host": 1.15,
        "info": {"gpu": "NVIDIA A100-SXM4-80GB", "cpu": "AMD EPYC 7763", "num_cpu": "16"},
    },
}
DEFAULT_MACHINES = tuple(MACHINES)

# (bandwidth efficiency, kernel launches, allocations) per kernel (ltx2k.workload.cases
# name) and variant: sglang's original kernels (per_head, separate) reach less
# of the copy bandwidth and separate launches 9; eager launches several kernels,
# the optimized ones one. A variant without a line here is modelled by its kind
# (_KIND_MODEL): a new kernel needs none.
_VARIANT_MODEL = {
    ("split_rope", "per_head"): (0.55, 1, 1),
    ("split_rope", "blocked"): (0.85, 1, 1),
    ("split_rope", "eager"): (0.35, 6, 6),
    ("split_rope", "compiled"): (0.70, 1, 2),
    ("ada_values9", "separate"): (0.50, 9, 9),
    ("ada_values9", "slab"): (0.85, 1, 1),
    ("ada_values9", "eager"): (0.30, 12, 12),
    ("ada_values9", "compiled"): (0.70, 1, 2),
    ("split_rope", "blocked_wide"): (0.88, 1, 1),
    ("ada_values9", "slab_grid"): (0.92, 1, 1),
    ("ada_values9", "slab_dconst"): (0.93, 1, 1),
    ("split_rope", "tiled"): (0.90, 1, 1),
    ("split_rope", "tiled_pdl"): (0.93, 1, 1),
    ("split_rope_pair", "row"): (0.75, 1, 2),
    ("split_rope_pair", "two_launches"): (0.88, 2, 2),
    ("qknorm_rope_pair", "row"): (0.70, 1, 2),
    ("qknorm_rope_pair", "eager"): (0.20, 30, 30),
    ("qknorm_rope_pair", "unfused_eager"): (0.30, 20, 20),
    ("qknorm_rope_pair", "unfused_ltx2k"): (0.60, 5, 4),
}
# By kind, for a variant without its own line: a torch.compile peer, another peer (eager
# PyTorch), a device algorithm.
_KIND_MODEL = {"compiled": (0.70, 1, 2), "peer": (0.35, 12, 12), "algorithm": (0.90, 1, 1)}
_LAUNCH_FLOOR_S = 2.0e-6
_LAUNCH_GAP_S = 1.5e-6
_NOISE = {"device": 0.01, "host": 0.05, "pct": 0.005}


@dataclass(frozen=True)
class Step:
    """A change injected into the synthetic history.

    Spec: ``MACHINE:BENCH:VARIANT:SHAPE:commit=K:+8%``. MACHINE, BENCH,
    VARIANT and SHAPE are globs; BENCH matches ``SplitRope.time_device_cold``
    or the full ``bench_kernels.SplitRope.time_device_cold``. From commit
    index K (0 = oldest) on, the metric's true value is multiplied by
    1 + 8/100. Steps compound.
    """

    machine: str
    benchmark: str
    variant: str
    shape: str
    commit: int
    percent: float

    @property
    def factor(self) -> float:
        return 1.0 + self.percent / 100.0

    @classmethod
    def parse(cls, spec: str) -> Step:
        if not isinstance(spec, str):
            raise TypeError(f"step spec must be a str, got {type(spec).__name__}: {spec!r}")
        parts = spec.split(":")
        if len(parts) != 6:
            raise ValueError(
                f"step={spec!r}: expected MACHINE:BENCH:VARIANT:SHAPE:commit=K:+P%, "
                f"got {len(parts)} ':'-separated fields"
            )
        machine, bench, variant, shape, commit, pct = parts
        commit_idx = _parse_commit(commit, spec, "step")
        m = re.fullmatch(r"([+-]?\d+(?:\.\d+)?)%", pct.strip())
        if not m:
            raise ValueError(f"step={spec!r}: change {pct!r} is not like '+8%' or '-30%'")
        percent = float(m.group(1))
        if percent <= -100.0:
            raise ValueError(f"step={spec!r}: change {pct!r} would make values non-positive")
        return cls(machine, bench, variant, shape, commit_idx, percent)

    def matches(self, machine: str, benchmark: str, variant: str, shape: str) -> bool:
        return _matches(self, machine, benchmark, variant, shape)


@dataclass(frozen=True)
class Failure:
    """A benchmark value stored as failed (None): ``MACHINE:BENCH:VARIANT:SHAPE:commit=K``."""

    machine: str
    benchmark: str
    variant: str
    shape: str
    commit: int

    @classmethod
    def parse(cls, spec: str) -> Failure:
        parts = spec.split(":") if isinstance(spec, str) else []
        if len(parts) != 5:
            raise ValueError(f"fail={spec!r}: expected MACHINE:BENCH:VARIANT:SHAPE:commit=K")
        return cls(*parts[:4], _parse_commit(parts[4], spec, "fail"))

    def matches(self, machine: str, benchmark: str, variant: str, shape: str) -> bool:
        return _matches(self, machine, benchmark, variant, shape)


@dataclass(frozen=True)
class SynthHistory:
    root: Path
    repo: Path
    results_dir: Path
    conf: Path
    commits: tuple[str, ...]  # oldest first; index K is "commit=K" in step specs
    dates: tuple[int, ...]  # ms since epoch, as asv stores them
    machines: tuple[str, ...]
    benchmarks: tuple[str, ...]


def _parse_commit(text: str, spec: str, what: str) -> int:
    m = re.fullmatch(r"commit=(\d+)", text.strip())
    if not m:
        raise ValueError(f"{what}={spec!r}: {text!r} is not like 'commit=12'")
    return int(m.group(1))


def _matches(sel, machine: str, benchmark: str, variant: str, shape: str) -> bool:
    short = benchmark.split(".", 1)[1] if benchmark.startswith(MODULE + ".") else benchmark
    return (
        fnmatch.fnmatchcase(machine, sel.machine)
        and (
            fnmatch.fnmatchcase(benchmark, sel.benchmark)
            or fnmatch.fnmatchcase(short, sel.benchmark)
        )
        and fnmatch.fnmatchcase(variant, sel.variant)
        and fnmatch.fnmatchcase(shape, sel.shape)
    )


def suite() -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """Benchmark name -> (variants, shape labels), as the asv suite declares them on a GPU."""
    out = {}
    for asv_class, spec in _SPECS.items():
        for metric in METRICS:
            # The suite times opt-in metrics at their listed shapes only (docs/shapes.md),
            # and has no benchmark for a metric it times at no shape of the kernel.
            opt_in = shapes.METRIC_SHAPES.get(_OPT_IN_NAME.get(metric, ""), {})
            shape_list = opt_in.get(spec.name, spec.gpu_shapes)
            if not shape_list:
                continue
            out[f"{MODULE}.{asv_class}.{metric}"] = (
                spec.variants,
                tuple(s.label for s in shape_list),
            )
    return out


# The data file's name of each opt-in metric among METRICS.
_OPT_IN_NAME = {
    "time_device_warm": "device_warm",
    "time_host_latency": "host",
    "track_allocations": "allocations",
}


def _bytes(kernel: str, shape: str) -> float:
    """The model's bytes moved by *kernel* (a cases name) at *shape* (a GPU shape label)."""
    s = next(x for x in cases.KERNELS[kernel].gpu_shapes if x.label == shape)
    if kernel == "split_rope":
        # x read + out written (bf16) + the cos/sin tables (fp32)
        return 2.0 * s.B * s.S * s.H * s.D * 2 + 2.0 * s.S * s.D * 4
    if kernel == "ada_values9":
        table = 2 if s.table_dtype == "bf16" else 4
        # nine modulation rows out (bf16) per token, the table, the timestep embedding
        return s.B * s.S * 9.0 * s.D * 2 + 9.0 * s.D * table + s.B * s.S * s.D * 4.0
    # The two kernels above keep the model their synthetic histories were drawn with;
    # any other kernel moves what its case counts.
    return float(cases.KERNELS[kernel].bytes_moved(s))


def _variant_model(kernel: str, variant: str) -> tuple[float, int, int]:
    if (kernel, variant) in _VARIANT_MODEL:
        return _VARIANT_MODEL[(kernel, variant)]
    if variant in COMPILED_VARIANTS:
        return _KIND_MODEL["compiled"]
    return _KIND_MODEL["peer" if cases.is_peer(kernel, variant) else "algorithm"]


def _model(kernel: str, variant: str, machine: str, shape: str) -> dict[str, float]:
    m = MACHINES[machine]
    eff, launches, allocs = _variant_model(kernel, variant)
    nbytes = _bytes(kernel, shape)
    floor = _LAUNCH_FLOOR_S + (launches - 1) * _LAUNCH_GAP_S
    warm = floor + nbytes / (m["bw"] * eff)
    copy = _LAUNCH_FLOOR_S + nbytes / (m["bw"] * 0.9)
    return {
        "time_device_warm": warm,
        # cold: L2 flushed first, so every byte comes from HBM plus a TLB warm-up
        "time_device_cold": warm * 1.1 + 1.0e-6,
        "time_host_latency": (18e-6 + 4e-6 * launches) * m["host"],
        "track_allocations": float(allocs),
        # share of a same-size copy's bandwidth, kept in the 30-92% band runners report
        "track_pct_copy_bandwidth": 30.0 + 62.0 * copy / warm,
    }


# The commits' identity: the throwaway repository must take commits on a machine
# where git has none configured.
_IDENTITY = ("user.name=ltx2k synth", "user.email=synth@ltx2k.invalid")


def _make_repo(repo: Path, n_commits: int, rng: np.random.Generator) -> tuple[list, list]:
    repo.mkdir(parents=True)
    git.output(repo, "init", "-q", "-b", "main")
    start = int(datetime.datetime(2025, 1, 6, tzinfo=datetime.timezone.utc).timestamp())
    commits, dates = [], []
    t = start
    for i in range(n_commits):
        t += 3600 * int(rng.integers(2, 30))  # commits land hours to a day apart
        (repo / "history.txt").write_text(f"synthetic commit {i}\n")
        git.output(repo, "add", "history.txt")
        stamp = f"{t} +0000"
        git.output(
            repo,
            "commit",
            "-q",
            "-m",
            f"synthetic commit {i}",
            config=_IDENTITY,
            env={"GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp},
        )
        commits.append(git.output(repo, "rev-parse", "HEAD"))
        dates.append(t * 1000)  # asv: author date (%at) in ms
    return commits, dates


def _benchmarks_json(names: dict) -> dict:
    out = {}
    for name, (variants, labels) in names.items():
        metric = name.rsplit(".", 1)[1]
        code = f"def {metric}(self, variant, shape):\n    ...  # synthetic\n"
        entry = {
            "code": code,
            "name": name,
            "param_names": ["variant", "shape"],
            "params": [[repr(v) for v in variants], [repr(s) for s in labels]],
            "timeout": TIMEOUT_S,
            "type": "time" if metric.startswith("time_") else "track",
            "unit": UNITS[metric],
            "version": hashlib.sha256(code.encode()).hexdigest(),
        }
        if entry["type"] == "time":
            entry.update(
                min_run_count=2,
                number=0,
                repeat=0,
                rounds=2,
                sample_time=0.01,
                warmup_time=-1,
            )
        out[name] = entry
    return out


def _machine_info(machine: str) -> dict:
    info = {
        "arch": "x86_64",
        "machine": machine,
        "os": "Linux 5.15.0-1063-nvidia",
        "ram": "2113331388",
        "gpu_count": "8",
        "driver": "570.124.06",
        "cuda": "12.8",
        "torch": "2.11.0+cu128",
        "triton": "3.6.0",
    }
    info.update(MACHINES[machine]["info"])
    return info


def generate_history(
    out_dir,
    *,
    n_commits: int = 20,
    machines: Sequence[str] = DEFAULT_MACHINES,
    steps: Iterable[Step | str] = (),
    failures: Iterable[Failure | str] = (),
    drop: Iterable[str] = (),
    seed: int = 0,
    n_samples: int = 10,
) -> SynthHistory:
    """Write a synthetic history under *out_dir* (created; must not exist or be empty).

    *drop* items ``MACHINE:commit=K`` leave out that machine's result file
    for commit K, as when a runner skipped a commit.
    """
    from asv import util
    from asv.results import Results
    from asv.runner import BenchmarkResult

    root = Path(os.fspath(out_dir))
    if root.exists() and any(root.iterdir()):
        raise ValueError(f"out_dir={os.fspath(out_dir)!r} exists and is not empty")
    if not isinstance(n_commits, int) or n_commits < 2:
        raise ValueError(f"n_commits must be an int >= 2, got {n_commits!r}")
    if not isinstance(n_samples, int) or n_samples < 2:
        raise ValueError(f"n_samples must be an int >= 2, got {n_samples!r}")
    machines = tuple(machines)
    unknown = [m for m in machines if m not in MACHINES]
    if not machines or unknown:
        raise ValueError(f"machines={machines!r}: each must be one of {sorted(MACHINES)}")
    steps = tuple(s if isinstance(s, Step) else Step.parse(s) for s in steps)
    failures = tuple(f if isinstance(f, Failure) else Failure.parse(f) for f in failures)
    dropped = set()
    for spec in drop:
        parts = spec.split(":") if isinstance(spec, str) else []
        if len(parts) != 2:
            raise ValueError(f"drop={spec!r}: expected MACHINE:commit=K")
        dropped.add((parts[0], _parse_commit(parts[1], spec, "drop")))
    for item in (*steps, *failures):
        if item.commit >= n_commits:
            raise ValueError(f"{item!r}: commit {item.commit} >= n_commits={n_commits}")

    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    repo = root / "repo"
    commits, dates = _make_repo(repo, n_commits, rng)
    results_dir = root / "results"
    names = suite()
    bench_meta = _benchmarks_json(names)
    util.write_json(str(results_dir / "benchmarks.json"), bench_meta, api_version=2)
    conf = root / "asv.conf.json"
    conf.write_text(
        json.dumps(
            {
                "version": 1,
                "project": "ltx2k-synthetic",
                "project_url": "https://example.invalid/ltx2k",
                "repo": "repo",
                "branches": ["main"],
                "environment_type": "existing",
                "benchmark_dir": "benchmarks",
                "results_dir": "results",
                "html_dir": "html",
            },
            indent=4,
        )
    )

    for machine in machines:
        info = _machine_info(machine)
        util.write_json(str(results_dir / machine / "machine.json"), info, api_version=1)
        for i, (commit, date) in enumerate(zip(commits, dates, strict=True)):
            if (machine, i) in dropped:
                continue
            res = Results({**info, "python": "3.11"}, {}, commit, date, "3.11", ENV_NAME, {})
            started = datetime.datetime.fromtimestamp(date / 1000 + 3600, datetime.timezone.utc)
            for name, (variants, labels) in names.items():
                _, asv_class, metric = name.split(".")
                kernel = _SPECS[asv_class].name
                result, samples, number = [], [], []
                for variant, shape in itertools.product(variants, labels):
                    # One generator per cell and commit: appending a machine, benchmark,
                    # variant or shape leaves every other cell's draws unchanged.
                    cell = zlib.crc32(f"{machine}|{name}|{variant}|{shape}".encode())
                    mrng = np.random.default_rng([seed, cell, i])
                    truth = _model(kernel, variant, machine, shape)[metric]
                    for st in steps:
                        if i >= st.commit and st.matches(machine, name, variant, shape):
                            truth *= st.factor
                    if metric == "track_pct_copy_bandwidth":
                        # Computed from the cold time, as the suite does: its steps move it.
                        cold = f"{name.rpartition('.')[0]}.time_device_cold"
                        for st in steps:
                            if i >= st.commit and st.matches(machine, cold, variant, shape):
                                truth /= st.factor
                    failed = any(
                        f.commit == i and f.matches(machine, name, variant, shape) for f in failures
                    )
                    if metric.startswith("time_"):
                        sigma = _NOISE["host" if metric == "time_host_latency" else "device"]
                        s = (truth * mrng.lognormal(0.0, sigma, n_samples)).tolist()
                        result.append(None if failed else True)
                        samples.append(None if failed else s)
                        number.append(None if failed else 100)
                    else:
                        noisy = truth
                        if metric == "track_pct_copy_bandwidth":
                            noisy = float(truth * mrng.lognormal(0.0, _NOISE["pct"]))
                        result.append(None if failed else noisy)
                        samples.append(None)
                        number.append(None)
                res.add_result(
                    bench_meta[name],
                    BenchmarkResult(
                        result=result,
                        samples=samples,
                        number=number,
                        errcode=1 if all(r is None for r in result) else 0,
                        stderr="",
                        profile=None,
                    ),
                    started_at=started,
                    duration=0.5 + 0.01 * len(result),
                    record_samples=True,
                )
            res.save(str(results_dir))
    return SynthHistory(
        root=root,
        repo=repo,
        results_dir=results_dir,
        conf=conf,
        commits=tuple(commits),
        dates=tuple(dates),
        machines=machines,
        benchmarks=tuple(names),
    )
