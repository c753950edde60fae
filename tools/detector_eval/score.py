"""Scores change-point detectors on the labelled corpus; writes a table, a plot and the numbers.

    python -m tools.detector_eval.score --out DIR [--small] [--methods ltx2k,asv,otava]

Rules (docs/detectors.md states them for readers):

* A reported step *matches* the true one when its range of candidate commits
  (``last_good_index + 1 .. index``) holds the true first-bad run, or its
  ``index`` is within one run of it. The first match (an exact one if there is
  one) is a true positive; every other report is a false positive, and so is
  every report on an unchanged series.
* *Exact*: the matching step's ``index`` is the true first-bad run.
* *Qualifying* steps are those that matter: size >= max(3%, 4 x the series'
  true between-run noise). Recall is given over all steps and over these.
* *False-flag rate*: the share of unchanged series with any report at HEAD.
* *Commits to detect*: the method runs on every prefix ending at the step,
  one run later, ... up to HEAD; the count is the number of runs on the new
  level at the first prefix whose report matches. *Within 3 commits*: found
  by the prefix ending two runs after the step, or by HEAD when that comes
  sooner.
* *Suspected* steps (ltx2k's ``Detection.suspect``) never count above: they count
  towards "flagged or suspected" recall and the first bad commit, and apart as the
  share of unchanged series with one.
* *Short histories* (``--short``): the corpus cut to its last N runs and HEAD
  (``Corpus.window``), judged at HEAD only; "pooled rule" steps qualify against the
  median true noise of the series' pool rather than their own.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .corpus import Corpus, Series, make_corpus
from .methods import Found, Job, Method, all_methods

WITHIN = 3
SIZE_BINS = ((0.02, 0.03), (0.03, 0.05), (0.05, 0.08), (0.08, 0.15))
NOISE_BINS = ((0.0, 0.005), (0.005, 0.01), (0.01, 0.02), (0.02, 0.035), (0.035, 0.06), (0.06, 9.9))


def matches(found: Found, true_index: int) -> bool:
    in_range = found.last_good_index + 1 <= true_index <= found.index
    return in_range or abs(found.index - true_index) <= 1


@dataclass(frozen=True)
class Verdict:
    """What one method's report at one cut means for one series."""

    reported: int
    tp: bool
    exact: bool
    fp: int


def judge(found: Sequence[Found], true_index: int | None) -> Verdict:
    if true_index is None:
        return Verdict(len(found), False, False, len(found))
    hits = [f for f in found if matches(f, true_index)]
    if not hits:
        return Verdict(len(found), False, False, len(found))
    exact = any(f.index == true_index for f in hits)
    return Verdict(len(found), True, exact, len(found) - 1)


@dataclass(frozen=True)
class Outcome:
    """One series under one method: the verdict at HEAD and, for a step, when it was first seen."""

    series: Series
    head: Verdict  # flagged steps only
    first_seen: int | None = None  # runs on the new level at the first matching cut
    head_any: Verdict | None = None  # flagged or suspected steps (ltx2k's suspects)

    @property
    def within(self) -> bool:
        s = self.series
        if self.first_seen is None or s.step_index is None:
            return False
        return self.first_seen <= min(WITHIN, s.n - s.step_index)


def jobs_for(corpus: Corpus, latency: bool = True) -> list[Job]:
    """HEAD of every series and, for a step, every cut from the first bad run on."""
    jobs = []
    for k, s in enumerate(corpus.series):
        jobs.append(Job(k, s.n))
        if latency and s.step_index is not None:
            jobs.extend(Job(k, end) for end in range(s.step_index + 1, s.n))
    return jobs


