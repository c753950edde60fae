"""Apache Otava's change-point analysis on JSON series: runs inside Otava's own venv.

stdin: ``{"options": {"window_len", "max_pvalue", "min_magnitude"}, "series": [[v|null, ...]]}``
stdout: one list per series of ``{"index", "last_good_index", "pvalue", "change_percent"}``,
indices into the series as given (``null`` entries included).

It calls ``otava.analysis.compute_change_points``, the split/merge E-divisive
that ``otava analyze`` runs per metric. Failed runs are left out rather than
forward-filled (what ``otava analyze`` does): a copied value would be a fake
repeat for the t-test and would move a change point onto the failed run.
This file imports only Otava and the standard library, so that it runs with
Otava's pinned numpy and nothing of the caller.
"""

import json
import sys

from otava.analysis import compute_change_points


def analyse(values, options):
    kept = [i for i, v in enumerate(values) if v is not None]
    series = [float(values[i]) for i in kept]
    if len(series) < 3:
        return []
    points, _weak = compute_change_points(
        series,
        window_len=options["window_len"],
        max_pvalue=options["max_pvalue"],
        min_magnitude=options["min_magnitude"],
    )
    out = []
    for cp in points:
        j = int(cp.index)
        out.append(
            {
                "index": kept[j],
                "last_good_index": kept[j - 1],
                "pvalue": float(cp.stats.pvalue),
                "change_percent": float(cp.stats.forward_change_percent()),
            }
        )
    return out


def main():
    job = json.load(sys.stdin)
    json.dump([analyse(v, job["options"]) for v in job["series"]], sys.stdout)


if __name__ == "__main__":
    main()
