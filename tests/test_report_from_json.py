"""``Report.from_json`` reads back what ``Report.to_json`` writes, and refuses the rest.

A report file reaches ``ltx2k publish --regress-json`` from another job, or from a
person's editor: a field of the wrong type or out of its set of values must stop the
publish with one line naming the file and the field (``rows[3].cells['h200'].flag``),
not draw GPUs named ``h``, ``2``, ``0``, ``0``, say "No regressions", or fail later
inside the page builder as an internal error.

The reports read back are real ones (``regress.compare`` on a synthetic history, in
both modes) and a hand-made one that holds every kind of field: earlier steps, a step
without a ratio, a GPU uuid, a shared verdict, a reason, problems and notes. The
property tests put a wrong value into one field at a time, picked by Hypothesis, and
expect ValueError naming that field.
"""

from __future__ import annotations

import copy
import json
import math
import re
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ltx2k import cli
from ltx2k.analysis import regress
from ltx2k.analysis.model import FLAGS, Baseline, Cell, Report, Row, StepInfo
from ltx2k.history.records import Problem, load_results
from ltx2k.report import publish
from tools.synthetic_history import Step, generate_history

GPU, OTHER = "h200", "a100-sxm4-80gb"
STATUSES = ("regression", "ok", "insufficient")
KINDS = ("commit", "branch", "last-n")
DIRECTIONS = ("regression", "improvement")
TESTS = ("mann-whitney", "ci-overlap", "ratio-only", "change-point", "none")
HEX = re.compile(r"[0-9a-fA-F]{4,64}")

PROPERTY = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,  # same examples on every run: a CI failure reproduces locally
    suppress_health_check=[HealthCheck.too_slow],
)


def _json(report: Report) -> dict:
    """The report as a file holds it: strict JSON (no NaN), parsed back."""
    return json.loads(json.dumps(report.to_json(), allow_nan=False))


def _read(doc, source="report") -> Report:
    return Report.from_json(doc, source=source)


class _Key(str):
    """A key of a JSON object whose keys are data (a GPU name): shown as ``cells['h200']``."""


def _fields(value, schema, where=()):
    """(where, kind) of *value* and of every field inside it, by *schema*."""
    if isinstance(schema, dict):
        yield where, "object"
        for key, sub in schema.items():
            if key in value:
                yield from _fields(value[key], sub, (*where, key))
    elif isinstance(schema, tuple) and schema[0] == "obj?":
        yield where, "object?"
        if value is not None:  # its fields, not the object again (null is right for it)
            yield from ((w, k) for w, k in _fields(value, schema[1], where) if w != where)
    elif isinstance(schema, tuple) and schema[0] == "list":
        yield where, "list"
        for i, item in enumerate(value):
            yield from _fields(item, schema[1], (*where, i))
    elif isinstance(schema, tuple) and schema[0] == "map":
        yield where, "object"
        for key, item in value.items():
            yield from _fields(item, schema[1], (*where, _Key(key)))
    elif schema == "pair":
        yield where, "pair"
        yield (*where, 0), "str"
        yield (*where, 1), "str"
    elif schema == "ci?":
        yield where, "ci?"
        for i in range(len(value or ())):
            yield (*where, i), "num?"
    else:
        yield where, schema


def _path(where) -> str:
    out = ""
    for part in where:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, _Key):
            out += f"[{str(part)!r}]"
        else:
            out += f".{part}" if out else part
    return out


def _get(doc, where):
    for part in where:
        doc = doc[str(part) if isinstance(part, _Key) else part]
    return doc


def _set(doc, where, value):
    _get(doc, where[:-1])[where[-1]] = value


# --- the reports ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    return generate_history(
        tmp_path_factory.mktemp("synth") / "h",
        n_commits=10,
        machines=(GPU, OTHER),
        # Two steps on one cell: the one at head flags it, the older one is an earlier step.
        steps=[
            Step.parse(f"{GPU}:SplitRope.time_device_cold:blocked:*:commit=3:+25%"),
            Step.parse(f"{GPU}:SplitRope.time_device_cold:blocked:*:commit=8:+30%"),
            Step.parse(f"{OTHER}:AdaValues9.time_device_cold:slab:*:commit=8:-20%"),
        ],
        # A cell that failed at head: an "insufficient" cell with its reason, and a problem.
        failures=[f"{OTHER}:AdaValues9.time_host_latency:eager:B1_S1_D2048_bf16:commit=9"],
        drop=[f"{OTHER}:commit=4"],
        seed=5,
    )


