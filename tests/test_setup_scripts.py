"""The set-up scripts: shims that work from any shell, a per-job venv that never
installs into the python it is built on."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _env() -> dict:
    # A fresh shell: nothing activated, the venv's bin not on PATH.
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if p != bindir)
    return env


def test_ltx2k_shim_runs_from_any_directory(tmp_path):
    proc = subprocess.run(
        [str(ROOT / "scripts" / "ltx2k"), "--help"],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "usage: ltx2k" in proc.stdout


def test_python_shim_reaches_asv_and_pytest(tmp_path):
    for module in ("asv", "pytest"):
        proc = subprocess.run(
            [str(ROOT / "scripts" / "python"), "-m", module, "--version"],
            cwd=tmp_path,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr


def test_python_shim_without_set_up_says_what_to_run(tmp_path):
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "python", tmp_path / "scripts" / "python")
    proc = subprocess.run(
        [str(tmp_path / "scripts" / "python"), "-c", "pass"],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert "scripts/bootstrap.sh" in proc.stderr


@pytest.mark.slow
def test_per_job_venv_installs_nothing_into_the_base_python(tmp_path):
    """LTX2K_VENV: ltx2k and anything else land in the job's venv; the base python
    (a runner's shared one) still imports its own ltx2k, and lends torch/triton."""
    clone = tmp_path / "checkout"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    for name in ("bootstrap.sh", "python", "ltx2k"):  # the scripts as they are in this tree
        shutil.copy(ROOT / "scripts" / name, clone / "scripts" / name)
    base = sys.executable
    before = subprocess.run(
        [base, "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True
    ).stdout
    venv = tmp_path / "job-venv"
    env = {**_env(), "LTX2K_PYTHON": base, "LTX2K_VENV": str(venv)}
    proc = subprocess.run(
        ["bash", "scripts/bootstrap.sh"],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == str(venv / "bin" / "python")
    assert "done in" in proc.stderr  # each stage says how long it took
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import ltx2k, torch; print(ltx2k.__file__)"],
        cwd=tmp_path,  # not a checkout: `-c` would import ltx2k from the cwd
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(where).is_relative_to(clone)
    # asv's per-commit envs (ltx2k/runner/asv_env.py) inherit what the job's venv inherits.
    inherited = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import ltx2k.runner.asv_env as e; print(e.host_site_dirs())",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    import sysconfig

    assert sysconfig.get_paths()["purelib"] in inherited
    after = subprocess.run(
        [base, "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True
    ).stdout
    assert after == before
    shim = subprocess.run(
        [str(clone / "scripts" / "python"), "-c", "import sys; print(sys.executable)"],
        env=_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    assert shim.stdout.strip() == str(venv / "bin" / "python")


# A stand-in for the .venv's python: it answers bootstrap.sh's questions as a machine
# with (or without) a local CPU wheel and a reachable CPU index would, and logs each
# `pip install` it is asked for instead of downloading anything.
_FAKE_PYTHON = r"""#!/usr/bin/env bash
case "$*" in
  "-c import torch, triton" | "-c import torch") exit 1 ;;
  "-c import sys; print(sys.executable)") echo "$0" ;;
  "-c import ltx2k, torch, triton, asv;"*) echo "bootstrap: ltx2k 0 torch 0 triton 0" ;;
  -c*urllib*) exit "$FAKE_CPU_INDEX_DOWN" ;;
  "-m pip install"*--dry-run*) exit "$FAKE_NO_LOCAL_WHEEL" ;;
  "-m pip install"*) printf '%s\n' "$*" >>"$FAKE_PIP_LOG" ;;
  *) echo "fake python: unexpected: $*" >&2; exit 99 ;;
esac
"""


@pytest.mark.parametrize(
    "local_wheel, cpu_index_up, index_env, torch_req, index_arg",
    [
        (True, False, None, "torch==2.13.0+cpu", None),
        (False, True, None, "torch==2.13.0+cpu", "https://download.pytorch.org/whl/cpu"),
        (
            False,
            False,
            "https://mirror.example/cpu",
            "torch==2.13.0+cpu",
            "https://mirror.example/cpu",
        ),
        (False, False, None, "torch==2.11.0", None),
    ],
    ids=["local-cpu-wheel", "cpu-index", "LTX2K_TORCH_INDEX", "pypi-cuda-build"],
)
def test_bootstrap_resolves_torch_and_triton_in_one_pip_call(
    tmp_path, local_wheel, cpu_index_up, index_env, torch_req, index_arg
):
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "bootstrap.sh", tmp_path / "scripts" / "bootstrap.sh")
    fake = tmp_path / ".venv" / "bin" / "python"
    fake.parent.mkdir(parents=True)
    fake.write_text(_FAKE_PYTHON)
    fake.chmod(0o755)
    log = tmp_path / "pip.log"
    env = {
        **_env(),
        "LTX2K_PYTHON": str(fake),  # "no torch here": the .venv branch runs
        "FAKE_PIP_LOG": str(log),
        "FAKE_NO_LOCAL_WHEEL": "0" if local_wheel else "1",
        "FAKE_CPU_INDEX_DOWN": "0" if cpu_index_up else "1",
    }
    env.pop("LTX2K_TORCH_INDEX", None)
    if index_env:
        env["LTX2K_TORCH_INDEX"] = index_env
    proc = subprocess.run(
        ["bash", "scripts/bootstrap.sh"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    installs = log.read_text().splitlines()
    assert len(installs) == 1, installs  # one resolve: nothing pip could replace later
    args = installs[0].split()
    assert torch_req in args and "triton==3.6.0" in args and ".[dev]" in args
    assert "--progress-bar" in args  # the long stage shows pip's progress
    if index_arg:
        assert args[args.index("--extra-index-url") + 1] == index_arg
    else:
        assert "--extra-index-url" not in args
    warning = "about 3 GB"
    if torch_req.endswith("+cpu"):
        assert warning not in proc.stderr
    else:  # said before the download starts, with what to set instead
        assert proc.stderr.index(warning) < proc.stderr.index("CUDA build from PyPI")
        assert "LTX2K_TORCH_INDEX" in proc.stderr
