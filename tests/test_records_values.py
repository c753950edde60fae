"""What a runner wrote where a number belongs, read without trusting it.

JSON ``true``/``false`` parse as Python bools, which are ints: a loader that asks
``isinstance(x, (int, float))`` reads them as 1.0 and 0.0. Every value, sample and
statistic here is either a real JSON number or makes its benchmark unusable, said in a
Problem; the loader never raises on what a result file holds.
"""

# ruff: noqa: F811  (pytest fixtures imported from test_history_load)
from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ltx2k.history.records import load_results
from tests.test_history_hostile import COLD, MACHINE, _column, _set_first_value
from tests.test_history_load import (  # noqa: F401 (fixtures)
    _edit,
    hist,
    only_injected_failure,
    pristine,
    result_files,
)

# --- one small result file, written afresh for every example ----------------------------

BENCH = "bench_x.Suite.time_x"
CLEAN = "bench_x.Suite.time_y"
PARAMS = [["'1'", "'2'", "'3'"]]
COMMIT = "0123456789abcdef0123456789abcdef01234567"
COLUMNS = [
    "result",
    "params",
    "version",
    "started_at",
    "duration",
    "stats_ci_99_a",
    "stats_ci_99_b",
    "stats_q_25",
    "stats_q_75",
    "stats_number",
    "stats_repeat",
    "samples",
    "profile",
]
MACHINE_JSON = {"machine": "h200", "arch": "x86_64", "cpu": "cpu", "version": 1}


def _row(values, samples, stat=None):
    n = len(values)
    stats = [stat] * n if stat is not None else [None] * n
    return [values, PARAMS, "v1", 1, 1.0, *([stats] * 6), samples, None]


def _write(root: Path, values, samples, stat=None) -> Path:
    results = root / "results"
    (results / "h200").mkdir(parents=True)
    meta = {"param_names": ["n"], "params": PARAMS, "unit": "seconds", "type": "time"}
    bench = {"version": 2, BENCH: dict(meta, name=BENCH), CLEAN: dict(meta, name=CLEAN)}
    (results / "benchmarks.json").write_text(json.dumps(bench))
    (results / "h200" / "machine.json").write_text(json.dumps(MACHINE_JSON))
    data = {
        "commit_hash": COMMIT,
        "env_name": "env",
        "date": 1767747600000,
        "params": {"machine": "h200", "python": "3.12"},
        "python": "3.12",
        "requirements": {},
        "env_vars": {},
        "result_columns": COLUMNS,
        "results": {
            BENCH: _row(values, samples, stat),
            CLEAN: _row([1e-3, 2e-3, None], [[1e-3], [2e-3, 2.5e-3], None]),
        },
        "durations": {},
        "version": 2,
    }
    (results / "h200" / f"{COMMIT[:8]}-env.json").write_text(json.dumps(data))
    return results