def outcomes(corpus: Corpus, jobs: Sequence[Job], found: Sequence[list[Found]]) -> list[Outcome]:
    by_series: dict[int, dict[int, list[Found]]] = {}
    for job, f in zip(jobs, found, strict=True):
        by_series.setdefault(job.series, {})[job.end] = f
    out = []
    for k, s in enumerate(corpus.series):
        cuts = by_series[k]
        first = None
        if s.step_index is not None:
            for end in sorted(cuts):
                flagged = [f for f in cuts[end] if not f.suspected]
                if end > s.step_index and judge(flagged, s.step_index).tp:
                    first = end - s.step_index
                    break
        flagged = [f for f in cuts[s.n] if not f.suspected]
        out.append(Outcome(s, judge(flagged, s.step_index), first, judge(cuts[s.n], s.step_index)))
    return out


def run_method(
    method: Method, corpus: Corpus, workers: int = 1, latency: bool = True
) -> tuple[list[Outcome], float]:
    jobs = jobs_for(corpus, latency)
    t0 = time.perf_counter()
    found = method.run(corpus, jobs, workers=workers)
    return outcomes(corpus, jobs, found), time.perf_counter() - t0


def _rate(k: int, n: int) -> float | None:
    return None if n == 0 else k / n


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float] | None:
    if n == 0:
        return None
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return (max(0.0, mid - half), min(1.0, mid + half))


def _count(outs: Iterable[Outcome], pred: Callable[[Outcome], bool]) -> tuple[int, int]:
    outs = list(outs)
    return sum(pred(o) for o in outs), len(outs)


def summarise(outs: Sequence[Outcome]) -> dict:
    unchanged = [o for o in outs if not o.series.changed]
    steps = [o for o in outs if o.series.changed]
    qual = [o for o in steps if o.series.qualifying]
    tp = sum(o.head.tp for o in outs)
    fp = sum(o.head.fp for o in outs)
    reported = sum(o.head.reported for o in outs)
    precision = _rate(tp, tp + fp)
    recall = _rate(tp, len(steps))
    f1 = None if not precision or not recall else 2 * precision * recall / (precision + recall)
    flagged, n_unch = _count(unchanged, lambda o: o.head.reported > 0)
    q_tp = [o for o in qual if o.head.tp]
    latency: dict[str, int] = {}
    for o in qual:
        key = "never" if o.first_seen is None else str(o.first_seen)
        latency[key] = latency.get(key, 0) + 1
    by_pos = {}
    for k in range(5):
        at_k = [o for o in qual if o.series.position == k]
        by_pos[str(k)] = {
            "n": len(at_k),
            "recall": _rate(sum(o.head.tp for o in at_k), len(at_k)),
        }
    before = [o for o in qual if (o.series.position or 0) > 0]
    at_head = [o for o in qual if o.series.position == 0]
    by_size = []
    for lo, hi in SIZE_BINS:
        sel = [o for o in steps if lo <= o.series.step_size < hi]
        hit = sum(o.head.tp for o in sel)
        by_size.append({"lo": lo, "hi": hi, "n": len(sel), "recall": _rate(hit, len(sel))})
    by_noise = []
    for lo, hi in NOISE_BINS:
        un = [o for o in unchanged if lo <= o.series.noise < hi]
        st = [o for o in qual if lo <= o.series.noise < hi]
        by_noise.append(
            {
                "lo": lo,
                "hi": hi,
                "unchanged": len(un),
                "false_flag_rate": _rate(sum(o.head.reported > 0 for o in un), len(un)),
                "qualifying": len(st),
                "recall_qualifying": _rate(sum(o.head.tp for o in st), len(st)),
            }
        )
    within_q = sum(o.within for o in qual)
    anyv = [o.head_any or o.head for o in qual]
    pooled = [o.head_any or o.head for o in steps if o.series.qualifying_pooled]
    return {
        # Qualifying against the GPU's pooled noise (the median of its pool's cells).
        "pooled_qualifying_steps": len(pooled),
        "recall_pooled_or_suspected": _rate(sum(v.tp for v in pooled), len(pooled)),
        "exact_pooled_or_suspected": _rate(sum(v.exact for v in pooled), len(pooled)),
        # Flagged or suspected: a suspect names its step and ltx2k confirm as the next step.
        "recall_qualifying_or_suspected": _rate(sum(v.tp for v in anyv), len(qual)),
        "exact_qualifying_or_suspected": _rate(sum(v.exact for v in anyv), len(qual)),
        "suspected_unchanged": _rate(
            sum((o.head_any or o.head).reported > o.head.reported for o in unchanged), n_unch
        ),
        "series": len(outs),
        "unchanged": n_unch,
        "steps": len(steps),
        "qualifying_steps": len(qual),
        "reported": reported,
        "tp": tp,
        "fp": fp,
        "precision": precision,
        "recall": recall,
        "recall_qualifying": _rate(len(q_tp), len(qual)),
        "f1": f1,
        "exact_rate": _rate(sum(o.head.exact for o in steps), tp),
        "exact_rate_qualifying": _rate(sum(o.head.exact for o in q_tp), len(q_tp)),
        "false_flag_rate": _rate(flagged, n_unch),
        "false_flag_ci95": wilson(flagged, n_unch),
        "false_flags": flagged,
        "within3_qualifying": _rate(within_q, len(qual)),
        "within3_qualifying_ci95": wilson(within_q, len(qual)),
        "within3_all": _rate(sum(o.within for o in steps), len(steps)),
        "commits_to_detect_qualifying": dict(sorted(latency.items())),
        "recall_qualifying_by_position": by_pos,
        "recall_qualifying_at_head": _rate(sum(o.head.tp for o in at_head), len(at_head)),
        "recall_qualifying_before_head": _rate(sum(o.head.tp for o in before), len(before)),
        "recall_by_size": by_size,
        "by_noise": by_noise,
    }


