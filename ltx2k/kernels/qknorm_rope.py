"""The attention prologue in one launch: RMSNorm of q and of k, then split RoPE of each.

``out = split_rope(rms_norm(x, weight, eps), cos, sin)`` for ``x`` in ``(q, k)``, each
RMSNorm over the whole hidden size ``H*D`` (LTX-2's ``q_norm``/``k_norm``), bit-identical
to :func:`ltx2k.workload.reference.qknorm_split_rope_pair_reference`: the sum of squares
in that reference's stated order (a fixed pairwise tree, not ``tl.sum``'s), the division
and square root correctly rounded, the weight applied in fp32, one rounding to bf16, then
split RoPE's rounding. ``torch.nn.functional.rms_norm`` sums in another order;
docs/kernels/attention_prologue.md says how far apart they are.

A program holds whole tokens (every head: the norm needs the whole row). The device
algorithms (``variant=``):

- ``"row"`` (sglang's current design, from NVlabs Sana's sol-engine): one program per token
  row, q's row and k's row in the same program, each reading its own cos/sin and weight;
  ``num_warps`` 4 at a hidden size of 4096 and over, else 8;
- ``"tiled"``: several tokens per program where one token is less than a tile (the audio
  stream's 2048), the warps sized to the tile; where q and k take the very same cos/sin
  tensors a program normalizes and rotates the same tokens of both with one read of the
  angles, otherwise q's programs come first, then k's;
- ``"tiled_pdl"`` (the default): ``"tiled"`` with programmatic dependent launch where the
  GPU has it.

The host paths (``launch=``) are split RoPE's. ``eps`` is compiled in (one binary per
value; a model has one or two), and each value has its own native memos.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

from ltx2k.kernels import _checks, _launch, _native, _routing, _tiles, rope, rope_pair
from ltx2k.workload import record as _record
from ltx2k.workload import reference, variants

SEPARATE, SHARED, ROW = 0, 1, 2
# Elements of one half-operand per program (split RoPE's tile) and per thread. Per thread
# 8, not split RoPE's 4: a program also holds the token's weights and its sum's tree, and a
# one-token program at hidden 2048 (1024 elements a half) ran faster at 4 warps than at 8
# (docs/kernels/attention_prologue.md, "Warps at hidden 2048"); a full tile keeps 8.
TILE_ELEMENTS = 2048
ELEMENTS_PER_THREAD = 8
MAX_WARPS = 8
MAX_BLOCK_TOKENS = 16
MIN_PROGRAMS_PER_SM = 8
# One program holds a token's whole hidden size (H * D/2 elements of each half).
MAX_HIDDEN = 16384


@triton.jit
def _load_weight(w_ptr, heads, cols, H, HALF):
    at = (heads * (2 * HALF))[:, None] + cols[None, :]
    mask = (heads[:, None] < H) & (cols[None, :] < HALF)
    w1 = tl.load(w_ptr + at, mask=mask, other=0.0).to(tl.float32)
    w2 = tl.load(w_ptr + at + HALF, mask=mask, other=0.0).to(tl.float32)
    return w1[None, :, :], w2[None, :, :]


@triton.jit
def _norm_rope_tile(
    x_ptr, w_ptr, cos_ptr, sin_ptr, out_ptr, tile, n_tokens, S, H, HALF,
    scb, sch, scs, ssb, ssh, sss,
    EPS: tl.constexpr, BLOCK_TOKENS: tl.constexpr, BLOCK_HEADS: tl.constexpr,
    BLOCK_HALF: tl.constexpr, LOG2N: tl.constexpr, ANGLES_FIRST: tl.constexpr,
):  # fmt: skip
    row, inner, mask, b, s, heads, cols = _tiles.tile_offsets(
        tile * BLOCK_TOKENS, n_tokens, S, H, HALF, BLOCK_TOKENS, BLOCK_HEADS, BLOCK_HALF, 0
    )
    x1 = tl.load(x_ptr + row + inner, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x_ptr + row + (inner + HALF), mask=mask, other=0.0).to(tl.float32)
    if ANGLES_FIRST:
        # before the tree, as in the shared-angle programs: one memory latency a program
        c, sn = _tiles.load_angles(
            cos_ptr, sin_ptr, b, s, heads, cols, scb, sch, scs, ssb, ssh, sss, mask
        )
    w1, w2 = _load_weight(w_ptr, heads, cols, H, HALF)
    y1, y2 = _tiles.rms_normalize(
        x1, x2, w1, w2, H * 2 * HALF, EPS, BLOCK_TOKENS, BLOCK_HEADS * BLOCK_HALF, LOG2N
    )
    if not ANGLES_FIRST:
        c, sn = _tiles.load_angles(
            cos_ptr, sin_ptr, b, s, heads, cols, scb, sch, scs, ssb, ssh, sss, mask
        )
    _tiles.rotate_store(out_ptr + row, inner, y1, y2, c, sn, HALF, mask)


@triton.jit
def _qknorm_rope_pair_kernel(
    # pointers
    q_ptr, k_ptr, q_w_ptr, k_w_ptr, q_cos_ptr, q_sin_ptr, k_cos_ptr, k_sin_ptr,
    q_out_ptr, k_out_ptr,
    # sizes: sequence lengths, heads, half head dim, tokens (B*S) of each, q's programs
    Sq, Sk, H, HALF, q_tokens, k_tokens, q_programs,
    # strides of cos/sin (b, h, s); q and k are contiguous [B*S, H*D], the weights [H*D]
    qcb, qch, qcs, qsb, qsh, qss, kcb, kch, kcs, ksb, ksh, kss,
    # constexpr: the tile's shape (whole tokens: BLOCK_HEADS >= H) and the tree's depth
    EPS: tl.constexpr, BLOCK_HEADS: tl.constexpr, BLOCK_HALF: tl.constexpr,
    BLOCK_TOKENS: tl.constexpr, LOG2N: tl.constexpr, MODE: tl.constexpr,
    PDL: tl.constexpr = False,
):  # fmt: skip
    if PDL:
        # As split RoPE's tiled_pdl: every load and store comes after the wait.
        gdc_launch_dependents()
        gdc_wait()
    pid = tl.program_id(0)
    N: tl.constexpr = BLOCK_HEADS * BLOCK_HALF
    if MODE == 1:
        # Shared cos/sin: the same tokens of q and k, one read of the angles. Every load is
        # issued before q's tree: a load after it (the angles were, once) is a second
        # memory latency in each program's path.
        row, inner, mask, b, s, heads, cols = _tiles.tile_offsets(
            pid * BLOCK_TOKENS, q_tokens, Sq, H, HALF, BLOCK_TOKENS, BLOCK_HEADS, BLOCK_HALF, 0
        )
        hidden = H * 2 * HALF
        q1 = tl.load(q_ptr + row + inner, mask=mask, other=0.0).to(tl.float32)
        q2 = tl.load(q_ptr + row + (inner + HALF), mask=mask, other=0.0).to(tl.float32)
        k1 = tl.load(k_ptr + row + inner, mask=mask, other=0.0).to(tl.float32)
        k2 = tl.load(k_ptr + row + (inner + HALF), mask=mask, other=0.0).to(tl.float32)
        c, sn = _tiles.load_angles(
            q_cos_ptr, q_sin_ptr, b, s, heads, cols, qcb, qch, qcs, qsb, qsh, qss, mask
        )
        w1, w2 = _load_weight(q_w_ptr, heads, cols, H, HALF)
        y1, y2 = _tiles.rms_normalize(q1, q2, w1, w2, hidden, EPS, BLOCK_TOKENS, N, LOG2N)
        _tiles.rotate_store(q_out_ptr + row, inner, y1, y2, c, sn, HALF, mask)
        w1, w2 = _load_weight(k_w_ptr, heads, cols, H, HALF)
        y1, y2 = _tiles.rms_normalize(k1, k2, w1, w2, hidden, EPS, BLOCK_TOKENS, N, LOG2N)
        _tiles.rotate_store(k_out_ptr + row, inner, y1, y2, c, sn, HALF, mask)
    elif MODE == 2:
        # sglang's current design: row pid of q and of k (the shorter one masked off), the
        # angles loaded after the tree as this peer was first written and measured.
        _norm_rope_tile(q_ptr, q_w_ptr, q_cos_ptr, q_sin_ptr, q_out_ptr, pid, q_tokens, Sq, H,
                        HALF, qcb, qch, qcs, qsb, qsh, qss,
                        EPS, 1, BLOCK_HEADS, BLOCK_HALF, LOG2N, False)  # fmt: skip
        _norm_rope_tile(k_ptr, k_w_ptr, k_cos_ptr, k_sin_ptr, k_out_ptr, pid, k_tokens, Sk, H,
                        HALF, kcb, kch, kcs, ksb, ksh, kss,
                        EPS, 1, BLOCK_HEADS, BLOCK_HALF, LOG2N, False)  # fmt: skip
    else:
        if pid < q_programs:
            _norm_rope_tile(q_ptr, q_w_ptr, q_cos_ptr, q_sin_ptr, q_out_ptr, pid, q_tokens, Sq,
                            H, HALF, qcb, qch, qcs, qsb, qsh, qss,
                            EPS, BLOCK_TOKENS, BLOCK_HEADS, BLOCK_HALF, LOG2N, True)  # fmt: skip
        else:
            _norm_rope_tile(k_ptr, k_w_ptr, k_cos_ptr, k_sin_ptr, k_out_ptr, pid - q_programs,
                            k_tokens, Sk, H, HALF, kcb, kch, kcs, ksb, ksh, kss,
                            EPS, BLOCK_TOKENS, BLOCK_HEADS, BLOCK_HALF, LOG2N, True)  # fmt: skip


class NormConfig(NamedTuple):
    mode: int
    block_tokens: int
    q_programs: int  # grid is q_programs + k_programs
    k_programs: int
    num_warps: int
    pdl: bool = False


def _row(H: int, D: int, q_tokens: int, k_tokens: int, num_sms: int, shared: bool):
    return NormConfig(ROW, 1, max(q_tokens, k_tokens), 0, rope_pair.upstream_row_warps(H * D))


def _tiled(H: int, D: int, q_tokens: int, k_tokens: int, num_sms: int, shared: bool):
    # Whole tokens per program; more than one where a token is less than a tile (so each
    # program keeps ~16 KiB of loads in flight), while the grid keeps MIN_PROGRAMS_PER_SM
    # programs per SM.
    per_token = triton.next_power_of_2(H) * triton.next_power_of_2(max(1, D // 2))
    tokens = q_tokens if shared else q_tokens + k_tokens
    min_programs = MIN_PROGRAMS_PER_SM * num_sms
    bt = 1
    while (
        2 * bt <= MAX_BLOCK_TOKENS
        and 2 * bt * per_token <= TILE_ELEMENTS
        and triton.cdiv(tokens, 2 * bt) >= min_programs
    ):
        bt *= 2
    warps = min(MAX_WARPS, max(1, bt * per_token // (32 * ELEMENTS_PER_THREAD)))
    warps = triton.next_power_of_2(warps)
    if shared:
        return NormConfig(SHARED, bt, triton.cdiv(q_tokens, bt), 0, warps)
    return NormConfig(SEPARATE, bt, triton.cdiv(q_tokens, bt), triton.cdiv(k_tokens, bt), warps)


def _tiled_pdl(H: int, D: int, q_tokens: int, k_tokens: int, num_sms: int, shared: bool):
    return _tiled(H, D, q_tokens, k_tokens, num_sms, shared)._replace(pdl=True)


# The device algorithms (variant=). Append only: a name is the key of its history.
ALGORITHMS = {"row": _row, "tiled": _tiled, "tiled_pdl": _tiled_pdl}
CALLS = _launch.call_table(ALGORITHMS, ALGORITHMS, {})
ACCEPTED_VARIANTS = tuple(ALGORITHMS)
# Native memos per (algorithm, shared cos/sin, eps): eps is compiled in, and a memo's key
# is the inputs' layout only. A shared call's inputs are (q, k, q_weight, k_weight, cos, sin).
_SITES: dict[tuple[str, bool, float], _native.Site] = {}
MAX_EPS_VALUES = 8  # eps values with native memos; others take the lean path


def _site(algo: str, shared: bool, eps: float) -> _native.Site | None:
    """The native memo of (algorithm, shared cos/sin, eps); both sharings' memos of an eps
    are made together, and listed in _NATIVE for the public function's hot path."""
    site = _SITES.get((algo, shared, eps))
    if site is None:
        if len(_SITES) >= MAX_EPS_VALUES * 2 * len(ALGORITHMS):
            return None
        with _launch.LOCK:
            pair = tuple(
                _SITES.setdefault(
                    (algo, sh, eps),
                    _native.Site(
                        f"qknorm_rope_pair/{algo}{'/shared' if sh else ''}/eps={eps!r}",
                        n_inputs=6 if sh else 8,
                        unbind=False,
                        n_outputs=2,
                    ),
                )
                for sh in (False, True)
            )
            for call, (a, path) in CALLS.items():
                if a == algo and path == "native":
                    _NATIVE[(*call, eps)] = pair
        site = pair[shared]
    return site


