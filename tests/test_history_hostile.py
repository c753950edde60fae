"""The loader under wrongly typed, extreme, nested and non-regular input.

Every case damages one field of one file of a synthetic history: the load must
finish, name the file and the field in a Problem, keep the rest, and hand on
only values the detector and the plots can take.
"""

# ruff: noqa: F811  (pytest fixtures imported from test_history_load)
from __future__ import annotations

import json
import math
import os
import threading
from pathlib import Path

import pytest

from ltx2k.history.fields import MAX_SECONDS
from ltx2k.history.records import load_results
from tests.test_history_load import (  # noqa: F401 (fixtures)
    _column,
    _edit,
    hist,
    only_injected_failure,
    pristine,
    result_files,
)

COLD = "bench_kernels.SplitRope.time_device_cold"
MACHINE = "h200"


def _set_stat(column: str, value):
    def fn(d):
        d["results"][COLD][_column(d, column)] = [value] * len(d["results"][COLD][0])

    return fn


def _set_first_value(value):
    def fn(d):
        d["results"][COLD][0][0] = value

    return fn


def _set_key(key, value):
    def fn(d):
        d[key] = value

    return fn


def _repeat_first_param(d):
    values = d["results"][COLD][_column(d, "params")][0]
    values[1] = values[0]


def _set_samples(value):
    def fn(d):
        d["results"][COLD][_column(d, "samples")] = value

    return fn


BENCH_CASES = {
    "ci-string": (_set_stat("stats_ci_99_a", "x"), "stats_ci_99_a"),
    "ci-list": (_set_stat("stats_ci_99_a", [1, 2]), "stats_ci_99_a"),
    "ci-dict": (_set_stat("stats_ci_99_b", {"a": 1}), "stats_ci_99_b"),
    "number-string": (_set_stat("stats_number", "many"), "stats_number"),
    "number-zero": (_set_stat("stats_number", 0), "stats_number"),
    "number-fraction": (_set_stat("stats_number", 2.5), "stats_number"),
    "repeat-bool": (_set_stat("stats_repeat", True), "stats_repeat"),
    "q25-negative": (_set_stat("stats_q_25", -1.0), "stats_q_25"),
    "samples-int": (_set_samples(7), "samples"),
    "samples-nested": (_set_samples([[[1.0]]]), "samples"),
    "value-inf": (_set_first_value(math.inf), "result"),
    "value-huge": (_set_first_value(1e308), "result"),
    "value-zero": (_set_first_value(0.0), "result"),
    "value-negative": (_set_first_value(-1e-5), "result"),
    "value-absurd": (_set_first_value(MAX_SECONDS * 10), "result"),
    "value-string": (_set_first_value("fast"), "result"),
    # Two values for one cell: whichever the index kept was judged, a step of noise.
    "params-repeated": (_repeat_first_param, "params"),
}

FILE_CASES = {
    "date-string": (_set_key("date", "yesterday"), "date"),
    "date-huge": (_set_key("date", 1e20), "date"),
    "date-negative": (_set_key("date", -5), "date"),
    "date-list": (_set_key("date", [1]), "date"),
    "commit-dict": (_set_key("commit_hash", {"a": 1}), "commit_hash"),
    "env-html": (_set_key("env_name", "<img src=x onerror=alert(1)>"), "env_name"),
}


def _check_finite(records):
    for r in records:
        if r.value is not None:
            assert math.isfinite(r.value) and (r.unit != "seconds" or r.value > 0)
        assert 0 <= r.date <= 7258118400000


