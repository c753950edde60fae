"""Runner identity (asv machine name and file) and the `ltx2k run` command line."""

from __future__ import annotations

import json
import os

import pytest
import torch

from ltx2k.runner import asv_run, machine


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


def _fake_gpu_run(tmp_path, monkeypatch, gpus):
    """``ltx2k run`` on a GPU machine whose asv measures benchmark ``b`` of a file that
    already holds ``a`` (measured before, same started_at). Returns the file's path."""
    from ltx2k.runner import asv_compat

    conf = tmp_path / "asv.conf.json"
    conf.write_text('{"version": 1, "results_dir": "res"}')
    path = tmp_path / "res" / "h200" / "abcdef12-env.json"
    path.parent.mkdir(parents=True)
    cols = ["result", "params", "version", "started_at", "duration"]

    def write(results):
        data = {"commit_hash": "abcdef12" * 5, "env_name": "env", "result_columns": cols,
                "results": results}  # fmt: skip
        asv_compat.write_json(path, data, api_version=2, compact=True)

    write({"a": [[1.0], [], "v", 100, 1.0]})
    monkeypatch.setattr(asv_run, "check_range", lambda *a, **k: None)
    monkeypatch.setattr(machine, "identify", lambda: {"machine": "h200"})
    monkeypatch.setattr(machine, "write_asv_machine_file", lambda info: None)
    monkeypatch.setattr(machine, "list_gpus", gpus)

    def fake_asv(cmd, env):  # asv rewrites the file: "a" kept as it was, "b" measured now
        _fake_gpu_run.asv_env = env
        write({"a": [[1.0], [], "v", 100, 1.0], "b": [[2.0], [], "v", 200, 1.0]})
        return 0

    monkeypatch.setattr(asv_run.subprocess, "call", fake_asv)
    assert asv_run.run(["HEAD^!"], config=str(conf), keep_context=False) == 0
    return path


def test_a_gpu_run_tags_what_it_measured_with_the_physical_gpu(tmp_path, monkeypatch):
    from ltx2k.history.tags import read_tags

    gpu = machine.Gpu(3, "GPU-435786a2-02ef", "NVIDIA H200")
    seen = {}

    def gpus(environ=None):
        seen["env"] = environ
        return [gpu, machine.Gpu(4, "GPU-other", "NVIDIA H200")]

    path = _fake_gpu_run(tmp_path, monkeypatch, gpus)
    tags = read_tags(path)
    assert set(tags) == {"b"}  # what this run measured, not what was there before
    assert tags["b"]["gpu_uuid"] == "GPU-435786a2-02ef" and tags["b"]["gpu_index"] == 3
    assert tags["b"]["mode"] == "exclusive" and tags["b"]["concurrent_gpus"] == 1
    assert "PYTORCH_NVML_BASED_CUDA_CHECK" in seen["env"]  # asv's environment decides


def test_asv_gets_the_bytecode_cache_where_the_runner_writes_none(tmp_path, monkeypatch):
    # Every interpreter asv starts (pip, discovery, forkserver, setup_cache) imports torch.
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    _fake_gpu_run(tmp_path, monkeypatch, lambda environ=None: [])
    env = _fake_gpu_run.asv_env
    assert env["PYTHONPYCACHEPREFIX"] == str(tmp_path / "xdg" / "ltx2k" / "pycache")
    assert "PYTHONDONTWRITEBYTECODE" not in env


def test_a_gpu_run_whose_gpu_cannot_be_named_keeps_its_results_untagged(
    tmp_path, monkeypatch, capsys
):
    from ltx2k.history.tags import read_tags

    def broken(environ=None):
        raise RuntimeError("nvidia-smi exited 9: driver mismatch")

    path = _fake_gpu_run(tmp_path, monkeypatch, broken)
    assert read_tags(path) == {}
    assert set(json.loads(path.read_text())["results"]) == {"a", "b"}  # nothing lost
    assert "results will not name their GPU: nvidia-smi exited 9" in capsys.readouterr().err


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