@pytest.fixture(scope="module")
def real_reports(history) -> dict[str, Report]:
    records, problems = load_results(history.results_dir)
    head = history.commits[-1]
    return {
        "last-n": regress.compare(records, head, last=20, repo=history.repo, problems=problems),
        "commit": regress.compare(records, head, baseline=history.commits[-3], problems=problems),
    }


def _small(report: Report) -> Report:
    """Rows of *report* that show every kind of cell (each flag and test, a step, earlier
    steps, a shared verdict, a reason), two of each, and the first rows; a valid report."""

    def kind(row):
        cs = row.cells.values()
        return (
            frozenset((c.flag, c.test) for c in cs),
            any(c.step for c in cs),
            any(c.earlier for c in cs),
            any(c.verdict_of for c in cs),
            any(c.why for c in cs),
        )

    seen: dict = {}
    for row in report.rows:
        seen.setdefault(kind(row), []).append(row)
    keep = {id(r) for rows in seen.values() for r in rows[:2]} | {id(r) for r in report.rows[:2]}
    small = replace(report, rows=tuple(r for r in report.rows if id(r) in keep))
    assert {c.flag for _, _, c in small.cells()} == {c.flag for _, _, c in report.cells()}
    return small


C1, C2, C3, C4, C5, C6 = (str(i) * 40 for i in range(1, 7))


def _hand_report() -> Report:
    """Every field of the format with a value, every flag, test and optional part."""
    range_step = StepInfo(C1, C4, (C2, C3, C4), 1.2, (1.15, 1.25), 1e-4, True, 4, "regression")
    exact_step = StepInfo(C5, C6, (C6,), 0.8, (0.78, 0.83), 1e-3, False, 1, "improvement")
    no_ratio = StepInfo(C4, C5, (C5,), None, None, 0.02, False, 1, "regression")

    def row(metric, params, cells, *, variant="blocked", shape="B1_S1024_H32_D128"):
        return Row(
            f"bench_kernels.SplitRope.{metric}", "SplitRope", metric, variant, shape,
            params, "seconds", metric.startswith("track_pct"), 1.03, cells,
        )  # fmt: skip

    shape = (("variant", "blocked"), ("shape", "B1_S1024_H32_D128"))
    return Report(
        head=C6,
        baseline=Baseline("last-n", "20", (C5, C4, C1), {"a100": (C5, C1), "h200": (C5, C4)}),
        status="regression",
        machines=("a100", "h200"),
        rows=(
            row(
                "time_device_cold",
                shape,
                {
                    "h200": Cell(
                        1.2,
                        "regression",
                        12e-6,
                        10e-6,
                        1e-4,
                        "change-point",
                        range_step,
                        (exact_step,),
                        0.004,
                        "GPU-0a1b2c3d-aaaa-bbbb-cccc-000000000001",
                    ),  # fmt: skip
                    "a100": Cell(None, "insufficient", None, None, None, "none", why="no results"),
                },
            ),
            row(
                "track_pct_copy_bandwidth",
                shape,
                {
                    "h200": Cell(
                        0.8,
                        "suspected",
                        40.0,
                        50.0,
                        0.02,
                        "change-point",
                        no_ratio,
                        verdict_of="bench_kernels.SplitRope.time_device_cold",
                    ),  # fmt: skip
                    "a100": Cell(1.1, "improvement", 55.0, 50.0, 3e-3, "mann-whitney"),
                },
            ),
            row(
                "time_host_launch",
                (("launch", "graph"), ("shape", "B1_S1_H32_D128")),
                {
                    "h200": Cell(1.0, "ok", 1e-5, 1e-5, None, "ci-overlap"),
                    "a100": Cell(0.0, "ok", 0.0, 2.0, None, "ratio-only", noise=0.0),
                },
                variant=None,
                shape=None,
            ),
        ),
        problems=(
            Problem("results/h200/1111-env.json", "h200", "corrupt", "not JSON"),
            Problem("results/benchmarks.json", None, "missing-benchmarks-json", "no file"),
        ),
        notes=("a100: only 2 of the last 20 commits have results.",),
    )


