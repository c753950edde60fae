"""asv run for one shard of ``ltx2k shard-run``: its arguments and its launcher.

:func:`parse_asv_args` splits the ``asv run`` arguments a user gave shard-run
into what shard-run consumes itself (the range, ``-b``, ``--steps``,
``--date-period``) and what it passes on to every shard's ``asv run``;
:func:`resolve_commits` turns the range into the commits ``asv run`` would
benchmark; :class:`AsvLauncher` runs ``asv run HASHFILE:`` for one shard with a
private config (the command line itself is :func:`ltx2k.runner.asv_run.build_command`,
shared with ``ltx2k run``).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ltx2k.runner import asv_compat, asv_run

# asv run options shard-run consumes itself instead of passing them through.
_RANGE_OPTIONS = ("--bench", "--steps", "--date-period", "--machine")
_COMMIT_LINE = re.compile(r"For \S+ commit ([0-9a-f]{8})")


@dataclass(frozen=True)
class AsvArgs:
    """``asv run`` arguments split into what shard-run consumes and what it passes on."""

    range_spec: str | None
    bench: tuple[str, ...]
    steps: int | None
    date_period: float | None
    skip_existing_commits: bool
    passthrough: tuple[str, ...]


def parse_asv_args(asv_args: Sequence[str]) -> AsvArgs:
    args = list(asv_args)
    if args and args[0] == "--":
        args = args[1:]
    parser = asv_compat.run_parser()
    ns = parser.parse_args(args)
    if ns.machine is not None:
        raise ValueError(
            f"asv run --machine {ns.machine!r}: shard-run names the machine after the GPU"
        )
    actions = {s: a for a in parser._actions for s in a.option_strings}
    keep: list[str] = []
    positional: list[str] = []
    i = 0
    while i < len(args):
        tok = args[i]
        i += 1
        if not tok.startswith("-") or tok == "-":
            positional.append(tok)
            continue
        opt, eq, _ = tok.partition("=")
        action = actions.get(opt)
        attached = bool(eq)
        if action is None and not tok.startswith("--") and tok[:2] in actions:
            action, attached = actions[tok[:2]], True  # -bREGEX
        if action is None:
            raise ValueError(f"asv run arguments: cannot place {tok!r}")
        tokens = [tok]
        # Consume the option's value the way argparse just did (it parsed these
        # same tokens without error above, so a required value is present).
        takes = action.nargs in (None, 1) or (
            action.nargs == "?" and i < len(args) and not args[i].startswith("-")
        )
        if takes and not attached:
            tokens.append(args[i])
            i += 1
        if set(action.option_strings) & set(_RANGE_OPTIONS):
            continue
        keep.extend(tokens)
    if len(positional) > 1 or (positional[:1] or [None])[0] != ns.range:
        raise ValueError(f"asv run arguments: expected at most one range, got {positional}")
    return AsvArgs(
        range_spec=ns.range,
        bench=tuple(ns.bench or ()),
        steps=ns.steps,
        date_period=ns.date_period,
        skip_existing_commits=bool(ns.skip_existing_commits),
        passthrough=tuple(keep),
    )


def resolve_commits(conf, args: AsvArgs, results_dir, machine: str) -> list[str]:
    """Full hashes ``asv run`` would benchmark for *args* (asv.commands.run.Run.run's switch)."""
    commits = asv_compat.resolve_range(
        conf, args.range_spec, results_dir, date_period=args.date_period, steps=args.steps
    )
    if args.skip_existing_commits and Path(results_dir, machine).is_dir():
        # The shards' results dirs start (almost) empty, so asv's own check there
        # would skip nothing: decide here, against the destination.
        commits = [c for c in commits if not asv_compat.has_results(results_dir, machine, c)]
    return commits


# --- the launcher ------------------------------------------------------------------------


class Log:
    """shard-run's progress lines, on stderr (log=True), a stream, or nowhere (False)."""

    def __init__(self, stream):
        self.stream = stream
        self.lock = threading.Lock()

    def __call__(self, msg: str) -> None:
        stream = sys.stderr if self.stream is True else self.stream
        if stream:
            with self.lock:
                print(f"ltx2k shard-run: {msg}", file=stream, flush=True)


class AsvLauncher:
    """The real ``run_one``: ``asv run HASHFILE:`` with a private config per shard.

    The config is asv.conf.json with ``results_dir`` and ``env_dir`` moved into
    the shard's work directory. asv changes into the config file's directory
    and resolves relative paths there, so the copy's paths are made absolute,
    and a plugin imported relative to it (``".ltx2k.runner.asv_env"``) gets a symlink
    to its package next to the copy.
    """

    _PATH_KEYS = ("repo", "benchmark_dir", "html_dir")

    def __init__(self, config, machine: str, passthrough: Sequence[str] = (), log=True):
        self.root = Path(os.fspath(config)).resolve().parent
        self.conf = asv_compat.load_conf(os.fspath(config))
        for key in self._PATH_KEYS:
            value = self.conf.get(key)
            if isinstance(value, str) and (self.root / value).exists():
                self.conf[key] = str((self.root / value).resolve())
        self.machine = machine
        self.passthrough = list(passthrough)
        self.say = Log(log)
        self._n = itertools.count()
        self._lock = threading.Lock()

    def _link_plugins(self, work: Path) -> None:
        for plugin in self.conf.get("plugins") or ():
            if isinstance(plugin, str) and plugin.startswith("."):
                top = plugin[1:].split(".")[0]
                link = work / top
                if not link.exists():
                    link.symlink_to(self.root / top, target_is_directory=True)

    def command(self, commits: Sequence[str], results_dir: Path, bench: Sequence[str]):
        work = Path(results_dir).parent
        work.mkdir(parents=True, exist_ok=True)
        with self._lock:
            n = next(self._n)
        conf = dict(self.conf)
        conf["results_dir"] = str(Path(results_dir).resolve())
        conf["env_dir"] = str((work / "env").resolve())
        conf["html_dir"] = str((work / "html").resolve())
        self._link_plugins(work)
        conf_path = work / f"asv.conf.{n}.json"
        conf_path.write_text(json.dumps(conf, indent=4))
        hashfile = work / f"commits.{n}.txt"
        hashfile.write_text("".join(c + "\n" for c in commits))
        args = [*self.passthrough]
        for b in bench:
            args += ["-b", b]
        return asv_run.build_command([*args, f"HASHFILE:{hashfile}"], str(conf_path), self.machine)

    def __call__(self, commits, env, results_dir, bench) -> int:
        cmd = self.command(commits, Path(results_dir), bench)
        label = f"gpu{env.get('LTX2K_GPU_INDEX', '?')}"
        self.say(f"[{label}] + {' '.join(cmd)}")
        order = {c[:8]: i for i, c in enumerate(commits, 1)}
        proc = subprocess.Popen(
            cmd,
            env=dict(env),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            m = _COMMIT_LINE.search(line)
            if m and m.group(1) in order:
                self.say(f"[{label}] commit {order[m.group(1)]}/{len(commits)} {m.group(1)}")
            print(f"[{label}] {line.rstrip()}", file=sys.stderr, flush=True)
        return proc.wait()