@pytest.mark.parametrize("case", sorted(BENCH_CASES))
def test_bad_field_loses_only_that_benchmark_of_that_file(hist, case):
    _, results = hist
    damage, field = BENCH_CASES[case]
    path = result_files(results, MACHINE)[0]
    _edit(path, damage)
    commit = json.loads(path.read_text())["commit_hash"]
    records, problems = load_results(results)
    bad = only_injected_failure(problems)
    # asv's own accessors refuse some of these first ("corrupt"); either way one problem
    # names the file, and ours also names the field.
    assert [(p.machine, p.benchmark) for p in bad] == [(MACHINE, COLD)]
    assert bad[0].kind in ("bad-value", "corrupt") and str(path) in bad[0].message
    assert bad[0].kind == "corrupt" or repr(field) in bad[0].message
    mine = [r for r in records if r.machine == MACHINE and r.commit == commit]
    assert mine and not any(r.benchmark == COLD for r in mine)
    _check_finite(records)


@pytest.mark.parametrize("case", sorted(FILE_CASES))
def test_bad_file_field_loses_only_that_file(hist, case):
    _, results = hist
    damage, field = FILE_CASES[case]
    path = result_files(results, MACHINE)[0]
    commit = json.loads(path.read_text())["commit_hash"]
    _edit(path, damage)
    records, problems = load_results(results)
    bad = only_injected_failure(problems)
    assert [(p.machine, p.path) for p in bad] == [(MACHINE, str(path))]
    assert bad[0].kind in ("bad-value", "corrupt")
    assert bad[0].kind == "corrupt" or repr(field) in bad[0].message
    assert not [r for r in records if r.machine == MACHINE and r.commit == commit]
    assert [r for r in records if r.machine == MACHINE]
    _check_finite(records)


@pytest.mark.parametrize(
    "text, words",
    [
        ("[" * 100_000, "nested more than"),
        ('{"a": ' + "[" * 5_000 + "]" * 5_000 + "}", "nested more than"),
        ('{"version": 2, "date": ' + "9" * 100_000 + "}", "digits"),
        ('{"version": 2, "x": -' + "1" * 5_000 + "}", "digits"),
    ],
    ids=["open-brackets", "deep-but-closed", "huge-int", "huge-negative-int"],
)
def test_deep_or_huge_json_is_a_problem(hist, text, words):
    _, results = hist
    path = result_files(results, MACHINE)[0]
    path.write_text(text)
    records, problems = load_results(results)
    bad = only_injected_failure(problems)
    assert [(p.kind, p.path) for p in bad] == [("corrupt", str(path))]
    assert words in bad[0].message
    assert records


def _load_in_thread(results):
    out = {}
    t = threading.Thread(target=lambda: out.update(r=load_results(results)), daemon=True)
    t.start()
    t.join(30)
    assert not t.is_alive(), "load_results blocked"
    return out["r"]


@pytest.mark.parametrize("where", ["result", "machine.json", "benchmarks.json"])
def test_fifo_is_skipped_not_waited_on(hist, where):
    _, results = hist
    path = {
        "result": results / MACHINE / "fifo-env.json",
        "machine.json": results / MACHINE / "machine.json",
        "benchmarks.json": results / "benchmarks.json",
    }[where]
    path.unlink(missing_ok=True)
    os.mkfifo(path)
    records, problems = _load_in_thread(results)
    kind = "bad-machine-json" if where == "machine.json" else "not-a-file"
    assert any(p.kind == kind and p.path == str(path) for p in problems)
    assert "FIFO" in next(p.message for p in problems if p.path == str(path))


@pytest.mark.parametrize("target", ["file", "dir"])
def test_symlinks_are_never_followed(hist, tmp_path, target):
    _, results = hist
    outside = tmp_path / "outside"
    outside.mkdir()
    src = result_files(results, MACHINE)[0]
    if target == "file":
        (outside / "x.json").write_text(src.read_text())
        link = results / MACHINE / "zz-link.json"
        link.symlink_to(outside / "x.json")
    else:
        (outside / "machine.json").write_text((results / MACHINE / "machine.json").read_text())
        link = results / "linked-machine"
        link.symlink_to(outside)
    _, problems = load_results(results)
    bad = only_injected_failure(problems)
    assert [(p.kind, p.path) for p in bad] == [("not-a-file", str(link))]


