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
from ltx2k.workload import cases, contexts, record, shapes

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
# The attention prologue's labels, as the kernels came in: both kernels, the same shapes.
PROLOGUE_GPU = [
    "B2_Sq1536_Sk1536_H32_D128_shared",
    "B1_Sq6144_Sk6144_H32_D128_shared",
    "B2_Sq126_Sk126_H32_D64_shared",
    "B2_Sq1536_Sk126_H32_D64",
    "B2_Sq126_Sk1536_H32_D64",
    "B4_Sq25_Sk25_H32_D64_shared",
]
FROZEN_BY_KERNEL = {
    ("split_rope_pair", "gpu"): PROLOGUE_GPU,
    ("qknorm_rope_pair", "gpu"): PROLOGUE_GPU,
    ("split_rope_pair", "cpu-interpreter"): [
        "B1_Sq3_Sk5_H3_D16",
        "B2_Sq4_Sk4_H5_D24_shared_head_major",
    ],
    ("qknorm_rope_pair", "cpu-interpreter"): [
        "B1_Sq3_Sk5_H3_D16",
        "B2_Sq4_Sk4_H5_D24_shared_head_major_wfp32",
    ],
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
    for key, labels in FROZEN_BY_KERNEL.items():
        got = [s.label for s in shapes.SHAPES[key]]
        assert got[: len(labels)] == labels, key


def test_the_attention_prologue_shapes_say_what_they_are():
    """Self-attention shares cos/sin (one S), cross-attention does not (Sq != Sk, both
    directions), at LTX-2's head sizes; the model-config ones cite the docs section that
    derives them, and it exists."""
    docs = (Path(__file__).resolve().parent.parent / "docs" / "shapes.md").read_text()
    assert "\n## The attention prologue's shapes\n" in docs
    for kernel in ("split_rope_pair", "qknorm_rope_pair"):
        gpu = {s.label: s for s in shapes.shapes_of(kernel, True)}
        for s in gpu.values():
            assert s.shared == (s.Sq == s.Sk)
            assert (s.H, s.D) in ((32, 128), (32, 64))
            assert s.source in (
                "hand-picked",
                "model config: docs/shapes.md#the-attention-prologues-shapes",
            )
        cross = [s for s in gpu.values() if not s.shared]
        assert {(s.Sq, s.Sk) for s in cross} == {(1536, 126), (126, 1536)}
        assert gpu["B4_Sq25_Sk25_H32_D64_shared"].source == "hand-picked"
        cpu = shapes.shapes_of(kernel, False)
        assert any(s.Sq != s.Sk for s in cpu) and any(s.H % 2 for s in cpu)
        assert any(s.shared for s in cpu) and {s.layout for s in cpu} == set(shapes.LAYOUTS)
    weights = {s.weight_dtype for s in shapes.shapes_of("qknorm_rope_pair", False)}
    assert weights == {"bf16", "fp32"}


@pytest.mark.parametrize(
    "kernel, fields, label",
    [
        ("split_rope_pair", {}, "B2_Sq3_Sk5_H3_D16"),
        ("split_rope_pair", {"Sk": 3, "shared": True}, "B2_Sq3_Sk3_H3_D16_shared"),
        (
            "split_rope_pair",
            {"Sk": 3, "shared": True, "layout": "head_major"},
            "B2_Sq3_Sk3_H3_D16_shared_head_major",
        ),
        ("qknorm_rope_pair", {"weight_dtype": "bf16"}, "B2_Sq3_Sk5_H3_D16"),
        ("qknorm_rope_pair", {"weight_dtype": "fp32"}, "B2_Sq3_Sk5_H3_D16_wfp32"),
    ],
)
def test_pair_labels_name_what_is_not_the_default(kernel, fields, label):
    values = {"B": 2, "Sq": 3, "Sk": 5, "H": 3, "D": 16, "layout": "token_major"}
    values["shared"] = False
    if kernel == "qknorm_rope_pair":
        values["weight_dtype"] = "bf16"
    shape = shapes.shape_from_fields(kernel, {**values, **fields})
    assert shape.label == label
    assert shapes.shape_from_fields(kernel, shapes.entry(kernel, shape)) == shape


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


# JSON json.loads refuses past its syntax: nesting past the recursion limit, an integer
# past Python's digit limit, bytes that are not UTF-8.
UNPARSABLE = {
    "deep_nesting": b"[" * 100_000 + b"]" * 100_000,
    "huge_integer": b'{"format": ' + b"9" * 5000 + b"}",
    "not_utf8": b'{"format": "\xff\xfe"}',
}
BAD_RECORDS.update({f"unparsable_{k}": (v, "not a shape record (") for k, v in UNPARSABLE.items()})


@pytest.mark.parametrize("case", list(BAD_RECORDS))
def test_bad_input_is_one_line_naming_the_file_and_entry(tmp_path, capsys, case):
    text, message = BAD_RECORDS[case]
    data, rec = _copy_data(tmp_path), tmp_path / "bad.json"
    if isinstance(text, bytes):
        rec.write_bytes(text)
    else:
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
    "metric_unknown_kernel": (
        lambda d: d["metric_shapes"]["kernel"].update(gelu=[]),
        "metric_shapes.kernel must map kernels of",
    ),
    "shared_cross_attention": (
        lambda d: _pair_entry(d).update(Sk=7, shared=True),
        "shared cos/sin need Sq == Sk",
    ),
    "shared_not_a_bool": (lambda d: _pair_entry(d).update(shared="yes"), "shared must be"),
    "weight_dtype": (
        lambda d: _pair_entry(d, "qknorm_rope_pair").update(weight_dtype="fp8"),
        "weight_dtype must be one of",
    ),
}


