"""The main job, end to end: gate -> benchmark -> store -> regress -> publish.

``ltx2k all`` (and ``scripts/main.sh``) runs this on whatever device is
present: the GPU through asv, or the Triton interpreter on CPU under the
machine "cpu-interpreter". Each stage is the same library call a CI script
or a person would make on its own; this module only sequences them.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ltx2k import git


@dataclass
class Outcome:
    html: Path
    regress_exit: int
    stages: list[str]


def _say(msg: str) -> None:
    print(f"[ltx2k all] {msg}", file=sys.stderr, flush=True)


def ensure_store(store: str) -> str:
    """A local path that does not exist yet becomes a new bare repository."""
    if "://" in store or store.startswith("git@"):
        return store
    path = Path(store)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        git.run(None, "init", "-q", "--bare", str(path), check=True)
        _say(f"created results store {path} (a bare git repo; branch asv-results)")
    return str(path.resolve())


# Regressions listed by name in the terminal summary; the rest are counted, and the
# full report is a file (a CI log or a terminal is no place for a 150-row table).
SUMMARY_ROWS = 10


def _plain(markdown: str) -> str:
    return markdown.replace("**", "").replace("`", "")


def terminal_summary(report, markdown_path: Path, html: Path, limit: int = SUMMARY_ROWS) -> str:
    """At most ``limit + 6`` lines: the verdict, the worst regressions, where the rest is."""
    from ltx2k.report.markdown import format_cell, format_step, problem_lines, render_markdown

    lines = [_plain(render_markdown(report).splitlines()[0])]
    regs = sorted(
        report.cells("regression"),
        key=lambda t: -abs((t[2].ratio or 1.0) - 1.0),
    )
    for row, gpu, cell in regs[:limit]:
        what = " ".join(x for x in (row.kernel, row.metric, row.variant, row.shape) if x)
        step = _plain(format_step(cell.step))
        lines.append(
            f"  {gpu}: {what}: {_plain(format_cell(cell))}" + (f", {step}" if step else "")
        )
    if len(regs) > limit:
        lines.append(f"  ... and {len(regs) - limit} more regression(s)")
    lines.extend(problem_lines(report.problems, "(listed in the report)"))
    lines.append(f"full report (Markdown): {markdown_path}")
    lines.append(f"dashboard: {html.resolve()}/index.html and summary.html")
    lines.append("serve it with `scripts/python -m asv preview` (or any static web server)")
    return "\n".join(lines)


def run_all(
    *,
    config: str = "asv.conf.json",
    commits: str = "HEAD^!",
    store: str | None = None,
    html: str = "html",
    results: str = "results",
    asv_args: list[str] | None = None,
    skip_bench: bool = False,
) -> Outcome:
    from ltx2k import runtime
    from ltx2k.runner import asv_run, machine

    t0 = time.monotonic()
    repo = Path(config).resolve().parent
    stages = []
    if not skip_bench:
        # Before the gate: an unknown revision should cost a second, not a gate run.
        asv_run.check_range([*(asv_args or []), commits], config=config, flag="--commits")
    backend = runtime.select_backend()
    name = machine.identify()["machine"]
    _say(f"device: {backend}; asv machine: {name}")

    _say("1/5 correctness gate: every variant bit-exact against its reference")
    from ltx2k.measure.gate import check_all

    failures = check_all(verbose=False)
    if failures:
        raise RuntimeError(
            "correctness gate failed, nothing benchmarked:\n  " + "\n  ".join(failures)
        )
    stages.append("gate")

    if not skip_bench:
        _say(f"2/5 asv run {commits} on {name} (asv prints progress)")
        rc = asv_run.run([*(asv_args or []), commits], config=config)
        if rc != 0:
            raise RuntimeError(f"asv run exited {rc}")
        stages.append("bench")

    if store:
        from ltx2k.history import store as store_mod

        url = ensure_store(store)
        _say(f"3/5 store: push results/{name} to {url}")
        store_mod.push_results(url, results, machine=[name])
        store_mod.pull_results(url, results)
        stages.append("store")
    else:
        _say("3/5 store: skipped (no --store)")

    from ltx2k.analysis import regress
    from ltx2k.report import publish
    from ltx2k.report.markdown import render_markdown

    head = git.output(repo, "rev-parse", "HEAD")
    _say(f"4/5 regress: steps in the last {regress.DEFAULT_LAST} benchmarked commits up to HEAD")
    report = regress.regress(results, head, last=regress.DEFAULT_LAST, repo=str(repo))
    md = render_markdown(report)
    stages.append("regress")

    _say("5/5 publish: asv publish + summary page")
    res = publish.publish(config, results, html, regress_json=report, repo=repo)
    md_path = Path(html) / "regress.md"
    md_path.parent.mkdir(parents=True, exist_ok=True)
    md_path.write_text(md)  # after publish: asv publish empties html/
    if not res.asv_ok:
        raise RuntimeError(
            f"asv publish failed; only {Path(html) / 'summary.html'} and {md_path} were written"
        )
    stages.append("publish")
    _say(f"done in {time.monotonic() - t0:.0f} s")
    print(terminal_summary(report, md_path, Path(html)), flush=True)
    return Outcome(html=Path(html), regress_exit=report.exit_code, stages=stages)