def _check_weight(name: str, w: object, hidden: int) -> None:
    w = _checks.tensor(name, w)
    _checks.rank(name, w, 1, f"[H*D] = [{hidden}]")
    if w.shape[0] != hidden:
        raise ValueError(
            f"{name} must have H*D = {hidden} elements (q's hidden size), got shape "
            f"{tuple(w.shape)}"
        )
    _checks.dtype(name, w, (torch.bfloat16, torch.float32))
    _checks.contiguous(name, w)


def _plain(*tensors) -> bool:
    """Whether a call may try its native replay (:func:`ltx2k.kernels._native.plain3`'s
    checks, for every input): a loop, not a generator, on the host's hot path."""
    for t in tensors:
        if type(t) not in _PLAIN_TYPES:
            return False
    return not tensors[0].is_meta and _native._functorch_level() is None


_PLAIN_TYPES = _native.PLAIN_TYPES


def _validate(q, k, q_weight, k_weight, q_cos, q_sin, k_cos, k_sin, eps):
    """(B, Sq, Sk, H, D), or a ValueError/TypeError naming the argument."""
    B, Sq, Sk, H, D = rope_pair._validate(q, k, q_cos, q_sin, k_cos, k_sin)
    _check_weight("q_weight", q_weight, H * D)
    _check_weight("k_weight", k_weight, H * D)
    _checks.in_range("H*D", H * D, 2, MAX_HIDDEN, "hidden size (one program holds a token)")
    check_eps(eps)
    _checks.same_device(q=q, q_weight=q_weight, k_weight=k_weight)
    return B, Sq, Sk, H, D


