"""Input validation shared by the kernel launchers.

Every failure is a ValueError (TypeError for non-tensors) that names the
argument and shows what it actually got, because a kernel fed the wrong
layout does not fail: it returns a silently wrong tensor.
"""

from __future__ import annotations

import torch
from torch._subclasses.fake_tensor import FakeTensor

from ltx2k.runtime import interpreter_requested
from ltx2k.workload.record import note as record_call  # noqa: F401 - the public functions' first line

# Fixed at import, like Triton's own choice of interpreter: the kernels were
# decorated in one mode, and reading os.environ per call would also break
# torch.compile(fullgraph=True) tracing.
INTERPRET = interpreter_requested()


def tensor(name: str, t: object) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    return t


def rank(name: str, t: torch.Tensor, n: int, layout: str) -> None:
    if t.dim() != n:
        raise ValueError(f"{name} must be {n}-D {layout}, got shape {tuple(t.shape)}")


def dtype(name: str, t: torch.Tensor, allowed: tuple[torch.dtype, ...]) -> None:
    if t.dtype not in allowed:
        names = " or ".join(str(d).removeprefix("torch.") for d in allowed)
        raise ValueError(f"{name} must be {names}, got {t.dtype} (shape {tuple(t.shape)})")


def contiguous(name: str, t: torch.Tensor) -> None:
    if not t.is_contiguous():
        raise ValueError(
            f"{name} must be contiguous, got shape {tuple(t.shape)} strides {t.stride()}"
        )


def unit_last_stride(name: str, t: torch.Tensor) -> None:
    # The kernels vectorise along the last dim; any other stride would need a gather.
    if t.shape[-1] > 1 and t.stride(-1) != 1:
        raise ValueError(
            f"{name} must have last-dim stride 1, got shape {tuple(t.shape)} strides {t.stride()}"
        )


def same_device(**tensors: torch.Tensor) -> torch.device:
    devices = {name: t.device for name, t in tensors.items()}
    first = next(iter(devices.values()))
    if any(d != first for d in devices.values()):
        shown = ", ".join(f"{n} on {d}" for n, d in devices.items())
        raise ValueError(f"all inputs must be on one device, got {shown}")
    # meta: only the registered ops' fake implementations see it (nothing launches)
    if first.type not in ("cuda", "meta") and not INTERPRET:
        name = next(iter(devices))
        raise ValueError(
            f"{name} is on {first}; the Triton kernels need CUDA tensors "
            "(or TRITON_INTERPRET=1 for the CPU interpreter)"
        )
    return first


def in_range(name: str, value: int, lo: int, hi: int, what: str) -> None:
    if not lo <= value <= hi:
        raise ValueError(f"{what} {name}={value} is outside the supported range [{lo}, {hi}]")


def real_data(**tensors: torch.Tensor) -> None:
    """Refuse FakeTensors (inputs, or an output allocated under FakeTensorMode) before a
    launch: their data_ptr() is 0, and Triton's launcher passes a null pointer through
    unchecked, so the kernel would read and write address 0 and leave the CUDA context
    unusable. The public functions send FakeTensors to the registered ops' fake
    implementations (ltx2k.kernels.ops), so this is the backstop of the launch path itself.
    Refuses a ZeroTensor (``torch._efficientzerotensor``: PyTorch's zeros without memory,
    which some of its derivative formulas return) for the same reason: its data_ptr() is 0,
    yet its strides are contiguous, so every layout check passes.
    Not called while torch.compile traces."""
    for name, t in tensors.items():
        if isinstance(t, FakeTensor):
            raise TypeError(
                f"{name} is a FakeTensor (shape {tuple(t.shape)}, e.g. under FakeTensorMode); "
                "the Triton kernels read and write real memory. To trace them, call "
                "torch.ops.ltx2k.* (or the public functions), which have fake implementations"
            )
        if t._is_zerotensor():
            raise TypeError(
                f"{name} is a ZeroTensor (shape {tuple(t.shape)}, torch._efficientzerotensor): "
                "it has no memory for the Triton kernels to read; pass "
                f"torch.zeros({tuple(t.shape)}, dtype={t.dtype}) instead"
            )