VIEWS: dict[str, Callable[[Series], bool]] = {
    "all": lambda s: True,
    "synthetic": lambda s: s.source == "synthetic",
    "real": lambda s: s.source == "real",
    # asv reports increases only; here every method is judged on slowdowns alone.
    "slowdowns-only": lambda s: not s.changed or s.slowdown,
}


def score(outs: Sequence[Outcome]) -> dict:
    return {name: summarise([o for o in outs if keep(o.series)]) for name, keep in VIEWS.items()}


# -- report --------------------------------------------------------------------

COLUMNS = (
    ("precision", "precision"),
    ("recall", "recall (all steps)"),
    ("recall_qualifying", "recall (qualifying)"),
    ("f1", "F1"),
    ("exact_rate_qualifying", "exact commit (qualifying, detected)"),
    ("false_flag_rate", "false flags (unchanged series)"),
    ("within3_qualifying", "qualifying found within 3 commits"),
    ("recall_qualifying_at_head", "recall at HEAD (qualifying)"),
    ("recall_qualifying_before_head", "recall 1-4 before HEAD (qualifying)"),
)


HEADLINE = (
    "precision",
    "recall",
    "recall_qualifying",
    "f1",
    "exact_rate_qualifying",
    "false_flag_rate",
    "false_flags",
    "unchanged",
    "qualifying_steps",
    "within3_qualifying",
    "recall_qualifying_at_head",
    "recall_qualifying_before_head",
)


def _pct(x) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def table(results: dict, view: str = "all") -> str:
    names = list(results["methods"])
    lines = ["| metric | " + " | ".join(f"`{n}`" for n in names) + " |"]
    lines.append("| --- |" + " ---: |" * len(names))
    for key, label in COLUMNS:
        cells = [_pct(results["methods"][n]["views"][view][key]) for n in names]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    sec = [f"{results['methods'][n]['seconds']:.1f}" for n in names]
    lines.append("| CPU seconds (whole corpus, all cuts) | " + " | ".join(sec) + " |")
    return "\n".join(lines)


