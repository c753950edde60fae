"""Benchmark cases: kernel x variant x shape, as data, with inputs, callables and byte counts.

The shapes come from ``ltx2k.workload.shapes`` and the variants from ``ltx2k.workload.variants``
(plain data). This is the one place that knows how to build a kernel's inputs, call a
variant, count its minimum traffic, say what the variant is gated against and map a
recorded call to a suite shape (one :class:`KernelSpec` per kernel); the asv suite,
pytest-benchmark, the CLI, the correctness gate and the recorder all go through it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ltx2k.workload import reference, shapes, variants

BF16 = 2  # bytes


def _exact_values(shape, lo: int, hi: int, gen: torch.Generator, scale: float = 1.0):
    # Small integers (times a power of two) are exact in bf16 and so are their
    # products/sums here: the result is then independent of the rounding mode,
    # which makes the CPU interpreter (truncating fp32->bf16) bit-comparable.
    return (torch.randint(lo, hi + 1, shape, generator=gen).float() * scale).to(torch.bfloat16)


def _generator(device, seed: int, exact: bool) -> torch.Generator:
    # Random inputs are drawn on the device itself: drawing hundreds of MB on
    # the CPU and copying them dominated each asv benchmark process's setup.
    dev = torch.device(device)
    if exact or dev.type != "cuda":
        return torch.Generator().manual_seed(seed)
    return torch.Generator(device=dev).manual_seed(seed)


def rope_inputs(
    shape: shapes.RopeShape,
    device,
    seed: int = 0,
    exact: bool = False,
    transposed: bool | None = None,
):
    """(x, cos, sin) for one shape, cos/sin in the shape's layout (``shape.layout``).

    Token-major cos/sin are [B,S,H,D/2].transpose(1,2), the layout LTX-2 produces;
    head-major ones a contiguous [B,H,S,D/2]. ``transposed`` overrides the shape's
    layout (True: token-major), for tests of both layouts at one shape.
    """
    B, S, H, D = shape.B, shape.S, shape.H, shape.D
    if transposed is None:
        transposed = rope_layout(shape) == shapes.DEFAULT_LAYOUT
    gen = _generator(device, seed, exact)
    cs_shape = (B, S, H, D // 2) if transposed else (B, H, S, D // 2)
    if exact:
        pw = torch.tensor([-2.0, -1.0, -0.5, 0.5, 1.0, 2.0])
        x = _exact_values((B, S, H * D), -16, 16, gen)
        cos = pw[torch.randint(0, 6, cs_shape, generator=gen)].to(torch.bfloat16)
        sin = pw[torch.randint(0, 6, cs_shape, generator=gen)].to(torch.bfloat16)
    else:
        dev = gen.device
        x = torch.randn((B, S, H * D), generator=gen, device=dev).to(torch.bfloat16)
        ang = torch.rand(cs_shape, generator=gen, device=dev) * 6.2831853
        cos, sin = ang.cos().to(torch.bfloat16), ang.sin().to(torch.bfloat16)
    x, cos, sin = (t.to(device) for t in (x, cos, sin))
    if transposed:
        cos, sin = cos.transpose(1, 2), sin.transpose(1, 2)
    return x, cos, sin


def rope_layout(shape) -> str:
    """The cos/sin layout of a RoPE shape; token-major for a shape object that has none."""
    layout = getattr(shape, "layout", shapes.DEFAULT_LAYOUT)
    if layout not in shapes.LAYOUTS:
        raise ValueError(f"RoPE shape {shape.label}: unknown cos/sin layout {layout!r}")
    return layout


def ada_inputs(shape: shapes.AdaShape, device, seed: int = 0, exact: bool = False):
    """(scale_shift_table, timestep) for one shape."""
    B, S, D = shape.B, shape.S, shape.D
    gen = _generator(device, seed, exact)
    tdtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[shape.table_dtype]
    if exact:
        table = _exact_values((9, D), -16, 16, gen, scale=0.5).to(tdtype)
        ts = _exact_values((B, S, 9 * D), -16, 16, gen)
    else:
        dev = gen.device
        table = (torch.randn((9, D), generator=gen, device=dev) / D**0.5).to(tdtype)
        ts = torch.randn((B, S, 9 * D), generator=gen, device=dev).to(torch.bfloat16)
    return table.to(device), ts.to(device)


def pair_inputs(shape: shapes.PairShape, device, seed: int = 0, exact: bool = False):
    """(q, k, q_cos, q_sin, k_cos, k_sin) for one shape, cos/sin in the shape's layout.

    With ``shape.shared`` the call passes the very same cos/sin tensors for k as for q
    (``k_cos is q_cos``), as a self-attention does; the kernel then reads them once.
    Exact values as :func:`rope_inputs`'s.
    """
    gen = _generator(device, seed, exact)
    q = _activations((shape.B, shape.Sq, shape.H * shape.D), gen, exact)
    k = _activations((shape.B, shape.Sk, shape.H * shape.D), gen, exact)
    q_cos, q_sin = _cos_sin(shape, shape.Sq, gen, exact, device)
    k_cos, k_sin = (q_cos, q_sin) if shape.shared else _cos_sin(shape, shape.Sk, gen, exact, device)
    return q.to(device), k.to(device), q_cos, q_sin, k_cos, k_sin


def _activations(size, gen: torch.Generator, exact: bool) -> torch.Tensor:
    if exact:
        return _exact_values(size, -16, 16, gen)
    return torch.randn(size, generator=gen, device=gen.device).to(torch.bfloat16)


def _cos_sin(shape, S: int, gen: torch.Generator, exact: bool, device):
    """cos, sin [B, H, S, D/2] bf16 in ``shape.layout`` (see :func:`rope_inputs`)."""
    B, H, half = shape.B, shape.H, shape.D // 2
    token_major = rope_layout(shape) == shapes.DEFAULT_LAYOUT
    size = (B, S, H, half) if token_major else (B, H, S, half)
    if exact:
        pw = torch.tensor([-2.0, -1.0, -0.5, 0.5, 1.0, 2.0])
        cos = pw[torch.randint(0, 6, size, generator=gen)].to(torch.bfloat16)
        sin = pw[torch.randint(0, 6, size, generator=gen)].to(torch.bfloat16)
    else:
        ang = torch.rand(size, generator=gen, device=gen.device) * 6.2831853
        cos, sin = ang.cos().to(torch.bfloat16), ang.sin().to(torch.bfloat16)
    cos, sin = cos.to(device), sin.to(device)
    return (cos.transpose(1, 2), sin.transpose(1, 2)) if token_major else (cos, sin)


# The model's RMSNorm eps (LTX-2's attention: norm_eps=1e-6).
QK_NORM_EPS = 1e-6
_DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}


def qknorm_pair_inputs(shape: shapes.QKNormPairShape, device, seed: int = 0, exact: bool = False):
    """(q, k, q_weight, k_weight, q_cos, q_sin, k_cos, k_sin, eps) for one shape: the
    arguments of the fused prologue, in its order. Weights [H*D] of ``shape.weight_dtype``.

    Exact values (the CPU interpreter) make the norm exact too. RMSNorm divides by
    ``sqrt(mean(x**2) + eps)``: every token's values here are drawn from
    {±2, ±4, ±8, ±10, ±12} in proportions whose squares average exactly 64 (groups of
    eight: five ±4 and three ±12, or three ±2 and five ±10; ±8 for what is left of the
    hidden size), so mean + eps rounds to 64 in fp32 (eps is below half its ulp) and rstd
    is 1/8 exactly, in any summation order. With weights in {±0.5, ±1}, every normalized
    value is a multiple of 1/8 below 2, and split RoPE of it with cos/sin in
    {±0.5, ±1, ±2} is exact in bf16: the fused kernel, its reference and
    ``torch.nn.functional.rms_norm`` then agree bit for bit in the interpreter, which
    truncates where the GPU rounds.
    """
    gen = _generator(device, seed, exact)
    hidden = shape.H * shape.D
    if exact:
        q = _unit_rms_values((shape.B, shape.Sq), hidden, gen)
        k = _unit_rms_values((shape.B, shape.Sk), hidden, gen)
        w = torch.tensor([-1.0, -0.5, 0.5, 1.0])
        q_weight = w[torch.randint(0, 4, (hidden,), generator=gen)]
        k_weight = w[torch.randint(0, 4, (hidden,), generator=gen)]
    else:
        dev = gen.device
        q = (torch.randn((shape.B, shape.Sq, hidden), generator=gen, device=dev) * 4).bfloat16()
        k = (torch.randn((shape.B, shape.Sk, hidden), generator=gen, device=dev) * 4).bfloat16()
        q_weight = 0.5 + torch.rand(hidden, generator=gen, device=dev)
        k_weight = 0.5 + torch.rand(hidden, generator=gen, device=dev)
    wdtype = _DTYPES[shape.weight_dtype]
    q_weight, k_weight = q_weight.to(wdtype).to(device), k_weight.to(wdtype).to(device)
    q_cos, q_sin = _cos_sin(shape, shape.Sq, gen, exact, device)
    k_cos, k_sin = (q_cos, q_sin) if shape.shared else _cos_sin(shape, shape.Sk, gen, exact, device)
    return (
        q.to(device), k.to(device), q_weight, k_weight, q_cos, q_sin, k_cos, k_sin, QK_NORM_EPS
    )  # fmt: skip


# Magnitudes whose squares average 64 over each group (see qknorm_pair_inputs).
_MEAN_SQUARE_64 = ((4,) * 5 + (12,) * 3, (2,) * 3 + (10,) * 5)


def _unit_rms_values(rows: tuple[int, int], hidden: int, gen: torch.Generator) -> torch.Tensor:
    """[*rows, hidden] bf16 of exact values whose squares average exactly 64 on every row."""
    n = rows[0] * rows[1]
    groups, rest = divmod(hidden, 8)
    pattern = torch.tensor(_MEAN_SQUARE_64, dtype=torch.float32)  # [2, 8]
    which = torch.randint(0, 2, (n, groups), generator=gen)
    mags = torch.cat([pattern[which].reshape(n, groups * 8), torch.full((n, rest), 8.0)], 1)
    order = torch.argsort(torch.rand((n, hidden), generator=gen), dim=1)
    signs = torch.randint(0, 2, (n, hidden), generator=gen) * 2 - 1
    return (mags.gather(1, order) * signs).reshape(*rows, hidden).to(torch.bfloat16)


def rope_bytes(shape: shapes.RopeShape) -> int:
    n = shape.B * shape.S * shape.H * shape.D
    return BF16 * (n + n + n // 2 + n // 2)  # read x, cos, sin once; write out once


def ada_bytes(shape: shapes.AdaShape) -> int:
    table = 9 * shape.D * (2 if shape.table_dtype == "bf16" else 4)
    n = 9 * shape.B * shape.S * shape.D
    return table + BF16 * (n + n)  # read table + timestep, write 9 outputs


def pair_bytes(shape: shapes.PairShape) -> int:
    """q and k read and written once; cos and sin (each half as many elements as the tensor
    they rotate) read once, k's not at all when they are q's."""
    nq = shape.B * shape.Sq * shape.H * shape.D  # elements of q, and of q_out
    nk = shape.B * shape.Sk * shape.H * shape.D
    cos_sin = nq + (0 if shape.shared else nk)  # cos + sin: 2 x n/2 elements each side
    return BF16 * (2 * nq + 2 * nk + cos_sin)


def qknorm_pair_bytes(shape: shapes.QKNormPairShape) -> int:
    """:func:`pair_bytes` and the two weights, [H*D] each, read once."""
    weights = 2 * shape.H * shape.D * _DTYPES[shape.weight_dtype].itemsize
    return pair_bytes(shape) + weights


# --- from a recorded call to the suite shape that times it (ltx2k.workload.record) ----------
# Each takes a checked signature's ``args`` (name -> {"shape", "stride", "dtype", and
# "same_as": the earlier argument it is the very same tensor as, if any}) and a source,
# and raises ValueError saying why no suite shape can stand for it.


def _require_dtypes(args: dict, names, dtypes=("bfloat16",)) -> None:
    for name in names:
        if args[name]["dtype"] not in dtypes:
            raise ValueError(
                f"{name} is {args[name]['dtype']}; the kernel takes {' or '.join(dtypes)}"
            )


def _rope_fields(args: dict, x: str, cos: str, sin: str) -> dict:
    """B, S, H, D and the cos/sin layout of one split-RoPE operand triple."""
    from ltx2k.workload import record

    xa, ca, sa = args[x], args[cos], args[sin]
    if len(xa["shape"]) != 3 or len(ca["shape"]) != 4 or sa["shape"] != ca["shape"]:
        raise ValueError(
            f"needs {x} [B, S, H*D] and {cos}, {sin} [B, H, S, D/2], got {x} {xa['shape']}, "
            f"{cos} {ca['shape']}, {sin} {sa['shape']}"
        )
    B, S, HD = xa["shape"]
    cB, H, cS, half = ca["shape"]
    if (cB, cS) != (B, S) or H == 0 or HD % H:
        raise ValueError(f"{x} {xa['shape']} does not fit {cos} [B, H, S, D/2] = {ca['shape']}")
    D = HD // H
    if D % 2:
        raise ValueError(f"head dim D = {HD}/{H} = {D} is odd; the split halves need it even")
    if half * 2 != D:
        raise ValueError(f"{cos}.shape[3] = {half} is not D/2 = {D // 2}")
    # From the strides: a file's own "layout" is only a summary.
    layout = record.rope_layout(args, cos, sin)
    if layout not in shapes.LAYOUTS:
        raise ValueError(
            f"{cos}/{sin} layout is {layout} ({cos} strides {ca['stride']}, {sin} strides "
            f"{sa['stride']}); a suite shape is one of {shapes.LAYOUTS}"
        )
    return {"B": B, "S": S, "H": H, "D": D, "layout": layout}


def _layout_shows(args: dict, cos: str) -> bool:
    """Whether a [B, H, S, D/2] cos/sin argument's strides tell its layout apart: with one
    head or one token both layouts are the same memory."""
    _, H, S, _ = args[cos]["shape"]
    return H > 1 and S > 1


def rope_shape_of_call(args: dict, source: str):
    _require_dtypes(args, ("x", "cos", "sin"))
    return shapes.shape_from_fields("split_rope", _rope_fields(args, "x", "cos", "sin"), source)


def ada_shape_of_call(args: dict, source: str):
    table, ts = args["scale_shift_table"], args["timestep"]
    _require_dtypes(args, ("scale_shift_table",), ("bfloat16", "float32"))
    _require_dtypes(args, ("timestep",))
    if len(table["shape"]) != 2 or table["shape"][0] != 9 or len(ts["shape"]) != 3:
        raise ValueError(
            f"needs scale_shift_table [9, D] and timestep [B, S, 9*D], got "
            f"{table['shape']} and {ts['shape']}"
        )
    D = table["shape"][1]
    B, S, nine_d = ts["shape"]
    if nine_d != 9 * D:
        raise ValueError(f"timestep.shape[2] = {nine_d} is not 9*D = {9 * D}")
    table_dtype = {"bfloat16": "bf16", "float32": "fp32"}[table["dtype"]]
    fields = {"B": B, "S": S, "D": D, "table_dtype": table_dtype}
    return shapes.shape_from_fields("ada_values9", fields, source)


def pair_shape_of_call(kernel: str, args: dict, source: str):
    """The pair shape of a split_rope_pair or qknorm_rope_pair call: q's and k's split RoPE
    operands, one layout for both, and ``shared`` where k_cos and k_sin were the very
    tensors q_cos and q_sin (the recorder saw them by identity); for the fused prologue,
    the weights' dtype."""
    _require_dtypes(args, ("q", "k", "q_cos", "q_sin", "k_cos", "k_sin"))
    q = _rope_fields(args, "q", "q_cos", "q_sin")
    k = _rope_fields(args, "k", "k_cos", "k_sin")
    if (q["B"], q["H"], q["D"]) != (k["B"], k["H"], k["D"]):
        raise ValueError(
            f"q {args['q']['shape']} with q_cos {args['q_cos']['shape']} and k "
            f"{args['k']['shape']} with k_cos {args['k_cos']['shape']} differ in B, H or D"
        )
    if q["layout"] != k["layout"]:
        # A side with one token (a single query) or one head has cos/sin that are the same
        # memory in either layout, which record.cos_sin_layout calls token-major: the other
        # side's strides say which layout the call passes.
        if not _layout_shows(args, "q_cos"):
            q["layout"] = k["layout"]
        elif not _layout_shows(args, "k_cos"):
            k["layout"] = q["layout"]
    if q["layout"] != k["layout"]:
        raise ValueError(
            f"q's cos/sin are {q['layout']} and k's {k['layout']}; a suite shape has one layout"
        )
    shared = args["k_cos"].get("same_as") == "q_cos" and args["k_sin"].get("same_as") == "q_sin"
    fields = {**q, "Sq": q["S"], "Sk": k["S"], "shared": shared}
    if kernel == "qknorm_rope_pair":
        _require_dtypes(args, ("q_weight", "k_weight"), ("bfloat16", "float32"))
        hidden = q["H"] * q["D"]
        for name in ("q_weight", "k_weight"):
            if args[name]["shape"] != [hidden]:
                raise ValueError(f"{name} is {args[name]['shape']}; needs [H*D] = [{hidden}]")
        if args["q_weight"]["dtype"] != args["k_weight"]["dtype"]:
            raise ValueError(
                f"q_weight is {args['q_weight']['dtype']} and k_weight "
                f"{args['k_weight']['dtype']}; a suite shape has one weight dtype"
            )
        fields["weight_dtype"] = {"bfloat16": "bf16", "float32": "fp32"}[args["q_weight"]["dtype"]]
    return shapes.shape_from_fields(kernel, fields, source)


