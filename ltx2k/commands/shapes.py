"""``ltx2k shapes``: list the suite's shapes; ``ltx2k shapes add``: append recorded ones."""

from __future__ import annotations

import argparse

from ltx2k.commands.common import EXIT_OK


def add_parser(subparsers) -> argparse.ArgumentParser:
    s = subparsers.add_parser(
        "shapes",
        help="list the suite's shapes, or add the shapes of a recorder file",
        description="Without an action: every shape of the suite's data file, with its "
        "layout, where it came from and the opt-in metrics timed at it (docs/shapes.md).",
    )
    s.add_argument("--data", help="the shapes data file (default: ltx2k/workload/shapes.json)")
    actions = s.add_subparsers(dest="shapes_action", metavar="ACTION")
    add = actions.add_parser(
        "add",
        help="append the recorded shapes the suite lacks",
        description="Append to the data file every shape the recorder file's signatures "
        "are timed at and the suite does not hold yet (ltx2k.record_shapes or "
        "LTX2K_RECORD_SHAPES wrote it). The file is replaced in one rename, or left as it was.",
    )
    add.add_argument("record", metavar="RECORD.json", help="a recorder file")
    add.add_argument(
        "--dry-run", action="store_true", help="print what would be added; write nothing"
    )
    # Its own dest: given both before and after `add`, neither silently wins (run).
    add.add_argument("--data", dest="add_data", help="the shapes data file to append to")
    return s


def check_runnable(kernel: str, shape) -> None:
    """ValueError, naming the fields, where a data file's *shape* is past what ``shapes add``
    lets a recorded one be (ltx2k.workload.record.check_runnable): a grid past CUDA's
    limit, or a tensor spanning more than MAX_TENSOR_BYTES.

    Only the CLI passes it to ``shapes.load``. The suite's own load (module level in
    ltx2k/workload/shapes.py, which benchmarks/bench_kernels.py imports from the working
    tree by file path) does not: this check imports ltx2k.kernels.adaln and
    ltx2k.workload.record, which import that module (a cycle at import time), and the
    benchmark file must not import the benchmarked commit's ltx2k.commands. The shipped
    data file is held to it by a test (test_input_checks_machine_shapes.py); moving the
    check into ltx2k.workload would let the suite's load apply it too."""
    from ltx2k.kernels import adaln
    from ltx2k.workload import record

    record._check_grid(kernel, shape)
    # The tensors that grow with the tokens are contiguous bf16 [B, S, hidden]: RoPE's x, a
    # pair's q and k (the longer), AdaLN's timestep; cos/sin are half of x. One more grows
    # with D only: AdaLN's [9, D] table, in fp32 twice a token's timestep row.
    S = max((f for f in ("S", "Sq", "Sk") if hasattr(shape, f)), key=lambda f: getattr(shape, f))
    if hasattr(shape, "H"):
        hidden, width = "H*D", shape.H * shape.D
    else:
        hidden, width = "9*D", adaln.N_VALUES * shape.D
    sizes = {f"[B, {S}, {hidden}] bf16": shape.B * getattr(shape, S) * width * 2}
    if kernel == "ada_values9":
        sizes[f"[9, D] {shape.table_dtype}"] = width * (4 if shape.table_dtype == "fp32" else 2)
    for what, nbytes in sizes.items():
        if nbytes > record.MAX_TENSOR_BYTES:
            raise ValueError(
                f"a {what} tensor of {shape.label} spans {nbytes} bytes, over the "
                f"{record.MAX_TENSOR_BYTES} bytes (1 TiB) one tensor of a suite shape may "
                "span (ltx2k.workload.record.MAX_TENSOR_BYTES)"
            )


def run(args: argparse.Namespace) -> int:
    from ltx2k.workload import shapes

    add_data = getattr(args, "add_data", None)
    if args.data and add_data and args.data != add_data:
        raise ValueError(
            f"--data given twice: {args.data!r} before the action and {add_data!r} after it; "
            "give one"
        )
    data = add_data or args.data or shapes.DATA_FILE
    suite = shapes.load(data, check_runnable)
    if args.shapes_action is None:
        rows = [shapes.LISTING_COLUMNS, *shapes.listing(suite)]
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        for r in rows:
            print("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())
        return EXIT_OK
    from ltx2k.workload import record

    found = record.additions(args.record, suite)
    new = [a for a in found if not a.held]
    # A shape the model called in its own context (a Parameter weight, inference mode) is
    # timed in the call contexts too, where the suite does not time it so yet.
    in_context = [
        a
        for a in found
        if "model" in a.contexts
        and (not a.held or a.shape.label in {s.label for s in suite.shapes[(a.kernel, "gpu")]})
        and a.shape.label not in {s.label for s in suite.metric_shapes["host_context"][a.kernel]}
    ]
    for a in found:
        verb = "held" if a.held else ("would add" if args.dry_run else "add")
        how = f"; called as {', '.join(sorted(a.contexts))}" if a.contexts else ""
        timed = "; timed per call context" if a in in_context else ""
        print(f"{verb:9}  {a.kernel}  {a.shape.label}  ({a.calls} calls{how}{timed})")
    if (new or in_context) and not args.dry_run:
        shapes.append(
            [shapes.entry(a.kernel, a.shape) for a in new],
            data,
            metrics=[("host_context", a.kernel, a.shape.label) for a in in_context],
            check=check_runnable,
        )
    print(
        f"{len(new)} new shape(s){' (dry run: nothing written)' if args.dry_run else ''}; "
        f"{len(found) - len(new)} already in the suite; data file {data}"
    )
    return EXIT_OK
