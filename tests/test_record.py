"""The shape recorder (ltx2k.workload.record): what a real caller's calls leave in the file."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch
from conftest import DEVICE

import ltx2k
from ltx2k.kernels.adaln import ltx2_ada_values9
from ltx2k.kernels.rope import apply_ltx2_split_rotary_emb
from ltx2k.workload import cases, contexts, record, shapes, variants

ROOT = Path(__file__).resolve().parent.parent
ROPE = shapes.RopeShape(1, 3, 2, 16)
ADA = shapes.AdaShape(2, 1, 32, "fp32")


@pytest.fixture(params=["python", "native"])
def counter(request, monkeypatch):
    """Each counting test runs with both counters: the Python one (the interpreter's) and
    the native module's C one (a GPU process's), built here against the installed torch."""
    fresh = record._Counter()
    if request.param == "native":
        from ltx2k.kernels import _native

        fresh.bind(_native.build())
        assert fresh.count is not None
    fresh.ready = True  # the Python counter: as where no native module is built
    monkeypatch.setattr(record, "_COUNTER", fresh)
    return fresh


def _rope_args(transposed: bool):
    return cases.rope_inputs(ROPE, DEVICE, seed=1, transposed=transposed)


def _calls(path) -> dict[tuple[str, str], int]:
    """{(kernel, layout or dtype of the table): calls} of a recorder file."""
    out = {}
    for sig in record.read(path)["signatures"]:
        what = sig.get("layout") or sig["args"]["scale_shift_table"]["dtype"]
        out[(sig["kernel"], what)] = out.get((sig["kernel"], what), 0) + sig["calls"]
    return out


def test_two_layouts_give_two_entries_with_counts(counter, tmp_path):
    path = tmp_path / "calls.json"
    token, head = _rope_args(True), _rope_args(False)
    with ltx2k.record_shapes(path):
        for _ in range(3):
            apply_ltx2_split_rotary_emb(*token)
        apply_ltx2_split_rotary_emb(*head)
        ltx2_ada_values9(*cases.ada_inputs(ADA, DEVICE, seed=2))
    apply_ltx2_split_rotary_emb(*token)  # after the block: not recorded
    sigs = record.read(path)["signatures"]
    assert len(sigs) == 3
    assert _calls(path) == {
        ("split_rope", "token_major"): 3,
        ("split_rope", "head_major"): 1,
        ("ada_values9", "float32"): 1,
    }
    x = next(s for s in sigs if s.get("layout") == "token_major")["args"]["x"]
    assert x == {
        "shape": [1, 3, 32],
        "stride": [96, 32, 1],
        "dtype": "bfloat16",
        "storage_offset": 0,
        "offset_alignment": 16,
    }


def test_a_second_recording_adds_its_counts_to_the_file(counter, tmp_path):
    path = tmp_path / "calls.json"
    args = _rope_args(True)
    for n in (2, 5):
        with ltx2k.record_shapes(path):
            for _ in range(n):
                apply_ltx2_split_rotary_emb(*args)
    assert _calls(path) == {("split_rope", "token_major"): 7}


def test_storage_offset_alignment_is_recorded(counter, tmp_path):
    path = tmp_path / "calls.json"
    x, cos, sin = _rope_args(True)
    big = torch.empty(x.numel() + 3, dtype=x.dtype, device=x.device)
    shifted = big[3:].view(x.shape).copy_(x)  # offset 3 bf16 = 6 bytes: 2-byte aligned
    with ltx2k.record_shapes(path):
        apply_ltx2_split_rotary_emb(shifted, cos, sin)
    (sig,) = record.read(path)["signatures"]
    assert sig["args"]["x"]["storage_offset"] == 3
    assert sig["args"]["x"]["offset_alignment"] == 2


def test_outside_a_recording_nothing_is_active_and_nothing_written(tmp_path):
    path = tmp_path / "calls.json"
    with ltx2k.record_shapes(path):
        assert record._ACTIVE
    assert record._ACTIVE == ()
    apply_ltx2_split_rotary_emb(*_rope_args(True))
    assert not path.exists()  # nothing recorded: nothing written


def test_concurrent_threads_lose_no_count(counter, tmp_path):
    path = tmp_path / "calls.json"
    x, cos, sin = _rope_args(True)
    n_threads, n_calls = 4, 5000
    barrier = threading.Barrier(n_threads)

    def caller():
        barrier.wait()
        for _ in range(n_calls):
            record.note("split_rope", x, cos, sin)  # the public functions' first line

    # Switch threads as often as the interpreter can, so that an unguarded
    # read-modify-write of a count would lose some.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        with ltx2k.record_shapes(path):
            threads = [threading.Thread(target=caller) for _ in range(n_threads)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    finally:
        sys.setswitchinterval(interval)
    assert _calls(path) == {("split_rope", "token_major"): n_threads * n_calls}


def _child(path, transposed, n, barrier):
    x, cos, sin = _rope_args(transposed)
    barrier.wait()
    for _ in range(n):  # many short recordings: many writes racing for the file
        with record.record_shapes(path):
            record.note("split_rope", x, cos, sin)


def test_concurrent_processes_lose_no_entry(counter, tmp_path):
    path = tmp_path / "calls.json"
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(4)
    procs = [ctx.Process(target=_child, args=(path, i % 2 == 0, 10, barrier)) for i in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0] * 4
    assert _calls(path) == {("split_rope", "token_major"): 20, ("split_rope", "head_major"): 20}
    assert not list(tmp_path.glob("*.tmp"))  # every write renamed its temporary file


def test_a_call_that_cannot_be_recorded_still_runs(counter, tmp_path):
    path = tmp_path / "calls.json"
    with ltx2k.record_shapes(path):
        with pytest.raises(TypeError, match="x must be a torch.Tensor"):
            apply_ltx2_split_rotary_emb("not a tensor", *_rope_args(True)[1:])
        out = apply_ltx2_split_rotary_emb(*_rope_args(True))
    assert out.shape == (1, 3, 32)
    assert _calls(path) == {("split_rope", "token_major"): 1}


def test_meta_tensors_are_recorded_and_compiled_traces_apart(counter, tmp_path, monkeypatch):
    """While dynamo traces the public function nothing is counted there; the op's fake
    implementation counts the trace once, with "compiling", apart from the eager calls."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    path = tmp_path / "calls.json"
    meta = [t.to("meta") for t in _rope_args(True)]
    fake = [FakeTensorMode().from_tensor(t) for t in _rope_args(True)]  # what a trace passes
    with ltx2k.record_shapes(path):
        record.note("split_rope", *meta)
        monkeypatch.setattr(record, "_is_compiling", lambda: True)  # as under torch.compile
        record.note("split_rope", *fake)
        record.note_traced("split_rope", *fake)
    sigs = record.read(path)["signatures"]
    assert sorted((s["context"]["compiling"], s["calls"]) for s in sigs) == [(False, 1), (True, 1)]
    assert _calls(path) == {("split_rope", "token_major"): 2}