@dataclass(frozen=True)
class Tolerance:
    """How far an output may be from what it is gated against, element by element:
    ``|out - want| <= atol + rtol * |want|`` (``torch.isclose``; NaN is never close).
    ``EXACT`` (both 0) is bit-exactness. *why* says where the difference comes from."""

    atol: float = 0.0
    rtol: float = 0.0
    why: str = ""

    @property
    def exact(self) -> bool:
        return self.atol == 0 and self.rtol == 0


EXACT = Tolerance()

# torch.compile of the unfused prologue against the eager one: inductor's rms_norm sums
# the squares in its own order (and the eager one on CUDA in another), so a normalized
# value y can round to the neighbouring bf16 value. Split RoPE multiplies y by cos or sin
# (|cos|, |sin| <= 1) and adds two such products: an output moves by up to one bf16 ulp
# of y, and rounds once more. The normalized values are O(1) (RMS 1 times the weight), so
# the bound is absolute, one ulp at |y| < 16 (2**-4), with bf16's relative rounding on
# top; a relative bound alone fails where the two products cancel. docs/measurement.md
# ("The correctness gate") has what it was measured against.
UNFUSED_COMPILED = Tolerance(
    atol=2**-4,
    rtol=2**-7,
    why="rms_norm's summation order under torch.compile: a normalized value one bf16 ulp "
    "away moves a RoPE output by up to one ulp of it (2**-4 at |y| < 16)",
)


