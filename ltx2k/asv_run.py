"""``ltx2k run``: asv run with the settings a runner needs, so nobody retypes them.

- the machine name and fields come from the GPU (ltx2k.machine), written to
  ~/.asv-machine.json, so results land under results/<gpu-model>/;
- ``--record-samples`` so every time benchmark stores its raw samples, which
  ``ltx2k regress`` uses for its significance test;
- no GPU: the Triton interpreter and the machine "cpu-interpreter";
- ``--launch-method`` comes from asv.conf.json (forkserver);
- on a GPU, a CUDA context is held open for the whole run
  (:class:`ltx2k.runtime.ContextKeeper`), so the ~280 benchmark processes of
  a commit do not each pay the GPU's initialisation.
"""

from __future__ import annotations

import os
import subprocess
import sys

from ltx2k import machine, runtime


def build_command(asv_args: list[str], config: str, machine_name: str) -> list[str]:
    args = list(asv_args)
    if args and args[0] == "--":
        args = args[1:]
    cmd = [sys.executable, "-m", "asv", "run", "--config", config, "--machine", machine_name]
    if "--record-samples" not in args and "--no-record-samples" not in args:
        cmd.append("--record-samples")
    return cmd + args


def run(
    asv_args: list[str],
    config: str = "asv.conf.json",
    dry_run: bool = False,
    keep_context: bool = True,
) -> int:
    if not os.path.exists(config):
        raise FileNotFoundError(f"--config {config!r} does not exist (run from the repo root)")
    info = machine.identify()
    env = dict(os.environ)
    env.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    if info["machine"] == machine.CPU_MACHINE:
        env["TRITON_INTERPRET"] = "1"
    cmd = build_command(asv_args, config, info["machine"])
    print("+ " + " ".join(cmd), file=sys.stderr)
    if dry_run:
        return 0
    machine.write_asv_machine_file(info)
    with runtime.context_keeper(keep_context and info["machine"] != machine.CPU_MACHINE):
        return subprocess.call(cmd, env=env)
