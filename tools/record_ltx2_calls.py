"""Record an LTX-2-like sequence of kernel calls, for ``ltx2k shapes add`` (docs/shapes.md).

A stand-in for recording a serving process (``LTX2K_RECORD_SHAPES``) where there is
none: both of LTX-2's transformer streams call both kernels, as the model does, at
several resolutions and durations, under ``ltx2k.record_shapes``:

- video: 32 heads x 128 (hidden 4096), RoPE on the video tokens;
- audio: 32 heads x 64 (hidden 2048), RoPE on the audio tokens;
- RoPE in the audio width (32 x 64) over the video tokens: the audio-video cross
  attention's video side;
- AdaLN with per-token timesteps (``timestep [B, S, 9*D]``) on each stream;
- the attention prologue (split RoPE of q and k in one call, and the fused q/k RMSNorm
  then split RoPE) of each stream's self-attention, one cos/sin for q and k, and of both
  cross-modal attentions in the audio width (video queries with audio keys, and audio
  queries with video keys), each side with its own cos/sin;
- cos/sin token-major (``[B, S, H, D/2]`` viewed as ``[B, H, S, D/2]``), as the model
  passes them; ``--head-major`` adds the same calls with head-major cos/sin.

The token counts follow from the VIDEOS table below and the model's latent
compression (32x in space, 8x in time after the first frame) and audio token rate;
docs/shapes.md ("LTX-2's production shapes") says where each comes from.

Usage (GPU): python tools/record_ltx2_calls.py OUT.json [--batch 1 --batch 2]
             ltx2k shapes add OUT.json --dry-run
``--small`` runs a tiny version of the same sequence (the CPU interpreter).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ltx2k import runtime  # noqa: E402
from ltx2k.workload import cases, shapes

SPATIAL_COMPRESSION = 32  # pixels per latent token along each side
TEMPORAL_COMPRESSION = 8  # frames per latent frame, after the first
AUDIO_TOKENS_PER_SECOND = 25  # 16 kHz mel frames, hop 160, 4x temporal compression
FPS = 24


@dataclass(frozen=True)
class Stream:
    heads: int
    head_dim: int

    @property
    def hidden(self) -> int:
        return self.heads * self.head_dim


VIDEO = Stream(32, 128)
AUDIO = Stream(32, 64)
SMALL_VIDEO = Stream(3, 32)
SMALL_AUDIO = Stream(2, 16)

# (height, width, frames): typical generation sizes.
VIDEOS = (
    (512, 768, 121),
    (704, 1216, 121),
    (480, 640, 49),
    (384, 512, 25),
)
SMALL_VIDEOS = ((64, 96, 9), (32, 64, 1))


def video_tokens(height: int, width: int, frames: int, spatial: int = SPATIAL_COMPRESSION) -> int:
    latent_frames = (frames - 1) // TEMPORAL_COMPRESSION + 1
    return latent_frames * (height // spatial) * (width // spatial)


def audio_tokens(frames: int) -> int:
    return max(1, round(frames / FPS * AUDIO_TOKENS_PER_SECOND))


def calls(small: bool) -> list[tuple[str, Stream, int]]:
    """(what, stream width, tokens) of every call site at every video size, in model order."""
    video, audio = (SMALL_VIDEO, SMALL_AUDIO) if small else (VIDEO, AUDIO)
    spatial = 16 if small else SPATIAL_COMPRESSION
    out = []
    for h, w, f in SMALL_VIDEOS if small else VIDEOS:
        n_video = video_tokens(h, w, f, spatial)
        out.append(("video", video, n_video))
        out.append(("audio", audio, audio_tokens(f)))
        out.append(("audio-video cross attention", audio, n_video))
    return out


def prologue_calls(small: bool) -> list[tuple[str, Stream, int, int]]:
    """(what, width, q tokens, k tokens) of every attention's prologue at every video size:
    self-attention (q and k of one stream, one cos/sin) and both cross-modal attentions."""
    video, audio = (SMALL_VIDEO, SMALL_AUDIO) if small else (VIDEO, AUDIO)
    spatial = 16 if small else SPATIAL_COMPRESSION
    out = []
    for h, w, f in SMALL_VIDEOS if small else VIDEOS:
        n_video, n_audio = video_tokens(h, w, f, spatial), audio_tokens(f)
        out.append(("video self attention", video, n_video, n_video))
        out.append(("audio self attention", audio, n_audio, n_audio))
        out.append(("audio-to-video cross attention", audio, n_video, n_audio))
        out.append(("video-to-audio cross attention", audio, n_audio, n_video))
    return out


def run(out: Path, batches: list[int], steps: int, head_major: bool, small: bool) -> None:
    runtime.select_backend()
    import ltx2k

    device = runtime.device()
    layouts = shapes.LAYOUTS if head_major else (shapes.DEFAULT_LAYOUT,)
    with ltx2k.record_shapes(out):
        for B in batches:
            for what, stream, S in calls(small):
                ada = shapes.AdaShape(B, S, stream.hidden, "bf16")
                table, timestep = cases.ada_inputs(ada, device)
                ropes = [
                    cases.rope_inputs(
                        shapes.RopeShape(B, S, stream.heads, stream.head_dim, lay), device
                    )
                    for lay in layouts
                ]
                for _ in range(steps):  # a denoising step: AdaLN, then RoPE on q and k
                    ltx2k.ltx2_ada_values9(table, timestep)
                    for x, cos, sin in ropes:
                        ltx2k.apply_ltx2_split_rotary_emb(x, cos, sin)
                        ltx2k.apply_ltx2_split_rotary_emb(x, cos, sin)
                print(f"B={B} {what}: {S} tokens, {stream.heads} x {stream.head_dim}", flush=True)
            for what, stream, Sq, Sk in prologue_calls(small):
                for lay in layouts:
                    fields = (B, Sq, Sk, stream.heads, stream.head_dim, lay, Sq == Sk)
                    pair = cases.pair_inputs(shapes.PairShape(*fields), device)
                    fused = cases.qknorm_pair_inputs(shapes.QKNormPairShape(*fields), device)
                    for _ in range(steps):
                        ltx2k.apply_ltx2_split_rotary_emb_pair(*pair)
                        ltx2k.ltx2_qknorm_split_rope_pair(*fused)
                print(f"B={B} {what} prologue: {Sq} x {Sk} tokens", flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path, help="the recorder file to write (merged if it exists)")
    p.add_argument("--batch", type=int, action="append", help="batch sizes (default 1)")
    p.add_argument("--steps", type=int, default=2, help="calls per shape (default 2)")
    p.add_argument("--head-major", action="store_true", help="also head-major cos/sin")
    p.add_argument("--small", action="store_true", help="tiny shapes, for the CPU interpreter")
    a = p.parse_args(argv)
    run(a.out, a.batch or [1], a.steps, a.head_major, a.small)
    return 0


if __name__ == "__main__":
    sys.exit(main())