@dataclass(frozen=True)
class Gate:
    """What a variant's output is checked against before it is timed, and how closely."""

    against: Callable[..., Any]  # called with the case's arguments
    tolerance: Tolerance = EXACT

    def accepts(self, out: Any, want: Any) -> bool:
        return outputs_close(out, want, self.tolerance)


def _compiled_reference(spec: KernelSpec) -> Callable:
    return _compiled(spec.reference)


def _eager_reference(spec: KernelSpec) -> Callable:
    return spec.reference


# The peers every kernel from before per-kernel peers had: its reference, and
# torch.compile of it.
DEFAULT_PEERS: dict[str, Callable[[KernelSpec], Callable]] = {
    "eager": _eager_reference,
    "compiled": _compiled_reference,
}


@dataclass(frozen=True)
class KernelSpec:
    """Everything the harness knows of one kernel: with its lines in shapes.json and
    variants.py, adding this is adding the kernel to the suite, the gate, the recorder and
    the dashboard."""

    name: str  # "split_rope" / "ada_values9" / ...
    make_inputs: Callable[..., tuple]  # (shape, device, seed=0, exact=False) -> arguments
    bytes_moved: Callable[[Any], int]  # the minimum traffic of one call at a shape
    reference: Callable[..., Any]  # the eager reference the device algorithms match exactly
    triton_module: str  # module with ACCEPTED_VARIANTS, CALLS and the public function
    public_fn: str
    # The public function's tensor arguments, in call order: the names the recorder gives
    # them (its first line is ``_checks.record_call(name, *these)``).
    record_args: tuple[str, ...] = ()
    # A recorded signature's args (name -> shape, stride, dtype, same_as) -> the suite
    # shape that times it; ValueError saying why none can (ltx2k.workload.record).
    shape_of_call: Callable[[dict, str], Any] | None = None
    # The arguments (by position) that are a block's nn.Parameter in LTX-2, where the
    # model calls the kernel with its own weights: AdaLN's scale_shift_table. The call
    # context "model" (ltx2k/workload/contexts.py) passes them so.
    weights: tuple[int, ...] = ()
    # The peers (variants that are not the kernel's device algorithms): name -> a function
    # of this spec that builds the callable; VariantUnavailable where it cannot be built.
    peers: Mapping[str, Callable[[KernelSpec], Callable]] = field(
        default_factory=lambda: dict(DEFAULT_PEERS)
    )
    # What a variant is gated against, where not the reference bit for bit.
    gates: Mapping[str, Gate] = field(default_factory=dict)

    @property
    def asv_class(self) -> str:
        """The benchmark class in benchmarks/bench_kernels.py (variants.ASV_CLASS)."""
        return variants.ASV_CLASS[self.name]

    @property
    def variants(self) -> tuple[str, ...]:
        return variants.TIMED_VARIANTS[self.name]

    @property
    def gpu_shapes(self) -> tuple:
        return shapes.shapes_of(self.name, True)

    @property
    def cpu_shapes(self) -> tuple:
        return shapes.shapes_of(self.name, False)

    def gate(self, variant: str) -> Gate:
        """What *variant*'s output must match before it is timed."""
        return self.gates.get(variant) or Gate(self.reference)


