"""Runner identity (asv machine name and file) and the `ltx2k run` command line."""

from __future__ import annotations

import json
import os

import pytest
import torch

from ltx2k import asv_run, machine


@pytest.mark.parametrize(
    "gpu,name",
    [
        ("NVIDIA H200", "h200"),
        ("NVIDIA A100-SXM4-80GB", "a100-sxm4-80gb"),
        ("NVIDIA H100 80GB HBM3", "h100-80gb-hbm3"),
        ("  NVIDIA GeForce RTX 4090 ", "geforce-rtx-4090"),
    ],
)
def test_slug_is_stable_per_gpu_model(gpu, name):
    assert machine.slug(gpu) == name


def test_slug_rejects_empty():
    with pytest.raises(ValueError, match="machine name"):
        machine.slug(" -- ")


@pytest.mark.skipif(torch.cuda.is_available(), reason="CPU identity")
def test_cpu_machine_never_mixes_with_gpu_history(monkeypatch):
    monkeypatch.delenv("LTX2K_MACHINE", raising=False)
    info = machine.identify()
    assert info["machine"] == machine.CPU_MACHINE
    for field in ("gpu", "gpu_count", "driver", "cuda", "torch", "triton", "os", "arch", "cpu"):
        assert field in info


def test_machine_file_merges_and_refuses_corrupt(tmp_path):
    path = tmp_path / "asv-machine.json"
    machine.write_asv_machine_file({"machine": "h200", "gpu": "NVIDIA H200"}, str(path))
    machine.write_asv_machine_file({"machine": "a100-sxm4-80gb", "gpu": "A100"}, str(path))
    data = json.loads(path.read_text())
    assert data["version"] == 1
    assert data["h200"]["gpu"] == "NVIDIA H200" and data["a100-sxm4-80gb"]["gpu"] == "A100"
    path.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        machine.write_asv_machine_file({"machine": "h200"}, str(path))
    assert path.read_text() == "{not json"  # never overwritten: no lost data


def test_run_command_records_samples_and_names_the_machine():
    cmd = asv_run.build_command(["--quick", "HEAD^!"], "asv.conf.json", "h200")
    assert cmd[cmd.index("--machine") + 1] == "h200"
    assert "--record-samples" in cmd and cmd[-2:] == ["--quick", "HEAD^!"]
    cmd = asv_run.build_command(["--", "--no-record-samples", "A..B"], "c.json", "m")
    assert "--record-samples" not in cmd and cmd[-1] == "A..B"


def test_context_keeper_starts_reports_devices_and_exits_with_the_block():
    from ltx2k.runtime import ContextKeeper

    with ContextKeeper() as keeper:
        proc = keeper.proc
        assert proc.poll() is None  # alive while the run lasts
        assert keeper.devices == torch.cuda.device_count()
    assert proc.wait(timeout=30) == 0  # and gone after, so no context leaks


def test_context_keeper_that_cannot_start_is_an_error(tmp_path):
    from ltx2k.runtime import ContextKeeper

    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\nexit 3\n")
    fake.chmod(0o755)
    with pytest.raises(RuntimeError, match="keeper did not start"):
        ContextKeeper(python=str(fake)).__enter__()


def test_one_nvidia_smi_query_gives_gpus_count_and_driver(monkeypatch):
    text = "0, GPU-aaaa, NVIDIA H200, 570.86.15\n1, GPU-bbbb, NVIDIA H200, 570.86.15\n"
    gpus = machine.host_gpus(lambda: text)
    assert [(g.index, g.uuid, g.name, g.driver) for g in gpus] == [
        (0, "GPU-aaaa", "NVIDIA H200", "570.86.15"),
        (1, "GPU-bbbb", "NVIDIA H200", "570.86.15"),
    ]
    assert gpus[0] == machine.Gpu(0, "GPU-aaaa", "NVIDIA H200")  # the driver is no identity
    # The machine fields count the host's GPUs, not the ones CUDA_VISIBLE_DEVICES leaves.
    monkeypatch.setattr(machine, "_nvidia_smi", lambda: text)
    assert machine._host_info(fallback_count=1) == ("2", "570.86.15")
    monkeypatch.setattr(machine, "_nvidia_smi", lambda: "")  # no driver installed
    assert machine._host_info(fallback_count=1) == ("1", "unknown")

    def broken():
        raise RuntimeError("nvidia-smi exited 9")

    monkeypatch.setattr(machine, "_nvidia_smi", broken)
    assert machine._host_info(fallback_count=3) == ("3", "unknown")


@pytest.mark.skipif(torch.cuda.is_available(), reason="CPU identity")
def test_identify_pinned_writes_the_machine_file_in_a_child(tmp_path, monkeypatch):
    monkeypatch.delenv("LTX2K_MACHINE", raising=False)
    env = {**os.environ, "HOME": str(tmp_path)}
    gpu = machine.Gpu(0, "GPU-fake-0000", "Fake")
    assert machine.identify_pinned(gpu, env) == machine.CPU_MACHINE
    data = json.loads((tmp_path / ".asv-machine.json").read_text())
    assert data[machine.CPU_MACHINE]["machine"] == machine.CPU_MACHINE
