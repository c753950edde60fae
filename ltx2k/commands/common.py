"""What every command shares: exit statuses, the one-line failure, argparse types."""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
from pathlib import Path

# Exit statuses shared by every command (regress and confirm document their own 2 and 3).
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_INTERRUPTED = 130  # a shell's status for SIGINT


def fail(msg: str, code: int = EXIT_ERROR) -> int:
    print(f"ltx2k: error: {msg}", file=sys.stderr)
    return code


def internal_error(what: str, e: BaseException) -> None:
    """An error inside ltx2k while producing *what* (one output of several): one line
    naming it, then the traceback a bug report needs, on stderr. The caller goes on
    with the other outputs."""
    import traceback

    print(
        f"ltx2k: internal error: {what} was not written: {type(e).__name__}: {e} "
        "(a bug in ltx2k; the traceback follows, the other outputs are written)",
        file=sys.stderr,
    )
    traceback.print_exception(type(e), e, e.__traceback__, file=sys.stderr)


def check_outputs(outputs: dict[str, object], inputs: dict[str, object]) -> None:
    """ValueError before anything is written where an output would overwrite another
    output or what the command reads: two output flags naming one path, or an output that
    is an input file or lies inside an input folder (a results dir: a report written into
    it would be read as a results file next time). Flags with no value are skipped."""
    outs = {flag: os.path.realpath(os.fspath(p)) for flag, p in outputs.items() if p}
    seen: dict[str, str] = {}
    for flag, path in outs.items():
        if path in seen:
            raise ValueError(
                f"{seen[path]} and {flag} name the same file {outputs[flag]!r}; one would "
                "overwrite the other"
            )
        seen[path] = flag
    for in_flag, given in inputs.items():
        if not given:
            continue
        real = os.path.realpath(os.fspath(given))
        for flag, path in outs.items():
            if path == real or path.startswith(real.rstrip(os.sep) + os.sep):
                where = "is" if path == real else "lies inside"
                raise ValueError(
                    f"{flag} {os.fspath(outputs[flag])!r} {where} {in_flag} "
                    f"{os.fspath(given)!r}: writing it would change what this command reads"
                )


def check_output_files(outputs: dict[str, object]) -> None:
    """ValueError, before any work, for an output file flag whose path cannot be written:
    an existing folder, or a file in a folder that does not exist. Every command treats
    a missing folder the same way, as a mistyped path, rather than one output creating
    it and another failing on it (after the work, its result then lost). Flags with no
    value are skipped."""
    for flag, given in outputs.items():
        if not given:
            continue
        path = Path(os.fspath(given))
        if path.is_dir():
            raise ValueError(f"{flag} {os.fspath(given)!r} is a folder; pass a file path")
        parent = path.parent
        if not parent.is_dir():
            what = "is not a folder" if parent.exists() else "does not exist"
            raise ValueError(
                f"{flag} {os.fspath(given)!r}: its folder {os.fspath(parent)!r} {what}; "
                "create it first"
            )


ASV_CONFIG = "asv.conf.json"


def add_config_option(parser: argparse.ArgumentParser) -> None:
    """``--config``: the asv config every asv-driving command reads (:func:`find_config`)."""
    parser.add_argument(
        "--config",
        default=None,
        help=f"asv config (default: the project's {ASV_CONFIG}, found next to --results, "
        "in the current directory or its git top level, or in the checkout ltx2k runs from)",
    )


# The checkout this package was imported from (an editable install's source tree).
CHECKOUT = Path(__file__).resolve().parents[2]


def _git_toplevel(directory: Path) -> Path | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(directory), "rev-parse", "--show-toplevel"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except OSError:  # no git: the other places still count
        return None
    return Path(out.stdout.strip()) if out.returncode == 0 and out.stdout.strip() else None


def project_dirs(results: str | os.PathLike | None = None) -> list[Path]:
    """Where a command looks for the project, in order: the folders above *results*
    (asv keeps results next to its config), the current directory and its git top
    level, and the checkout this ``ltx2k`` package was imported from."""
    places: list[Path] = []
    if results is not None:
        places += Path(results).resolve().parents[:3]
    cwd = Path.cwd()
    places += [cwd, _git_toplevel(cwd), CHECKOUT]
    seen: list[Path] = []
    for p in places:
        if p is not None and p not in seen:
            seen.append(p)
    return seen


def find_config(config: str | os.PathLike | None, results=None) -> str:
    """The asv config a command reads: *config* (``--config``) as given, else the first
    :func:`project_dirs` folder holding asv.conf.json. ValueError naming the places
    looked in and what to pass when there is none."""
    if config is not None:
        path = Path(config)
        if not path.is_file():
            raise ValueError(
                f"--config {os.fspath(config)!r}: no such file (looked in {Path.cwd()}); "
                f"pass the path of the project's {ASV_CONFIG}"
            )
        return os.fspath(config)
    places = project_dirs(results)
    for d in places:
        if (d / ASV_CONFIG).is_file():
            return str(d / ASV_CONFIG)
    raise ValueError(
        f"found no {ASV_CONFIG} in {', '.join(map(str, places))}; run from the ltx2k "
        f"checkout, or pass --config PATH/{ASV_CONFIG}"
    )


def check_results_dir(results: str | os.PathLike, flag: str = "--results") -> None:
    """ValueError when *results* is not a directory, naming where it was looked for and
    where the project's results are, if a project is found."""
    path = Path(results)
    if path.is_dir():
        return
    if path.exists():
        raise ValueError(f"{flag} {os.fspath(results)!r} is a file; pass the asv results directory")
    where = f" in {Path.cwd()}" if not path.is_absolute() else ""
    hint = next(
        (str(d / "results") for d in project_dirs() if (d / "results").is_dir()),
        None,
    )
    raise ValueError(
        f"{flag} {os.fspath(results)!r}: no such directory{where}; pass the asv results "
        "directory" + (f", e.g. {flag} {hint}" if hint else "")
    )


def usage_error_exits_1(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Usage errors exit 1, as every other error does: regress and confirm give 2 a
    meaning of their own, where argparse would use 2 for usage errors. Applies to the
    parser's subcommands, and theirs, too."""

    def error(message: str):
        parser.print_usage(sys.stderr)
        parser.exit(EXIT_ERROR, f"{parser.prog}: error: {message}\n")

    parser.error = error
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                usage_error_exits_1(sub)
    return parser


def at_least(kind, minimum):
    """An argparse type: *kind* (int or float) no smaller than *minimum*, and finite: NaN
    passes every comparison (``nan < 0`` is False) and is no number of seconds, nor is
    infinity."""

    def parse(text: str):
        value = kind(text)  # ValueError: argparse says "invalid int value: 'two'"
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{text!r} is below the minimum, {minimum}")
        return value

    parse.__name__ = kind.__name__
    return parse


def positive(kind):
    """An argparse type: *kind* greater than zero."""

    def parse(text: str):
        value = at_least(kind, 0)(text)
        if value == 0:
            raise argparse.ArgumentTypeError(f"{text!r} is not greater than 0")
        return value

    parse.__name__ = kind.__name__
    return parse