@pytest.fixture(scope="module")
def docs(real_reports) -> dict[str, dict]:
    """Small valid report files, by name, for the mutation tests."""
    hand = _hand_report()
    return {
        "last-n": _json(_small(real_reports["last-n"])),
        "commit": _json(_small(real_reports["commit"])),
        "hand": _json(hand),
        "hand-branch": _json(replace(hand, baseline=Baseline("branch", "main", (C5,)))),
    }


# --- round trip -------------------------------------------------------------------------


def test_real_reports_hold_what_the_mutation_tests_need(real_reports):
    """The history gives what the tests below pick from: steps with earlier steps,
    derived cells with their source's verdict, reasons, and both modes' statuses."""
    rep = real_reports["last-n"]
    assert rep.status == "regression" and real_reports["commit"].status == "regression"
    cells = [c for _, _, c in rep.cells()]
    assert any(c.step and c.earlier for c in cells)
    assert any(c.verdict_of for c in cells) and any(c.why for c in cells) and rep.problems
    assert {c.test for _, _, c in real_reports["commit"].cells()} >= {"mann-whitney"}


@pytest.mark.parametrize("mode", ["last-n", "commit"])
def test_a_real_report_reads_back_as_itself(real_reports, mode):
    report = real_reports[mode]
    assert _read(_json(report)) == report
    assert _read(report.to_json()) == report  # the mapping, not through a file


def test_a_hand_made_report_with_every_field_reads_back_as_itself():
    report = _hand_report()
    assert _read(_json(report)) == report
    branch = replace(report, baseline=Baseline("branch", "main", (C5,), {"h200": (C5,)}))
    assert _read(_json(branch)) == branch


def test_a_report_written_before_the_newer_fields_still_reads(docs):
    """Keys added to the format later (gpu_uuid, verdict_of, why, noise, earlier_steps,
    launch, ...) may be missing from an older file; an absent optional part reads as empty."""
    doc = copy.deepcopy(docs["hand"])
    for row in doc["rows"]:
        del row["launch"]
        for cell in row["cells"].values():
            for key in ("gpu_uuid", "verdict_of", "why", "noise", "earlier_steps", "test"):
                cell.pop(key)
    del doc["problems"], doc["notes"], doc["baseline"]["commits_by_machine"]
    rep = _read(doc)
    assert rep.problems == () and rep.notes == () and rep.baseline.by_machine == {}
    assert all(c.test == "none" and c.earlier == () for _, _, c in rep.cells())
    old = {"ratio": 1.0, "flag": "ok", "head": 1.0, "base": 1.0, "p_value": None, "test": "none"}
    assert Cell.from_json(old).gpu_uuid is None


def test_extra_keys_are_additive(docs):
    doc = copy.deepcopy(docs["hand"])
    doc["format_version"] = 2
    doc["rows"][0]["cells"]["h200"]["new_field"] = [1, 2]
    doc["rows"][0]["cells"]["h200"]["step"]["new_field"] = "x"
    assert _read(doc) == _read(docs["hand"])


# --- the cases found by hand ------------------------------------------------------------


def _error(doc, source="report") -> str:
    with pytest.raises(ValueError) as e:
        _read(doc, source)
    msg = str(e.value)
    assert "\n" not in msg, msg
    return msg


def _cell_paths(doc):
    return [(i, m) for i, row in enumerate(doc["rows"]) for m in row["cells"]]


def test_machines_as_a_string_is_refused(docs):
    doc = copy.deepcopy(docs["last-n"])
    doc["machines"] = "h200"
    msg = _error(doc)
    assert re.search(r"\bmachines must be a list of strings, got str 'h200'", msg), msg


def test_a_flag_outside_flags_is_refused_not_read_as_no_regression(docs):
    doc = copy.deepcopy(docs["last-n"])
    for i, m in _cell_paths(doc):
        doc["rows"][i]["cells"][m]["flag"] = "weird"
    m0 = next(iter(doc["rows"][0]["cells"]))
    msg = _error(doc)
    assert f"rows[0].cells[{m0!r}].flag must be one of {list(FLAGS)}, got str 'weird'" in msg


