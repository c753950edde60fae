#!/usr/bin/env python
"""Write a synthetic multi-GPU asv history (see tools/synthetic_history.py).

Example::

    python scripts/synth_history.py /tmp/synth --seed 1 \\
        --step 'a100-sxm4-80gb:SplitRope.time_device_cold:blocked:*:commit=12:+8%' \\
        --step 'h200:SplitRope.time_device_cold:blocked:*:commit=12:-30%'
    ltx2k regress --results /tmp/synth/results --repo /tmp/synth/repo \\
        --head "$(git -C /tmp/synth/repo rev-parse HEAD~7)" --last 20
    asv publish --config /tmp/synth/asv.conf.json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

# tools/ is not installed: it is imported from the checkout this script is in.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv: list[str] | None = None) -> int:
    from tools import synthetic_history as synthetic

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out_dir", help="folder to create (must not exist, or be empty)")
    p.add_argument("--commits", type=int, default=20, help="number of commits (default 20)")
    p.add_argument(
        "--machine",
        action="append",
        choices=sorted(synthetic.MACHINES),
        help="GPU runner (repeatable; default all three)",
    )
    p.add_argument(
        "--step",
        action="append",
        default=[],
        help="MACHINE:BENCH:VARIANT:SHAPE:commit=K:+P%% (globs; K counts from 0, oldest)",
    )
    p.add_argument(
        "--fail",
        action="append",
        default=[],
        help="MACHINE:BENCH:VARIANT:SHAPE:commit=K stored as a failed (null) result",
    )
    p.add_argument("--drop", action="append", default=[], help="MACHINE:commit=K: runner skipped K")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--samples", type=int, default=10, help="samples per timing (default 10)")
    args = p.parse_args(argv)
    try:
        h = synthetic.generate_history(
            args.out_dir,
            n_commits=args.commits,
            machines=args.machine or synthetic.DEFAULT_MACHINES,
            steps=args.step,
            failures=args.fail,
            drop=args.drop,
            seed=args.seed,
            n_samples=args.samples,
        )
    except (ValueError, TypeError) as e:
        print(f"synth_history: error: {e}", file=sys.stderr)
        return 1
    print(f"results: {h.results_dir}\nrepo:    {h.repo}\nconfig:  {h.conf}")
    for i, c in enumerate(h.commits):
        print(f"commit={i:<3d} {c}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
