"""asv environment plugin "ltx2k-inherit": per-commit envs that reuse the runner's torch/triton.

Why a plugin: GPU runners are offline and torch/triton are preinstalled
(often in a venv, e.g. /opt/torch/.venv). asv's virtualenv/uv/conda envs
would try to download them, and ``python -m venv --system-site-packages``
from inside a venv inherits the *base* interpreter's site-packages, not the
venv's. So each asv env here is a bare venv whose ``.pth`` file appends the
host interpreter's site-packages directories: torch, triton, asv_runner and
pip are inherited, never reinstalled, and the per-commit ltx2k wheel (built
``--no-deps --no-index``) is installed into the env itself, ahead of them on
``sys.path``.

Loaded by asv.conf.json ``"plugins": [".ltx2k.runner.asv_env"]`` (the leading dot
imports from the directory asv runs in).
"""

from __future__ import annotations

import glob
import os
import shutil
import site
import sys
import sysconfig

from asv import environment, util
from asv.console import log

PTH_NAME = "_ltx2k_inherit_host.pth"


def host_site_dirs() -> list[str]:
    """The running interpreter's site-packages dirs (venv first, then base, then any
    it inherits through .pth files)."""
    dirs = list(site.getsitepackages())
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    for key in ("purelib", "platlib"):
        dirs.append(sysconfig.get_paths()[key])
    # Site dirs this interpreter reaches through a .pth file of its own, as in a
    # per-job venv on top of a runner's torch venv (scripts/bootstrap.sh LTX2K_VENV).
    dirs.extend(p for p in sys.path if os.path.basename(p) in ("site-packages", "dist-packages"))
    seen, out = set(), []
    for d in dirs:
        if d and os.path.isdir(d) and d not in seen:
            seen.add(d)
            out.append(d)
    return out


class InheritEnvironment(environment.Environment):
    tool_name = "ltx2k-inherit"

    def __init__(self, conf, python, requirements, tagged_env_vars):
        self._python = python
        self._requirements = requirements
        super().__init__(conf, python, requirements, tagged_env_vars)
        # Nothing to pip-install into the env: asv_runner, pympler and build come from the host.
        self._base_requirements = {}

    @classmethod
    def matches(cls, python):
        return python in ("same", f"{sys.version_info[0]}.{sys.version_info[1]}")

    @property
    def name(self):
        return environment.get_env_name(
            self.tool_name, self._python, self._requirements, self._tagged_env_vars
        )

    def _site_packages(self) -> str:
        v = f"python{sys.version_info[0]}.{sys.version_info[1]}"
        return os.path.join(self._path, "lib", v, "site-packages")

    def _setup(self):
        log.info(f"Creating venv for {self.name} inheriting {sys.executable}'s packages")
        util.check_call([sys.executable, "-m", "venv", "--without-pip", self._path])
        sp = self._site_packages()
        os.makedirs(sp, exist_ok=True)
        with open(os.path.join(sp, PTH_NAME), "w") as f:
            f.write("\n".join(host_site_dirs()) + "\n")
        # asv checks for a `pip` executable; pip itself is the host's, via the .pth.
        pip = os.path.join(self._path, "bin", "pip")
        with open(pip, "w") as f:
            f.write('#!/bin/sh\nexec "$(dirname "$0")/python" -m pip "$@"\n')
        os.chmod(pip, 0o755)

    def _uninstall_project(self):
        # Not `pip uninstall`: when the env holds no ltx2k yet, pip would find
        # and remove the *host's* install through the inherited path.
        self._set_installed_commit_hash(None)
        sp = self._site_packages()
        project = self._project.replace("-", "_")
        for path in glob.glob(os.path.join(sp, project)) + glob.glob(
            os.path.join(sp, f"{project}-*.dist-info")
        ):
            shutil.rmtree(path, ignore_errors=True)

    def run(self, args, **kwargs):
        log.debug(f"Running '{' '.join(args)}' in {self.name}")
        return self.run_executable("python", args, **kwargs)