@pytest.mark.parametrize(
    "key, value, expect",
    [
        ("status", "bogus", f"status must be one of {list(STATUSES)}, got str 'bogus'"),
        ("notes", "abc", "notes must be a list of strings, got str 'abc'"),
        ("head", "zzz", "head must be a commit sha (4 to 64 hex digits), got str 'zzz'"),
        ("head", None, "head must be a commit sha (4 to 64 hex digits), got null"),
        ("head", 12345678, "head must be a commit sha (4 to 64 hex digits), got int 12345678"),
        ("rows", {}, "rows must be a list, got dict {}"),
        ("problems", "none", "problems must be a list, got str 'none'"),
    ],
)
def test_a_wrong_top_level_field_is_refused(docs, key, value, expect):
    doc = copy.deepcopy(docs["last-n"])
    doc[key] = value
    assert expect in _error(doc)


def test_a_null_benchmark_is_refused(docs):
    doc = copy.deepcopy(docs["last-n"])
    doc["rows"][2]["benchmark"] = None
    assert "rows[2].benchmark must be a string, got null" in _error(doc)


def test_a_string_where_a_number_is_expected_is_refused(docs):
    doc = copy.deepcopy(docs["last-n"])
    for i, m in _cell_paths(doc):
        doc["rows"][i]["cells"][m]["head"] = "abc"
    m0 = next(iter(doc["rows"][0]["cells"]))
    msg = _error(doc)
    assert f"rows[0].cells[{m0!r}].head must be a finite number or null, got str 'abc'" in msg


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), True, 10**400])
def test_a_number_that_is_not_finite_or_is_a_bool_is_refused(docs, value):
    """NaN and Infinity are not JSON, but Python's json reads them; a bool is no number."""
    doc = copy.deepcopy(docs["hand"])
    doc["rows"][0]["threshold"] = value
    assert "rows[0].threshold must be a finite number, got" in _error(doc)
    doc = copy.deepcopy(docs["hand"])
    doc["rows"][0]["cells"]["h200"]["step"]["ci"][1] = value
    assert "rows[0].cells['h200'].step.ci[1] must be a finite number or null" in _error(doc)


@pytest.mark.parametrize(
    "where, value, expect",
    [
        (("baseline", "kind"), "tag", f"baseline.kind must be one of {list(KINDS)}, got str 'tag'"),
        (("baseline", "ref"), "twenty", "baseline.ref must be a whole number of commits"),
        (("baseline", "ref"), "0", "baseline.ref must be a whole number of commits"),
        (("baseline", "ref"), 20, "baseline.ref must be a string, got int 20"),
        (("baseline", "commits"), "abcd", "baseline.commits must be a list of commit shas"),
        (("baseline", "commits_by_machine"), [], "baseline.commits_by_machine must be an object"),
        (
            ("rows", 0, "cells", "h200", "step", "direction"),
            "worse",
            f"rows[0].cells['h200'].step.direction must be one of {list(DIRECTIONS)}",
        ),
        (
            ("rows", 0, "cells", "h200", "test"),
            "t-test",
            f"rows[0].cells['h200'].test must be one of {list(TESTS)}, got str 't-test'",
        ),
        (
            ("rows", 0, "cells", "h200", "step", "runs_after"),
            -1,
            "rows[0].cells['h200'].step.runs_after must be a whole number >= 0, got int -1",
        ),
        (
            ("rows", 0, "cells", "h200", "step", "persists"),
            "yes",
            "rows[0].cells['h200'].step.persists must be true or false, got str 'yes'",
        ),
        (
            ("rows", 0, "cells", "h200", "step", "ci"),
            [1.0],
            "rows[0].cells['h200'].step.ci must be a list of 2 numbers or null, got list [1.0]",
        ),
        (
            ("rows", 0, "params", 1),
            ["shape"],
            "rows[0].params[1] must be a [name, value] pair of strings, got list ['shape']",
        ),
        (("rows", 0, "higher_is_better"), 0, "rows[0].higher_is_better must be true or false"),
        (("problems", 1, "machine"), 7, "problems[1].machine must be a string or null, got int 7"),
    ],
)
def test_each_kind_of_field_is_checked(docs, where, value, expect):
    doc = copy.deepcopy(docs["hand"])
    _set(doc, where, value)
    assert expect in _error(doc)