def _meta_inputs(kernel: str) -> tuple:
    shape = {
        "split_rope": ROPE,
        "ada_values9": ADA,
        "split_rope_pair": shapes.PairShape(1, 3, 5, 2, 16),
        "qknorm_rope_pair": shapes.QKNormPairShape(1, 3, 5, 2, 16),
    }[kernel]
    args = cases.KERNELS[kernel].make_inputs(shape, DEVICE)
    return tuple(a.to("meta") if isinstance(a, torch.Tensor) else a for a in args)


@pytest.mark.parametrize("kernel", list(cases.KERNELS))
def test_an_eager_call_on_meta_tensors_is_one_plain_call(tmp_path, kernel):
    # Meta tensors go to the registered op, whose fake implementation counts traces: the
    # public function counted this call already, as the eager call it is.
    path = tmp_path / "calls.json"
    fn = cases.variant_fn(kernel, variants.DEFAULT_VARIANT[kernel])
    with ltx2k.record_shapes(path):
        fn(*_meta_inputs(kernel))
    (sig,) = record.read(path)["signatures"]
    assert sig["calls"] == 1 and not sig["context"]["compiling"]
    assert contexts.name_of(kernel, sig["context"]) == "plain"


def test_the_public_function_under_torch_compile_is_one_trace(tmp_path):
    path = tmp_path / "calls.json"
    args = _rope_args(True)
    with ltx2k.record_shapes(path):
        torch.compile(apply_ltx2_split_rotary_emb, fullgraph=True, backend="eager")(*args)
    (sig,) = record.read(path)["signatures"]
    assert sig["calls"] == 1 and sig["context"]["compiling"]