def check_eps(eps) -> float:
    """eps as a float, or a TypeError/ValueError naming it: a number (not a bool, string or
    tensor), finite and positive."""
    if isinstance(eps, bool) or not isinstance(eps, (int, float)):
        raise TypeError(f"eps must be a float, got {type(eps).__name__}")
    try:
        value = float(eps)
    except OverflowError:  # an int past float's range
        raise ValueError(f"eps must be a finite positive float, got an int of "
                         f"{eps.bit_length()} bits") from None  # fmt: skip
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"eps must be a finite positive float, got {eps!r}")
    if not _FP32_TINY <= value <= _FP32_MAX:
        # The norm adds eps in float32: outside float32's normal range it becomes 0, inf or
        # a subnormal, which a GPU may flush to zero where the eager reference does not.
        raise ValueError(
            f"eps must lie in float32's normal range [{_FP32_TINY:.6g}, {_FP32_MAX:.6g}] "
            f"(the norm adds it in float32), got {eps!r}"
        )
    return value


_FP32_TINY = torch.finfo(torch.float32).tiny
_FP32_MAX = torch.finfo(torch.float32).max


def ltx2_qknorm_split_rope_pair(
    q: torch.Tensor,
    k: torch.Tensor,
    q_weight: torch.Tensor,
    k_weight: torch.Tensor,
    q_cos: torch.Tensor,
    q_sin: torch.Tensor,
    k_cos: torch.Tensor,
    k_sin: torch.Tensor,
    eps: float = 1e-6,
    *,
    variant: str = variants.DEFAULT_VARIANT.get("qknorm_rope_pair", "tiled_pdl"),
    launch: str = "auto",
) -> tuple[torch.Tensor, torch.Tensor]:
    """RMSNorm of q and of k over the hidden size, then split RoPE of each, in one launch.
    Bit-identical to :func:`ltx2k.workload.reference.qknorm_split_rope_pair_reference`.

    Args:
        q, k, q_cos, q_sin, k_cos, k_sin: as :func:`ltx2k.apply_ltx2_split_rotary_emb_pair`
            (``Sk`` may differ from ``Sq``; the very same cos/sin tensors for q and k are
            read once).
        q_weight, k_weight: the RMSNorm weights, ``[H*D]`` bf16 or fp32, contiguous (the
            attention's ``q_norm.weight`` / ``k_norm.weight``; an ``nn.Parameter`` is fine).
        eps: RMSNorm's epsilon (LTX-2: 1e-6), a positive float in float32's normal range.
        variant: ``"tiled_pdl"`` (default), ``"tiled"`` or ``"row"`` (sglang's current
            design: one program per token row of q and k).
        launch: ``"auto"`` (default: ``"native"``), ``"native"``, ``"lean"`` or ``"triton"``.

    Returns:
        ``(q_out, k_out)``, new bf16 tensors shaped as q and k.
    """
    _checks.record_call("qknorm_rope_pair", q, k, q_weight, k_weight, q_cos, q_sin, k_cos, k_sin)
    try:
        sites = _NATIVE.get((variant, launch, eps)) if type(eps) is float else None
    except TypeError:  # an unhashable variant or launch: bad_call names it below
        sites = None
    if sites is not None and not torch.compiler.is_compiling():
        # The hot path of a decode step: one dict lookup, inline checks, one C call. (An int
        # eps equal to a float one finds its memos: the type check sends it the long way.)
        P = _PLAIN_TYPES
        if q_cos is k_cos and q_sin is k_sin:
            if (
                type(q) in P
                and type(k) in P
                and type(q_weight) in P
                and type(k_weight) in P
                and type(q_cos) in P
                and type(q_sin) in P
                and not q.is_meta
                and _native._functorch_level() is None
            ):
                out = sites[1].call(q, k, q_weight, k_weight, q_cos, q_sin)
                if out is not None:
                    return out
        elif _plain(q, k, q_weight, k_weight, q_cos, q_sin, k_cos, k_sin):
            out = sites[0].call(q, k, q_weight, k_weight, q_cos, q_sin, k_cos, k_sin)
            if out is not None:
                return out
    try:  # inline: this is the hot path (a try costs nothing until it raises)
        call = CALLS.get((variant, launch))
    except TypeError:  # an unhashable variant or launch: named below
        call = None
    if call is None:
        raise _launch.bad_call(variant, launch, CALLS)
    algo, path = call
    if path == "native" and not torch.compiler.is_compiling():
        out = _native_call(q, k, q_weight, k_weight, q_cos, q_sin, k_cos, k_sin, eps, algo)
        if out is not None:
            return out
    args = (q, k, q_weight, k_weight, q_cos, q_sin, k_cos, k_sin)
    if torch.compiler.is_compiling() or _routing.routed(*args):
        return _routed(*args, eps, variant, launch)
    return _launch_python(*args, eps, algo, path)


