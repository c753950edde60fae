"""The ``ltx2k`` commands, one module each, as asv keeps them in ``asv/commands/``.

Each module has ``add_parser(subparsers)``, which declares the command and its
flags, and ``run(args) -> int`` (``push``/``pull`` for ``store``), a thin
handler over one library call. Handlers import their library lazily, so
``ltx2k --help`` never imports torch. ``ltx2k/cli.py`` parses, maps each
command to its handler (``cli.cmd_<command>``), calls it and turns a user's
error into one line.
"""

from __future__ import annotations

import argparse

from ltx2k.commands import (
    check,
    confirm,
    interference,
    machine,
    main_job,
    power,
    publish,
    quick,
    regress,
    run,
    shapes,
    shard_run,
    store,
)

# In the order `ltx2k --help` lists them.
COMMANDS = (
    check,
    machine,
    quick,
    main_job,
    run,
    power,
    shard_run,
    interference,
    regress,
    confirm,
    store,
    publish,
    shapes,
)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ltx2k",
        description="Check, benchmark and track the LTX-2 Triton kernels, GPU by GPU "
        "(asv underneath). `ltx2k COMMAND --help` for each command.",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(sub)
    return p
