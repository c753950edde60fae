"""The outcome of ``ltx2k confirm``: every cell's verdict, the run's status and exit code,
and the Markdown summary, log lines and JSON written from it."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from ltx2k.confirm.verdict import CellResult
from ltx2k.history import store_kills

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_CONFIRMED = 2


@dataclass
class Outcome:
    machine: str
    source: dict
    cells: list[CellResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    dry_run: bool = False

    @property
    def confirmed(self) -> list[CellResult]:
        return [c for c in self.cells if c.verdict == "confirmed"]

    @property
    def failed(self) -> list[CellResult]:
        return [c for c in self.cells if c.verdict in ("error", "no-data")]

    @property
    def status(self) -> str:
        if self.dry_run:
            return "dry-run"
        if self.confirmed:
            return "confirmed"
        if self.failed:
            return "error"
        if not self.cells:
            return "nothing-flagged"
        return "not-confirmed"

    @property
    def exit_code(self) -> int:
        # A confirmed regression wins over a cell that could not be measured.
        return {"confirmed": EXIT_CONFIRMED, "error": EXIT_ERROR}.get(self.status, EXIT_OK)

    def to_json(self) -> dict:
        return {
            "machine": self.machine,
            "status": self.status,
            "source": self.source,
            "cells": [c.to_json() for c in self.cells],
            "notes": list(self.notes),
        }


_ICON = {
    "confirmed": "❌ confirmed",
    "not-confirmed": "✅ not confirmed",
    "no-data": "⚠️ no data",
    "error": "💥 error",
    "not-checked": "⏭️ not checked",
}


def _value(value: float | None, unit: str) -> str:
    from ltx2k.report.markdown import format_value

    # One more digit than the regress tables: a re-measured pair differs by a few %.
    return format_value(value, unit, digits=4)


def render_markdown(outcome: Outcome) -> str:
    n, k = len(outcome.cells), len(outcome.confirmed)
    head = {
        "confirmed": f"❌ {k} of {n} cell(s) confirmed",
        "not-confirmed": f"✅ none of {n} cell(s) confirmed",
        "error": f"💥 {len(outcome.failed)} of {n} cell(s) could not be re-measured",
        "nothing-flagged": "nothing flagged on this machine",
        "dry-run": "dry run, nothing measured (the asv commands are in the log)",
    }[outcome.status]
    out = [f"### ltx2k confirm on `{outcome.machine}`: {head}", ""]
    if outcome.cells:
        if not outcome.dry_run:
            out += [
                "Each commit re-measured on this runner as an interleaved A/B pair "
                "(`asv continuous`), judged by `ltx2k regress`'s rule with the cell's "
                "threshold; a cell asv keeps one number of (`track_host_calibrated`) is "
                "judged on every measuring process's value with a rank test and the "
                "minimum step instead; ratio is after / before.",
                "",
            ]
        out += [
            "| cell | commit | before | after | ratio | p | verdict |",
            "|---|---|---:|---:|---:|---:|---|",
        ]
        for c in outcome.cells:
            commit = f"`{c.commit[:12]}`" if c.commit else "—"
            if c.subject:
                commit += " " + _md_escape(c.subject[:72])
            if c.bisected:
                commit += f" (bisected from {c.range_size} commits)"
            ratio = f"{c.ratio:.3f}" if c.ratio is not None else "—"
            p = f"{c.p_value:.2g}" if c.p_value is not None else (c.test or "—")
            verdict = _ICON[c.verdict] + (f": {_md_escape(c.message)}" if c.message else "")
            out.append(
                f"| {_md_escape(c.label)} | {commit} | {_value(c.before_value, c.unit)} "
                f"| {_value(c.after_value, c.unit)} | {ratio} | {p} | {verdict} |"
            )
        out.append("")
    if outcome.notes:
        out += ["Notes:", ""] + [f"- {_md_escape(n)}" for n in outcome.notes] + [""]
    return "\n".join(out)


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def format_line(c: CellResult) -> str:
    """One line per cell for the log."""
    parts = [f"{c.verdict:13s} {c.label}"]
    if c.commit:
        parts.append(f"commit {c.commit[:12]}")
    if c.before_value is not None or c.after_value is not None:
        before = _value(c.before_value, c.unit)
        parts.append(f"before {before} after {_value(c.after_value, c.unit)}")
    if c.ratio is not None:
        parts.append(f"ratio {c.ratio:.3f}")
    if c.p_value is not None:
        parts.append(f"p {c.p_value:.2g}")
    if c.message:
        parts.append(c.message)
    return "  ".join(parts)


def write_outputs(outcome: Outcome, *, json_path=None, markdown_path=None) -> str:
    """Write the JSON and Markdown files asked for; return the Markdown."""
    markdown = render_markdown(outcome)
    for flag, path, text in (
        ("--json", json_path, json.dumps(outcome.to_json(), indent=2) + "\n"),
        ("--markdown", markdown_path, markdown),
    ):
        if not path:
            continue
        try:
            store_kills.write_whole(path, text)
        except OSError as e:
            raise ValueError(
                f"{flag} {os.fspath(path)}: cannot write ({e.strerror or e})"
            ) from None
    return markdown