def _two_launches(spec: KernelSpec) -> Callable:
    """Split RoPE of q, then of k: two calls of the single-tensor public function (its
    default variant and launch path), what a caller without the pair function runs."""
    rope = _public_function(KERNELS["split_rope"])

    def two_launches(q, k, q_cos, q_sin, k_cos, k_sin):
        return rope(q, q_cos, q_sin), rope(k, k_cos, k_sin)

    return two_launches


def _unfused_eager(spec: KernelSpec) -> Callable:
    return reference.unfused_prologue


def _unfused_compiled(spec: KernelSpec) -> Callable:
    return _compiled(reference.unfused_prologue)


def _unfused_ltx2k(spec: KernelSpec) -> Callable:
    """``torch.nn.functional.rms_norm`` of q and of k, then ltx2k's pair function (its
    default variant): the unfused prologue with ltx2k's RoPE."""
    pair = _public_function(KERNELS["split_rope_pair"])

    def unfused_ltx2k(q, k, q_weight, k_weight, q_cos, q_sin, k_cos, k_sin, eps):
        hidden = (q.shape[-1],)
        qn = torch.nn.functional.rms_norm(q, hidden, q_weight, eps)
        kn = torch.nn.functional.rms_norm(k, hidden, k_weight, eps)
        return pair(qn, kn, q_cos, q_sin, k_cos, k_sin)

    return unfused_ltx2k


