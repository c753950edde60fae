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
    # asv's per-commit envs (ltx2k/asv_env.py) inherit what the job's venv inherits.
    inherited = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import ltx2k.asv_env as e; print(e.host_site_dirs())",
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
