"""``ltx2k shard-run``: one commit range, one asv process per GPU of the host.

How a run goes (:func:`shard_run`):

1. **Split.** The range is resolved the way ``asv run RANGE`` resolves it
   (:func:`ltx2k.runner.asv_launch.resolve_commits`) and dealt out round-robin, commit
   i to GPU i mod N (:func:`ltx2k.runner.partition.split_commits` says why not blocks).
2. **Isolate.** Each shard gets a private work directory: its own asv config
   (``results_dir`` and ``env_dir`` inside it), so concurrent asv processes never
   write the same file, and ``asv run HASHFILE:<its commits>``
   (:class:`ltx2k.runner.asv_launch.AsvLauncher`). Result files the destination already
   holds for the shard's commits are copied in first
   (:func:`ltx2k.history.merge.copy_in`), so ``asv run`` merges into them exactly
   as it would in place and ``--skip-existing*`` keep their meaning.
3. **Pin.** ``CUDA_VISIBLE_DEVICES`` holds the GPU's UUID, not its index: CUDA
   numbers devices fastest-first unless ``CUDA_DEVICE_ORDER=PCI_BUS_ID``, so an
   index could name a different GPU than nvidia-smi's. GPUs are listed with
   ``nvidia-smi`` (:func:`ltx2k.runner.machine.list_gpus`, never torch), so the parent
   never creates a CUDA context.
4. **Phases** (the :class:`ltx2k.runner.partition.Policy`). Benchmarks whose name
   matches an *exclusive* regex run in a second phase, one GPU at a time while
   the others idle; all other benchmarks run on every GPU at once.
5. **Tag.** Every benchmark a shard measured gets its GPU identity and phase in
   the result file (:mod:`ltx2k.history.tags` describes the format and why it
   is not a machine field).
6. **Merge** (:func:`ltx2k.history.merge.merge_results`), after each phase, into
   the one results directory (so a run stopped in its second phase keeps the
   first's): a file the destination changed since it was copied in is a
   conflict, reported and never overwritten, and the shard's copy is kept in the
   work directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ltx2k.history.merge import MergeReport, accumulate, copy_in, merge_results

# TAG_KEY and read_tags stay importable from here: the summary page
# (ltx2k.report.firstscreen) and its tests read tags through this module.
from ltx2k.history.tags import (  # noqa: F401
    MODE_CONCURRENT,
    MODE_EXCLUSIVE,
    TAG_KEY,
    read_tags,
    tag_results,
)
from ltx2k.runner.asv_launch import AsvLauncher, Log, parse_asv_args, resolve_commits
from ltx2k.runner.machine import Gpu, identify_pinned, list_gpus
from ltx2k.runner.partition import Policy, partition, phase_regexes, split_commits

RunOne = Callable[[Sequence[str], Mapping[str, str], Path, Sequence[str]], int]


# --- GPUs ---------------------------------------------------------------------------------


def select_gpus(gpus: Sequence[Gpu], count) -> list[Gpu]:
    """``count``: "auto" (all of them) or a positive int (the first ``count``)."""
    if count == "auto":
        chosen = list(gpus)
    else:
        n = int(count) if isinstance(count, str) and count.isdigit() else count
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"gpus must be 'auto' or an int >= 1, got {count!r}")
        if n > len(gpus):
            raise ValueError(f"gpus={n} but only {len(gpus)} GPU(s) are visible")
        chosen = list(gpus[:n])
    if not chosen:
        raise ValueError(
            "no GPU visible (nvidia-smi lists none, or CUDA_VISIBLE_DEVICES hides them all); "
            "shard-run needs GPUs -- use `ltx2k run` on a CPU"
        )
    models = sorted({g.name for g in chosen})
    if len(models) > 1:
        # One machine name (the GPU model) for all shards: mixed models would
        # file one model's numbers under the other's history.
        raise ValueError(
            f"the selected GPUs are of different models {models}; pick one model with "
            "CUDA_VISIBLE_DEVICES"
        )
    return chosen


# --- running ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Shard:
    gpu: Gpu
    commits: tuple[str, ...]
    work: Path

    @property
    def results(self) -> Path:
        return self.work / "results"


@dataclass
class ShardOutcome:
    gpu: Gpu
    commits: tuple[str, ...]
    returncodes: dict[str, int | None] = field(default_factory=dict)  # phase -> asv exit
    errors: list[str] = field(default_factory=list)


@dataclass
class ShardRunResult:
    commits: tuple[str, ...]
    concurrent: tuple[str, ...]
    exclusive: tuple[str, ...]
    shards: list[ShardOutcome]
    merge: MergeReport
    work_dir: Path | None  # kept (conflicts or errors), else None

    @property
    def exit_code(self) -> int:
        if self.merge.conflicts or any(o.errors for o in self.shards):
            return 1
        codes = [c for o in self.shards for c in o.returncodes.values()]
        return max((c for c in codes if c is not None), default=0)


MACHINE_FILE = ".asv-machine.json"


def shard_home(base: Mapping[str, str], home: Path) -> dict[str, str]:
    """Environment entries that give one shard's asv a HOME of its own.

    Every ``asv run`` rewrites ``~/.asv-machine.json`` in place as it starts
    (``asv.machine.Machine.load`` saves, non-atomically), so concurrent shards
    sharing a HOME can read a half-written file and fail. Each shard gets a copy
    in its own HOME; the caches that default under HOME keep pointing at the
    real ones (Triton's kernels, ltx2k's measured bandwidth), and so do packages
    installed with ``pip install --user``.
    """
    real = Path(base.get("HOME") or os.path.expanduser("~"))
    home.mkdir(parents=True, exist_ok=True)
    src = real / MACHINE_FILE
    if src.exists():
        shutil.copyfile(src, home / MACHINE_FILE)
    return {
        "HOME": str(home),
        "TRITON_CACHE_DIR": base.get("TRITON_CACHE_DIR") or str(real / ".triton" / "cache"),
        "XDG_CACHE_HOME": base.get("XDG_CACHE_HOME") or str(real / ".cache"),
        "PYTHONUSERBASE": base.get("PYTHONUSERBASE") or str(real / ".local"),
    }


def shard_env(
    base: Mapping[str, str], gpu: Gpu, cpu: bool = False, home: Path | None = None
) -> dict[str, str]:
    env = dict(base)
    if home is not None:
        env.update(shard_home(base, home))
    env["CUDA_VISIBLE_DEVICES"] = gpu.uuid
    # Informational, for logs and benchmark code; asv never records os.environ.
    env["LTX2K_GPU_INDEX"] = str(gpu.index)
    env["LTX2K_GPU_UUID"] = gpu.uuid
    env.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")  # as `ltx2k run` (asv_run.py)
    if cpu:
        env["TRITON_INTERPRET"] = "1"
    return env


def _discover(run_one: RunOne, shard: Shard, env, work: Path) -> list[dict]:
    results = work / "discover" / "results"
    rc = run_one(shard.commits[:1], env, results, ["just-discover"])
    path = results / "benchmarks.json"
    if not path.exists():
        raise RuntimeError(
            f"benchmark discovery on {shard.gpu.label} (commit {shard.commits[0][:8]}) "
            f"exited {rc} and wrote no benchmarks.json; see asv's output above"
        )
    data = json.loads(path.read_text(encoding="utf-8"))
    return [v for k, v in data.items() if k != "version" and isinstance(v, dict)]


def shard_run(
    commits: Sequence[str],
    gpus: Sequence[Gpu],
    results_dir,
    run_one: RunOne,
    *,
    machine: str,
    policy: Policy | None = None,
    bench: Sequence[str] = (),
    base_env: Mapping[str, str] | None = None,
    cpu: bool = False,
    work_dir=None,
    log=True,
) -> ShardRunResult:
    """Run *commits* across *gpus* with *run_one* and merge into *results_dir*.

    ``run_one(commits, env, results_dir, bench)`` runs asv (or a fake) for
    *commits* with environment *env* (``CUDA_VISIBLE_DEVICES`` pinned), writing
    into *results_dir* with ``-b`` values *bench*, and returns asv's exit status.
    It is called once with ``bench=["just-discover"]`` to list the suite, then
    per shard and phase. The work directory is removed unless something needs
    a human (a conflict or a launcher error); its path is in the result then.
    """
    say = Log(log)
    policy = Policy() if policy is None else policy
    commits = tuple(commits)
    if not commits:
        raise ValueError("commits is empty: the range selects nothing to benchmark")
    if not gpus:
        raise ValueError("gpus is empty")
    uuids = [g.uuid for g in gpus]
    if len(set(uuids)) != len(uuids):
        raise ValueError(f"gpus names one GPU twice: {uuids}")
    if not isinstance(machine, str) or not machine or "/" in machine:
        raise ValueError(f"machine must be a machine directory name, got {machine!r}")
    dest = Path(os.fspath(results_dir))
    base_env = dict(os.environ if base_env is None else base_env)
    work = Path(tempfile.mkdtemp(prefix="ltx2k-shard-", dir=work_dir))
    shards = [
        Shard(g, c, work / f"shard{i}-{g.label}")
        for i, (g, c) in enumerate(zip(gpus, split_commits(commits, len(gpus)), strict=True))
    ]
    active = [s for s in shards if s.commits]
    if len(active) < len(shards):
        idle = ", ".join(s.gpu.label for s in shards if not s.commits)
        say(f"{len(commits)} commit(s) for {len(shards)} GPUs: {idle} stay idle")
    outcomes = {s.gpu: ShardOutcome(s.gpu, s.commits) for s in shards}
    envs = {
        s.gpu: shard_env(base_env, s.gpu, cpu, home=work / f"home{i}") for i, s in enumerate(shards)
    }
    copied_in: dict[str, bytes] = {}
    for s in active:
        s.results.mkdir(parents=True)
        copied_in.update(copy_in(dest, s.results, machine, s.commits))
        say(
            f"{s.gpu.label} ({s.gpu.uuid}): {len(s.commits)} commit(s) "
            + " ".join(c[:8] for c in s.commits)
        )

    try:
        suite = _discover(run_one, active[0], envs[active[0].gpu], work)
        concurrent, exclusive = partition(suite, bench, policy)
        if not concurrent and not exclusive:
            raise ValueError(f"-b {list(bench)} selects no benchmark of the suite")
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)  # nothing measured yet
        raise
    say(
        f"{len(concurrent)} benchmark(s) on all GPUs at once, {len(exclusive)} one GPU at a "
        f"time (exclusive: {', '.join(policy.exclusive) or 'none'})"
    )
    modes = {n: (MODE_CONCURRENT, len(active)) for n in concurrent}
    modes.update({n: (MODE_EXCLUSIVE, 1) for n in exclusive})

    def one(s: Shard, phase: str, names) -> None:
        say(f"[{phase}] {s.gpu.label} starts on {len(s.commits)} commit(s)")
        try:
            rc = run_one(s.commits, envs[s.gpu], s.results, phase_regexes(names, bench))
        except Exception as e:  # one broken shard must not lose the others' results
            outcomes[s.gpu].errors.append(f"{phase}: {type(e).__name__}: {e}")
            say(f"[{phase}] {s.gpu.label} failed: {e}")
            return
        outcomes[s.gpu].returncodes[phase] = rc
        say(f"[{phase}] {s.gpu.label} done (asv exit {rc})")

    merge = MergeReport()
    handed_over = dict(copied_in)  # what dest held when each file was last handed to a shard

    def land() -> None:
        # Tag and merge after every phase, not once at the end: a run stopped later (a
        # timeout, a cancelled job) keeps what the finished phases measured. Seen on a
        # 2-GPU H200: a job time limit killed a run in its exclusive phase, and the device
        # times both GPUs had finished were never merged.
        for s in active:  # always against the first copies: asv drops our tag on rewrite
            tag_results(s.results, machine, s.gpu, modes, copied_in)
        rep = merge_results(dest, [s.results for s in active], handed_over)
        accumulate(merge, rep)
        for rel in rep.copied + rep.replaced + rep.unchanged:
            handed_over[rel] = (dest / rel).read_bytes()  # ours now: the next landing may replace

    try:
        if concurrent:
            with ThreadPoolExecutor(max_workers=len(active)) as pool:
                list(pool.map(lambda s: one(s, MODE_CONCURRENT, concurrent), active))
            land()
        if exclusive:
            for s in active:  # one GPU at a time; the others idle
                one(s, MODE_EXCLUSIVE, exclusive)
            land()
    except BaseException:
        # Interrupted or broken after measuring: what the shards wrote is still on disk.
        landed = f"; merged before the stop: {len(merge.copied) + len(merge.replaced)} file(s)"
        say(f"stopped before the merge finished{landed}; shard results kept in {work}")
        raise
    for c in merge.conflicts:
        say(f"CONFLICT {c.path}: {c.reason}; the shard's copy is kept at {c.kept}")
    keep = bool(merge.conflicts) or any(o.errors for o in outcomes.values())
    say(
        f"merged into {dest}: {len(merge.copied)} new, {len(merge.replaced)} updated, "
        f"{len(merge.unchanged)} unchanged, {len(merge.conflicts)} conflict(s)"
    )
    if keep:
        say(f"work directory kept for inspection: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return ShardRunResult(
        commits,
        concurrent,
        exclusive,
        [outcomes[s.gpu] for s in shards],
        merge,
        work if keep else None,
    )


@contextlib.contextmanager
def sigterm_as_interrupt():
    """Turn SIGTERM into KeyboardInterrupt while a run is in flight.

    Python's default SIGTERM handling exits at once, without ``except``/``finally``:
    a `timeout` or a cancelled CI job would then skip the "shard results kept in
    ..." report. As an exception, the stop takes shard_run's interrupted path.
    """
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may install handlers
        return

    def handler(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def run(
    asv_args: Sequence[str],
    *,
    gpus="auto",
    results=None,
    config="asv.conf.json",
    policy: Policy | None = None,
    dry_run: bool = False,
    gpu_list: Sequence[Gpu] | None = None,
    machine: str | None = None,
) -> int:
    """``ltx2k shard-run``: everything from the command line to merged results.

    *gpu_list* and *machine* replace nvidia-smi and ``ltx2k machine`` (tests
    run fake GPUs on the CPU interpreter with them).
    """
    from ltx2k import runtime
    from ltx2k.runner import asv_compat, asv_run
    from ltx2k.runner import machine as machine_mod

    if not os.path.exists(config):
        raise FileNotFoundError(f"--config {config!r} does not exist (run from the repo root)")
    policy = Policy() if policy is None else policy
    args = parse_asv_args(asv_args)
    asv_run.check_range(asv_args, config)
    conf = asv_compat.load_config(config)
    dest = Path(results or conf.results_dir)
    chosen = select_gpus(list_gpus() if gpu_list is None else gpu_list, gpus)
    if machine is None:
        machine = identify_pinned(chosen[0], os.environ)
    mismatch = policy.mismatch(machine)
    if mismatch:
        print(f"ltx2k shard-run: warning: {mismatch}", file=sys.stderr)
    commits = resolve_commits(conf, args, dest, machine)
    if not commits:
        print("ltx2k shard-run: nothing to benchmark in this range", file=sys.stderr)
        return 0
    if dry_run:
        for g, c in zip(chosen, split_commits(commits, len(chosen)), strict=True):
            print(f"{g.label} {g.uuid}: {' '.join(x[:8] for x in c) or '(idle)'}")
        source = f" (measured on {policy.machine})" if policy.machine else ""
        print(f"exclusive: {list(policy.exclusive)}{source}; asv args: {list(args.passthrough)}")
        return 0
    launcher = AsvLauncher(config, machine, args.passthrough)
    cpu = machine == machine_mod.CPU_MACHINE
    # One keeper holds a context on every GPU of the host (see asv_run.run).
    with sigterm_as_interrupt(), runtime.context_keeper(not cpu):
        res = shard_run(
            commits,
            chosen,
            dest,
            launcher,
            machine=machine,
            policy=policy,
            bench=args.bench,
            cpu=cpu,
        )
    for o in res.shards:
        print(
            f"{o.gpu.label} {o.gpu.uuid}: {len(o.commits)} commit(s), asv exit "
            f"{o.returncodes or '-'}{'; ' + '; '.join(o.errors) if o.errors else ''}"
        )
    return res.exit_code
