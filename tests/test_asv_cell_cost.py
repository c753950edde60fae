"""tools/asv_cell_cost.py: the per-cell timestamps it patches in, and the report it reads."""

from __future__ import annotations

import ast
import gzip
import json
import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOOL = runpy.run_path(str(ROOT / "tools" / "asv_cell_cost.py"))


def test_patch_wraps_the_setups_before_the_classes_bind_them(tmp_path):
    suite = tmp_path / "bench_kernels.py"
    suite.write_text((ROOT / "benchmarks" / "bench_kernels.py").read_text())
    TOOL["patch"](suite)
    src = suite.read_text()
    ast.parse(src)
    assert src.index("_cell_wrap(globals()[_n], _n)") < src.index(TOOL["MARKER"])


def test_patch_refuses_a_file_without_the_suite(tmp_path):
    other = tmp_path / "x.py"
    other.write_text("x = 1\n")
    with pytest.raises(SystemExit, match="no 'for _kernel, _class_name in .* line"):
        TOOL["patch"](other)
    assert other.read_text() == "x = 1\n"


def test_report_charges_each_cell_until_the_next_process_starts(tmp_path, capsys):
    log = tmp_path / "cells.jsonl"
    rows = [
        # two cells of one metric (pids 1, 2: asv calls setup before every sample), then one
        ["_prepare", ["split_rope", "device_cold", "tiled", "B1"], 10.0, 10.3, 1, None],
        ["_prepare", ["split_rope", "device_cold", "tiled", "B1"], 10.31, 10.32, 1, None],
        ["_prepare", ["split_rope", "device_cold", "tiled", "B2"], 10.5, 10.8, 2, None],
        ["_counted_setup", ["split_rope", "blocked", "B1"], 11.5, 11.5, 3, None],
        ["_counted_setup", ["split_rope", "blocked", "B2"], 11.6, 11.6, 4, None],
    ]
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    TOOL["report"](log)
    out = capsys.readouterr().out
    assert "split_rope device_cold tiled" in out and "2 cells     1.5 s  0.750 s/cell" in out
    assert "_counted_setup split_rope blocked" in out and "1 cells     0.1 s" in out
    assert "4 processes, 1.6 s" in out
    # per kernel, with the torch.compile peers' share
    assert "split_rope                   3      1.6  0.0 s in 0 processes" in out
    # the logs kept in docs/data are gzipped: the same report
    gz = tmp_path / "cells.jsonl.gz"
    gz.write_bytes(gzip.compress(log.read_bytes()))
    TOOL["report"](gz)
    assert capsys.readouterr().out == out


def test_report_sums_each_kernel_and_its_compiled_peers(tmp_path, capsys):
    log = tmp_path / "cells.jsonl"
    rows = [
        ["_prepare", ["split_rope", "device_cold", "compiled", "B1"], 0.0, 2.0, 1, None],
        ["_prepare", ["split_rope", "device_cold", "tiled", "B1"], 3.0, 3.1, 2, None],
        ["_prepare", ["qknorm_rope_pair", "host", "unfused_compiled", "B1"], 3.5, 5.0, 3, None],
        ["_host_launch_setup", ["split_rope", "triton", "B1"], 7.0, 7.1, 4, None],
        ["_prepare", ["split_rope", "device_cold", "eager", "B1"], 7.5, 7.6, 5, None],
    ]
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    TOOL["report"](log)
    lines = {ln.split()[0]: ln.split() for ln in capsys.readouterr().out.splitlines() if ln}
    # split_rope: its compiled cell (3.0 s), tiled (0.5 s) and the launch setup (0.5 s)
    assert lines["split_rope"][1:] == ["3", "4.0", "3.0", "s", "in", "1", "processes"]
    assert lines["qknorm_rope_pair"][1:] == ["1", "3.5", "3.5", "s", "in", "1", "processes"]