KERNELS: dict[str, KernelSpec] = {
    spec.name: spec
    for spec in (
        KernelSpec(
            "split_rope",
            rope_inputs,
            rope_bytes,
            reference.split_rotary_reference,
            "ltx2k.kernels.rope",
            "apply_ltx2_split_rotary_emb",
            record_args=("x", "cos", "sin"),
            shape_of_call=rope_shape_of_call,
        ),
        KernelSpec(
            "ada_values9",
            ada_inputs,
            ada_bytes,
            reference.ada_values9_reference,
            "ltx2k.kernels.adaln",
            "ltx2_ada_values9",
            record_args=("scale_shift_table", "timestep"),
            shape_of_call=ada_shape_of_call,
            weights=(0,),
        ),
        KernelSpec(
            "split_rope_pair",
            pair_inputs,
            pair_bytes,
            reference.split_rope_pair_reference,
            "ltx2k.kernels.rope_pair",
            "apply_ltx2_split_rotary_emb_pair",
            record_args=("q", "k", "q_cos", "q_sin", "k_cos", "k_sin"),
            shape_of_call=functools.partial(pair_shape_of_call, "split_rope_pair"),
            peers={**DEFAULT_PEERS, "two_launches": _two_launches},
        ),
        KernelSpec(
            "qknorm_rope_pair",
            qknorm_pair_inputs,
            qknorm_pair_bytes,
            reference.qknorm_split_rope_pair_reference,
            "ltx2k.kernels.qknorm_rope",
            "ltx2_qknorm_split_rope_pair",
            record_args=("q", "k", "q_weight", "k_weight", "q_cos", "q_sin", "k_cos", "k_sin"),
            shape_of_call=functools.partial(pair_shape_of_call, "qknorm_rope_pair"),
            weights=(2, 3),  # the attention's q_norm and k_norm weights
            peers={
                "eager": _eager_reference,
                "unfused_eager": _unfused_eager,
                "unfused_compiled": _unfused_compiled,
                "unfused_ltx2k": _unfused_ltx2k,
            },
            # The unfused peers compute torch.nn.functional.rms_norm's own summation
            # order: each is gated against the unfused prologue, not the fused reference.
            # F.rms_norm then ltx2k's pair function is that prologue bit for bit (the
            # same rms_norm call, and the pair function is exact); torch.compile of it is
            # within UNFUSED_COMPILED.
            gates={
                "unfused_eager": Gate(reference.unfused_prologue),
                "unfused_ltx2k": Gate(reference.unfused_prologue),
                "unfused_compiled": Gate(reference.unfused_prologue, UNFUSED_COMPILED),
            },
        ),
    )
}