def test_each_signature_carries_its_call_context(counter, tmp_path):
    """The model's call (AdaLN's table its nn.Parameter, inference mode) and a plain one are
    two signatures, each with its context; the Parameter is seen as such by either counter."""
    path = tmp_path / "calls.json"
    table, ts = cases.ada_inputs(shapes.AdaShape(1, 2, 64, "bf16"), DEVICE, seed=3)
    weight = torch.nn.Parameter(table)
    with ltx2k.record_shapes(path):
        ltx2_ada_values9(table, ts)
        with torch.inference_mode():
            for _ in range(3):
                ltx2_ada_values9(weight, ts)
        with torch.no_grad():
            ltx2_ada_values9(weight, ts)
    sigs = record.read(path)["signatures"]
    assert len(sigs) == 3
    got = sorted(
        (
            s["calls"],
            s["context"]["grad_mode"],
            s["context"]["inference_mode"],
            s["context"]["tensors"]["scale_shift_table"]["parameter"],
            s["context"]["tensors"]["scale_shift_table"]["requires_grad"],
            s["context"]["tensors"]["timestep"]["parameter"],
            s["context"]["graph_capture"] or s["context"]["compiling"],
        )
        for s in sigs
    )
    assert got == [
        (1, False, False, True, True, False, False),  # no_grad
        (1, True, False, False, False, False, False),  # plain
        (3, False, True, True, True, False, False),  # inference mode
    ]
    names = sorted(contexts.name_of("ada_values9", s["context"]) for s in sigs)
    assert names == ["model", "model", "plain"]


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda d: d / "missing" / "calls.json", "does not exist"),
        (lambda d: d, "is a directory"),
        (lambda d: _write(d / "other.json", '{"a": 1}'), "not a shape record"),
        (lambda d: _write(d / "broken.json", "{"), "not JSON"),
    ],
    ids=["no_directory", "a_directory", "another_json_file", "not_json"],
)
def test_a_bad_path_is_an_error_at_entry(tmp_path, make, message):
    path = make(tmp_path)
    before = path.read_text() if path.is_file() else None
    entered = False
    with pytest.raises(ValueError, match=message), ltx2k.record_shapes(path):
        entered = True
    assert not entered
    assert record._ACTIVE == ()
    if before is not None:
        assert path.read_text() == before  # never overwritten