def _native_call(q, k, q_weight, k_weight, q_cos, q_sin, k_cos, k_sin, eps, algo):
    # None: not seen with this layout yet, or not eligible (the Python path decides). A
    # float eps only: an int or bool eps keys another memo, and the Python path's
    # validation decides what it means. A rejected eps gets no memo (its error comes from
    # the Python path), or a caller's bad values would use up MAX_EPS_VALUES.
    if type(eps) is not float or not (math.isfinite(eps) and eps > 0):
        return None
    if q_cos is k_cos and q_sin is k_sin:
        inputs = (q, k, q_weight, k_weight, q_cos, q_sin)
        shared = True
    else:
        inputs = (q, k, q_weight, k_weight, q_cos, q_sin, k_cos, k_sin)
        shared = False
    if not _plain(*inputs):
        return None
    site = _site(algo, shared, eps)
    return None if site is None else site.call(*inputs)


# (variant, launch, eps) -> (separate, shared) native memos of the calls that take the
# native path, filled as each eps value is first seen (_site).
_NATIVE: dict[tuple[str, str, float], tuple[_native.Site, _native.Site]] = {}


def _call(q, k, q_weight, k_weight, q_cos, q_sin, k_cos, k_sin, eps, algo: str, path: str):
    """The registered op's implementation: the launch paths, no routing."""
    if path == "native":
        out = _native_call(q, k, q_weight, k_weight, q_cos, q_sin, k_cos, k_sin, eps, algo)
        if out is not None:
            return out
    return _launch_python(q, k, q_weight, k_weight, q_cos, q_sin, k_cos, k_sin, eps, algo, path)