def _pair_entry(data: dict, kernel: str = "split_rope_pair") -> dict:
    return next(e for e in data["shapes"] if e["kernel"] == kernel)


def test_a_kernel_a_metric_list_does_not_name_has_no_shape_in_it(tmp_path):
    data = json.loads(shapes.DATA_FILE.read_text())
    for per_kernel in data["metric_shapes"].values():
        per_kernel.pop("split_rope_pair", None)
    path = tmp_path / "shapes.json"
    path.write_text(json.dumps(data))
    suite = shapes.load(path)
    assert all(suite.metric_shapes[m]["split_rope_pair"] == () for m in shapes.OPT_IN_METRICS)
    # appending to such a list starts it
    label = PROLOGUE_GPU[0]
    shapes.append([], path, metrics=[("host_context", "split_rope_pair", label)])
    assert [
        s.label for s in shapes.load(path).metric_shapes["host_context"]["split_rope_pair"]
    ] == [label]


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


@pytest.mark.parametrize("case", list(UNPARSABLE))
def test_an_unparsable_data_file_is_one_line_naming_it(tmp_path, capsys, case):
    path = tmp_path / "shapes.json"
    path.write_bytes(UNPARSABLE[case])
    with pytest.raises(ValueError, match=r"shapes\.json: ") as e:
        shapes.load(path)
    assert "\n" not in str(e.value)
    rc, _, err = _main(capsys, "shapes", "--data", str(path))
    assert rc == 1 and err.count("\n") == 1 and str(path) in err, err


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


def _pair_calls(path):
    """The attention prologue as a model calls it, at shapes the suite lacks: a
    self-attention with one cos/sin for q and k, the same with equal copies for k (two
    tensors: read twice), a cross-attention, and the fused prologue with its weights as the
    block's Parameters under inference mode."""
    from ltx2k.kernels.qknorm_rope import ltx2_qknorm_split_rope_pair
    from ltx2k.kernels.rope_pair import apply_ltx2_split_rotary_emb_pair

    self_attn = shapes.PairShape(1, 6, 6, 2, 16, shared=True)
    cross = shapes.PairShape(1, 6, 9, 2, 16)
    prologue = shapes.QKNormPairShape(1, 6, 6, 2, 16, shared=True)
    with ltx2k.record_shapes(path):
        q, k, q_cos, q_sin, k_cos, k_sin = cases.pair_inputs(self_attn, DEVICE)
        assert k_cos is q_cos
        apply_ltx2_split_rotary_emb_pair(q, k, q_cos, q_sin, k_cos, k_sin)
        apply_ltx2_split_rotary_emb_pair(q, k, q_cos, q_sin, q_cos.clone(), q_sin.clone())
        apply_ltx2_split_rotary_emb_pair(*cases.pair_inputs(cross, DEVICE))
        args = contexts.arguments(
            "qknorm_rope_pair", cases.qknorm_pair_inputs(prologue, DEVICE), "model"
        )
        with torch.inference_mode():
            ltx2_qknorm_split_rope_pair(*args)