def input_sets(kernel: str, shape, device, count: int, seed: int = 0) -> list[tuple]:
    """*count* independent argument sets of *kernel* at *shape* (seeds seed, seed + 1, ...),
    for a cold-L2 rotation.

    Each set is drawn and allocated on its own: that is how the stored history was
    measured. Drawing small sets many at once, as slices of one allocation, was cheaper but
    moved cold device time at decode shapes (docs/measurement.md, "Suite cost").
    """
    if count < 1:
        raise ValueError(f"count must be >= 1, got {count}")
    make = KERNELS[kernel].make_inputs
    return [make(shape, device, seed=seed + i) for i in range(count)]


class VariantUnavailable(NotImplementedError):
    """This variant does not exist at this version/device; asv treats it as a skip."""


@functools.cache
def _compiled(fn: Callable) -> Callable:
    """torch.compile of a reference, as the suite's compiled peers run it."""
    import torch._inductor.config as inductor_config

    # Round bf16 intermediates as eager does; without this inductor keeps the
    # cos product in fp32 and the peer would not be bit-identical (and so would
    # not pass the correctness gate).
    if hasattr(inductor_config, "emulate_precision_casts"):
        inductor_config.emulate_precision_casts = True
    # Inductor times two configs of each 1-D pointwise kernel at its first run
    # and keeps the faster; on the H200 that choice differed between benchmark
    # processes (RoPE B1_S1024: 14.6 vs 11.8 us in two runs of one commit), so
    # the peer's history was bimodal. One heuristic config: a stable peer.
    if hasattr(inductor_config, "triton") and hasattr(inductor_config.triton, "autotune_pointwise"):
        inductor_config.triton.autotune_pointwise = False
    return torch.compile(fn, fullgraph=True, dynamic=False)