def _launch_python(q, k, q_weight, k_weight, q_cos, q_sin, k_cos, k_sin, eps, algo, path):
    """Validate, allocate and launch from Python (recording the launch for the native path)."""
    B, Sq, Sk, H, D = _validate(q, k, q_weight, k_weight, q_cos, q_sin, k_cos, k_sin, eps)
    eps = float(eps)
    q_out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    k_out = torch.empty(k.shape, dtype=k.dtype, device=k.device)
    if not torch.compiler.is_compiling():
        _checks.real_data(q=q, k=k, q_weight=q_weight, k_weight=k_weight, q_cos=q_cos)
        _checks.real_data(q_sin=q_sin, k_cos=k_cos, k_sin=k_sin, q_out=q_out, k_out=k_out)
    q_tokens, k_tokens = B * Sq, B * Sk
    if q_tokens + k_tokens == 0:
        return q_out, k_out
    shared = q_cos is k_cos and q_sin is k_sin
    cfg = ALGORITHMS[algo](H, D, q_tokens, k_tokens, rope._num_sms(q.device), shared)
    pdl = cfg.pdl and rope._has_pdl(q.device)
    half = D // 2
    block_heads, block_half = triton.next_power_of_2(H), triton.next_power_of_2(half)
    grid = (cfg.q_programs + cfg.k_programs,)
    tensors = (q, k, q_weight, k_weight, q_cos, q_sin, k_cos, k_sin, q_out, k_out)
    # A side with no tokens is masked off in every program ("row" still runs its
    # index arithmetic): S = 1 there keeps that arithmetic free of a division by zero.
    scalars = (
        max(Sq, 1), max(Sk, 1), H, half, q_tokens, k_tokens, cfg.q_programs,
        *q_cos.stride()[:3], *q_sin.stride()[:3], *k_cos.stride()[:3], *k_sin.stride()[:3],
    )  # fmt: skip
    constexprs = (
        ("EPS", eps),
        ("BLOCK_HEADS", block_heads),
        ("BLOCK_HALF", block_half),
        ("BLOCK_TOKENS", cfg.block_tokens),
        ("LOG2N", (block_heads * block_half).bit_length() - 1),
        ("MODE", cfg.mode),
        ("PDL", pdl),
    )
    _launch.launch_by(
        path,
        _qknorm_rope_pair_kernel,
        grid,
        tensors,
        scalars,
        constexprs,
        cfg.num_warps,
        pdl,
        site=_site(algo, shared, eps) if path == "native" else None,
        inputs=tensors[:6] if shared else tensors[:8],
        out=(q_out, k_out),
    )
    return q_out, k_out