def test_a_read_only_directory_is_an_error_at_entry(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root writes anywhere")
    tmp_path.chmod(0o500)
    try:
        with pytest.raises(ValueError, match="cannot be written"):
            record.Recording(tmp_path / "calls.json")
    finally:
        tmp_path.chmod(0o700)


def test_a_file_broken_meanwhile_is_kept_and_the_counts_too(tmp_path):
    path = tmp_path / "calls.json"
    recording = record.Recording(path)
    key = ("split_rope", 1, *[(t.shape, t.stride(), t.dtype, 0) for t in _rope_args(True)])
    record._COUNTER.add((recording,), key, 1)
    path.write_text("not mine")
    with pytest.raises(ValueError, match="not a shape record"):
        recording.write()
    assert path.read_text() == "not mine"
    path.unlink()
    recording.write()  # the counts were kept for a later write
    assert _calls(path) == {("split_rope", "token_major"): 1}


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


_SERVE = """
import torch
from ltx2k.workload import cases, shapes
from ltx2k.kernels.rope import apply_ltx2_split_rotary_emb
args = cases.rope_inputs(shapes.RopeShape(1, 2, 1, 8), "cpu", seed=0)
for _ in range(4):
    apply_ltx2_split_rotary_emb(*args)
"""


def _serve(env_path: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TRITON_INTERPRET": "1", record.ENV_VAR: env_path}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-c", _SERVE], env=env, capture_output=True, text=True, timeout=300
    )


def test_the_environment_variable_records_a_whole_process(tmp_path):
    path = tmp_path / "serve.json"
    proc = _serve(str(path))
    assert proc.returncode == 0, proc.stderr
    assert _calls(path) == {("split_rope", "token_major"): 4}
    # A bad path: one line when the process starts, which runs on unrecorded.
    bad = _serve(str(tmp_path / "nowhere" / "serve.json"))
    assert bad.returncode == 0, bad.stderr
    (line,) = [ln for ln in bad.stderr.splitlines() if record.ENV_VAR in ln]
    assert line.startswith(f"ltx2k: error: {record.ENV_VAR}: shape record")
    assert "does not exist" in line and "Traceback" not in bad.stderr


def test_a_record_file_is_what_read_accepts(tmp_path):
    path = tmp_path / "calls.json"
    with ltx2k.record_shapes(path):
        apply_ltx2_split_rotary_emb(*_rope_args(True))
    data = json.loads(path.read_text())
    assert data["format"] == record.FORMAT
    assert record.read(path) == data


def test_a_function_under_torch_compile_traces_the_hook_without_a_break(tmp_path):
    # fullgraph=True fails on a graph break: the hook must trace, inside a recording
    # and out, and what dynamo traces is not a call.
    def fn(x, cos, sin):
        record.note("split_rope", x, cos, sin)
        return x * 2

    args = _rope_args(True)
    path = tmp_path / "calls.json"
    with ltx2k.record_shapes(path):
        out = torch.compile(fn, fullgraph=True, backend="eager")(*args)
        record.note("split_rope", *args)  # one real call, for the file to exist
    assert torch.equal(out, args[0] * 2)
    assert _calls(path) == {("split_rope", "token_major"): 1}
    torch.compile(fn, fullgraph=True, backend="eager")(*args)  # no recording: no guard fails


def test_a_child_forked_inside_a_recording_writes_its_own_calls_only(tmp_path):
    path = tmp_path / "calls.json"
    args = _rope_args(True)
    with ltx2k.record_shapes(path) as recording:
        for _ in range(3):
            record.note("split_rope", *args)
        pid = os.fork()
        if pid == 0:  # the child: one call of its own, written, and out
            code = 1
            try:
                record.note("split_rope", *args)
                recording.write()
                code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        for _ in range(2):
            record.note("split_rope", *args)
    assert _calls(path) == {("split_rope", "token_major"): 3 + 1 + 2}


# --- the native counter against the Python one --------------------------------------


def _native_module():
    from ltx2k.kernels import _native

    return _native.build()


def _views():
    """Tensors whose signatures differ in every field the key holds."""
    base = torch.arange(2 * 3 * 4 * 8, dtype=torch.float32).view(2, 3, 4, 8)
    return [
        base,
        base.transpose(1, 2),  # strides
        base[:, 1:],  # storage offset
        base.to(torch.bfloat16),  # dtype
        base.reshape(6, 32),  # rank
        torch.empty(2, 3, device="meta"),
        torch.empty(0, 5),
    ]