# The peers of the kernels from before peers were per kernel (KernelSpec.peers).
PEERS = tuple(DEFAULT_PEERS)


def is_peer(kernel: str, variant: str) -> bool:
    """Whether *variant* is one of *kernel*'s peers rather than a device algorithm."""
    return variant in KERNELS[kernel].peers


def _public_function(spec: KernelSpec) -> Callable:
    """The kernel's public function; VariantUnavailable at a version without its module."""
    import importlib

    try:
        mod = importlib.import_module(spec.triton_module)
    except ModuleNotFoundError as e:
        if e.name is None or not spec.triton_module.startswith(e.name):
            raise  # the module exists and fails to import: an error, not a skip
        raise VariantUnavailable(f"{spec.name}: no {spec.triton_module} at this version") from e
    return getattr(mod, spec.public_fn)


def variant_fn(kernel: str, variant: str, launch: str = "auto") -> Callable:
    """The callable for one variant: Triton launch, eager reference, or torch.compile of it.

    *launch* is the Triton variants' host path (``launch=`` of the public
    functions); a peer has none, so it takes ``"auto"`` only.
    """
    spec = KERNELS[kernel]
    if variant in spec.peers:
        if launch != "auto":
            raise ValueError(f"variant {variant!r} has no launch path; got launch={launch!r}")
        return spec.peers[variant](spec)
    import importlib
    import inspect

    _public_function(spec)  # VariantUnavailable where the kernel's module is not there yet
    mod = importlib.import_module(spec.triton_module)
    if variant not in getattr(mod, "ACCEPTED_VARIANTS", {}):
        raise VariantUnavailable(f"{kernel} has no variant {variant!r} at this version")
    fn = getattr(mod, spec.public_fn)
    if launch == "auto":
        return functools.partial(fn, variant=variant)
    if "launch" not in inspect.signature(fn).parameters:
        raise VariantUnavailable(f"{kernel} has no launch= parameter at this version")
    if (variant, launch) not in mod.CALLS:
        raise VariantUnavailable(f"{kernel} variant {variant!r} has no launch path {launch!r}")
    return functools.partial(fn, variant=variant, launch=launch)


