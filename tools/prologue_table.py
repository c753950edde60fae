"""The attention prologue's kernels in one `asv run`: each one's cold-L2 device time at the
suite's shapes next to the peers it must beat, and the ratio expected from bytes and
launches beside the ratio measured.

    python tools/prologue_table.py results/MACHINE/COMMIT-ENV.json [--launch-us 2]

The expectation: a call costs ``bytes / bandwidth + launches x launch_us``, with the
bandwidth this GPU's own copy bandwidth as the run measured it (the suite's
``track_pct_copy_bandwidth`` of split RoPE's default at its largest shape, with that
cell's device time) and ``launch_us`` the fixed cost of one launch. Bytes:

- the pair: q, k read and written, cos/sin read once (``cases.pair_bytes``); one launch;
- two single RoPEs: each reads its tensor and its cos/sin and writes it; two launches;
- the fused prologue: the pair's bytes and the two weights; one launch;
- RMSNorm then ltx2k's pair (``unfused_ltx2k``): q and k read and written by the norms,
  then the pair's bytes; three launches.

Eager and ``torch.compile`` peers run more kernels than bytes say; their columns are
measured only. Put the Markdown it prints in docs/kernels/attention_prologue.md with the
run's date and GPU.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BF16 = 2


def _cells(result_file: Path) -> dict[tuple[str, str, str], float]:
    """(benchmark name, variant or launch, shape label) -> value, read by asv's own loader."""
    from asv.results import Results

    res = Results.load(str(result_file))
    out = {}
    for key in res.get_all_result_keys():
        params = res.get_result_params(key)
        values = res.get_result_value(key, params)
        if len(params) != 2:
            continue
        for i, (first, second) in enumerate((a, b) for a in params[0] for b in params[1]):
            v = values[i] if i < len(values) else None
            if v is not None and v == v:  # NaN: a failed or skipped cell
                out[(key, first.strip("'"), second.strip("'"))] = float(v)
    return out


def _bandwidth(cells, cases, shapes) -> float:
    """Bytes/s: bytes / cold time / (pct / 100) of split RoPE's default at its largest shape."""
    from ltx2k.workload import variants

    default = variants.DEFAULT_VARIANT["split_rope"]
    best = None
    for shape in shapes.shapes_of("split_rope", True):
        t = cells.get(("bench_kernels.SplitRope.time_device_cold", default, shape.label))
        pct = cells.get(("bench_kernels.SplitRope.track_pct_copy_bandwidth", default, shape.label))
        if t and pct:
            nbytes = cases.KERNELS["split_rope"].bytes_moved(shape)
            if best is None or nbytes > best[0]:
                best = (nbytes, nbytes / t / (pct / 100))
    if best is None:
        raise SystemExit(
            "no split RoPE copy-bandwidth cell in this result: cannot set the bandwidth"
        )
    return best[1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("result", type=Path, help="one asv result file (results/MACHINE/*.json)")
    ap.add_argument("--launch-us", type=float, default=2.0, help="fixed cost of one launch")
    a = ap.parse_args(argv)
    if not a.result.is_file():
        print(f"prologue_table: result {a.result} is not a file", file=sys.stderr)
        return 2
    from ltx2k.workload import cases, shapes, variants

    cells = _cells(a.result)
    bw = _bandwidth(cells, cases, shapes)
    lat = a.launch_us * 1e-6

    def t(nbytes, launches):
        return nbytes / bw + launches * lat

    def dev(kernel, variant, label):
        cls = variants.ASV_CLASS[kernel]
        return cells.get((f"bench_kernels.{cls}.time_device_cold", variant, label))

    def us(x):
        return "—" if x is None else f"{x * 1e6:.1f}"

    def ratio(num, den):
        return "—" if num is None or den is None else f"{num / den:.2f}×"

    print(f"copy bandwidth {bw / 1e12:.2f} TB/s (from the run); {a.launch_us:g} µs a launch\n")
    print("Split RoPE of q and k, cold-L2 device µs:\n")
    print(
        "| shape | pair (default) | row (sglang's current design) | two single launches "
        "| eager | expected ratio | measured ratio over two launches |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for shape in shapes.shapes_of("split_rope_pair", True):
        nq, nk = (shape.B * s * shape.H * shape.D for s in (shape.Sq, shape.Sk))
        exp = t(BF16 * 3 * (nq + nk), 2) / t(cases.pair_bytes(shape), 1)
        pair, row, two, eager = (
            dev("split_rope_pair", v, shape.label)
            for v in (variants.DEFAULT_VARIANT["split_rope_pair"], "row", "two_launches", "eager")
        )
        print(
            f"| {shape.label} | {us(pair)} | {us(row)} | {us(two)} | {us(eager)} "
            f"| {exp:.2f}× | {ratio(two, pair)} |"
        )
    print("\nThe fused prologue (q/k RMSNorm + split RoPE), cold-L2 device µs:\n")
    print(
        "| shape | fused (default) | row (sglang's current design) | norm + ltx2k pair "
        "| unfused compiled | unfused eager | expected over norm + pair "
        "| measured over norm + pair | over compiled | over eager | over row |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for shape in shapes.shapes_of("qknorm_rope_pair", True):
        nq, nk = (shape.B * s * shape.H * shape.D for s in (shape.Sq, shape.Sk))
        pb = cases.pair_bytes(shape)
        exp = t(BF16 * 2 * (nq + nk) + pb, 3) / t(cases.qknorm_pair_bytes(shape), 1)
        fused, row, unf_l, unf_c, unf_e = (
            dev("qknorm_rope_pair", v, shape.label)
            for v in (
                variants.DEFAULT_VARIANT["qknorm_rope_pair"],
                "row",
                "unfused_ltx2k",
                "unfused_compiled",
                "unfused_eager",
            )
        )
        print(
            f"| {shape.label} | {us(fused)} | {us(row)} | {us(unf_l)} | {us(unf_c)} | {us(unf_e)} "
            f"| {exp:.2f}× | {ratio(unf_l, fused)} | {ratio(unf_c, fused)} "
            f"| {ratio(unf_e, fused)} | {ratio(row, fused)} |"
        )
    print("\nHost latency of the default variants, µs a call:\n")
    print("| kernel | shape | µs |")
    print("|---|---|---:|")
    for kernel in ("split_rope", "split_rope_pair", "qknorm_rope_pair"):
        cls = variants.ASV_CLASS[kernel]
        for shape in shapes.shapes_of(kernel, True):
            v = cells.get(
                (
                    f"bench_kernels.{cls}.time_host_latency",
                    variants.DEFAULT_VARIANT[kernel],
                    shape.label,
                )
            )
            if v is not None:
                print(f"| {kernel} | {shape.label} | {v * 1e6:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