def rope_operands(
    x: object, cos: object, sin: object, names: tuple[str, str, str] = ("x", "cos", "sin")
) -> tuple[int, int, int, int]:
    """Validate one split-RoPE operand triple (``x [B, S, H*D]``, ``cos``/``sin``
    ``[B, H, S, D/2]``, all bf16) and return ``(B, S, H, D)``. *names* are the caller's
    argument names, so a pair's error names ``k_cos`` rather than ``cos``."""
    xn, cn, sn = names
    x = tensor(xn, x)
    cos = tensor(cn, cos)
    sin = tensor(sn, sin)
    rank(xn, x, 3, "[B, S, H*D]")
    rank(cn, cos, 4, "[B, H, S, D/2]")
    rank(sn, sin, 4, "[B, H, S, D/2]")
    if sin.shape != cos.shape:
        raise ValueError(
            f"{sn}.shape must equal {cn}.shape, got {sn} {tuple(sin.shape)} vs {cn} "
            f"{tuple(cos.shape)}"
        )
    for name, t in ((xn, x), (cn, cos), (sn, sin)):
        dtype(name, t, (torch.bfloat16,))
    contiguous(xn, x)
    unit_last_stride(cn, cos)
    unit_last_stride(sn, sin)
    B, S, HD = x.shape
    if B * S > MAX_ROPE_TOKENS:  # the message built only then: this runs on every call
        in_range("B*S", B * S, 0, MAX_ROPE_TOKENS, f"token count ({xn}.shape[0] * {xn}.shape[1])")
    cb, H, cs, half = cos.shape
    if cb != B:
        raise ValueError(
            f"{cn}.shape[0] (B) must equal {xn}.shape[0]={B}, got {cn} {tuple(cos.shape)}"
        )
    if cs != S:
        raise ValueError(
            f"{cn}.shape[2] (S) must equal {xn}.shape[1]={S}, got {cn} {tuple(cos.shape)}"
        )
    in_range("H", H, 1, MAX_ROPE_HEADS, f"head count ({cn}.shape[1])")
    if HD % H:
        raise ValueError(
            f"{xn}.shape[2]={HD} is not a multiple of H={cn}.shape[1]={H} (mismatched H); "
            f"{xn} {tuple(x.shape)}, {cn} {tuple(cos.shape)}"
        )
    D = HD // H
    if D % 2:
        raise ValueError(
            f"head dim D = {xn}.shape[2] / H = {HD}/{H} = {D} is odd; split RoPE needs even D"
        )
    in_range("D", D, 2, MAX_ROPE_HEAD_DIM, "head dim")
    if half != D // 2:
        raise ValueError(
            f"{cn}.shape[3] must be D/2 = {D // 2} ({xn}.shape[2]={HD}, H={H}), "
            f"got {cn} {tuple(cos.shape)}"
        )
    for name, t in ((cn, cos), (sn, sin)):
        angle_offsets(name, t, H, half)
    return B, S, H, D


INT32_MAX = 2**31 - 1


def angle_offsets(name: str, t: torch.Tensor, H: int, half: int) -> None:
    """ValueError where the kernels' 32-bit offset inside a token would overflow for cos or
    sin. They index a token's angles as ``head * stride(1) + column`` in 32 bits (the
    token's own part is 64-bit): a head-major ``[B, H, S, D/2]`` layout's head stride is
    S*D/2, so with enough tokens the last head lies past 2**31. (A stride that is itself
    past 2**31 reaches the kernel as a 64-bit integer, and the product is 64-bit.)"""
    stride = t.stride(1)
    last = (H - 1) * stride + half - 1
    if stride <= INT32_MAX < last:
        raise ValueError(
            f"{name}: head {H - 1} starts {last - half + 1} elements into its token "
            f"({name}.stride(1)={stride}), past the kernels' 32-bit offsets inside a token "
            f"(2**31 - 1); lay {name} out token-major, e.g. "
            f"{name}.transpose(1, 2).contiguous().transpose(1, 2)"
        )


def row_offsets(name: str, t: torch.Tensor) -> None:
    """ValueError where a 32-bit ``row * stride(0)`` offset would overflow for the rows of
    a 2-D *t* (AdaLN's table: its kernels offset row ``value`` as ``value * stride(0)`` in
    32 bits while that stride fits in them). A row view of a wide buffer gets there."""
    stride = t.stride(0)
    last = (t.shape[0] - 1) * stride + t.shape[1] - 1
    if stride <= INT32_MAX < last:
        raise ValueError(
            f"{name}: row {t.shape[0] - 1} starts {last - t.shape[1] + 1} elements in "
            f"({name}.stride(0)={stride}), past the kernels' 32-bit row offsets (2**31 - 1); "
            f"pass {name}.contiguous()"
        )


# Split RoPE's supported sizes (every kernel in its layout).
MAX_ROPE_HEADS = 1024
MAX_ROPE_HEAD_DIM = 512
# Tokens (B*S) of one operand. The kernels number programs and tokens in 32 bits: a
# grid's first dim (at most 2**31 - 1 on CUDA) holds a program per token, or per tile of
# tokens with q's and k's programs together in the pair and the fused prologue; a tiled
# program's tokens are ``program_id * BLOCK_TOKENS + arange(BLOCK_TOKENS)``, and the
# last tile of q in the pair and the prologue runs past q's last token. With fewer than
# 2**30 tokens every one of those fits; past 2**31 a tiled program's token index wraps
# negative (and passes the pair's and the prologue's token mask): the kernel would read
# and write before its tensors.
MAX_ROPE_TOKENS = 2**30 - 1