# --- the registered op ------------------------------------------------------------------


@torch.library.custom_op("ltx2k::qknorm_split_rope_pair", mutates_args=())
def qknorm_split_rope_pair(
    q: torch.Tensor,
    k: torch.Tensor,
    q_weight: torch.Tensor,
    k_weight: torch.Tensor,
    q_cos: torch.Tensor,
    q_sin: torch.Tensor,
    k_cos: torch.Tensor,
    k_sin: torch.Tensor,
    eps: float,
    variant: str,
    launch: str,
) -> tuple[torch.Tensor, torch.Tensor]:
    algo, path = _launch.resolve(CALLS, variant, launch)
    return _call(q, k, q_weight, k_weight, q_cos, q_sin, k_cos, k_sin, eps, algo, path)


@qknorm_split_rope_pair.register_fake
def _(q, k, q_weight, k_weight, q_cos, q_sin, k_cos, k_sin, eps, variant, launch):
    _launch.resolve(CALLS, variant, launch)
    _validate(q, k, q_weight, k_weight, q_cos, q_sin, k_cos, k_sin, eps)
    _record.note_traced("qknorm_rope_pair", q, k, q_weight, k_weight, q_cos, q_sin, k_cos, k_sin)
    return (
        torch.empty(q.shape, dtype=q.dtype, device=q.device),
        torch.empty(k.shape, dtype=k.dtype, device=k.device),
    )