def test_file_over_the_size_limit_is_skipped(hist, monkeypatch):
    from ltx2k.history import jsonfile

    _, results = hist
    path = result_files(results, MACHINE)[0]
    monkeypatch.setattr(jsonfile, "MAX_FILE_BYTES", path.stat().st_size - 1)
    _, problems = load_results(results)
    assert any(p.kind == "too-large" and p.path == str(path) for p in problems)


@pytest.mark.parametrize(
    "name",
    [
        "bench_kernels.SplitRope.time_kernel<img src=x onerror=alert(1)>",
        "bench_kernels.SplitRope.time kernel",
        "bench_kernels..time_kernel",
        "bench_kernels.SplitRope.time_kernel'\"",
    ],
)
def test_benchmark_name_outside_asvs_grammar_is_refused(hist, name):
    _, results = hist
    path = result_files(results, MACHINE)[0]
    _edit(path, lambda d: d["results"].__setitem__(name, d["results"].pop(COLD)))
    _edit(results / "benchmarks.json", lambda d: d.__setitem__(name, d.pop(COLD)))
    records, problems = load_results(results)
    assert not any(r.benchmark == name for r in records)
    bad = [p for p in problems if p.kind == "bad-name"]
    assert bad and all(p.benchmark == name for p in bad)
    assert {p.path for p in bad} == {str(path), str(results / "benchmarks.json")}


@pytest.mark.parametrize(
    "field, value",
    [
        ("params", [["'<script>alert(1)</script>'"]]),
        ("param_names", ["x<b>"]),
        ("pretty_name", "<img src=x onerror=alert(1)>"),
        ("unit", "s<script>"),
        ("params", 5),
    ],
)
def test_benchmarks_json_field_shown_by_asv_is_checked(hist, field, value):
    _, results = hist
    _edit(results / "benchmarks.json", lambda d: d[COLD].__setitem__(field, value))
    records, problems = load_results(results)
    bad = [p for p in problems if p.kind == "bad-name"]
    assert [(p.benchmark, p.path) for p in bad] == [(COLD, str(results / "benchmarks.json"))]


def test_machine_name_outside_asvs_file_names_is_refused(hist):
    _, results = hist
    bad_name = 'h200"><img src=x onerror=alert(1)>'
    os.rename(results / MACHINE, results / bad_name)
    records, problems = load_results(results)
    assert [p.kind for p in problems if p.path == str(results / bad_name)] == ["bad-machine-name"]
    assert not any(r.machine == bad_name for r in records)


def test_parameter_value_in_a_result_file_is_checked(hist):
    _, results = hist
    path = result_files(results, MACHINE)[0]
    _edit(path, lambda d: d["results"][COLD][1][0].__setitem__(0, "'<b>x</b>'"))
    records, problems = load_results(results)
    bad = only_injected_failure(problems)
    assert [(p.kind, p.benchmark) for p in bad] == [("bad-value", COLD)]
    assert "'params'" in bad[0].message


def test_a_clean_history_has_no_new_problem(hist):
    _, results = hist
    records, problems = load_results(results)
    assert only_injected_failure(problems) == []
    _check_finite(records)
    assert Path(results).is_dir()


@pytest.mark.parametrize(
    "field, value",
    [("cpu", "<img src=x onerror=alert(1)>"), ("os", ["Linux"]), ("<b>", "x")],
)
def test_machine_json_field_shown_by_asv_is_checked(hist, field, value):
    _, results = hist
    _edit(results / MACHINE / "machine.json", lambda d: d.__setitem__(field, value))
    records, problems = load_results(results)
    bad = only_injected_failure(problems)
    assert [(p.kind, p.machine) for p in bad] == [("bad-machine-json", MACHINE)]
    assert [r for r in records if r.machine == MACHINE]  # its results still load