def test_the_native_key_decodes_to_the_python_key(tmp_path, monkeypatch):
    mod = _native_module()
    monkeypatch.setattr(record, "_COUNTER", record._Counter().bind(mod))
    for t in _views():
        rec = record.Recording(tmp_path / "calls.json")
        head = record.KERNEL_IDS["ada_values9"] | 0b101 << record._KERNEL_BITS
        assert mod.shape_count((rec,), head, t, t.mT) is True
        (key,) = rec._counts
        assert isinstance(key, bytes) and rec._counts[key] == 1
        metas = ((u.shape, u.stride(), u.dtype, u.storage_offset()) for u in (t, t.mT))
        assert record._decode(key) == ("ada_values9", 0b101, *metas)


def test_the_native_counter_declines_what_it_cannot_read_and_python_counts_it(
    tmp_path, monkeypatch
):
    """A tensor subclass goes to the Python key, and both keys of one signature end as one
    entry of the file with their counts summed."""
    mod = _native_module()

    class Sub(torch.Tensor):
        pass

    x, cos, sin = _rope_args(True)
    rec = record.Recording(tmp_path / "calls.json")
    assert mod.shape_count((rec,), 0, x.as_subclass(Sub), cos, sin) is False
    assert mod.shape_count((rec,), 0, x, cos, "not a tensor") is False
    assert rec._counts == {}
    monkeypatch.setattr(record, "_COUNTER", record._Counter().bind(mod))
    record._start(rec)
    try:
        record.note("split_rope", x, cos, sin)
        record.note("split_rope", x.as_subclass(Sub), cos, sin)
    finally:
        record._stop(rec)
    assert sorted(type(k).__name__ for k in rec._counts) == ["bytes", "tuple"]
    rec.write()
    assert _calls(tmp_path / "calls.json") == {("split_rope", "token_major"): 2}


@pytest.mark.parametrize(
    "call, error",
    [
        (lambda m: m.shape_count(), TypeError),
        (lambda m: m.shape_count([], 0), TypeError),
        (lambda m: m.shape_count((object(),), 0, torch.zeros(1)), AttributeError),
        (lambda m: m.shape_add((), b"k"), TypeError),
        (lambda m: m.scalar_type_dtype(10_000), ValueError),
    ],
    ids=["no_args", "not_a_tuple", "not_a_recording", "no_count", "bad_code"],
)
def test_the_native_counter_raises_python_errors_on_bad_arguments(call, error):
    with pytest.raises(error):
        call(_native_module())


@pytest.mark.parametrize("native", [False, True], ids=["python_key", "native_key"])
def test_which_argument_is_the_same_tensor_as_an_earlier_one_is_recorded(
    tmp_path, monkeypatch, native
):
    """A self-attention passes one cos/sin for q and k: the signature says so by identity
    (two equal tensors are two), through either key."""
    counter = record._Counter().bind(_native_module()) if native else record._Counter()
    counter.ready = True
    monkeypatch.setattr(record, "_COUNTER", counter)
    shape = shapes.PairShape(1, 3, 3, 2, 8, shared=True)
    q, k, q_cos, q_sin, k_cos, k_sin = cases.pair_inputs(shape, DEVICE)
    rec = record.Recording(tmp_path / "calls.json")
    record._start(rec)
    try:
        record.note("split_rope_pair", q, k, q_cos, q_sin, k_cos, k_sin)
        record.note("split_rope_pair", q, k, q_cos, q_sin, q_cos.clone(), q_sin.clone())
        record.note("split_rope_pair", q, q, q_cos, q_sin, k_cos, k_sin)
    finally:
        record._stop(rec)
    rec.write()
    same = [
        {n: a["same_as"] for n, a in s["args"].items() if "same_as" in a}
        for s in record.read(tmp_path / "calls.json")["signatures"]
    ]
    assert len(same) == 3
    for want in (
        {},
        {"k": "q", "k_cos": "q_cos", "k_sin": "q_sin"},
        {"k_cos": "q_cos", "k_sin": "q_sin"},
    ):
        assert want in same