def _setup(ctx, inputs, output) -> None:
    ctx.save_for_backward(*_routing.saved(*inputs[:8]))
    ctx.eps = inputs[8]


def _grad(ctx, gq, gk):
    # Each output is split_rope(rms_norm(x)). The norm is recomputed in eager ops (the
    # reference's own, so its autograd is the reference's, bit for bit), the rotation's
    # gradient is split RoPE's backward kernel and eager cos/sin terms (as split RoPE's).
    if torch.is_grad_enabled():
        return _grad_with_graph(ctx, gq, gk)
    q, k, q_weight, k_weight, q_cos, q_sin, k_cos, k_sin = ctx.saved_tensors
    nq, nk, nqw, nkw, nqc, nqs, nkc, nks = ctx.needs_input_grad[:8]
    heads = q_cos.shape[1]
    grads = []
    for g, x, w, cos, sin, nx, nw, nc, ns in (
        (gq, q, q_weight, q_cos, q_sin, nq, nqw, nqc, nqs),
        (gk, k, k_weight, k_cos, k_sin, nk, nkw, nkc, nks),
    ):
        with torch.enable_grad():
            xd = x.detach().requires_grad_(nx)
            wd = w.detach().requires_grad_(nw)
            y = reference.rms_norm_reference(xd, wd, ctx.eps, heads)
        gy, gcos, gsin = rope.split_rope_grads(g, y.detach(), cos, sin, nx or nw, nc, ns)
        gx = gw = None
        if nx or nw:
            wanted = [t for t, n in ((xd, nx), (wd, nw)) if n]
            got = iter(torch.autograd.grad(y, wanted, gy))
            gx = next(got) if nx else None
            gw = next(got) if nw else None
        grads.append((gx, gw, gcos, gsin))
    (gqx, gqw, gqc, gqs), (gkx, gkw, gkc, gks) = grads
    return gqx, gkx, gqw, gkw, gqc, gqs, gkc, gks, None, None, None


def _grad_with_graph(ctx, gq, gk):
    # backward(create_graph=True), e.g. a gradient penalty: the gradients must themselves
    # be differentiable in the inputs and in (gq, gk). The path above detaches the norm to
    # feed the rotation's kernel; here the reference's own autograd runs on the saved
    # inputs, so the first-order values are the reference's and the graph is kept.
    saved = ctx.saved_tensors
    needs = ctx.needs_input_grad[:8]
    wanted = [t for t, n in zip(saved, needs, strict=True) if n]
    outs = reference.qknorm_split_rope_pair_reference(*saved, ctx.eps)
    # Only the outputs that depend on an input needing grad (k_out need not, for one).
    pairs = [(o, g) for o, g in zip(outs, (gq, gk), strict=True) if o.requires_grad]
    got = iter(
        torch.autograd.grad(
            [o for o, _ in pairs], wanted, [g for _, g in pairs],
            create_graph=True, allow_unused=True,
        )
    )  # fmt: skip
    grads = [next(got) if n else None for n in needs]
    return (*grads, None, None, None)


