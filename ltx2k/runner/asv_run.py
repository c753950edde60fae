"""``ltx2k run``: asv run with the settings a runner needs, so nobody retypes them.

- the machine name and fields come from the GPU (ltx2k.runner.machine), written to
  ~/.asv-machine.json, so results land under results/<gpu-model>/;
- ``--record-samples`` so every time benchmark stores its raw samples, which
  ``ltx2k regress`` uses for its significance test;
- no GPU: the Triton interpreter and the machine "cpu-interpreter";
- ``--launch-method`` comes from asv.conf.json (forkserver);
- on a GPU, a CUDA context is held open for the whole run
  (:class:`ltx2k.runtime.ContextKeeper`), so the ~280 benchmark processes of
  a commit do not each pay the GPU's initialisation;
- on a GPU, every benchmark it measured is tagged in its result file with the
  physical GPU (index, UUID: :mod:`ltx2k.history.tags`, as ``shard-run`` tags
  its shards), so the report can say which card measured a value.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from ltx2k import runtime
from ltx2k.history import tags
from ltx2k.runner import asv_compat, bytecode, machine

# asv run's own range words: asv resolves them, git does not know them.
_ASV_RANGE_WORDS = ("NEW", "ALL", "EXISTING", "TAGS")


def build_command(asv_args: list[str], config: str, machine_name: str) -> list[str]:
    args = list(asv_args)
    if args and args[0] == "--":
        args = args[1:]
    cmd = [sys.executable, "-m", "asv", "run", "--config", config, "--machine", machine_name]
    if "--record-samples" not in args and "--no-record-samples" not in args:
        cmd.append("--record-samples")
    return cmd + args


def check_passthrough(asv_args: Sequence[str]) -> None:
    """ValueError for what ``ltx2k run`` cannot pass on to ``asv run``: the options it sets
    itself (a second --machine or --config would contradict its own) and anything asv
    run's own option table does not take, such as a second commit range."""
    args = list(asv_args)
    if args and args[0] == "--":
        args = args[1:]
    for a in args:
        if a == "--config" or a.startswith("--config="):
            raise ValueError(
                "--config belongs to ltx2k run, before the range: `ltx2k run --config FILE "
                "HEAD^!`; ltx2k hands it to asv"
            )
    ns, extra = asv_compat.run_parser().parse_known_args(args)
    if ns.machine is not None:
        raise ValueError(
            f"--machine {ns.machine!r}: ltx2k run names the machine itself, from the GPU "
            "(`ltx2k machine`); set LTX2K_MACHINE=NAME to choose another name"
        )
    if extra:
        raise ValueError(
            f"asv run does not take {' '.join(extra)!r} (one commit range at most, and asv "
            "run's options: `python -m asv run --help`)"
        )


def range_of(asv_args: Sequence[str]) -> str | None:
    """The commit range among *asv_args*, parsed with asv run's own option table."""
    args = list(asv_args)
    if args and args[0] == "--":
        args = args[1:]
    ns, _ = asv_compat.run_parser().parse_known_args(args)
    return ns.range


def _conf_repo(config: str) -> Path | None:
    try:
        conf = asv_compat.load_conf(config)
    except (OSError, ValueError):
        return None  # asv itself reports an unreadable config
    repo = Path(config).resolve().parent / str(conf.get("repo", "."))
    return repo if repo.is_dir() else None  # a URL: asv clones it, nothing to check here


def _unknown_revisions(repo: Path, spec: str) -> list[str]:
    """The revisions of a git range *spec* (A..B, A...B, A^!, ^A, ...) that *repo* lacks."""
    revs = []
    for part in re.split(r"\.\.\.?", spec):
        rev = re.sub(r"\^(!|@|-\d*)$", "", part.removeprefix("^"))
        if rev:  # an empty side of A.. means HEAD
            revs.append(rev)
    missing = []
    for rev in revs:
        proc = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            missing.append(rev)
    return missing


def check_range(asv_args: Sequence[str], config: str = "asv.conf.json", flag: str = "") -> None:
    """Raise ValueError naming each revision of the range the repository lacks.

    asv would end in a long traceback for an unknown revision; git answers in a
    line. *flag* names where the range came from (``--commits``) in the message.
    """
    spec = range_of(asv_args)
    repo = _conf_repo(config)
    if spec is None or repo is None or spec in _ASV_RANGE_WORDS or spec.startswith("HASHFILE:"):
        return
    where = f"{flag} {spec!r}" if flag else f"commit range {spec!r}"
    proc = subprocess.run(
        ["git", "-C", str(repo), "rev-list", "--max-count=1", spec, "--"],
        capture_output=True,
        text=True,
    )
    if proc.returncode == 0:
        return
    missing = _unknown_revisions(repo, spec)
    if missing:
        names = ", ".join(repr(m) for m in missing)
        noun = "revision" if len(missing) == 1 else "revisions"
        raise ValueError(f"{where}: unknown {noun} {names} in {repo}")
    first = next((ln for ln in proc.stderr.splitlines() if ln.strip()), "git rev-list failed")
    raise ValueError(f"{where}: {first.removeprefix('fatal: ')}")


def run(
    asv_args: list[str],
    config: str = "asv.conf.json",
    dry_run: bool = False,
    keep_context: bool = True,
) -> int:
    if not os.path.exists(config):
        raise FileNotFoundError(f"--config {config!r} does not exist (run from the repo root)")
    asv_compat.load_conf(config)  # a config asv would choke on is named here, in a line
    check_passthrough(asv_args)
    check_range(asv_args, config)
    info = machine.identify()
    # asv's interpreters (its own, pip's, discovery, forkserver, setup_cache) each import
    # torch: keep their bytecode where the runner keeps none (ltx2k/runner/bytecode.py).
    env = bytecode.environ_with_cache(os.environ)
    env.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    if info["machine"] == machine.CPU_MACHINE:
        env["TRITON_INTERPRET"] = "1"
    cmd = build_command(asv_args, config, info["machine"])
    print("+ " + " ".join(cmd), file=sys.stderr)
    if dry_run:
        return 0
    machine.write_asv_machine_file(info)
    on_gpu = info["machine"] != machine.CPU_MACHINE
    gpu = measuring_gpu(env) if on_gpu else None
    results = results_dir(config)
    before = tags.snapshot(results, info["machine"]) if gpu else {}
    with runtime.context_keeper(keep_context and on_gpu):
        rc = subprocess.call(cmd, env=env)
    if gpu is not None:
        try:
            tags.tag_results(results, info["machine"], gpu, {}, before)
        except (OSError, ValueError) as e:  # a tag is provenance: never lose the run over it
            print(f"ltx2k run: could not tag the results with {gpu.uuid}: {e}", file=sys.stderr)
    return rc


def results_dir(config: str) -> Path:
    """The config's results_dir, resolved against the config's folder."""
    conf = asv_compat.load_conf(config)
    return (Path(config).resolve().parent / conf.get("results_dir", "results")).resolve()


def measuring_gpu(environ) -> machine.Gpu | None:
    """The GPU asv's benchmark processes use (CUDA device 0 of the visible ones), or None.

    None, with a line on stderr, when nvidia-smi cannot say: the run goes on untagged.
    """
    try:
        gpus = machine.list_gpus(environ)
    except (RuntimeError, ValueError) as e:
        print(f"ltx2k run: results will not name their GPU: {e}", file=sys.stderr)
        return None
    return gpus[0] if gpus else None
