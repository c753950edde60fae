"""What every command shares: exit statuses, the one-line failure, argparse types."""

from __future__ import annotations

import argparse
import sys

# Exit statuses shared by every command (regress and confirm document their own 2 and 3).
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_INTERRUPTED = 130  # a shell's status for SIGINT


def fail(msg: str, code: int = EXIT_ERROR) -> int:
    print(f"ltx2k: error: {msg}", file=sys.stderr)
    return code


ASV_CONFIG = "asv.conf.json"


def add_config_option(parser: argparse.ArgumentParser) -> None:
    """``--config``: the asv config every asv-driving command reads."""
    parser.add_argument("--config", default=ASV_CONFIG, help=f"asv config (default {ASV_CONFIG})")


def usage_error_exits_1(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """regress reserves exit 2 for "regression found"; argparse would use 2 for usage errors."""

    def error(message: str):
        parser.print_usage(sys.stderr)
        parser.exit(EXIT_ERROR, f"{parser.prog}: error: {message}\n")

    parser.error = error
    return parser


def at_least(kind, minimum):
    """An argparse type: *kind* (int or float) no smaller than *minimum*."""

    def parse(text: str):
        value = kind(text)  # ValueError: argparse says "invalid int value: 'two'"
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