@pytest.mark.parametrize(
    "where",
    [
        ("head",),
        ("baseline",),
        ("status",),
        ("rows",),
        ("baseline", "kind"),
        ("baseline", "ref"),
        ("rows", 1, "benchmark"),
        ("rows", 1, "cells", _Key("h200"), "flag"),
        ("rows", 0, "cells", _Key("h200"), "step", "first_bad"),
        ("rows", 0, "cells", _Key("h200"), "earlier_steps", 0, "persists"),
        ("problems", 0, "kind"),
    ],
)
def test_a_missing_required_field_is_named(docs, where):
    doc = copy.deepcopy(docs["hand"])
    parent = _get(doc, where[:-1])
    del parent[where[-1]]
    assert f"{_path(where)} is missing" in _error(doc)


def test_cells_must_be_the_reports_machines(docs):
    """Each row has one cell per GPU of ``machines``, as regress writes it: the Markdown
    and the counts read ``row.cells[m]`` for every GPU."""
    doc = copy.deepcopy(docs["hand"])
    del doc["rows"][1]["cells"]["a100"]
    assert "rows[1].cells must hold one cell per machine of machines" in _error(doc)
    assert "missing: ['a100']" in _error(doc)
    doc = copy.deepcopy(docs["hand"])
    doc["rows"][2]["cells"]["l40s"] = doc["rows"][2]["cells"]["h200"]
    assert "not in machines: ['l40s']" in _error(doc)


def test_the_status_must_agree_with_the_flags(docs):
    """ "regression" exactly when a cell is flagged so (the exit status and the page's
    badge follow the status, the counts follow the flags)."""
    doc = copy.deepcopy(docs["hand"])
    doc["status"] = "ok"
    msg = _error(doc)
    assert "status must be 'regression' when a cell is flagged regression, got str 'ok'" in msg
    doc = copy.deepcopy(docs["hand"])
    doc["rows"][0]["cells"]["h200"]["flag"] = "ok"
    assert "status is 'regression' but no cell is flagged regression" in _error(doc)


def test_a_non_object_is_refused():
    for doc in ([1, 2], "report", None, 3):
        assert "the report must be a JSON object, got" in _error(doc)


def test_the_single_classes_name_their_fields(docs):
    cell = copy.deepcopy(docs["hand"]["rows"][0]["cells"]["h200"])
    cell["flag"] = "weird"
    with pytest.raises(ValueError, match=r"^cell\.flag must be one of"):
        Cell.from_json(cell)
    row = copy.deepcopy(docs["hand"]["rows"][0])
    row["unit"] = None
    with pytest.raises(ValueError, match=r"^row\.unit must be a string, got null"):
        Row.from_json(row)
    step = copy.deepcopy(docs["hand"]["rows"][0]["cells"]["h200"]["step"])
    step["range"] = "1111"
    with pytest.raises(ValueError, match=r"^step\.range must be a list of commit shas"):
        StepInfo.from_json(step)


# --- one wrong field at a time, picked by Hypothesis ----------------------------------------

# The format (docs/history.md), as the tests see it: each field and what it holds.
# "?" suffix: null allowed. ("enum", values): one of the values. ("list", item),
# ("map", value): a JSON array / object of items; a dict: an object of these fields.
STEP = {
    "last_good": "commit",
    "first_bad": "commit",
    "range": ("list", "commit"),
    "ratio": "num?",
    "ci": "ci?",
    "p_value": "num?",
    "persists": "bool",
    "runs_after": "count",
    "direction": ("enum", DIRECTIONS),
}
CELL = {
    "ratio": "num?",
    "flag": ("enum", FLAGS),
    "head": "num?",
    "base": "num?",
    "p_value": "num?",
    "test": ("enum", TESTS),
    "step": ("obj?", STEP),
    "earlier_steps": ("list", STEP),
    "noise": "num?",
    "gpu_uuid": "str?",
    "verdict_of": "str?",
    "why": "str?",
}
ROW = {
    "benchmark": "str",
    "kernel": "str",
    "metric": "str",
    "variant": "str?",
    "launch": "str?",
    "shape": "str?",
    "params": ("list", "pair"),
    "unit": "str",
    "higher_is_better": "bool",
    "threshold": "num",
    "cells": ("map", CELL),
}
PROBLEM = {"path": "str", "machine": "str?", "kind": "str", "message": "str"}
REPORT = {
    "head": "commit",
    "baseline": {
        "kind": ("enum", KINDS),
        "ref": "str",
        "commits": ("list", "commit"),
        "commits_by_machine": ("map", ("list", "commit")),
    },
    "status": ("enum", STATUSES),
    "machines": ("list", "str"),
    "rows": ("list", ROW),
    "notes": ("list", "str"),
    "problems": ("list", PROBLEM),
}


