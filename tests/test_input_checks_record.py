"""``ltx2k shapes add`` refuses recorded signatures the kernels cannot run: sizes past the
kernels' own limits, tensors no memory holds, strides no valid call has, and fields of the
wrong JSON type (ltx2k.workload.record)."""

from __future__ import annotations

import copy
import json
import shutil

import pytest
from conftest import DEVICE

import ltx2k
from ltx2k import cli
from ltx2k.kernels import _checks, adaln, qknorm_rope, rope
from ltx2k.kernels.adaln import ltx2_ada_values9
from ltx2k.kernels.qknorm_rope import ltx2_qknorm_split_rope_pair
from ltx2k.kernels.rope import apply_ltx2_split_rotary_emb
from ltx2k.kernels.rope_pair import apply_ltx2_split_rotary_emb_pair
from ltx2k.workload import cases, record, shapes

ROPE = shapes.RopeShape(1, 3, 2, 8)
ADA = shapes.AdaShape(1, 2, 64, "bf16")
PAIR = shapes.PairShape(1, 3, 3, 2, 8, shared=True)
QKNORM = shapes.QKNormPairShape(1, 3, 5, 2, 8)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> dict[str, dict]:
    """{kernel: its one signature} of real calls of every kernel, recorded by ltx2k."""
    path = tmp_path_factory.mktemp("record") / "calls.json"
    with ltx2k.record_shapes(path):
        apply_ltx2_split_rotary_emb(*cases.rope_inputs(ROPE, DEVICE))
        ltx2_ada_values9(*cases.ada_inputs(ADA, DEVICE))
        apply_ltx2_split_rotary_emb_pair(*cases.pair_inputs(PAIR, DEVICE))
        ltx2_qknorm_split_rope_pair(*cases.qknorm_pair_inputs(QKNORM, DEVICE))
    sigs = record.read(path)["signatures"]
    assert sorted(s["kernel"] for s in sigs) == sorted(record.ARGS)
    return {s["kernel"]: s for s in sigs}


def _write(tmp_path, *sigs) -> str:
    path = tmp_path / "calls.json"
    path.write_text(json.dumps({"format": record.FORMAT, "signatures": list(sigs)}))
    return str(path)


def _add(tmp_path, capsys, rec: str) -> tuple[int, str]:
    data = tmp_path / "shapes.json"
    shutil.copy(shapes.DATA_FILE, data)
    before = data.read_bytes()
    rc = cli.main(["shapes", "--data", str(data), "add", rec])
    _, err = capsys.readouterr()
    if rc != 0:
        assert data.read_bytes() == before  # refused: nothing appended
    return rc, err


def _refused(tmp_path, capsys, sig: dict, *parts: str) -> str:
    """`shapes add` of a file holding *sig* (after the real calls) is one error line naming
    the file, the signature and *parts*; the library raises a ValueError saying the same."""
    rec = _write(tmp_path, sig)
    rc, err = _add(tmp_path, capsys, rec)
    assert rc == cli.EXIT_ERROR, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"ltx2k: error: {rec}: signatures[0] ({sig['kernel']}): "), err
    for part in parts:
        assert part in err, (part, err)
    with pytest.raises(ValueError) as e:
        record.additions(rec)
    assert str(e.value) in err
    return err


def test_the_real_calls_are_accepted(tmp_path, capsys, recorded):
    rec = _write(tmp_path, *recorded.values())
    labels = {(a.kernel, a.shape.label) for a in record.additions(rec)}
    assert labels == {
        ("split_rope", ROPE.label),
        ("ada_values9", ADA.label),
        ("split_rope_pair", PAIR.label),
        ("qknorm_rope_pair", QKNORM.label),
    }
    rc, err = _add(tmp_path, capsys, rec)
    assert rc == 0, err


def _ada(recorded, D: int, B: int = 1, S: int = 1) -> dict:
    sig = copy.deepcopy(recorded["ada_values9"])
    sig["args"]["scale_shift_table"].update(shape=[9, D], stride=[D, 1])
    sig["args"]["timestep"].update(shape=[B, S, 9 * D], stride=[S * 9 * D, 9 * D, 1])
    return sig


