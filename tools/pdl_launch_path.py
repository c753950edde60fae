"""Split RoPE's device time under programmatic dependent launch, per host launch path.

Times ``tiled_pdl`` with the suite's cold-L2 clock (CUDA graph of back-to-back launches
over rotated input sets) through each launch path (``triton``: ``kernel[grid]``, ``lean``,
``native``), for the kernel as it is and for the same kernel with its PDL trigger
(``gdc_launch_dependents``) moved to its end, interleaved in one process; and dumps the
captured graph of three launches per path, to show which kind of dependency each path's
launches leave between the graph's kernel nodes.

Usage (GPU): python tools/pdl_launch_path.py [--rounds 7] [--out DIR]
Put the table it prints in docs/kernels/split_rope.md with its date and GPU.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import re
import statistics
import sys
import tempfile
from pathlib import Path

SHAPES = ((4, 25, 32, 64), (1, 1024, 32, 128), (1, 4096, 16, 128))
PATHS = ("triton", "lean", "native")


def trigger_at_end_kernel():
    """``_split_rope_kernel`` with ``gdc_launch_dependents()`` after the stores instead of
    before the wait: the injected change a caller's device time must show. A JITFunction
    of its own module file (Triton reads a kernel's source from its file)."""
    from ltx2k.kernels import rope

    src = inspect.getsource(rope._split_rope_kernel.fn)
    trigger = "        gdc_launch_dependents()\n"
    if src.count(trigger) != 1:
        raise RuntimeError("the kernel's PDL trigger is not where this tool expects it")
    src = src.replace(trigger, "", 1).rstrip() + "\n    if PDL:\n        gdc_launch_dependents()\n"
    module = (
        "import triton\nimport triton.language as tl\n"
        "from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait\n"
        "from ltx2k.kernels.rope import _rotate\n\n\n" + src
    )
    path = Path(tempfile.mkdtemp(prefix="ltx2k-pdl-")) / "rope_trigger_at_end.py"
    path.write_text(module)
    spec = importlib.util.spec_from_file_location("rope_trigger_at_end", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod._split_rope_kernel


def _edge_kinds(fn, args, out_dir: Path, name: str) -> str:
    """Capture three launches into a graph and read the edges of its debug dump."""
    import torch

    fn(*args)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    graph.enable_debug_mode()
    with torch.cuda.graph(graph):
        for _ in range(3):
            fn(*args)
    dot = out_dir / f"graph-{name}.dot"
    try:
        graph.debug_dump(str(dot.resolve()))
        text = dot.read_text(errors="replace")
    except (OSError, RuntimeError) as e:
        return f"no graph dump ({type(e).__name__})"
    kinds = sorted(set(re.findall(r"(?i)programmatic[a-z_ ]*|port[_ ]?[a-z]+", text)))
    return ", ".join(kinds) or "plain edges only"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--out", default=".")
    a = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("pdl_launch_path: needs a CUDA GPU", file=sys.stderr)
        return 2
    from ltx2k.kernels import rope
    from ltx2k.measure import device_time
    from ltx2k.workload import cases, shapes

    out_dir = Path(a.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    main_kernel, end_kernel = rope._split_rope_kernel, trigger_at_end_kernel()
    kernels = {"main": main_kernel, "trigger at end": end_kernel}
    print(f"# {torch.cuda.get_device_name()} torch {torch.__version__}")
    for B, S, H, D in SHAPES:
        shape = shapes.RopeShape(B, S, H, D)
        nbytes = cases.KERNELS["split_rope"].bytes_moved(shape)
        clocks = {}
        for kname, kernel in kernels.items():
            rope._split_rope_kernel = kernel
            for site in rope._SITES.values():
                site.clear()
            for path in PATHS:
                fn = cases.variant_fn("split_rope", "tiled_pdl", path)
                clocks[(kname, path)] = (
                    kernel,
                    device_time.build_clock(
                        fn,
                        lambda n, shape=shape: cases.input_sets("split_rope", shape, "cuda", n),
                        nbytes,
                        cold=True,
                    ),
                )
                if (B, S) == (4, 25):
                    args = cases.rope_inputs(shape, "cuda")
                    kinds = _edge_kinds(fn, args, out_dir, f"{kname.replace(' ', '_')}-{path}")
                    print(f"edges {kname:15} {path:7}: {kinds}")
        samples = {k: [] for k in clocks}
        for _ in range(a.rounds):
            for k, (kernel, clock) in clocks.items():
                rope._split_rope_kernel = kernel
                samples[k] += device_time.device_times(clock, samples=10)
        rope._split_rope_kernel = main_kernel
        med = {k: statistics.median(v) * 1e6 for k, v in samples.items()}
        print(f"\n{shape.label}: cold-L2 µs, median of {a.rounds} x 10")
        print("| launch path | main | trigger at end | ratio |")
        print("|---|---:|---:|---:|")
        for path in PATHS:
            m, e = med[("main", path)], med[("trigger at end", path)]
            print(f"| {path} | {m:.3f} | {e:.3f} | {e / m:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