def held_out_table(results: dict) -> str:
    cols = (
        ("precision", "precision"),
        ("recall_qualifying", "recall (qualifying)"),
        ("exact_rate_qualifying", "exact"),
        ("false_flag_rate", "false flags"),
        ("within3_qualifying", "within 3 commits"),
        ("recall_qualifying_at_head", "recall at HEAD"),
        ("recall_qualifying_before_head", "recall 1-4 before"),
    )
    lines = ["| seed | method | " + " | ".join(c for _, c in cols) + " |"]
    lines.append("| --- | --- |" + " ---: |" * len(cols))
    for seed, block in results.get("held_out", {}).items():
        for name, m in block["methods"].items():
            cells = [_pct(m[k]) for k, _ in cols]
            lines.append(f"| {seed} | `{name}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results["methods"])
    views = {n: results["methods"][n]["views"]["all"] for n in names}
    palette = plt.get_cmap("tab10").colors
    colours = {n: palette[k % len(palette)] for k, n in enumerate(names)}
    bars = (
        ("precision", "precision"),
        ("recall_qualifying", "recall, qualifying steps"),
        ("f1", "F1, all steps"),
        ("exact_rate_qualifying", "exact commit (of found)"),
        ("within3_qualifying", "found within 3 commits"),
        ("false_flag_rate", "false flags, unchanged series"),
    )
    fig = plt.figure(figsize=(17, 9))
    box = {"left": 0.07, "right": 0.94, "top": 0.9, "bottom": 0.08, "hspace": 0.35}
    top = fig.add_gridspec(2, len(bars), height_ratios=(1, 1.4), wspace=0.12, **box)
    for col, (key, title) in enumerate(bars):
        ax = fig.add_subplot(top[0, col])
        vals = [100 * (views[n][key] or 0.0) for n in names]
        ax.barh(range(len(names)), vals, color=[colours[n] for n in names], height=0.7)
        ax.set_yticks(range(len(names)), names if col == 0 else [""] * len(names))
        if col == 0:
            for label, n in zip(ax.get_yticklabels(), names, strict=True):
                label.set_color(colours[n])
        ax.invert_yaxis()
        limit = 100.0 if key != "false_flag_rate" else max(5.0, 1.3 * max(vals))
        ax.set_xlim(0, limit)
        ax.set_xticks([0, limit / 2])
        ax.set_title(title, fontsize=10)
        ax.tick_params(axis="x", labelsize=8)
        ax.xaxis.set_major_formatter("{x:g}%")
        for y, v in enumerate(vals):
            inside = v > 0.75 * limit
            ax.text(
                v - 0.02 * limit if inside else v + 0.02 * limit,
                y,
                f"{v:.1f}",
                va="center",
                ha="right" if inside else "left",
                fontsize=8,
                color="white" if inside else "black",
            )
    bottom = fig.add_gridspec(2, 4, height_ratios=(1, 1.4), wspace=0.45, **box)

    def lines(ax, xs, series_of, xlabel, ylabel, title, span=100.0, ylim=(0.0, 105.0)):
        ends = []
        for n in names:
            pts = [(x, 100 * y) for x, y in zip(xs, series_of(n), strict=True) if y is not None]
            if not pts:
                continue
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=4, color=colours[n])
            ends.append([pts[-1][1], pts[-1][0], n])
        ax.set_ylim(*ylim)
        # Names at the line ends, pushed apart where lines end together, and kept
        # under the top of the panel (pushed down from there if the stack reaches it).
        ends.sort()
        gap = 0.055 * span
        for k in range(1, len(ends)):
            ends[k][0] = max(ends[k][0], ends[k - 1][0] + gap)
        top = ax.get_ylim()[1] - 0.5 * gap
        for k in range(len(ends) - 1, -1, -1):
            ceiling = top if k == len(ends) - 1 else ends[k + 1][0] - gap
            ends[k][0] = min(ends[k][0], ceiling)
        for y, x, n in ends:
            ax.annotate(
                n,
                (x, y),
                xytext=(6, 0),
                textcoords="offset points",
                fontsize=7,
                color=colours[n],
                va="center",
                annotation_clip=False,
            )
        ax.set_xlim(min(xs) - 0.3, max(xs) + 0.3)
        ax.set_xlabel(xlabel, fontsize=9)
        ax.set_ylabel(ylabel, fontsize=9)
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=8)

    first = views[names[0]]
    ax = fig.add_subplot(bottom[1, 0])
    sizes = [f"{100 * b['lo']:g}-{100 * b['hi']:g}%" for b in first["recall_by_size"]]
    lines(
        ax,
        list(range(len(sizes))),
        lambda n: [b["recall"] for b in views[n]["recall_by_size"]],
        "step size",
        "steps found at HEAD (%)",
        "recall vs step size (all steps)",
    )
    ax.set_xticks(range(len(sizes)), sizes)
    noise_labels = [
        f"{100 * lo:g}-{100 * hi:g}%" if hi < 1 else f">{100 * lo:g}%" for lo, hi in NOISE_BINS
    ]
    ax = fig.add_subplot(bottom[1, 1])
    lines(
        ax,
        list(range(len(NOISE_BINS))),
        lambda n: [b["recall_qualifying"] for b in views[n]["by_noise"]],
        "true between-run noise of the series",
        "qualifying steps found (%)",
        "recall vs noise (qualifying steps)",
    )
    ax.set_xticks(range(len(NOISE_BINS)), noise_labels, fontsize=7)
    ax = fig.add_subplot(bottom[1, 2])
    lines(
        ax,
        list(range(5)),
        lambda n: [views[n]["recall_qualifying_by_position"][str(k)]["recall"] for k in range(5)],
        "first bad run, commits before HEAD",
        "qualifying steps found (%)",
        "recall by position before HEAD",
    )
    ax.set_xticks(range(5))
    ax = fig.add_subplot(bottom[1, 3])
    flag_span = max(
        [100 * (b["false_flag_rate"] or 0) for n in names for b in views[n]["by_noise"]] + [1.0]
    )
    lines(
        ax,
        list(range(len(NOISE_BINS))),
        lambda n: [b["false_flag_rate"] for b in views[n]["by_noise"]],
        "true between-run noise of the series",
        "unchanged series flagged (%)",
        "false flags vs noise",
        span=flag_span,
        ylim=(0.0, 1.08 * flag_span),
    )
    ax.set_xticks(range(len(NOISE_BINS)), noise_labels, fontsize=7)
    corpus = results["corpus"]
    fig.suptitle(
        f"Change-point detectors on {corpus['series']} labelled series "
        f"({corpus['unchanged']} unchanged, {corpus['steps']} steps, "
        f"{corpus['qualifying_steps']} qualifying); {results['date']}",
        fontsize=12,
    )
    fig.savefig(path, dpi=100)
    plt.close(fig)