def shapes_for(kernel: str, on_gpu: bool) -> tuple:
    spec = KERNELS[kernel]
    return spec.gpu_shapes if on_gpu else spec.cpu_shapes


def find_shape(kernel: str, label: str):
    for s in KERNELS[kernel].gpu_shapes + KERNELS[kernel].cpu_shapes:
        if s.label == label:
            return s
    raise ValueError(f"unknown {kernel} shape label {label!r}")


def outputs_equal(out: Any, ref: Any) -> bool:
    """Bit-exact comparison (NaN never equals anything, so unwritten poison fails)."""
    if isinstance(out, Sequence) and not isinstance(out, torch.Tensor):
        return len(out) == len(ref) and all(
            outputs_equal(o, r) for o, r in zip(out, ref, strict=True)
        )
    return out.shape == ref.shape and out.dtype == ref.dtype and torch.equal(out, ref)


def outputs_close(out: Any, want: Any, tolerance: Tolerance = EXACT) -> bool:
    """:func:`outputs_equal` for ``EXACT``; else every element within *tolerance*, each of
    a tuple of outputs, shapes and dtypes equal (NaN is never close)."""
    if tolerance.exact:
        return outputs_equal(out, want)
    if isinstance(out, Sequence) and not isinstance(out, torch.Tensor):
        return len(out) == len(want) and all(
            outputs_close(o, w, tolerance) for o, w in zip(out, want, strict=True)
        )
    if out.shape != want.shape or out.dtype != want.dtype:
        return False
    close = torch.isclose(out.float(), want.float(), rtol=tolerance.rtol, atol=tolerance.atol)
    return bool(close.all())
