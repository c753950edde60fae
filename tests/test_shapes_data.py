"""The suite's shapes as data (ltx2k/workload/shapes.json), ``ltx2k shapes`` and
``ltx2k shapes add``."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import torch
from conftest import DEVICE

import ltx2k
from ltx2k import cli
from ltx2k.kernels.adaln import ltx2_ada_values9
from ltx2k.kernels.rope import apply_ltx2_split_rotary_emb
from ltx2k.workload import cases, record, shapes

# The labels, in order, from before the shapes were data: each is the key of an asv
# history, so the data file may only ever add to the end of these lists.
FROZEN = {
    "ROPE_SHAPES": [
        "B1_S1024_H32_D128",
        "B1_S4096_H16_D128",
        "B4_S1152_H32_D128",
        "B4_S25_H32_D64",
        "B2_S6144_H16_D128",
        "B1_S16384_H32_D128",
    ],
    "ADA_SHAPES": [
        "B1_S1_D4096_bf16",
        "B1_S1_D4096_fp32",
        "B1_S1_D2048_bf16",
        "B2_S3_D2048_bf16",
        "B1_S1024_D4096_bf16",
        "B2_S6144_D4096_bf16",
    ],
    "ROPE_SHAPES_CPU": ["B1_S4_H3_D64", "B2_S1_H5_D32"],
    "ADA_SHAPES_CPU": ["B1_S1_D256_bf16", "B2_S3_D96_fp32"],
}
FROZEN_METRICS = {
    "HOST_BOUND_SHAPES": {
        "split_rope": ["B4_S25_H32_D64"],
        "ada_values9": ["B1_S1_D4096_bf16", "B1_S1_D4096_fp32"],
    },
    "KERNEL_TIME_SHAPES": {
        "split_rope": ["B4_S25_H32_D64", "B1_S4096_H16_D128"],
        "ada_values9": [
            "B1_S1_D4096_bf16",
            "B1_S1_D4096_fp32",
            "B1_S1_D2048_bf16",
            "B2_S3_D2048_bf16",
            "B1_S1024_D4096_bf16",
        ],
    },
}


def test_every_label_from_before_stays_in_its_place():
    for name, labels in FROZEN.items():
        got = [s.label for s in getattr(shapes, name)]
        assert got[: len(labels)] == labels, name
    for name, per_kernel in FROZEN_METRICS.items():
        for kernel, labels in per_kernel.items():
            got = [s.label for s in getattr(shapes, name)[kernel]]
            assert got[: len(labels)] == labels, (name, kernel)
    # every shape from before is token-major (what cases built them as), a bf16 table
    # unless its label says fp32
    assert all(s.layout == "token_major" for s in shapes.ROPE_SHAPES[:6])


def test_the_data_file_is_in_its_canonical_form():
    # One shape per line: appending a shape is a one-line diff, and `shapes add` writes
    # the file in the form it was read in.
    text = shapes.DATA_FILE.read_text()
    assert shapes.dumps(json.loads(text)) == text


def test_the_data_file_loads_without_the_package(tmp_path):
    # As benchmarks/bench_kernels.py loads it: by path, from a copy of the tree.
    copy = tmp_path / "ltx2k"
    copy.mkdir()
    for name in ("shapes.py", "shapes.json"):
        shutil.copy(shapes.DATA_FILE.parent / name, copy / name)
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("_shapes_copy", copy / "shapes.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    try:
        spec.loader.exec_module(mod)
    finally:
        del sys.modules[spec.name]
    assert [s.label for s in mod.ROPE_SHAPES] == [s.label for s in shapes.ROPE_SHAPES]


@pytest.mark.parametrize("layout", shapes.LAYOUTS)
def test_a_shapes_layout_flows_into_its_inputs(layout):
    shape = shapes.RopeShape(2, 3, 4, 16, layout)
    x, cos, sin = cases.rope_inputs(shape, DEVICE, seed=0)
    assert cos.shape == sin.shape == (2, 4, 3, 8)
    for t in (cos, sin):
        assert record.cos_sin_layout(list(t.shape), list(t.stride())) == layout
    assert apply_ltx2_split_rotary_emb(x, cos, sin).shape == x.shape


def test_labels_carry_the_layout_only_where_it_is_not_the_default():
    assert shapes.RopeShape(1, 2, 3, 4).label == "B1_S2_H3_D4"
    assert shapes.RopeShape(1, 2, 3, 4, "head_major").label == "B1_S2_H3_D4_head_major"


def _copy_data(tmp_path) -> Path:
    path = tmp_path / "shapes.json"
    shutil.copy(shapes.DATA_FILE, path)
    return path


def _main(capsys, *argv) -> tuple[int, str, str]:
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def _record_calls(path, token_s=5, head_s=7):
    """Calls of both kernels at shapes the suite lacks, both RoPE layouts."""
    with ltx2k.record_shapes(path):
        for transposed, S in ((True, token_s), (False, head_s)):
            args = cases.rope_inputs(shapes.RopeShape(1, S, 2, 16), DEVICE, transposed=transposed)
            for _ in range(2):
                apply_ltx2_split_rotary_emb(*args)
        held = cases.rope_inputs(shapes.ROPE_SHAPES_CPU[0], DEVICE)  # the suite has it
        apply_ltx2_split_rotary_emb(*held)
        ltx2_ada_values9(*cases.ada_inputs(shapes.AdaShape(3, 2, 64, "fp32"), DEVICE))


def test_shapes_lists_every_shape_with_its_layout_source_and_metrics(capsys):
    rc, out, _ = _main(capsys, "shapes")
    assert rc == 0
    lines = out.splitlines()
    assert lines[0].split()[:5] == ["kernel", "label", "runs_on", "layout", "source"]
    rows = [ln.split() for ln in lines[1:]]
    suite = shapes.load()
    assert len(rows) == sum(len(v) for v in suite.shapes.values())
    row = next(r for r in rows if r[1] == "B4_S25_H32_D64")
    assert row == [
        "split_rope",
        "B4_S25_H32_D64",
        "gpu",
        "token_major",
        "hand-picked",
        "device_cold,pct_copy_bandwidth,host_calibrated,kernel,device_warm,host,host_launch,"
        "allocations,host_context,device_launch",
    ]
    every = "device_cold,pct_copy_bandwidth"
    assert next(r for r in rows if r[1] == "B1_S1024_H32_D128")[-1] == (
        every + ",device_warm,host,host_launch,allocations,host_context"
    )
    # a shape listed for no opt-in metric: its cold-L2 time and the % derived from it
    assert next(r for r in rows if r[1] == "B1_S6144_H32_D64")[-1] == every


def test_shapes_add_appends_what_the_suite_lacks_with_stable_labels(tmp_path, capsys):
    data, rec = _copy_data(tmp_path), tmp_path / "calls.json"
    _record_calls(rec)
    before = data.read_text()

    rc, out, _ = _main(capsys, "shapes", "add", str(rec), "--dry-run", "--data", str(data))
    assert rc == 0 and "would add" in out
    assert data.read_text() == before  # a dry run writes nothing

    rc, out, _ = _main(capsys, "shapes", "add", str(rec), "--data", str(data))
    assert rc == 0, out
    suite = shapes.load(data)
    new = [s.label for s in suite.shapes[("split_rope", "gpu")][len(shapes.ROPE_SHAPES) :]]
    assert sorted(new) == ["B1_S5_H2_D16", "B1_S7_H2_D16_head_major"]
    (ada,) = suite.shapes[("ada_values9", "gpu")][len(shapes.ADA_SHAPES) :]
    assert ada.label == "B3_S2_D64_fp32" and ada.source == "recorded: calls.json"
    assert "held       split_rope  B1_S4_H3_D64  (1 calls; called as plain)" in out
    # append-only: the old text is the start of the new one, up to the closing bracket
    old_shapes = before[: before.index("\n  ],")]
    assert data.read_text().startswith(old_shapes + ",\n")

    # the same record again adds nothing: the labels it makes are the ones it made
    rc, out, _ = _main(capsys, "shapes", "add", str(rec), "--data", str(data))
    assert rc == 0 and "0 new shape(s)" in out
    assert shapes.load(data) == suite


def test_a_shape_the_model_called_is_timed_per_call_context(tmp_path, capsys):
    """AdaLN recorded as a block calls it (its nn.Parameter table, inference mode): `shapes
    add` appends the shape and lists it for host_context, so the suite times it plain and as
    the model calls it; a shape only called plain is not listed; a second add changes nothing."""
    data, rec = _copy_data(tmp_path), tmp_path / "calls.json"
    table, ts = cases.ada_inputs(shapes.AdaShape(2, 3, 64, "bf16"), DEVICE)
    with ltx2k.record_shapes(rec):
        with torch.inference_mode():
            ltx2_ada_values9(torch.nn.Parameter(table), ts)
        ltx2_ada_values9(*cases.ada_inputs(shapes.AdaShape(1, 3, 64, "bf16"), DEVICE))
    rc, out, _ = _main(capsys, "shapes", "add", str(rec), "--data", str(data))
    assert rc == 0, out
    assert "B2_S3_D64_bf16  (1 calls; called as model; timed per call context)" in out
    assert "B1_S3_D64_bf16  (1 calls; called as plain)" in out
    suite = shapes.load(data)
    timed = [s.label for s in suite.metric_shapes["host_context"]["ada_values9"]]
    assert "B2_S3_D64_bf16" in timed and "B1_S3_D64_bf16" not in timed
    assert timed[: len(shapes.METRIC_SHAPES["host_context"]["ada_values9"])] == [
        s.label for s in shapes.METRIC_SHAPES["host_context"]["ada_values9"]
    ]  # appended, the old list kept in order
    rc, out, _ = _main(capsys, "shapes", "add", str(rec), "--data", str(data))
    assert rc == 0 and "0 new shape(s)" in out and "timed per call context" not in out
    assert shapes.load(data) == suite


def test_an_added_head_major_shape_is_built_head_major(tmp_path, capsys):
    data, rec = _copy_data(tmp_path), tmp_path / "calls.json"
    _record_calls(rec)
    assert _main(capsys, "shapes", "add", str(rec), "--data", str(data))[0] == 0
    shape = next(s for s in shapes.load(data).shapes[("split_rope", "gpu")] if s.S == 7)
    _, cos, _ = cases.rope_inputs(shape, DEVICE)
    assert cos.is_contiguous()


def _sig(kernel="split_rope", **change):
    x = {"shape": [1, 4, 32], "stride": [128, 32, 1], "dtype": "bfloat16", "storage_offset": 0}
    cs = {"shape": [1, 2, 4, 8], "stride": [64, 8, 16, 1], "dtype": "bfloat16", "storage_offset": 0}
    sig = {"kernel": kernel, "calls": 1, "args": {"x": x, "cos": dict(cs), "sin": dict(cs)}}
    sig["layout"] = "token_major"
    for dotted, value in change.items():
        *parents, leaf = dotted.split("__")
        node = sig
        for p in parents:
            node = node[p]
        node[leaf] = value
    return sig


def _record_text(*sigs) -> str:
    return json.dumps({"format": record.FORMAT, "signatures": list(sigs)})


BAD_RECORDS = {
    "not_json": ("{", "not a shape record (not JSON"),
    "another_json_file": ('{"shapes": []}', "not a shape record (needs format"),
    "the_shapes_file": (shapes.DATA_FILE.read_text(), "not a shape record (needs format"),
    "unknown_kernel": (_record_text(_sig(), _sig(kernel="gelu")), "signatures[1]: unknown kernel"),
    "odd_head_dim": (
        _record_text(
            _sig(
                args__x__shape=[1, 4, 30],
                args__cos__shape=[1, 2, 4, 7],
                args__sin__shape=[1, 2, 4, 7],
            )
        ),
        "signatures[0] (split_rope): head dim D = 30/2 = 15 is odd",
    ),
    "wrong_dtype": (
        _record_text(_sig(args__x__dtype="float16")),
        "signatures[0] (split_rope): x is float16; the kernel takes bfloat16",
    ),
    "mixed_layout": (
        _record_text(_sig(args__sin__stride=[64, 32, 8, 1])),
        "cos/sin layout is mixed (cos strides [64, 8, 16, 1], sin strides [64, 32, 8, 1])",
    ),
    "zero_calls": (_record_text(_sig(calls=0)), "signatures[0]: calls must be a positive"),
    "missing_arg": (
        _record_text({**_sig(), "args": {"x": _sig()["args"]["x"]}}),
        "signatures[0]: args must be ['x', 'cos', 'sin']",
    ),
    "bad_stride": (
        _record_text(_sig(args__cos__stride="wide")),
        "signatures[0]: args.cos.stride must be a list of integers",
    ),
}


@pytest.mark.parametrize("case", list(BAD_RECORDS))
def test_bad_input_is_one_line_naming_the_file_and_entry(tmp_path, capsys, case):
    text, message = BAD_RECORDS[case]
    data, rec = _copy_data(tmp_path), tmp_path / "bad.json"
    rec.write_text(text)
    before = data.read_bytes()
    rc, out, err = _main(capsys, "shapes", "add", str(rec), "--data", str(data))
    assert rc == 1
    assert err.count("\n") == 1 and err.startswith(f"ltx2k: error: {rec}: "), err
    assert message in err
    assert data.read_bytes() == before


def test_a_missing_record_file_is_one_line(tmp_path, capsys):
    rc, _, err = _main(capsys, "shapes", "add", str(tmp_path / "none.json"), "--dry-run")
    assert rc == 1 and "cannot read the shape record" in err and err.count("\n") == 1


BAD_DATA = {
    "repeated_label": (lambda d: d["shapes"].append(dict(d["shapes"][0])), "repeats shapes[0]"),
    "unknown_layout": (lambda d: d["shapes"][0].update(layout="diagonal"), "layout must be"),
    "no_source": (lambda d: d["shapes"][0].pop("source"), "shapes[0]: source must be"),
    "bad_source": (lambda d: d["shapes"][0].update(source="memory"), "shapes[0]: source must"),
    "odd_head_dim": (lambda d: d["shapes"][0].update(D=63), "shapes[0]: head dim D must be even"),
    "unknown_key": (lambda d: d["shapes"][0].update(Dv=1), "shapes[0]: unknown key(s) ['Dv']"),
    "metric_label": (
        lambda d: d["metric_shapes"]["kernel"]["split_rope"].append("B9_S9_H9_D8"),
        "metric_shapes.kernel.split_rope: 'B9_S9_H9_D8' is not a gpu shape",
    ),
}


@pytest.mark.parametrize("case", list(BAD_DATA))
def test_a_bad_data_file_names_the_entry(tmp_path, case):
    edit, message = BAD_DATA[case]
    data = json.loads(shapes.DATA_FILE.read_text())
    edit(data)
    path = tmp_path / "shapes.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=r"shapes\.json: ") as e:
        shapes.load(path)
    assert message in str(e.value)


def test_a_failed_append_leaves_the_data_file_as_it_was(tmp_path, monkeypatch):
    data = _copy_data(tmp_path)
    before = data.read_bytes()
    entry = shapes.entry("split_rope", shapes.RopeShape(1, 9, 2, 16, source="hand-picked"))

    def disk_full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space"):
        shapes.append([entry], data)
    assert data.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shapes.json"]
    # an entry the file cannot hold is refused before anything is written
    monkeypatch.undo()
    with pytest.raises(ValueError, match="repeats"):
        shapes.append([shapes.entry("split_rope", shapes.ROPE_SHAPES[0])], data)
    assert data.read_bytes() == before


def test_an_old_commit_skips_a_head_major_shape(monkeypatch):
    import importlib.util

    root = Path(__file__).resolve().parent.parent
    spec = importlib.util.spec_from_file_location(
        "_bench_layout", root / "benchmarks/bench_kernels.py"
    )
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    head = shapes.RopeShape(1, 2, 3, 16, "head_major")
    bench._check_layout(head)  # this commit builds it
    bench._check_layout(shapes.ROPE_SHAPES[0])
    monkeypatch.delattr(cases, "rope_layout")  # as at a commit before layouts were data
    with pytest.raises(NotImplementedError, match="no head_major cos/sin inputs"):
        bench._check_layout(head)
    bench._check_layout(shapes.ROPE_SHAPES[0])  # token-major: timed as it always was


def test_recorded_dtypes_match_the_inputs_cases_builds(tmp_path):
    # the suite shape a recording maps to is the recording: same shapes, dtypes, layout
    rec = tmp_path / "calls.json"
    shape = shapes.RopeShape(1, 3, 2, 16, "head_major")
    with ltx2k.record_shapes(rec):
        apply_ltx2_split_rotary_emb(*cases.rope_inputs(shape, DEVICE))
    (a,) = record.additions(rec)
    assert a.shape == shape and not a.held and a.calls == 1
    assert torch.bfloat16 == cases.rope_inputs(a.shape, DEVICE)[0].dtype


def test_a_hand_written_record_is_read_by_its_strides(tmp_path):
    # Only what a signature is: no layout summary, no alignment, keys in another order.
    cs = {"dtype": "bfloat16", "stride": [256, 32, 8, 1], "shape": [1, 4, 8, 8]}
    x = {"shape": [1, 8, 64], "stride": [512, 64, 1], "dtype": "bfloat16"}
    sig = {"calls": 2, "args": {"sin": cs, "cos": cs, "x": x}, "kernel": "split_rope"}
    rec = tmp_path / "hand.json"
    rec.write_text(_record_text(sig))
    (a,) = record.additions(rec)
    assert a.shape.label == "B1_S8_H4_D16_head_major" and a.calls == 2


def test_the_kernels_and_their_arguments_agree_everywhere():
    import inspect

    assert set(record.ARGS) == set(shapes.KERNEL_FIELDS) == set(cases.KERNELS)
    for kernel, names in record.ARGS.items():
        fn = cases.variant_fn(kernel, cases.KERNELS[kernel].variants[0]).func
        params = list(inspect.signature(fn).parameters)
        assert params[: len(names)] == list(names), kernel