def test_an_adaln_hidden_size_past_the_kernels_limit_is_refused(tmp_path, capsys, recorded):
    err = _refused(tmp_path, capsys, _ada(recorded, 1_000_000_000), "D=1000000000")
    assert f"[1, {adaln.MAX_D}]" in err
    # the limit itself is a shape the kernel runs
    assert record.suite_shape(_ada(recorded, adaln.MAX_D), "hand-picked").D == adaln.MAX_D


def test_adaln_programs_past_the_grid_limit_are_refused(tmp_path, capsys, recorded):
    # 9 x 16 column blocks of 1024 per row: past 2**31 - 1 programs of the default variant
    rows = adaln.MAX_PROGRAMS // (9 * 16) + 1
    _refused(tmp_path, capsys, _ada(recorded, adaln.MAX_D, S=rows), str(adaln.MAX_PROGRAMS))


def _rope(recorded, B: int, S: int, H: int, D: int) -> dict:
    sig = copy.deepcopy(recorded["split_rope"])
    half = D // 2
    sig["args"]["x"].update(shape=[B, S, H * D], stride=[S * H * D, H * D, 1])
    for name in ("cos", "sin"):  # token-major: a [B, S, H, D/2] tensor, transposed
        sig["args"][name].update(shape=[B, H, S, half], stride=[S * H * half, half, H * half, 1])
    return sig


def test_a_split_rope_shape_of_terabytes_is_refused(tmp_path, capsys, recorded):
    sig = _rope(recorded, 1_000_000, 1_000_000, 2, 8)
    assert record.cos_sin_layout(sig["args"]["cos"]["shape"], sig["args"]["cos"]["stride"]) == (
        "token_major"
    )
    _refused(tmp_path, capsys, sig, "x", str(adaln.MAX_PROGRAMS))


def test_a_tensor_past_the_memory_cap_is_refused(tmp_path, capsys, recorded):
    # few enough tokens for the grid, but every head past any GPU's memory
    sig = _rope(recorded, 1, 2**30, rope.MAX_HEADS, rope.MAX_HEAD_DIM)
    _refused(tmp_path, capsys, sig, "x", "bytes", f"{record.MAX_TENSOR_BYTES}")
    # cos/sin strides are free, but not past every memory either
    sig = copy.deepcopy(recorded["split_rope"])
    for name in ("cos", "sin"):
        sig["args"][name]["stride"][1] = 2**60  # the heads
    _refused(tmp_path, capsys, sig, "cos", "bytes")


def test_heads_and_head_dims_past_the_kernels_limits_are_refused(tmp_path, capsys, recorded):
    err = _refused(tmp_path, capsys, _rope(recorded, 1, 2, 2 * rope.MAX_HEADS, 2), "H=2048")
    assert f"[1, {rope.MAX_HEADS}]" in err
    err = _refused(tmp_path, capsys, _rope(recorded, 1, 2, 1, 2 * rope.MAX_HEAD_DIM), "D=1024")
    assert f"[2, {rope.MAX_HEAD_DIM}]" in err


def test_a_pair_with_more_heads_than_the_kernel_takes_is_refused(tmp_path, capsys, recorded):
    sig = copy.deepcopy(recorded["split_rope_pair"])
    H = _checks.MAX_ROPE_HEADS + 1
    for name in ("q", "k"):
        sig["args"][name].update(shape=[1, 3, H * 8], stride=[3 * H * 8, H * 8, 1])
    for name in ("q_cos", "q_sin", "k_cos", "k_sin"):
        sig["args"][name].update(shape=[1, H, 3, 4], stride=[3 * H * 4, 4, H * 4, 1])
    _refused(tmp_path, capsys, sig, f"H={H}", f"[1, {_checks.MAX_ROPE_HEADS}]")


