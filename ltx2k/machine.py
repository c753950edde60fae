"""Runner identity: the asv machine name and fields, derived from the GPU.

The name is a stable slug of the GPU model ("NVIDIA H200" -> "h200",
"NVIDIA A100-SXM4-80GB" -> "a100-sxm4-80gb"), never the hostname, so every
runner with the same GPU type shares one comparable history and a second
runner of that type does not split it. Without a GPU the machine is
"cpu-interpreter", whose numbers never mix with GPU history.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
from pathlib import Path

CPU_MACHINE = "cpu-interpreter"


def slug(gpu_name: str) -> str:
    s = gpu_name.strip().lower()
    s = re.sub(r"^nvidia\s+", "", s)
    s = re.sub(r"[^a-z0-9]+", "-", s).strip("-")
    if not s:
        raise ValueError(f"cannot derive a machine name from GPU name {gpu_name!r}")
    return s


def _driver_version() -> str:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
        return out.splitlines()[0].strip()
    except (OSError, subprocess.SubprocessError, IndexError):
        return "unknown"


def _host_gpu_count(fallback: int) -> int:
    # The host's count, not torch's: a runner pinned with CUDA_VISIBLE_DEVICES
    # sees 1, and asv publish splits a machine's graphs on any differing field.
    try:
        out = subprocess.run(
            ["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30, check=True
        ).stdout
        n = sum(1 for line in out.splitlines() if line.startswith("GPU "))
        return n or fallback
    except (OSError, subprocess.SubprocessError):
        return fallback


def _base_fields() -> dict[str, str]:
    try:  # asv's own defaults, so the standard fields look like asv wrote them
        from asv.machine import Machine

        return {k: str(v) for k, v in Machine.get_defaults().items()}
    except ImportError:
        return {
            "os": f"{platform.system()} {platform.release()}",
            "arch": platform.machine(),
            "cpu": platform.processor(),
            "num_cpu": str(os.cpu_count()),
            "ram": "",
        }


def identify() -> dict[str, str]:
    """asv machine fields for this runner (first visible GPU)."""
    import torch

    info = _base_fields()
    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = "none"
    info.update(torch=torch.__version__, triton=triton_version)
    if torch.cuda.is_available():
        name = torch.cuda.get_device_name(0)
        info.update(
            machine=slug(name),
            gpu=name,
            gpu_count=str(_host_gpu_count(torch.cuda.device_count())),
            driver=_driver_version(),
            cuda=str(torch.version.cuda),
        )
    else:
        info.update(
            machine=CPU_MACHINE,
            gpu="none (Triton interpreter)",
            gpu_count="0",
            driver="none",
            cuda="none",
        )
    override = os.environ.get("LTX2K_MACHINE")
    if override:  # e.g. a runner that must keep a legacy name
        info["machine"] = override
    return info


def write_asv_machine_file(info: dict[str, str], path: str | None = None) -> Path:
    """Add/replace this machine's entry in ~/.asv-machine.json (asv's own file format)."""
    p = Path(path or os.path.expanduser("~/.asv-machine.json"))
    data: dict = {}
    if p.exists():
        try:
            data = json.loads(p.read_text())
        except ValueError as e:
            raise ValueError(f"machine file {p} is not valid JSON ({e}); fix or remove it") from e
    data[info["machine"]] = dict(info)
    data["version"] = 1
    p.write_text(json.dumps(data, indent=4, sort_keys=True) + "\n")
    return p


def format_info(info: dict[str, str]) -> str:
    return "\n".join(f"{k:10s} {v}" for k, v in sorted(info.items()))