def machine_info() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version()}


def code_info() -> dict:
    """Which detector code the numbers belong to (it may be uncommitted while it is tuned)."""
    import hashlib
    import subprocess

    from .corpus import REPO

    path = REPO / "ltx2k" / "analysis" / "changepoint.py"

    def git(*args: str) -> str:
        r = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True)
        return r.stdout.strip()

    return {
        "git_head": git("rev-parse", "HEAD"),
        "changepoint_sha256": hashlib.sha256(path.read_bytes()).hexdigest()
        if path.exists()
        else None,
        "changepoint_git_status": git("status", "--porcelain", "--", str(path)) or "clean",
    }


def evaluate(
    corpus: Corpus, methods: dict[str, Method], workers: int = 1, latency: bool = True
) -> dict:
    results = {
        "date": datetime.date.today().isoformat(),
        "machine": machine_info(),
        "code": code_info(),
        "corpus": corpus.describe(),
        "methods": {},
    }
    for name, method in methods.items():
        outs, secs = run_method(method, corpus, workers=workers, latency=latency)
        results["methods"][name] = {
            "settings": method.settings,
            "seconds": secs,
            "views": score(outs),
        }
    return results


# -- short histories ---------------------------------------------------------------

SHORT_WINDOWS = (4, 5, 6)  # runs before HEAD: ``ltx2k regress --last N`` on a new runner
SHORT_KEYS = (
    "false_flag_rate",
    "suspected_unchanged",
    "recall_qualifying",
    "recall_qualifying_or_suspected",
    "exact_qualifying_or_suspected",
    "qualifying_steps",
    "recall_pooled_or_suspected",
    "exact_pooled_or_suspected",
    "pooled_qualifying_steps",
    "unchanged",
)