def _vmap(info, in_dims, q, k, q_weight, k_weight, q_cos, q_sin, k_cos, k_sin, eps, variant, launch):  # noqa: E501  # fmt: skip
    n = info.batch_size
    qd, kd, qwd, kwd, qcd, qsd, kcd, ksd = in_dims[:8]
    op = torch.ops.ltx2k.qknorm_split_rope_pair
    if qwd is not None or kwd is not None:
        # A weight per sample cannot share a launch (the kernel reads one weight): a loop.
        def at(t, d, i):
            return t if d is None else t.movedim(d, 0)[i]

        if n == 0:
            # No samples to loop over: validate one sample's layout (meta: no launch),
            # then the empty stack (torch.stack of nothing raises).
            meta = _routing.meta_sample
            _launch.resolve(CALLS, variant, launch)
            _validate(
                meta(q, qd).contiguous(), meta(k, kd).contiguous(),
                meta(q_weight, qwd).contiguous(), meta(k_weight, kwd).contiguous(),
                meta(q_cos, qcd), meta(q_sin, qsd), meta(k_cos, kcd), meta(k_sin, ksd), eps,
            )  # fmt: skip
            return tuple(
                torch.empty((0, *_routing.sample_shape(x, d)), dtype=x.dtype, device=x.device)
                for x, d in ((q, qd), (k, kd))
            ), (0, 0)
        outs = [
            op(at(q, qd, i).contiguous(), at(k, kd, i).contiguous(),
               at(q_weight, qwd, i).contiguous(), at(k_weight, kwd, i).contiguous(),
               at(q_cos, qcd, i), at(q_sin, qsd, i), at(k_cos, kcd, i), at(k_sin, ksd, i),
               eps, variant, launch)
            for i in range(n)
        ]  # fmt: skip
        return (torch.stack([o[0] for o in outs]), torch.stack([o[1] for o in outs])), (0, 0)
    fold = _routing.fold
    qf, kf = fold(q, qd, n).contiguous(), fold(k, kd, n).contiguous()
    cos_sin = (fold(q_cos, qcd, n), fold(q_sin, qsd, n), fold(k_cos, kcd, n), fold(k_sin, ksd, n))
    if q_cos is k_cos and q_sin is k_sin and (qcd, qsd) == (kcd, ksd):
        cos_sin = (cos_sin[0], cos_sin[1], cos_sin[0], cos_sin[1])
    q_out, k_out = op(qf, kf, q_weight, k_weight, *cos_sin, eps, variant, launch)
    unfold = _routing.unfold
    return (unfold(q_out, n, q, qd), unfold(k_out, n, k, kd)), (0, 0)


qknorm_split_rope_pair.register_autograd(_grad, setup_context=_setup)
qknorm_split_rope_pair.register_vmap(_vmap)


class QKNormSplitRopePair(torch.autograd.Function):
    """``torch.ops.ltx2k.qknorm_split_rope_pair`` with functorch-ready autograd and a jvp."""

    generate_vmap_rule = True

    @staticmethod
    def forward(q, k, q_weight, k_weight, q_cos, q_sin, k_cos, k_sin, eps, variant, launch):
        return torch.ops.ltx2k.qknorm_split_rope_pair(
            q, k, q_weight, k_weight, q_cos, q_sin, k_cos, k_sin, eps, variant, launch
        )

    @staticmethod
    def setup_context(ctx, inputs, output):
        tensors = _routing.saved(*inputs[:8])
        ctx.save_for_backward(*tensors)
        ctx.save_for_forward(*tensors)
        ctx.eps = inputs[8]

    @staticmethod
    def backward(ctx, gq, gk):
        return _grad(ctx, gq, gk)

    @staticmethod
    def jvp(ctx, *tangents):
        # Not linear (the norm): the reference's forward-mode derivative, in eager ops.
        primals = ctx.saved_tensors
        tangents = [rope_pair._or_zeros(p, t) for p, t in zip(primals, tangents[:8], strict=True)]

        def prologue(*args):
            return reference.qknorm_split_rope_pair_reference(*args, ctx.eps)

        return torch.func.jvp(prologue, tuple(primals), tuple(tangents))[1]


def _routed(q, k, q_weight, k_weight, q_cos, q_sin, k_cos, k_sin, eps, variant, launch):
    """The public function's call when routing (or tracing) sends it to the op."""
    # The op's schema would turn a bool or a numeric string into a float: checked first.
    eps = check_eps(eps)
    args = (q, k, q_weight, k_weight, q_cos, q_sin, k_cos, k_sin, eps, variant, launch)
    if torch.compiler.is_compiling():
        return torch.ops.ltx2k.qknorm_split_rope_pair(*args)
    return QKNormSplitRopePair.apply(*args)
