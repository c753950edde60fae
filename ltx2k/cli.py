"""``ltx2k`` command line: the entry point (``[project.scripts]``).

The commands are modules of :mod:`ltx2k.commands`, one each. ``main`` parses,
calls the command's handler, and turns a user's error (bad input, a missing
file, a tool that failed) into one line on stderr that names the flag, and a
non-zero exit; only a bug shows a traceback.
"""

from __future__ import annotations

import argparse
import re
import sys

from ltx2k import commands
from ltx2k.commands.common import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, fail, usage_error_exits_1

__all__ = ["EXIT_ERROR", "EXIT_INTERRUPTED", "EXIT_OK", "build_parser", "main"]

# Library functions name their parameters in errors; on the command line the same
# value came from a flag. These parameters' flags have other names.
_PARAM_FLAGS = {
    "results_dir": "results",
    "dest_results_dir": "dest",
    "store_url": "store",
    "asv_conf": "config",
    "html_dir": "html",
    "out_dir": "out",
    "machine_name": "machine",
    "params": "param",
}


def _user_error(e: BaseException) -> str | None:
    """One line for an error the user can fix (bad input, missing file, failed tool);
    None for anything else."""
    import subprocess

    if isinstance(e, subprocess.CalledProcessError):
        # asv's ProcessError subclasses it without calling its __init__: the command is
        # in .args and the status in .retcode there, and .cmd/.returncode do not exist.
        cmd = getattr(e, "cmd", None)
        if cmd is None:
            cmd = e.args
        cmd = cmd if isinstance(cmd, str) else " ".join(map(str, cmd))
        status = getattr(e, "returncode", getattr(e, "retcode", "?"))
        err = getattr(e, "stderr", None)
        err = err.decode(errors="replace") if isinstance(err, bytes) else err
        last = next((ln for ln in reversed((err or "").splitlines()) if ln.strip()), "")
        return f"`{cmd}` exited {status}" + (f": {last.strip()}" if last else "")
    if isinstance(e, OSError) and e.filename is not None:
        return f"{e.filename}: {e.strerror or e}"
    if isinstance(e, (ValueError, RuntimeError, OSError)):
        return str(e)
    if type(e).__name__ == "UserError" and type(e).__module__.startswith("asv"):
        return str(e)  # asv's own "you asked for something wrong"
    return None


def _subparser(parser: argparse.ArgumentParser, args: argparse.Namespace):
    """The (sub)parser of the command that ran, e.g. the one of ``store push``."""
    current = parser
    for dest in ("command", "store_command"):
        actions = [a for a in current._actions if isinstance(a, argparse._SubParsersAction)]
        if not actions or getattr(args, dest, None) is None:
            break
        current = actions[0].choices[getattr(args, dest)]
    return current


def _name_flags(message: str, parser: argparse.ArgumentParser) -> str:
    """``results_dir='x' is not a directory`` -> ``--results 'x' is not a directory``."""
    flags = {}
    for a in parser._actions:
        if a.option_strings:
            flags[a.dest] = max(a.option_strings, key=len)
        elif a.metavar:
            flags[a.dest] = str(a.metavar)
    for param, dest in _PARAM_FLAGS.items():
        if dest in flags:
            flags.setdefault(param, flags[dest])
    for param, flag in sorted(flags.items(), key=lambda kv: -len(kv[0])):
        # `pass machine=` (no value follows) -> `pass --machine`
        message = re.sub(rf"(?<![\w.=-]){param}=(?=[\s;,.)]|$)", flag, message)
        message = re.sub(rf"(?<![\w.=-]){param}=", f"{flag} ", message)
        message = re.sub(rf"(?<![\w.=-]){param}( must\b)", rf"{flag}\1", message)
    return message


# Each command's handler by the name main calls it: cmd_<command>, and
# cmd_store_<action> for the store's actions. Replacing one of these (a test that
# makes a command fail) replaces what runs.
cmd_check = commands.check.run
cmd_machine = commands.machine.run
cmd_quick = commands.quick.run
cmd_all = commands.main_job.run
cmd_run = commands.run.run
cmd_power = commands.power.run
cmd_shard_run = commands.shard_run.run
cmd_interference = commands.interference.run
cmd_regress = commands.regress.run
cmd_confirm = commands.confirm.run
cmd_store_push = commands.store.push
cmd_store_pull = commands.store.pull
cmd_publish = commands.publish.run
cmd_shapes = commands.shapes.run


def build_parser() -> argparse.ArgumentParser:
    return commands.build_parser()


def _handler(args: argparse.Namespace):
    """The handler of the command that ran, looked up at call time (see cmd_check)."""
    name = "cmd_" + args.command.replace("-", "_")
    if getattr(args, "store_command", None):
        name += "_" + args.store_command
    return globals()[name]


def main(argv: list[str] | None = None) -> int:
    parser = usage_error_exits_1(build_parser())
    # `ltx2k run --quick HEAD^!`: options ltx2k does not know belong to asv.
    args, extra = parser.parse_known_args(argv)
    if extra:
        if args.command != "run":
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        args.asv_args = extra + list(args.asv_args)
    try:
        return _handler(args)(args)
    except BrokenPipeError:
        # `ltx2k regress ... | head`: the reader left; nothing is wrong with the run.
        sys.stderr.close()
        return EXIT_OK
    except KeyboardInterrupt:
        return fail("interrupted", EXIT_INTERRUPTED)
    except Exception as e:
        message = _user_error(e)
        if message is None:
            raise  # a bug: the traceback is what a report of it needs
        return fail(_name_flags(message, _subparser(parser, args)))


if __name__ == "__main__":
    sys.exit(main())