def test_a_fused_prologue_past_its_hidden_size_is_refused(tmp_path, capsys, recorded):
    sig = copy.deepcopy(recorded["qknorm_rope_pair"])
    H, D = 64, 512  # each within split RoPE's limits; H*D past the fused kernel's
    for name, S in (("q", 3), ("k", 5)):
        sig["args"][name].update(shape=[1, S, H * D], stride=[S * H * D, H * D, 1])
        for part in ("cos", "sin"):
            sig["args"][f"{name}_{part}"].update(
                shape=[1, H, S, D // 2], stride=[S * H * D // 2, D // 2, H * D // 2, 1]
            )
    for name in ("q_weight", "k_weight"):
        sig["args"][name].update(shape=[H * D], stride=[1])
    _refused(tmp_path, capsys, sig, f"H*D={H * D}", f"[2, {qknorm_rope.MAX_HIDDEN}]")


@pytest.mark.parametrize(
    "kernel, arg, stride, message",
    [
        ("split_rope", "x", [1, 1, 1], "x must be contiguous"),
        ("split_rope", "cos", [24, 4, 8, 2], "cos must have last-dim stride 1"),
        ("ada_values9", "timestep", [1, 1, 1], "timestep must be contiguous"),
        ("ada_values9", "scale_shift_table", [64, 2], "scale_shift_table must have last-dim"),
        ("split_rope_pair", "k", [24, 1, 1], "k must be contiguous"),
        ("qknorm_rope_pair", "k_weight", [2], "k_weight must be contiguous"),
    ],
)
def test_strides_no_valid_call_has_are_refused(
    tmp_path, capsys, recorded, kernel, arg, stride, message
):
    sig = copy.deepcopy(recorded[kernel])
    assert len(sig["args"][arg]["stride"]) == len(stride)
    sig["args"][arg]["stride"] = stride
    _refused(tmp_path, capsys, sig, message)


def test_a_stride_on_a_dim_of_one_is_any_stride(tmp_path, recorded):
    # PyTorch ignores it (x of one token may carry any stride there): a valid call has it
    sig = copy.deepcopy(recorded["split_rope"])
    sig["args"]["x"]["stride"][0] = 12345  # B == 1
    (a,) = record.additions(_write(tmp_path, sig))
    assert a.shape.label == ROPE.label


@pytest.mark.parametrize("kernel", [["split_rope"], {"k": 1}, 3, None])
def test_a_kernel_field_that_is_not_a_name_is_one_line(tmp_path, capsys, recorded, kernel):
    sig = {**copy.deepcopy(recorded["split_rope"]), "kernel": kernel}
    rec = _write(tmp_path, sig)
    rc, err = _add(tmp_path, capsys, rec)
    assert rc == cli.EXIT_ERROR and err.count("\n") == 1 and "Traceback" not in err, err
    assert f"{rec}: signatures[0]: " in err and "kernel" in err
    with pytest.raises(ValueError, match=r"signatures\[0\]: .*kernel"):
        record.read(rec)


@pytest.mark.parametrize(
    "change",
    [
        {"shape": [1, 3, [16]]},
        {"shape": [1, 3, 16.0]},
        {"stride": [48, 16, True]},
        {"dtype": ["bfloat16"]},
        {"same_as": ["cos"]},
        {"storage_offset": "zero"},
    ],
    ids=["nested_list", "float_size", "bool_stride", "list_dtype", "list_same_as", "offset"],
)
def test_fields_of_the_wrong_json_type_are_one_line(tmp_path, capsys, recorded, change):
    sig = copy.deepcopy(recorded["split_rope"])
    target = "sin" if "same_as" in change else "x"
    sig["args"][target].update(change)
    rec = _write(tmp_path, sig)
    rc, err = _add(tmp_path, capsys, rec)
    assert rc == cli.EXIT_ERROR and err.count("\n") == 1 and "Traceback" not in err, err
    assert f"{rec}: signatures[0]" in err and f"args.{target}" in err, err


def test_a_large_shape_the_kernels_run_is_accepted(recorded):
    # production sizes and the kernels' own limits: nothing is allocated to check them
    shape = record.suite_shape(_ada(recorded, adaln.MAX_D, B=2, S=6144), "hand-picked")
    assert (shape.B, shape.S, shape.D) == (2, 6144, adaln.MAX_D)
    shape = record.suite_shape(_rope(recorded, 1, 2**20, 32, 128), "hand-picked")
    assert shape.label == "B1_S1048576_H32_D128"


def test_more_tokens_than_the_grid_takes_are_refused(tmp_path, capsys, recorded):
    # 8 GiB of x, but one program per token past CUDA's grid
    sig = _rope(recorded, 1, adaln.MAX_PROGRAMS + 1, 1, 2)
    _refused(tmp_path, capsys, sig, str(adaln.MAX_PROGRAMS + 1), str(adaln.MAX_PROGRAMS))