def short_histories(
    corpus: Corpus, methods: dict[str, Method], windows=SHORT_WINDOWS, workers: int = 1
) -> dict:
    """HEAD-only scores of every method on the corpus cut to each window."""
    out = {}
    for w in windows:
        cut = corpus.window(w)
        out[str(w)] = {}
        for name, method in methods.items():
            outs, _ = run_method(method, cut, workers=workers, latency=False)
            s = summarise(outs)
            out[str(w)][name] = {k: s[k] for k in SHORT_KEYS}
    return out


def short_table(results: dict) -> str:
    lines = [
        "| runs before HEAD | method | false flags | suspected (unchanged) | recall, flagged "
        "| recall, flagged or suspected | first bad commit named | qualifying "
        "| recall, pooled rule | first bad commit, pooled rule | qualifying, pooled rule |",
        "| ---: | --- |" + " ---: |" * 9,
    ]
    for w, block in results.items():
        for name, m in block.items():
            cells = [
                _pct(m["false_flag_rate"]),
                _pct(m["suspected_unchanged"]),
                _pct(m["recall_qualifying"]),
                _pct(m["recall_qualifying_or_suspected"]),
                _pct(m["exact_qualifying_or_suspected"]),
                str(m["qualifying_steps"]),
                _pct(m["recall_pooled_or_suspected"]),
                _pct(m["exact_pooled_or_suspected"]),
                str(m["pooled_qualifying_steps"]),
            ]
            lines.append(f"| {w} | `{name}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--small", action="store_true", help="the test-suite corpus")
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--methods", default="ltx2k,asv,asv-both,asv-both-min,otava,otava-default")
    ap.add_argument(
        "--held-out",
        default="",
        help="comma-separated seeds of further corpora built the same way (summary only)",
    )
    ap.add_argument(
        "--short",
        default=",".join(str(w) for w in SHORT_WINDOWS),
        help="comma-separated runs before HEAD to score short histories at ('' for none)",
    )
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--otava-venv", type=Path, default=None)
    args = ap.parse_args(argv)

    known = all_methods(args.otava_venv) if args.otava_venv else all_methods()
    wanted = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = [m for m in wanted if m not in known]
    if unknown:
        ap.error(f"unknown methods {unknown}; known: {sorted(known)}")
    corpus = make_corpus(args.seed, small=args.small)
    methods = {m: known[m] for m in wanted}
    results = evaluate(corpus, methods, workers=args.workers)
    windows = tuple(int(x) for x in args.short.split(",") if x.strip())
    results["held_out"] = {}
    results["short_histories"] = {}
    if windows:
        results["short_histories"][str(args.seed)] = short_histories(
            corpus, methods, windows, args.workers
        )
    for seed in (int(x) for x in args.held_out.split(",") if x.strip()):
        other_corpus = make_corpus(seed, small=args.small)
        other = evaluate(other_corpus, methods, workers=args.workers)
        if windows:
            results["short_histories"][str(seed)] = short_histories(
                other_corpus, methods, windows, args.workers
            )
        results["held_out"][str(seed)] = {
            "corpus": other["corpus"],
            "methods": {
                n: {k: m["views"]["all"][k] for k in HEADLINE} for n, m in other["methods"].items()
            },
        }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "detector-scores.json").write_text(json.dumps(results, indent=1) + "\n")
    md = [table(results, view) for view in VIEWS]
    text = "\n\n".join(f"### {view}\n\n{t}" for view, t in zip(VIEWS, md, strict=True))
    if results["held_out"]:
        text += "\n\n### held-out corpora\n\n" + held_out_table(results)
    for seed, block in results["short_histories"].items():
        text += f"\n\n### short histories, seed {seed}\n\n" + short_table(block)
    (args.out / "detector-scores.md").write_text(text + "\n")
    plot(results, args.out / "detector-scores.png")
    print(md[0])


if __name__ == "__main__":
    main()