def test_recorded_pair_calls_become_pair_shapes_shared_by_identity(tmp_path, capsys):
    data, rec = _copy_data(tmp_path), tmp_path / "calls.json"
    _pair_calls(rec)
    sigs = record.read(rec)["signatures"]
    same = [{n: a["same_as"] for n, a in s["args"].items() if "same_as" in a} for s in sigs]
    assert {"k_cos": "q_cos", "k_sin": "q_sin"} in same and {} in same
    rc, out, _ = _main(capsys, "shapes", "add", str(rec), "--data", str(data))
    assert rc == 0, out
    suite = shapes.load(data)
    new = {
        k: [s.label for s in suite.shapes[(k, "gpu")][len(shapes.shapes_of(k, True)) :]]
        for k in ("split_rope_pair", "qknorm_rope_pair")
    }
    # the clones are a shape of their own: two cos/sin pairs to read
    assert sorted(new["split_rope_pair"]) == [
        "B1_Sq6_Sk6_H2_D16",
        "B1_Sq6_Sk6_H2_D16_shared",
        "B1_Sq6_Sk9_H2_D16",
    ]
    assert new["qknorm_rope_pair"] == ["B1_Sq6_Sk6_H2_D16_shared"]
    # the fused prologue was called as the model calls it: timed per call context too
    context = suite.metric_shapes["host_context"]["qknorm_rope_pair"]
    assert [s.label for s in context][-1] == "B1_Sq6_Sk6_H2_D16_shared"
    assert "B1_Sq6_Sk6_H2_D16_shared" in out and "timed per call context" in out
    rc, out, _ = _main(capsys, "shapes", "add", str(rec), "--data", str(data))
    assert rc == 0 and "0 new shape(s)" in out


def _pair_sig(**change):
    x = {"shape": [1, 4, 32], "stride": [128, 32, 1], "dtype": "bfloat16", "storage_offset": 0}
    cs = {"shape": [1, 2, 4, 8], "stride": [64, 8, 16, 1], "dtype": "bfloat16", "storage_offset": 0}
    args = {"q": x, "k": dict(x), "q_cos": cs, "q_sin": dict(cs), "k_cos": dict(cs)}
    args["k_sin"] = dict(cs)
    sig = {"kernel": "split_rope_pair", "calls": 1, "args": args}
    for dotted, value in change.items():
        *parents, leaf = dotted.split("__")
        node = sig
        for p in parents:
            node = node[p]
        node[leaf] = value
    return sig


@pytest.mark.parametrize(
    "change, message",
    [
        ({"args__k_cos__same_as": "k_sin"}, "args.k_cos.same_as must name an earlier argument"),
        ({"args__q__shape": [1, 5, 32]}, "q [1, 5, 32] does not fit q_cos"),
        (
            {"args__k_cos__stride": [64, 32, 8, 1], "args__k_sin__stride": [64, 32, 8, 1]},
            "q's cos/sin are token_major and k's head_major",
        ),
        ({"args__k__dtype": "float16"}, "k is float16; the kernel takes bfloat16"),
    ],
    ids=["same_as_later", "q_does_not_fit", "two_layouts", "dtype"],
)
def test_a_pair_signature_no_suite_shape_stands_for_is_one_line(tmp_path, capsys, change, message):
    data, rec = _copy_data(tmp_path), tmp_path / "bad.json"
    rec.write_text(_record_text(_pair_sig(**change)))
    before = data.read_bytes()
    rc, _, err = _main(capsys, "shapes", "add", str(rec), "--data", str(data))
    assert rc == 1 and err.count("\n") == 1 and message in err, err
    assert data.read_bytes() == before


def test_a_hand_written_pair_record_is_shared_only_where_it_says_same_as(tmp_path):
    rec = tmp_path / "hand.json"
    equal = _pair_sig()
    shared = _pair_sig(args__k_cos__same_as="q_cos", args__k_sin__same_as="q_sin")
    rec.write_text(_record_text(equal, shared))
    labels = sorted(a.shape.label for a in record.additions(rec))
    assert labels == ["B1_Sq4_Sk4_H2_D16", "B1_Sq4_Sk4_H2_D16_shared"]


@pytest.mark.parametrize("Sq, Sk", [(1, 4), (4, 1)], ids=["one_query", "one_key"])
def test_a_one_token_side_of_a_head_major_pair_takes_the_other_sides_layout(tmp_path, Sq, Sk):
    # One token's cos/sin are the same memory in both layouts: the recorder calls them
    # token-major, and the other side's strides say the call is head-major.
    from ltx2k.kernels.rope_pair import apply_ltx2_split_rotary_emb_pair

    shape = shapes.PairShape(1, Sq, Sk, 2, 16, "head_major")
    rec = tmp_path / "calls.json"
    with ltx2k.record_shapes(rec):
        apply_ltx2_split_rotary_emb_pair(*cases.pair_inputs(shape, DEVICE))
    (a,) = record.additions(rec)
    assert a.shape == shape and a.shape.label == f"B1_Sq{Sq}_Sk{Sk}_H2_D16_head_major"