def _is_number(v) -> bool:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        return math.isfinite(float(v))
    except OverflowError:
        return False


def _valid(kind, v) -> bool:
    """Whether *v* is a right value for a field of *kind* (then it is no mutation)."""
    if isinstance(kind, tuple):  # ("enum", values)
        return v in kind[1] and isinstance(v, str)
    nullable = kind.endswith("?")
    if v is None:
        return nullable
    base = kind.rstrip("?")
    return {
        "str": lambda: isinstance(v, str),
        "commit": lambda: isinstance(v, str) and bool(HEX.fullmatch(v)),
        "num": lambda: _is_number(v),
        "bool": lambda: isinstance(v, bool),
        "count": lambda: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
        "object": lambda: isinstance(v, dict),
        "list": lambda: isinstance(v, list),
        "pair": lambda: isinstance(v, list) and len(v) == 2 and all(isinstance(x, str) for x in v),
        "ci": lambda: (
            isinstance(v, list) and len(v) == 2 and all(x is None or _is_number(x) for x in v)
        ),
    }[base]()


_JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.just(10**400),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["", "zzz", "abc", "h200", "1e3", "NaN", "true", "null", "g" * 40]),
    st.sampled_from(FLAGS + STATUSES + KINDS + TESTS),
    st.text(max_size=6),
    st.lists(st.one_of(st.integers(), st.text(max_size=3), st.none()), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


@st.composite
def _mutation(draw, docs):
    name = draw(st.sampled_from(sorted(docs)))
    fields = list(_fields(docs[name], REPORT))
    where, kind = draw(st.sampled_from(fields))
    value = draw(_JUNK.filter(lambda v: not _valid(kind, v)))
    return name, where, kind, value


@PROPERTY
@given(data=st.data())
def test_one_wrong_field_is_refused_naming_it(docs, data):
    name, where, kind, value = data.draw(_mutation(docs), label="mutation")
    doc = copy.deepcopy(docs[name])
    if where:
        _set(doc, where, value)
    else:
        doc = value
    with pytest.raises(ValueError) as e:
        _read(doc, source="regress_json='r.json'")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("regress_json='r.json' "), msg
    subject = _path(where) if where else "the report"
    # A pair or interval of the right length is refused at its wrong item ([i]).
    assert re.search(rf": {re.escape(subject)}(\[\d\])? must be ", msg), (kind, msg)


@pytest.mark.parametrize("name", ["last-n", "commit", "hand", "hand-branch"])
def test_every_field_of_a_valid_file_reads_as_written(docs, name):
    """The other side of the property: the unmutated files read, and writing what was
    read gives each file back, field for field."""
    assert _read(docs[name]).to_json() == docs[name]


# --- on the command line --------------------------------------------------------------------


def test_publish_names_the_file_and_the_field(history, docs, tmp_path):
    bad = dict(docs["last-n"], machines="h200")
    path = tmp_path / "rep.json"
    path.write_text(json.dumps(bad))
    with pytest.raises(ValueError) as e:
        publish._load_report(path)
    assert repr(str(path)) in str(e.value) and "machines must be a list" in str(e.value)
    with pytest.raises(ValueError, match=r"^regress_json .*rows\[0\]\.benchmark must be"):
        doc = copy.deepcopy(docs["last-n"])
        doc["rows"][0]["benchmark"] = 3
        publish._load_report(doc)


def test_cli_publish_refuses_a_malformed_report_in_one_line(history, docs, tmp_path, capsys):
    doc = copy.deepcopy(docs["last-n"])
    for row in doc["rows"]:
        for cell in row["cells"].values():
            cell["flag"] = "weird"
    path = tmp_path / "rep.json"
    path.write_text(json.dumps(doc))
    html = tmp_path / "html"
    argv = ["publish", "--config", str(history.conf), "--html", str(html)]
    code = cli.main([*argv, "--regress-json", str(path), "--last", "5"])
    err = capsys.readouterr().err
    assert code == cli.EXIT_ERROR, err
    assert "Traceback" not in err and not html.exists()
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"ltx2k: error: --regress-json {str(path)!r} "), last
    assert ".flag must be one of" in last and "'weird'" in last, last
