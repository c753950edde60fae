"""Do concurrent runs on one host disturb each other? The numbers behind shard-run's policy.

Input: asv results of one commit on one GPU (GPU 0), measured under several
*conditions*, each in its own results directory (scripts/interference.sh):

- ``alone``: nothing else runs on the host (the reference);
- ``concurrent-suite``: GPU 1 runs the same asv suite at the same time, which
  is exactly what ``ltx2k shard-run`` does to its neighbours;
- ``concurrent-load``: GPU 1 runs a bandwidth-bound copy loop (device and
  host<->device copies), a bound for an uncontrolled neighbour job;
- optionally ``alone-repeat``: a second alone run, a control whose flags are
  the rule's false positives.

The rule, per *cell* (benchmark x parameters) and condition:

- ``shift = median(condition) / median(alone) - 1`` on asv's stored medians;
- the harness's noise for that cell is the alone run's own 99% confidence
  interval of its median (asv's ``stats_ci_99_a/b``), as a ratio:
  ``band = max(ci_hi - m, m - ci_lo) / m``;
- the cell **exceeds noise** when both ``|shift| > band`` and the two sample
  sets differ by :func:`scipy.stats.mannwhitneyu` (two-sided) at ``alpha``
  (asv's 0.002, :data:`ltx2k.analysis.thresholds.DEFAULT_ALPHA`): big enough
  to matter *and* not a fluke of few samples.

Per metric *family* (``time_device_cold``, ``time_host_latency``) and
condition, over its cells: the median shift, the median band, and
:func:`scipy.stats.wilcoxon` on the per-cell log ratios (is the shift
systematic across cells?). The family **exceeds noise** when the Wilcoxon
p < alpha *and* ``|median shift| > median band``; it is **inconclusive** when
it has too few cells for the test to reach alpha at all (fewer than 10 at
0.002). A systematic but tiny shift (say +0.3% against a 1% band) is within
noise by design: it is real, but smaller than what the harness resolves.

:func:`suggest_policy` turns the ``concurrent-suite`` verdicts into the
exclusive-regex list ``ltx2k shard-run --policy`` reads.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ltx2k.analysis.significance import rank_test_can_reach, samples, signed_rank_can_reach
from ltx2k.analysis.thresholds import DEFAULT_ALPHA
from ltx2k.history.records import Record, load_results
from ltx2k.runner.partition import CONSERVATIVE_EXCLUSIVE
from ltx2k.workload import metrics

FAMILIES = ("time_device_cold", "time_host_latency")
REFERENCE = "alone"
SUITE_CONDITION = "concurrent-suite"
LOAD_CONDITION = "concurrent-load"
CONTROL_CONDITION = "alone-repeat"

EXCEEDS = "exceeds"
WITHIN = "within"
INSUFFICIENT = "insufficient"
FAMILY_EXCEEDS = "exceeds-noise"
FAMILY_WITHIN = "within-noise"
FAMILY_INCONCLUSIVE = "inconclusive"


@dataclass(frozen=True)
class CellShift:
    condition: str
    benchmark: str
    family: str
    params: tuple[tuple[str, str], ...]
    alone: float | None
    value: float | None
    shift: float | None  # value / alone - 1
    band: float | None  # relative half-width of the alone run's 99% CI
    p_value: float | None  # Mann-Whitney U, two-sided
    status: str  # EXCEEDS | WITHIN | INSUFFICIENT


@dataclass(frozen=True)
class FamilyShift:
    condition: str
    family: str
    n_cells: int  # cells with data in both runs
    n_exceeding: int
    median_shift: float | None
    median_band: float | None
    p_value: float | None  # Wilcoxon signed-rank on log ratios
    verdict: str  # FAMILY_EXCEEDS | FAMILY_WITHIN | FAMILY_INCONCLUSIVE
    # 95% bootstrap CI of the median shift: the largest systematic shift the data allow,
    # which is what a "within noise" verdict is worth.
    shift_ci: tuple[float, float] | None = None
    # Median |shift| over the cells: the cell-to-cell scatter. Compared with the control
    # (alone-repeat) it shows whether a neighbour makes single cells less repeatable,
    # even when it shifts none of them on average.
    median_abs_shift: float | None = None


@dataclass(frozen=True)
class InterferenceReport:
    machine: str
    commit: str
    reference: str
    conditions: tuple[str, ...]  # the compared ones, reference excluded
    alpha: float
    families: tuple[FamilyShift, ...]
    cells: tuple[CellShift, ...]

    def family(self, condition: str, family: str) -> FamilyShift:
        for f in self.families:
            if f.condition == condition and f.family == family:
                return f
        raise KeyError(f"no result for condition={condition!r}, family={family!r}")

    def to_json(self) -> dict:
        return {
            "machine": self.machine,
            "commit": self.commit,
            "reference": self.reference,
            "conditions": list(self.conditions),
            "alpha": self.alpha,
            "rule": {
                "cell": "exceeds when |shift| > band and Mann-Whitney U p < alpha",
                "band": "relative half-width of the reference run's 99% CI of the median",
                "family": "exceeds when Wilcoxon p (log ratios) < alpha and "
                "|median shift| > median band",
            },
            "families": [vars(f) for f in self.families],
            "cells": [{**vars(c), "params": dict(c.params)} for c in self.cells],
        }


# --- loading --------------------------------------------------------------------------------


def load_condition(results_dir, machine: str | None = None, commit: str | None = None):
    """Records of one machine and one commit from *results_dir*.

    Without *machine*/*commit*, the directory must hold exactly one of each
    (what scripts/interference.sh writes); *commit* may be a prefix.
    """
    records, _problems = load_results(results_dir)
    machines = sorted({r.machine for r in records})
    if machine is None:
        if len(machines) != 1:
            raise ValueError(
                f"results_dir={str(results_dir)!r} holds machines {machines}; pass machine="
            )
        machine = machines[0]
    records = [r for r in records if r.machine == machine]
    commits = sorted({r.commit for r in records})
    if commit is not None:
        commits = [c for c in commits if c.startswith(commit)]
    if len(commits) != 1:
        raise ValueError(
            f"results_dir={str(results_dir)!r}, machine={machine!r}, commit={commit!r}: "
            f"expected one commit, found {commits or 'none'}"
        )
    return [r for r in records if r.commit == commits[0]]


def parse_condition(spec: str) -> tuple[str, str]:
    """``NAME=RESULTS_DIR`` (one ``--condition``) as (name, dir); ValueError says what is wrong."""
    name, sep, path = spec.partition("=")
    what = None
    if not sep:
        what = "no '='"
    elif not name:
        what = "the NAME before '=' is empty"
    elif not path:
        what = "the RESULTS_DIR after '=' is empty"
    if what:
        raise ValueError(f"--condition {spec!r}: expected NAME=RESULTS_DIR, {what}")
    return name, path


def load_conditions(
    specs: Sequence[str], machine: str | None = None, commit: str | None = None
) -> dict[str, list[Record]]:
    """Each ``--condition NAME=RESULTS_DIR``'s records (:func:`load_condition`), by name.

    Errors name the ``--condition`` they come from; a name given twice is one,
    since a later directory would silently replace the earlier one.
    """
    conditions: dict[str, list[Record]] = {}
    dirs: dict[str, str] = {}  # real path -> the --condition that named it
    for spec in specs:
        name, path = parse_condition(spec)
        if name in conditions:
            raise ValueError(
                f"--condition {spec!r}: expected a new NAME=RESULTS_DIR, {name!r} is given twice"
            )
        if not os.path.isdir(path):
            raise ValueError(f"--condition {spec!r}: {path!r} is not a directory")
        real = os.path.realpath(path)
        if real in dirs:
            # One run compared with itself: no interference, whatever really happened.
            raise ValueError(
                f"--condition {spec!r}: {path!r} is --condition {dirs[real]!r}'s results dir "
                "too; each condition is its own run"
            )
        dirs[real] = spec
        try:
            conditions[name] = load_condition(path, machine, commit)
        except ValueError as e:
            # The condition names the dir already; load_condition's results_dir=... would repeat it.
            raise ValueError(f"--condition {spec!r}: {_drop_param('results_dir', e)}") from e
    return conditions


def _drop_param(param: str, e: BaseException) -> str:
    """The message of *e* without its ``param='value'`` part."""
    return re.sub(rf"{param}=('[^']*'|\S+)[,:]? ?", "", str(e)).strip()


def _index(records: Sequence[Record], families: Sequence[str], what: str):
    out: dict[tuple[str, tuple], Record] = {}
    for r in records:
        if r.benchmark.rsplit(".", 1)[-1] not in families:
            continue
        key = (r.benchmark, r.params)
        if key in out:
            raise ValueError(
                f"{what}: {r.benchmark} {dict(r.params)} appears twice (several envs?); "
                "keep one env per condition"
            )
        out[key] = r
    return out


# --- statistics -----------------------------------------------------------------------------


def _cell(condition: str, key, ref: Record | None, rec: Record | None, alpha: float) -> CellShift:
    benchmark, params = key
    family = benchmark.rsplit(".", 1)[-1]
    a, b = samples(ref), samples(rec)
    base = dict(condition=condition, benchmark=benchmark, family=family, params=params)
    usable = (
        ref is not None
        and rec is not None
        and ref.value is not None
        and rec.value is not None
        and ref.value > 0
        and ref.ci_99 is not None
        and rank_test_can_reach(len(a), len(b), alpha)
    )
    if not usable:
        return CellShift(
            **base,
            alone=ref.value if ref else None,
            value=rec.value if rec else None,
            shift=None,
            band=None,
            p_value=None,
            status=INSUFFICIENT,
        )
    from scipy.stats import mannwhitneyu

    m = ref.value
    band = max(ref.ci_99[1] - m, m - ref.ci_99[0]) / m
    shift = rec.value / m - 1.0
    p = float(mannwhitneyu(b, a, alternative="two-sided").pvalue)
    status = EXCEEDS if (p < alpha and abs(shift) > band) else WITHIN
    return CellShift(
        **base, alone=m, value=rec.value, shift=shift, band=band, p_value=p, status=status
    )


def _family(condition: str, family: str, cells: list[CellShift], alpha: float) -> FamilyShift:
    used = [c for c in cells if c.status != INSUFFICIENT]
    n = len(used)
    n_exc = sum(c.status == EXCEEDS for c in used)
    if n == 0:
        return FamilyShift(condition, family, 0, 0, None, None, None, FAMILY_INCONCLUSIVE)
    import numpy as np
    from scipy.stats import wilcoxon

    logs = np.log1p(np.array([c.shift for c in used]))
    median_shift = float(np.expm1(np.median(logs)))
    median_band = float(np.median([c.band for c in used]))
    spread = dict(
        shift_ci=_median_ci(logs), median_abs_shift=float(np.median(np.abs(np.expm1(logs))))
    )
    if not signed_rank_can_reach(n, alpha):
        return FamilyShift(
            condition,
            family,
            n,
            n_exc,
            median_shift,
            median_band,
            None,
            FAMILY_INCONCLUSIVE,
            **spread,
        )
    # All-zero differences (bit-identical runs) make Wilcoxon undefined: no shift at all.
    p = 1.0 if not np.any(logs) else float(wilcoxon(logs).pvalue)
    exceeds = p < alpha and abs(median_shift) > median_band
    verdict = FAMILY_EXCEEDS if exceeds else FAMILY_WITHIN
    return FamilyShift(condition, family, n, n_exc, median_shift, median_band, p, verdict, **spread)


def _median_ci(logs, confidence: float = 0.95) -> tuple[float, float] | None:
    """Percentile-bootstrap CI of the median of per-cell log ratios, as shifts.

    scipy.stats.bootstrap with a fixed seed: the same results give the same report.
    """
    import numpy as np
    from scipy.stats import bootstrap

    if len(logs) < 3:
        return None
    if not np.any(logs != logs[0]):  # degenerate sample (e.g. bit-identical runs)
        return (float(np.expm1(logs[0])),) * 2
    res = bootstrap(
        (logs,),
        np.median,
        confidence_level=confidence,
        method="percentile",
        n_resamples=2000,
        random_state=np.random.default_rng(0),
    )
    lo, hi = res.confidence_interval
    return float(np.expm1(lo)), float(np.expm1(hi))


def check_families(families: Sequence[str], conditions: Mapping[str, Sequence[Record]]) -> None:
    """ValueError naming the first of *families* that is neither a metric of the suite
    (:data:`ltx2k.workload.metrics.METRICS`) nor measured in any of *conditions*: a misspelt
    family would otherwise be an empty, "inconclusive" row that looks like a measurement."""
    measured = {r.benchmark.rsplit(".", 1)[-1] for recs in conditions.values() for r in recs}
    known = [*metrics.METRICS, *sorted(measured - set(metrics.METRICS))]
    for family in families:
        if not isinstance(family, str) or family not in known:
            raise ValueError(
                f"family={family!r} is not a metric family (known: {', '.join(known)})"
            )
    twice = [f for i, f in enumerate(families) if f in families[:i]]
    if twice:
        # Each family is one row of the report and one entry of the policy: twice would
        # count its cells twice in the family's verdict.
        raise ValueError(f"family={twice[0]!r} is given more than once")


def check_decide(decide: str, compared: Sequence[str]) -> None:
    """ValueError unless *decide* is one of the *compared* conditions (the reference is not
    one): the condition a policy follows."""
    if decide not in compared:
        raise ValueError(
            f"decide={decide!r} is not among conditions {list(compared)} (the compared "
            "ones; the policy follows one of them)"
        )


def analyse(
    conditions: Mapping[str, Sequence[Record]],
    *,
    reference: str = REFERENCE,
    families: Sequence[str] = FAMILIES,
    alpha: float = DEFAULT_ALPHA,
) -> InterferenceReport:
    """Compare every condition with *reference*, cell by cell and per family."""
    if reference not in conditions:
        raise ValueError(f"reference={reference!r} is not among conditions {sorted(conditions)}")
    if len(conditions) < 2:
        raise ValueError(
            f"conditions must name the reference and at least one other, got {sorted(conditions)}"
        )
    if isinstance(families, str) or not families:
        raise ValueError(f"families must be a non-empty sequence of metric names, got {families!r}")
    check_families(families, conditions)
    if not (isinstance(alpha, float) and 0.0 < alpha < 1.0):
        raise ValueError(f"alpha must be a float in (0, 1), got {alpha!r}")
    ident = {}
    for name, recs in conditions.items():
        if not recs:
            raise ValueError(f"condition {name!r} has no records")
        ident[name] = ({r.machine for r in recs}, {r.commit for r in recs})
    machines = set().union(*(m for m, _ in ident.values()))
    commits = set().union(*(c for _, c in ident.values()))
    if len(machines) != 1 or len(commits) != 1:
        detail = {k: (sorted(m), sorted(c)) for k, (m, c) in ident.items()}
        raise ValueError(f"conditions must share one machine and one commit, got {detail}")

    ref = _index(conditions[reference], families, reference)
    others = tuple(c for c in conditions if c != reference)
    cells: list[CellShift] = []
    out_families: list[FamilyShift] = []
    for cond in others:
        idx = _index(conditions[cond], families, cond)
        keys = sorted(set(ref) | set(idx))
        cond_cells = [_cell(cond, k, ref.get(k), idx.get(k), alpha) for k in keys]
        cells.extend(cond_cells)
        for fam in families:
            out_families.append(
                _family(cond, fam, [c for c in cond_cells if c.family == fam], alpha)
            )
    return InterferenceReport(
        machine=machines.pop(),
        commit=commits.pop(),
        reference=reference,
        conditions=others,
        alpha=alpha,
        families=tuple(out_families),
        cells=tuple(cells),
    )


# --- policy ---------------------------------------------------------------------------------


def suggest_policy(
    report: InterferenceReport,
    decide: str = SUITE_CONDITION,
    default: Sequence[str] | None = None,
) -> dict:
    """The shard-run policy these numbers support: ``{"exclusive": [...], ...}``.

    Starts from shard-run's conservative prior (host latency exclusive). A family
    whose *decide* condition stayed within noise loses its exclusive regexes (it
    may run concurrently);
    one that exceeded noise keeps or gains ``\\.<family>$``; an inconclusive
    family (too few cells with samples) is no measurement and keeps the
    prior, as do families not measured.
    """
    if default is None:
        default = CONSERVATIVE_EXCLUSIVE
    check_decide(decide, report.conditions)
    exclusive = list(default)
    basis = {}
    for f in (x for x in report.families if x.condition == decide):
        names = sorted({c.benchmark for c in report.cells if c.family == f.family})
        basis[f.family] = f.verdict
        if not names:
            continue
        if f.verdict == FAMILY_WITHIN:
            exclusive = [rx for rx in exclusive if not any(re.search(rx, n) for n in names)]
        elif f.verdict == FAMILY_EXCEEDS and not any(
            all(re.search(rx, n) for n in names) for rx in exclusive
        ):
            exclusive.append(rf"\.{re.escape(f.family)}$")
    return {
        "exclusive": exclusive,
        "decided_by": decide,
        "verdicts": basis,
        "machine": report.machine,
        "commit": report.commit,
    }


# --- output ---------------------------------------------------------------------------------


def _pct(x: float | None, signed: bool = True) -> str:
    if x is None:
        return "n/a"
    return f"{x * 100:+.2f}%" if signed else f"±{x * 100:.2f}%"


def _abs_pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x * 100:.2f}%"


def _p(p: float | None) -> str:
    return "n/a" if p is None else f"{p:.2g}"


def render_markdown(
    report: InterferenceReport, policy: Mapping | None = None, top: int = 10
) -> str:
    lines = [
        f"# Interference on {report.machine} at {report.commit[:8]}",
        "",
        f"Every condition against `{report.reference}`. A cell (benchmark x parameters) exceeds "
        "the harness's noise when its median shift is larger than the reference run's own 99% "
        f"CI half-width and Mann-Whitney U gives p < {report.alpha:g}; a metric family exceeds "
        f"it when the shift is systematic (Wilcoxon signed-rank p < {report.alpha:g} over the "
        "cells) and its median is larger than the median band.",
        "",
        "The 95% CI (bootstrap) bounds the systematic shift the data allow; median |shift| is "
        "the cell-to-cell scatter, to be read against the control (`alone-repeat`), which "
        "shows what two runs with no neighbour at all differ by.",
        "",
        "| metric | condition | cells | median shift | 95% CI | median \\|shift\\| "
        "| noise band (median) | cells beyond noise | Wilcoxon p | verdict |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for f in sorted(report.families, key=lambda x: (x.family, x.condition)):
        ci = f"{_pct(f.shift_ci[0])} .. {_pct(f.shift_ci[1])}" if f.shift_ci else "-"
        lines.append(
            f"| {metrics.title(f.family)} (`{f.family}`) | {f.condition} | {f.n_cells} "
            f"| {_pct(f.median_shift)} | {ci} | {_abs_pct(f.median_abs_shift)} "
            f"| {_pct(f.median_band, signed=False)} "
            f"| {f.n_exceeding}/{f.n_cells} | {_p(f.p_value)} | **{f.verdict}** |"
        )
    if policy is not None:
        lines += [
            "",
            f"## Policy these numbers support (decided by `{policy['decided_by']}`)",
            "",
            "`ltx2k shard-run` runs benchmarks matching these regexes one GPU at a time: "
            + (", ".join(f"`{rx}`" for rx in policy["exclusive"]) or "none")
            + ".",
        ]
    for cond in report.conditions:
        worst = sorted(
            (c for c in report.cells if c.condition == cond and c.status == EXCEEDS),
            key=lambda c: -abs(c.shift),
        )[:top]
        if not worst:
            continue
        lines += [
            "",
            f"## Largest shifts beyond noise: {cond}",
            "",
            "| benchmark | parameters | shift | band | p |",
            "| --- | --- | ---: | ---: | ---: |",
        ]
        for c in worst:
            params = ", ".join(f"{k}={v}" for k, v in c.params)
            lines.append(
                f"| `{c.benchmark}` | {params} | {_pct(c.shift)} | {_pct(c.band, False)} "
                f"| {_p(c.p_value)} |"
            )
    n_insufficient = sum(c.status == INSUFFICIENT for c in report.cells)
    if n_insufficient:
        lines += [
            "",
            f"{n_insufficient} cell(s) had no value, no samples or too few samples in one of "
            "the runs and are left out.",
        ]
    return "\n".join(lines) + "\n"


_COND_COLOURS = {
    SUITE_CONDITION: "#1f77b4",
    LOAD_CONDITION: "#d62728",
    CONTROL_CONDITION: "#7f7f7f",
}
_OTHER_COLOURS = ("#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")


def figure(report: InterferenceReport):
    """Shift per cell (%), one panel per family; grey: the reference's noise band.

    Colour is the condition; filled markers exceed noise, hollow ones do not.
    Built on the Agg canvas without pyplot, like ltx2k.report.plots (analysis
    must not import report, which sits downstream of it).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    fams = list(dict.fromkeys(c.family for c in report.cells))
    fig = Figure(figsize=(14, 4.8 * max(1, len(fams))), layout="constrained")
    FigureCanvasAgg(fig)
    colours = dict(_COND_COLOURS)
    extra = iter(_OTHER_COLOURS * 4)
    for cond in report.conditions:
        colours.setdefault(cond, next(extra))
    axes = fig.subplots(max(1, len(fams)), 1, squeeze=False)[:, 0]
    for ax, fam in zip(axes, fams, strict=False):
        keys = sorted({(c.benchmark, c.params) for c in report.cells if c.family == fam})
        pos = {k: i for i, k in enumerate(keys)}
        bands = {
            (c.benchmark, c.params): c.band * 100
            for c in report.cells
            if c.family == fam and c.band is not None
        }
        xs = [pos[k] for k in keys if k in bands]
        ys = [bands[k] for k in keys if k in bands]
        if xs:
            ax.fill_between(xs, [-y for y in ys], ys, step="mid", color="#d9d9d9", linewidth=0)
        ax.axhline(0.0, color="black", linewidth=0.6)
        for i, cond in enumerate(report.conditions):
            cells = [
                c
                for c in report.cells
                if c.family == fam and c.condition == cond and c.shift is not None
            ]
            offset = (i - (len(report.conditions) - 1) / 2) * 0.15
            for status, face in ((EXCEEDS, colours[cond]), (WITHIN, "none")):
                sel = [c for c in cells if c.status == status]
                ax.scatter(
                    [pos[(c.benchmark, c.params)] + offset for c in sel],
                    [c.shift * 100 for c in sel],
                    s=22,
                    facecolors=face,
                    edgecolors=colours[cond],
                )
        ax.set_title(f"{metrics.title(fam)} ({fam}): shift vs {report.reference}")
        ax.set_ylabel("shift (%)")
        ax.set_xticks(range(len(keys)))
        ax.set_xticklabels([_short_label(k) for k in keys], rotation=90, fontsize=6)
        ax.set_xlim(-0.5, len(keys) - 0.5)
        handles = [
            Line2D([], [], marker="o", linestyle="", color=colours[c], label=c)
            for c in report.conditions
        ]
        handles += [
            Line2D(
                [],
                [],
                marker="o",
                linestyle="",
                markerfacecolor="none",
                color="black",
                label="hollow: within noise",
            ),
            Patch(color="#d9d9d9", label=f"{report.reference}: 99% CI band"),
        ]
        ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.suptitle(f"Interference on {report.machine} at {report.commit[:8]}")
    return fig


def _short_label(key) -> str:
    bench, params = key
    cls = bench.split(".")[-2] if bench.count(".") >= 2 else bench
    return "/".join([cls, *(v for _, v in params)])


def write_outputs(report: InterferenceReport, out_dir, decide: str | None = SUITE_CONDITION):
    """Write interference.md, interference.json, interference.png and, unless *decide* is
    None, policy.json: the policy that follows condition *decide*, which must be one of
    ``report.conditions`` (ValueError before anything is written: an older policy.json
    in *out_dir* would stand for this run)."""
    policy = None if decide is None else suggest_policy(report, decide)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if policy is not None:
        (out / "policy.json").write_text(json.dumps(policy, indent=2) + "\n")
    paths = {
        "markdown": out / "interference.md",
        "json": out / "interference.json",
        "png": out / "interference.png",
    }
    paths["markdown"].write_text(render_markdown(report, policy))
    data = report.to_json()
    if policy is not None:
        data["policy"] = policy
    paths["json"].write_text(json.dumps(data, indent=2) + "\n")
    figure(report).savefig(paths["png"], dpi=110)
    if policy is not None:
        paths["policy"] = out / "policy.json"
    return paths
