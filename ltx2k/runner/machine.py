"""Runner identity: the GPUs of the host and the asv machine name and fields.

The GPUs come from ``nvidia-smi`` (:func:`host_gpus`, :func:`list_gpus`), never
from torch, so listing them creates no CUDA context: shard-run's parent lists
them while its shards run, and a context there would hold memory on every GPU.

The machine name is a stable slug of the GPU model ("NVIDIA H200" -> "h200",
"NVIDIA A100-SXM4-80GB" -> "a100-sxm4-80gb"), never the hostname, so every
runner with the same GPU type shares one comparable history and a second
runner of that type does not split it. Without a GPU the machine is
"cpu-interpreter", whose numbers never mix with GPU history.

``python -m ltx2k.runner.machine`` identifies the first visible GPU, writes its entry
to ~/.asv-machine.json and prints the machine name: shard-run runs it in a
child pinned to one GPU (:func:`identify_pinned`).
"""

from __future__ import annotations

import csv
import io
import json
import os
import platform
import re
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

CPU_MACHINE = "cpu-interpreter"


def slug(gpu_name: str) -> str:
    s = gpu_name.strip().lower()
    s = re.sub(r"^nvidia\s+", "", s)
    s = re.sub(r"[^a-z0-9]+", "-", s).strip("-")
    if not s:
        raise ValueError(f"cannot derive a machine name from GPU name {gpu_name!r}")
    return s


# --- GPUs, from nvidia-smi ------------------------------------------------------------------


@dataclass(frozen=True)
class Gpu:
    index: int  # nvidia-smi's index (PCI bus order)
    uuid: str
    name: str  # "NVIDIA H200"
    driver: str = field(default="", compare=False)  # "" when nvidia-smi did not say

    @property
    def label(self) -> str:
        return f"gpu{self.index}"


_QUERY = ["nvidia-smi", "--query-gpu=index,uuid,name,driver_version", "--format=csv,noheader"]


