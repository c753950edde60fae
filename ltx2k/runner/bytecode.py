"""A bytecode cache for the benchmark processes, where the runner keeps none.

Runner images often set ``PYTHONDONTWRITEBYTECODE=1`` and ship site-packages
without ``__pycache__`` (the H200 runner this suite was measured on does both).
Every fresh interpreter then compiles each module it imports from source: torch,
Triton and inductor cost seconds per interpreter, and asv starts several per
commit (its own, pip's build and install, discovery, the forkserver, the
``setup_cache`` process); each forked benchmark process of the torch.compile peer
compiled another ~50 modules that dynamo and inductor import lazily
(docs/measurement.md, "Suite cost").

Python reads and writes bytecode under ``PYTHONPYCACHEPREFIX`` instead of next to
the sources when it is set. So where ``PYTHONDONTWRITEBYTECODE`` is set and no
prefix is, ltx2k points the prefix at ``pycache`` in its cache folder
(``~/.cache/ltx2k`` by default) and lets Python write there: the sources and site-packages
stay untouched, which is what ``PYTHONDONTWRITEBYTECODE`` protects, and the
cache outlives the job as the Triton and inductor caches do. Python checks each
file against its source's size and mtime, so a stale one is never used.
Elsewhere nothing changes: Python already keeps bytecode next to the sources,
and a caller who sets ``PYTHONPYCACHEPREFIX`` keeps full control.

No imports beyond the standard library: ``benchmarks/bench_kernels.py`` loads
this file by path before it imports torch, and ``scripts/main.sh`` runs it as a
script (``eval "$(python ltx2k/runner/bytecode.py)"``) before anything imports torch.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping

PREFIX_VAR = "PYTHONPYCACHEPREFIX"
NO_WRITE_VAR = "PYTHONDONTWRITEBYTECODE"


def cache_root(environ: Mapping[str, str]) -> str:
    """ltx2k's cache folder: ``LTX2K_CACHE_DIR``, else ``ltx2k`` under the XDG cache
    (``~/.cache``). Defined here because this module imports nothing from ltx2k."""
    if environ.get("LTX2K_CACHE_DIR"):
        return environ["LTX2K_CACHE_DIR"]
    home = environ.get("HOME") or os.path.expanduser("~")
    return os.path.join(environ.get("XDG_CACHE_HOME") or os.path.join(home, ".cache"), "ltx2k")


def cache_dir(environ: Mapping[str, str]) -> str:
    """The bytecode folder in ltx2k's cache folder."""
    return os.path.join(cache_root(environ), "pycache")


def wanted(environ: Mapping[str, str]) -> bool:
    """Whether *environ* writes no bytecode and names no folder of its own for it."""
    return bool(environ.get(NO_WRITE_VAR)) and not environ.get(PREFIX_VAR)


def environ_with_cache(environ: Mapping[str, str]) -> dict[str, str]:
    """A copy of *environ* whose Python processes keep bytecode in ltx2k's cache folder.

    Unchanged unless ``wanted``.
    """
    env = dict(environ)
    if wanted(env):
        env[PREFIX_VAR] = cache_dir(env)
        env.pop(NO_WRITE_VAR, None)
    return env


def enable_in_this_process(environ: Mapping[str, str] = os.environ) -> str | None:
    """Keep this process's bytecode (for modules it imports from now on) in the cache folder.

    Returns the prefix set, or None where it is not ``wanted`` (nothing changed).
    """
    if not wanted(environ):
        return None
    sys.pycache_prefix = cache_dir(environ)
    sys.dont_write_bytecode = False
    return sys.pycache_prefix


def shell_exports(environ: Mapping[str, str]) -> str:
    """POSIX shell lines that give a shell's later commands ``environ_with_cache``."""
    if not wanted(environ):
        return ""
    return f"export {PREFIX_VAR}={shlex.quote(cache_dir(environ))}\nunset {NO_WRITE_VAR}\n"


if __name__ == "__main__":
    sys.stdout.write(shell_exports(os.environ))