def _is_number(x) -> bool:
    """A JSON number (a bool is not one, though Python's bool is an int)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool)


# Any JSON value: true/false, strings, nested lists and objects, and the numbers asv
# writes (NaN and infinities included, as Python's json writes them by default).
_json_leaf = (
    st.none()
    | st.booleans()
    | st.integers(-(10**20), 10**20)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=5)
)
json_values = st.recursive(
    _json_leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=6,
)
# A plausible time, so that most examples hold some good cells next to the bad ones.
_times = st.floats(1e-9, 1.0)
_cells = st.one_of(_times, st.none(), json_values)
_sample_lists = st.one_of(st.none(), st.lists(st.one_of(_times, json_values), max_size=4))


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    values=st.lists(_cells, min_size=3, max_size=3),
    samples=st.one_of(st.lists(_sample_lists, min_size=3, max_size=3), json_values),
)
def test_any_json_in_value_or_sample_positions_is_never_read_as_a_number(values, samples):
    with tempfile.TemporaryDirectory(prefix="ltx2k-values-") as d:
        results = _write(Path(d), values, samples)
        records, problems = load_results(results)  # never raises
    mine = [r for r in records if r.benchmark == BENCH]
    # The clean benchmark of the same file always loads, whatever its neighbour holds.
    assert [r.value for r in records if r.benchmark == CLEAN] == [1e-3, 2e-3, None]
    if any(v is not None and not _is_number(v) for v in values):
        # A bool, string, list or object as a value: the benchmark is unusable, and said.
        assert not mine
        bad = [p for p in problems if p.benchmark == BENCH]
        assert [p.kind for p in bad] == ["bad-value"] and "'result'" in bad[0].message
    for r in mine:
        i = int(r.param_dict["n"]) - 1
        raw = values[i]
        assert r.value is None or (type(r.value) is float and _is_number(raw))
        if r.value is not None:
            assert r.value == float(raw)
        if r.samples is not None:
            cell = samples[i]
            assert all(type(x) is float for x in r.samples)
            assert list(r.samples) == [float(x) for x in cell] and all(map(_is_number, cell))
    if mine and isinstance(samples, list):
        # Loaded: then no sample cell held a bool (or any non-number).
        for cell in samples:
            if isinstance(cell, list):
                assert all(_is_number(x) for x in cell)


@pytest.mark.parametrize("stat", [True, False, "1", [1.0], {"a": 1}])
def test_a_non_number_statistic_makes_the_benchmark_unusable(tmp_path, stat):
    results = _write(tmp_path, [1e-3, 2e-3, 3e-3], [[1e-3], [2e-3], [3e-3]], stat=stat)
    records, problems = load_results(results)
    assert not [r for r in records if r.benchmark == BENCH]
    assert [p.kind for p in problems if p.benchmark == BENCH] == ["bad-value"]


@pytest.mark.parametrize("value", [True, False])
def test_json_true_or_false_as_a_value_is_not_one_or_zero(tmp_path, value):
    results = _write(tmp_path, [1e-3, value, 3e-3], [[1e-3], [2e-3], [3e-3]])
    records, problems = load_results(results)
    assert not [r for r in records if r.benchmark == BENCH]
    bad = [p for p in problems if p.benchmark == BENCH]
    assert [p.kind for p in bad] == ["bad-value"]
    assert f"JSON {str(value).lower()}" in bad[0].message and "'result'" in bad[0].message


@pytest.mark.parametrize("value", [True, False, "fast", [1e-3], {"v": 1e-3}])
def test_a_non_number_value_in_a_real_history_is_a_bad_value(hist, value):
    _, results = hist
    path = result_files(results, MACHINE)[0]
    _edit(path, _set_first_value(value))
    commit = json.loads(path.read_text())["commit_hash"]
    records, problems = load_results(results)
    bad = only_injected_failure(problems)
    assert [(p.kind, p.benchmark, p.path) for p in bad] == [("bad-value", COLD, str(path))]
    assert "'result'" in bad[0].message
    mine = [r for r in records if r.machine == MACHINE and r.commit == commit]
    assert mine and not any(r.benchmark == COLD for r in mine)


def test_every_value_true_loses_the_file_s_benchmarks_not_a_regression(hist):
    """``true`` everywhere once read as 1.0 s for every cell of the head."""
    _, results = hist
    path = result_files(results, MACHINE)[-1]

    def all_true(d):
        for row in d["results"].values():
            i = _column(d, "result")
            row[i] = [True for _ in row[i]]

    _edit(path, all_true)
    commit = json.loads(path.read_text())["commit_hash"]
    records, problems = load_results(results)
    assert not [r for r in records if r.commit == commit and r.machine == MACHINE]
    bad = only_injected_failure(problems)
    assert bad and {p.kind for p in bad} == {"bad-value"}
    assert all(p.path == str(path) and "JSON true" in p.message for p in bad)


# --- the file's name and its commit_hash field -------------------------------------------


@pytest.mark.parametrize(
    "field, words",
    [
        ("b" * 40, ["named for commit", "'" + "b" * 40 + "'"]),
        ("SHORT", ["named for commit", "not a full git commit hash"]),
    ],
    ids=["another-commit", "short-prefix"],
)
@pytest.mark.parametrize("windowed", [False, True])
def test_a_file_named_for_another_commit_is_said(hist, field, words, windowed):
    _, results = hist
    path = result_files(results, MACHINE)[-1]
    name_commit = json.loads(path.read_text())["commit_hash"]
    field = name_commit[:4] if field == "SHORT" else field
    _edit(path, lambda d: d.__setitem__("commit_hash", field))
    select = (lambda index: {(MACHINE, name_commit)}) if windowed else None
    records, problems = load_results(results, select=select)
    bad = only_injected_failure(problems)
    assert [(p.kind, p.path, p.machine) for p in bad] == [("commit-mismatch", str(path), MACHINE)]
    assert name_commit[:8] in bad[0].message and repr(field) in bad[0].message
    assert all(w in bad[0].message for w in words)
    # asv takes the commit from the field: so do the records (when the file is loaded).
    assert not [r for r in records if r.path == str(path) and r.commit != field]
    if not windowed:
        assert [r for r in records if r.path == str(path)]


def test_a_short_commit_hash_that_matches_the_name_is_said(hist):
    _, results = hist
    path = result_files(results, MACHINE)[0]
    commit = json.loads(path.read_text())["commit_hash"]
    _edit(path, lambda d: d.__setitem__("commit_hash", commit[:8]))
    _, problems = load_results(results)
    bad = only_injected_failure(problems)
    assert [(p.kind, p.path) for p in bad] == [("commit-mismatch", str(path))]
    assert "not a full git commit hash" in bad[0].message


# --- benchmarks.json ----------------------------------------------------------------------


def test_benchmarks_json_without_entries_is_a_problem(hist):
    _, results = hist
    path = results / "benchmarks.json"
    path.write_text('{"version": 2}')
    records, problems = load_results(results)
    bad = [p for p in problems if p.path == str(path)]
    assert [p.kind for p in bad] == ["corrupt"] and "describes no benchmark" in bad[0].message
    assert records


@pytest.mark.parametrize("entry", ["x", 7, None, ["a"]])
def test_benchmarks_json_entries_that_are_not_objects_are_a_problem(hist, entry):
    _, results = hist
    path = results / "benchmarks.json"
    _edit(path, lambda d: d.update({k: entry for k in d if k != "version"}))
    n = len(json.loads(path.read_text())) - 1
    records, problems = load_results(results)
    bad = [p for p in problems if p.path == str(path)]
    assert [p.kind for p in bad] == ["corrupt"]
    assert f"{n} benchmark entries" in bad[0].message and "not a JSON object" in bad[0].message
    assert records


def test_one_entry_not_an_object_is_said_and_the_rest_kept(hist):
    _, results = hist
    path = results / "benchmarks.json"
    _edit(path, lambda d: d.__setitem__(COLD, "x"))
    records, problems = load_results(results)
    bad = [p for p in problems if p.path == str(path)]
    assert [p.kind for p in bad] == ["corrupt"] and "1 benchmark entry" in bad[0].message
    assert {r.unit for r in records if r.benchmark != COLD} >= {"seconds"}