def _nvidia_smi() -> str:
    try:
        proc = subprocess.run(_QUERY, capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        return ""  # no driver on this machine: no GPU
    except (OSError, subprocess.SubprocessError) as e:
        raise RuntimeError(f"{' '.join(_QUERY)} failed: {e}") from e
    if proc.returncode != 0:
        raise RuntimeError(
            f"{' '.join(_QUERY)} exited {proc.returncode}: {(proc.stderr or proc.stdout).strip()}"
        )
    return proc.stdout


def parse_gpu_query(text: str) -> list[Gpu]:
    """Parse ``nvidia-smi --query-gpu=index,uuid,name[,driver_version] --format=csv,noheader``."""
    gpus = []
    for row in csv.reader(io.StringIO(text), skipinitialspace=True):
        if not row or not "".join(row).strip():
            continue
        if len(row) not in (3, 4) or not row[0].strip().isdigit() or not row[1].startswith("GPU-"):
            raise ValueError(f"unexpected nvidia-smi line {','.join(row)!r}")
        driver = row[3].strip() if len(row) == 4 else ""
        gpus.append(Gpu(int(row[0]), row[1].strip(), row[2].strip(), driver))
    return gpus


def host_gpus(query: Callable[[], str] | None = None) -> list[Gpu]:
    """Every GPU of the host, whatever CUDA_VISIBLE_DEVICES says; [] without a driver."""
    return parse_gpu_query((query or _nvidia_smi)())


def visible_gpus(gpus: Sequence[Gpu], environ: Mapping[str, str]) -> list[Gpu]:
    """The GPUs a CUDA process started with *environ* would see, in its order."""
    cvd = environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is None:
        return list(gpus)
    entries = [e.strip() for e in cvd.split(",") if e.strip()]
    by_index = {g.index: g for g in gpus}
    mixed = len({g.name for g in gpus}) > 1
    out: list[Gpu] = []
    for e in entries:
        if e.lstrip("-").isdigit():
            if mixed and environ.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID":
                # CUDA's default order is fastest first: with different GPU
                # models, index e need not be nvidia-smi's GPU e.
                raise ValueError(
                    f"CUDA_VISIBLE_DEVICES={cvd!r} uses indices on a host with different GPU "
                    "models; set CUDA_DEVICE_ORDER=PCI_BUS_ID or list GPU UUIDs"
                )
            g = by_index.get(int(e))
        else:
            hits = [g for g in gpus if g.uuid.startswith(e)]  # CUDA accepts unique prefixes
            g = hits[0] if len(hits) == 1 else None
        if g is None:
            raise ValueError(
                f"CUDA_VISIBLE_DEVICES={cvd!r}: entry {e!r} matches no single GPU of "
                f"nvidia-smi ({', '.join(f'{x.index}:{x.uuid}' for x in gpus) or 'none'})"
            )
        if g not in out:
            out.append(g)
    return out


def list_gpus(
    environ: Mapping[str, str] | None = None, query: Callable[[], str] | None = None
) -> list[Gpu]:
    """Visible GPUs, from nvidia-smi: no CUDA context is created in this process."""
    environ = os.environ if environ is None else environ
    return visible_gpus(host_gpus(query), environ)


def _host_info(fallback_count: int) -> tuple[str, str]:
    """(GPU count, driver version) of the host, for the machine fields.

    The host's count, not torch's: a runner pinned with CUDA_VISIBLE_DEVICES
    sees 1, and asv publish splits a machine's graphs on any differing field.
    """
    try:
        gpus = host_gpus()
    except (RuntimeError, ValueError):
        gpus = []
    count = str(len(gpus) or fallback_count)
    driver = next((g.driver for g in gpus if g.driver), "unknown")
    return count, driver


# --- asv machine fields ---------------------------------------------------------------------


def _base_fields() -> dict[str, str]:
    try:  # asv's own defaults, so the standard fields look like asv wrote them
        from ltx2k.runner import asv_compat

        return asv_compat.machine_defaults()
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
        count, driver = _host_info(torch.cuda.device_count())
        info.update(
            machine=slug(name),
            gpu=name,
            gpu_count=count,
            driver=driver,
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


def _json_kind(value: object) -> str:
    """JSON's name for the type of a parsed *value*: "array", "string", "null", ..."""
    if value is None:
        return "null"
    names = {bool: "boolean", int: "number", float: "number", str: "string", list: "array"}
    return names.get(type(value), "object")


def write_asv_machine_file(info: dict[str, str], path: str | None = None) -> Path:
    """Add/replace this machine's entry in ~/.asv-machine.json (asv's own file format)."""
    if path is not None and not str(path).strip():
        raise ValueError("path must name a file, got an empty string")
    p = Path(os.path.expanduser("~/.asv-machine.json") if path is None else path)
    data: dict = {}
    if p.exists():
        try:
            data = json.loads(p.read_text())
        except ValueError as e:
            raise ValueError(f"machine file {p} is not valid JSON ({e}); fix or remove it") from e
        # asv's format: {"version": 1, machine name: {field: value}}; anything else is
        # some other file, which replacing would lose.
        if not isinstance(data, dict):
            raise ValueError(
                f"machine file {p} holds a JSON {_json_kind(data)}, not an object of "
                "machines; fix or remove it"
            )
        for name, fields in data.items():
            if name != "version" and not isinstance(fields, dict):
                raise ValueError(
                    f"machine file {p}: entry {name!r} is a JSON {_json_kind(fields)}, "
                    "not an object of fields; fix or remove it"
                )
    data[info["machine"]] = dict(info)
    data["version"] = 1
    p.write_text(json.dumps(data, indent=4, sort_keys=True) + "\n")
    return p


def format_info(info: dict[str, str]) -> str:
    return "\n".join(f"{k:10s} {v}" for k, v in sorted(info.items()))


# --- identity of one GPU, from a child process ------------------------------------------------


def identify_pinned(gpu: Gpu, environ: Mapping[str, str], cwd=None) -> str:
    """Write the machine file for *gpu* and return its machine name, from a child process.

    A child, not :func:`identify` here: identify asks torch for the first visible
    GPU's name, which creates a CUDA context in the calling process and answers
    for whatever GPU CUDA numbers first. Pinned with ``CUDA_VISIBLE_DEVICES``, the
    child answers for *gpu*, and shard-run's parent stays without a context.
    """
    env = dict(environ)
    env["CUDA_VISIBLE_DEVICES"] = gpu.uuid
    env.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    proc = subprocess.run(
        [sys.executable, "-m", "ltx2k.runner.machine"],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
    )
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        why = proc.stderr.strip() or f"exit {proc.returncode} and no machine name printed"
        raise RuntimeError(f"machine identification failed on {gpu.label}: {why}")
    return lines[-1]


def main() -> int:
    """Identify the first visible GPU, write ~/.asv-machine.json, print the machine name."""
    info = identify()
    path = write_asv_machine_file(info)
    print(f"wrote {path}", file=sys.stderr)
    print(info["machine"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
