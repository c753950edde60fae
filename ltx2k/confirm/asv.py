"""How ``ltx2k confirm`` drives asv: the ``asv find`` and ``asv continuous`` command lines,
the private config they run with, their output streamed and read back.

asv runs with a private copy of asv.conf.json whose ``results_dir`` lies in
the work directory: the re-measurements never mix with, or overwrite, the
runner's own history in ``results/`` (which ``runner_bench.sh`` pushes to the
store), and the verdict reads exactly what this run measured. ``env_dir`` is
the config's own, so the per-commit builds are shared with ``ltx2k run``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from ltx2k.confirm.targets import Plan, Target

_FOUND = re.compile(r"Greatest (?:regression|improvement) found: ([0-9a-f]{7,40})")
# asv's messages when -b / the benchmark name selects nothing or too much.
_NO_MATCH = re.compile(r"No benchmarks selected|benchmark not found")
_MANY_MATCH = re.compile(r"matches more than one benchmark")

Runner = Callable[[Sequence[str], dict], "tuple[int, str]"]


def say(msg: str) -> None:
    print(f"ltx2k confirm: {msg}", file=sys.stderr, flush=True)


# --- command lines -----------------------------------------------------------------------------


def find_command(config, machine: str, p: Plan, *, invert: bool) -> list[str]:
    cmd = [sys.executable, "-m", "asv", "find", "--config", os.fspath(config)]
    cmd += ["--machine", machine, "--show-stderr"]
    if invert:
        cmd.append("--invert")
    return cmd + [p.find_range, p.target.regex()]


def continuous_command(
    config,
    machine: str,
    before: str,
    after: str,
    regexes: Sequence[str],
    *,
    factor: float,
    rounds: int,
) -> list[str]:
    cmd = [sys.executable, "-m", "asv", "continuous", "--config", os.fspath(config)]
    cmd += ["--machine", machine, "--record-samples", "--interleave-rounds"]
    # The suite runs one round per commit (rounds = 1, to keep a full run short);
    # an A/B of a few cells can afford several, interleaved across the two commits.
    cmd += ["-a", f"rounds={rounds}", "--factor", f"{factor:g}", "--split", "--show-stderr"]
    for r in regexes:
        cmd += ["-b", r]
    return cmd + [before, after]


# --- the config --------------------------------------------------------------------------------


# Marks a --work folder as confirm's own: it empties results there and rewrites the
# config, so it never takes over a folder that holds something else.
WORK_MARKER = ".ltx2k-confirm-work"


def check_work(work) -> Path:
    """*work* resolved, or a ValueError: a file, or a folder with contents that confirm did
    not make (no :data:`WORK_MARKER`): emptying its results would lose someone's data."""
    path = Path(os.fspath(work))
    if not os.fspath(work):
        raise ValueError("--work must name a folder, got ''")
    if path.exists() and not path.is_dir():
        raise ValueError(f"--work {os.fspath(work)}: not a folder")
    if path.is_dir() and any(path.iterdir()) and not _made_by_confirm(path):
        raise ValueError(
            f"--work {os.fspath(work)}: holds files ltx2k confirm did not make (no "
            f"{WORK_MARKER}); confirm empties results there, so pass a new or empty folder"
        )
    return path.resolve()


def _made_by_confirm(work: Path) -> bool:
    if (work / WORK_MARKER).is_file():
        return True
    # A work folder from before the marker: its config sends results to its own results/.
    try:
        conf = json.loads((work / "asv.conf.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(conf, dict) and conf.get("results_dir") == str(work.resolve() / "results")


def private_config(config, work) -> Path:
    """asv.conf.json with results in *work*/results; every other path the original's."""
    from ltx2k.runner import asv_compat

    src = Path(os.fspath(config))
    if not src.is_file():
        raise FileNotFoundError(
            f"--config {os.fspath(config)!r} does not exist (run from the repo root)"
        )
    root = src.resolve().parent
    conf = asv_compat.load_conf(src)
    for key in ("repo", "benchmark_dir", "env_dir", "html_dir"):
        value = conf.get(key)
        if isinstance(value, str) and "://" not in value and not value.startswith("git@"):
            conf[key] = str((root / value).resolve())
    own = (root / conf.get("results_dir", "results")).resolve()
    if Path(os.fspath(work)).resolve() / "results" == own:
        raise ValueError(
            f"--work {os.fspath(work)}: its results/ is the config's results_dir {own}; "
            "confirm never writes into the runner's history"
        )
    work = check_work(work)
    work.mkdir(parents=True, exist_ok=True)
    (work / WORK_MARKER).write_text("made by ltx2k confirm; its results are emptied each run\n")
    conf["results_dir"] = str(work / "results")
    # asv imports a relative plugin (".ltx2k.runner.asv_env") from the config's folder.
    for plugin in conf.get("plugins") or ():
        if isinstance(plugin, str) and plugin.startswith("."):
            top = plugin[1:].split(".")[0]
            link = work / top
            if not link.exists() and not link.is_symlink():
                link.symlink_to(root / top, target_is_directory=True)
    out = work / "asv.conf.json"
    out.write_text(json.dumps(conf, indent=4) + "\n")
    return out


def config_repo(config: Path) -> Path:
    """The git repository the config's ``repo`` names (its own folder for a remote one)."""
    from ltx2k.runner import asv_compat

    conf = asv_compat.load_conf(config)
    repo = conf.get("repo", ".")
    if not isinstance(repo, str) or "://" in repo or repo.startswith("git@"):
        return config.resolve().parent
    return (config.resolve().parent / repo).resolve()


def results_dir(config: Path) -> Path:
    from ltx2k.runner import asv_compat

    conf = asv_compat.load_conf(config)
    return (Path(config).resolve().parent / conf.get("results_dir", "results")).resolve()


# --- running asv and reading its output --------------------------------------------------------


def stream(cmd: Sequence[str], env: dict) -> tuple[int, str]:
    """Run *cmd*, echoing its output to stderr as it comes (progress), and keep it."""
    say("+ " + " ".join(cmd))
    proc = subprocess.Popen(
        list(cmd), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        errors="replace",
    )  # fmt: skip
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line)
        sys.stderr.write(line)
    sys.stderr.flush()
    return proc.wait(), "".join(lines)


def parse_found(output: str, commits: Sequence[str]) -> str | None:
    """The commit asv find named, as a full sha of *commits* (never the first)."""
    found = _FOUND.findall(output)
    if not found:
        return None
    named = [c for c in commits[1:] if c.startswith(found[-1])]
    return named[0] if len(named) == 1 else None


def asv_problem(output: str, t: Target, rc: int, what: str) -> str:
    """Why asv *what* ("find" or "continuous") failed for *t*, or "" when it did not."""
    if _MANY_MATCH.search(output):
        return (
            f"--benchmark {t.benchmark!r} matches more than one benchmark; "
            "give the full name (e.g. bench_kernels.SplitRope.time_device_cold)"
        )
    if _NO_MATCH.search(output):
        return f"benchmark {t.label!r} matches no benchmark of the suite"
    if rc not in (0, 1) or (what == "find" and rc != 0):
        return f"asv {what} exited {rc}; see its log"
    return ""
