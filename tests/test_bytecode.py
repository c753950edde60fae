"""The bytecode cache of the benchmark processes (ltx2k/runner/bytecode.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ltx2k.runner import bytecode

REPO = Path(__file__).resolve().parent.parent


def _clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (bytecode.PREFIX_VAR, bytecode.NO_WRITE_VAR, "XDG_CACHE_HOME", "LTX2K_CACHE_DIR")
    }
    env["HOME"] = str(tmp_path / "home")
    env.update(extra)
    return env


def test_a_runner_that_writes_no_bytecode_gets_the_cache_folder(tmp_path):
    env = bytecode.environ_with_cache(
        {"PYTHONDONTWRITEBYTECODE": "1", "XDG_CACHE_HOME": str(tmp_path), "KEEP": "x"}
    )
    assert env[bytecode.PREFIX_VAR] == str(tmp_path / "ltx2k" / "pycache")
    assert bytecode.NO_WRITE_VAR not in env
    assert env["KEEP"] == "x"


def test_bytecode_lives_in_ltx2k_cache_folder_wherever_that_is(tmp_path, monkeypatch):
    from ltx2k.measure import bandwidth

    monkeypatch.setenv("LTX2K_CACHE_DIR", str(tmp_path / "c"))
    assert bytecode.cache_dir(os.environ) == str(tmp_path / "c" / "pycache")
    assert bandwidth.cache_path() == tmp_path / "c" / "copy_bandwidth.json"


def test_a_chosen_prefix_or_a_runner_that_writes_bytecode_is_left_alone(tmp_path):
    chosen = {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": "/elsewhere"}
    assert bytecode.environ_with_cache(chosen) == chosen
    assert bytecode.environ_with_cache({"HOME": "/h"}) == {"HOME": "/h"}
    assert bytecode.shell_exports(chosen) == ""
    assert bytecode.shell_exports({"HOME": "/h"}) == ""


def _imports_twice(tmp_path: Path, env: dict[str, str]) -> tuple[Path, str, bool]:
    """Import a module in two fresh interpreters: its bytecode path, its value, and
    whether the second interpreter loaded it from that bytecode (not from source)."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "probe_mod.py").write_text("VALUE = 41 + 1\n")
    code = "import sys, probe_mod; print(probe_mod.__cached__, probe_mod.VALUE)"
    outs = []
    for _ in range(2):
        proc = subprocess.run(
            [sys.executable, "-v", "-c", code],  # -v: where each import's code came from
            cwd=src,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        outs.append(proc)
    first, second = (p.stdout.split() for p in outs)
    assert first == second
    read = f"code object from '{first[0]}'" in outs[1].stderr
    return Path(first[0]), first[1], read


def test_shell_exports_make_later_interpreters_write_and_read_the_cache(tmp_path):
    env = _clean_env(tmp_path, PYTHONDONTWRITEBYTECODE="1")
    exports = subprocess.run(
        [sys.executable, str(REPO / "ltx2k" / "runner" / "bytecode.py")],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    prefix = tmp_path / "home" / ".cache" / "ltx2k" / "pycache"
    assert f"PYTHONPYCACHEPREFIX={prefix}" in exports
    # What scripts/main.sh does with them: eval, then every later interpreter has them.
    shown = subprocess.run(
        ["bash", "-c", f'eval "{exports}"; "{sys.executable}" -c '
         '"import sys; print(sys.pycache_prefix, sys.flags.dont_write_bytecode)"'],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()  # fmt: skip
    assert shown == [str(prefix), "0"]
    cached, value, read = _imports_twice(tmp_path, bytecode.environ_with_cache(env))
    assert value == "42"
    assert cached.is_file() and prefix in cached.parents
    assert read  # the second interpreter did not compile it again
    assert not (tmp_path / "src" / "__pycache__").exists()  # the sources stay untouched


def test_without_the_cache_such_a_runner_writes_nothing(tmp_path):
    # The control: what the runner does on its own (each interpreter compiles again).
    env = _clean_env(tmp_path, PYTHONDONTWRITEBYTECODE="1")
    cached, _, read = _imports_twice(tmp_path, env)
    assert not cached.exists() and not read
    assert not (tmp_path / "home" / ".cache").exists()


def test_asv_runner_processes_of_the_suite_keep_their_bytecode(tmp_path):
    # asv runs the suite from asv_runner's benchmark.py (discovery, forkserver,
    # setup_cache): there the suite module turns the cache on before it imports torch.
    runner = tmp_path / "benchmark.py"
    runner.write_text(
        "import importlib.util, sys\n"  # as asv_runner imports it: argv stays its own
        "spec = importlib.util.spec_from_file_location(\n"
        f"    'bench_kernels', {str(REPO / 'benchmarks' / 'bench_kernels.py')!r})\n"
        "spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
        "import torch\n"
        "print(sys.pycache_prefix)\n"
        "print(torch.__cached__)\n"
    )
    env = _clean_env(tmp_path, PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=str(REPO))
    out = subprocess.run(
        [sys.executable, str(runner), "discover"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    ).stdout.split()
    prefix = tmp_path / "home" / ".cache" / "ltx2k" / "pycache"
    assert out[-2] == str(prefix)
    assert Path(out[-1]).is_file() and prefix in Path(out[-1]).parents
