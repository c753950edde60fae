"""tools/host_cell_spread.py off the GPU: its cells are checked before anything runs, the
interleaved clock times every cell it is given, and without a GPU it says so and exits 2."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import host_cell_spread  # noqa: E402 - tools/ is not a package


@pytest.mark.parametrize(
    "cell, words",
    [
        ("split_rope:tiled_pdl", "kernel:variant:shape"),
        ("rope:tiled_pdl:B4_S25_H32_D64", "unknown kernel 'rope'"),
        ("split_rope:tiled_pdl:B9_S1_H1_D1", "no shape 'B9_S1_H1_D1'"),
    ],
)
def test_a_bad_cell_is_named(cell, words):
    with pytest.raises(SystemExit) as e:
        host_cell_spread.parse_cell(cell)
    assert words in str(e.value) and "host_cell_spread" in str(e.value)


def test_the_default_cells_are_the_suites():
    for text in host_cell_spread.DECODE_CELLS:
        host_cell_spread.parse_cell(text)  # raises on a cell the data no longer has


def test_the_interleaved_clock_times_each_cell_in_the_interpreter():
    cells = [
        host_cell_spread.parse_cell("split_rope:tiled_pdl:B2_S1_H5_D32"),
        host_cell_spread.parse_cell("ada_values9:slab_dconst:B1_S1_D256_bf16"),
    ]
    us = host_cell_spread.time_cells(cells, batches=2)
    assert len(us) == 2 and all(u > 0 for u in us)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the GPU run is the tool's purpose")
def test_without_a_gpu_it_says_so(capsys):
    assert host_cell_spread.main(["--processes", "0"]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err
