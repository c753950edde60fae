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
    # SUPPRESS: absent here, the value of `ltx2k shapes --data` stays
    add.add_argument("--data", default=argparse.SUPPRESS, help="the shapes data file to append to")
    return s


def run(args: argparse.Namespace) -> int:
    from ltx2k.workload import shapes

    data = args.data or shapes.DATA_FILE
    suite = shapes.load(data)
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
        )
    print(
        f"{len(new)} new shape(s){' (dry run: nothing written)' if args.dry_run else ''}; "
        f"{len(found) - len(new)} already in the suite; data file {data}"
    )
    return EXIT_OK
