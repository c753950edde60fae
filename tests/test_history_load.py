"""Loading asv results: malformed input becomes Problems, never an exception or a lost GPU."""

from __future__ import annotations

import json
import math
import shutil
from collections import Counter
from pathlib import Path

import pytest
from asv.results import Results

from ltx2k.history.records import Problem, Record, load_results
from ltx2k.history.window import Window
from ltx2k.workload import shapes, variants
from tools.synthetic_history import generate_history, suite

FAIL = "h100-80gb-hbm3:SplitRope.time_device_warm:eager:B4_S25_H32_D64:commit=1"


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    return generate_history(
        tmp_path_factory.mktemp("synth") / "h", n_commits=3, seed=3, failures=[FAIL]
    )


@pytest.fixture
def hist(pristine, tmp_path):
    """A private copy of the synthetic results that a test may damage."""
    dest = tmp_path / "results"
    shutil.copytree(pristine.results_dir, dest)
    return pristine, dest


def result_files(results: Path, machine: str) -> list[Path]:
    return sorted(p for p in (results / machine).glob("*.json") if p.name != "machine.json")


def n_records_in(path: Path) -> int:
    return sum(len(row[0]) for row in json.loads(path.read_text())["results"].values())


def by_kind(problems: list[Problem]) -> Counter:
    return Counter(p.kind for p in problems)


def only_injected_failure(problems: list[Problem]) -> list[Problem]:
    """The problems other than the failure the fixture injected on purpose."""
    return [p for p in problems if not (p.kind == "failed" and "time_device_warm" in p.message)]


def test_clean_history_loads_with_asvs_own_values(hist):
    h, results = hist
    records, problems = load_results(results)
    assert only_injected_failure(problems) == []
    # Every metric at its own shapes: opt-in metrics run at their listed shapes only.
    per_commit = sum(len(v) * len(s) for v, s in suite().values())
    assert per_commit < 5 * sum(
        len(variants.TIMED_VARIANTS[k]) * len(shapes.shapes_of(k, True))
        for k in variants.TIMED_VARIANTS
    )
    expected = len(h.machines) * len(h.commits) * per_commit
    assert len(records) == expected
    assert {r.machine for r in records} == set(h.machines)
    assert {r.commit for r in records} == set(h.commits)

    units = {r.benchmark.rsplit(".", 1)[1]: r.unit for r in records}
    assert units["time_device_cold"] == "seconds"
    assert units["track_allocations"] == "allocations"
    assert units["track_pct_copy_bandwidth"] == "%"
    seen = {r.param_dict["variant"] for r in records if ".SplitRope." in r.benchmark}
    assert seen == set(variants.TIMED_VARIANTS["split_rope"])  # unquoted: 'blocked' -> blocked

    # Spot-check against asv's own accessors on one file.
    path = result_files(results, "h200")[0]
    res = Results.load(str(path))
    name = "bench_kernels.SplitRope.time_device_cold"
    params = res.get_result_params(name)
    asv_values = res.get_result_value(name, params)
    ours = [r for r in records if r.benchmark == name and r.commit == res.commit_hash]
    ours = [r for r in ours if r.machine == "h200"]
    assert sorted(r.value for r in ours) == sorted(asv_values)
    for r in ours:
        assert r.ci_99[0] <= r.value <= r.ci_99[1]
        assert r.q_25 <= r.value <= r.q_75
        assert len(r.samples) == r.repeat
        assert r.date == res.date and r.env == h_env(path)
        assert r.machine_info["gpu"] == "NVIDIA H200"


def h_env(path: Path) -> str:
    return path.stem.split("-", 1)[1]


def test_injected_failure_is_a_problem_and_a_none_record(hist):
    h, results = hist
    records, problems = load_results(results)
    failed = [p for p in problems if p.kind == "failed"]
    assert len(failed) == 1
    p = failed[0]
    assert p.machine == "h100-80gb-hbm3"
    assert "bench_kernels.SplitRope.time_device_warm" in p.message
    assert "variant=eager, shape=B4_S25_H32_D64" in p.message
    assert h.commits[1][:8] in p.message
    none = [r for r in records if r.value is None]
    assert [(r.machine, r.commit, r.benchmark, r.params) for r in none] == [
        (
            "h100-80gb-hbm3",
            h.commits[1],
            "bench_kernels.SplitRope.time_device_warm",
            (("variant", "eager"), ("shape", "B4_S25_H32_D64")),
        )
    ]
    assert none[0].samples is None and none[0].ci_99 is None


@pytest.mark.parametrize(
    "damage, kind, words",
    [
        (
            lambda p: p.write_text(p.read_text()[: len(p.read_text()) // 2]),
            "truncated",
            "truncated",
        ),
        (lambda p: p.write_text(""), "truncated", "empty"),
        (lambda p: p.write_text("results: <<garbage>> {"), "corrupt", "not valid JSON"),
        (lambda p: p.write_bytes(b"\xff\xfe\x00garbage"), "corrupt", "not text"),
        (lambda p: p.write_text("[1, 2, 3]"), "corrupt", "not an object"),
        (lambda p: p.write_text('{"version": 2, "results": {}}'), "corrupt", "missing key"),
        (lambda p: p.write_text('{"version": 1}'), "wrong-version", "format version 1"),
    ],
    ids=["truncated", "empty", "garbage", "binary", "list", "missing-keys", "old-version"],
)
def test_damaged_result_file_is_reported_and_the_rest_loads(hist, damage, kind, words):
    _, results = hist
    clean, _ = load_results(results)
    victim = result_files(results, "a100-sxm4-80gb")[1]
    lost = n_records_in(victim)
    damage(victim)
    records, problems = load_results(results)
    bad = only_injected_failure(problems)
    assert [(p.kind, p.machine, p.path) for p in bad] == [(kind, "a100-sxm4-80gb", str(victim))]
    assert words in bad[0].message and str(victim) in bad[0].message
    assert len(records) == len(clean) - lost
    assert Counter(r.machine for r in records)["h200"] == Counter(r.machine for r in clean)["h200"]


def test_unreadable_path_is_reported(hist):
    _, results = hist
    (results / "h200" / "0badc0de-env.json").mkdir()  # a directory where a file should be
    _, problems = load_results(results)
    bad = only_injected_failure(problems)
    assert [(p.kind, p.machine) for p in bad] == [("unreadable", "h200")]


def test_machine_with_only_broken_files_is_not_dropped(hist):
    _, results = hist
    for p in result_files(results, "a100-sxm4-80gb"):
        p.write_text("{ not json")
    records, problems = load_results(results)
    assert "a100-sxm4-80gb" not in {r.machine for r in records}
    kinds = by_kind(p for p in problems if p.machine == "a100-sxm4-80gb")
    assert kinds == {"corrupt": 3, "no-usable-results": 1}
    summary = next(p for p in problems if p.kind == "no-usable-results")
    assert "'a100-sxm4-80gb'" in summary.message and "3 result file(s)" in summary.message
    assert {r.machine for r in records} == {"h200", "h100-80gb-hbm3"}


def test_machine_dir_without_results(hist):
    _, results = hist
    (results / "b200").mkdir()
    (results / "b200" / "machine.json").write_text(json.dumps({"machine": "b200", "version": 1}))
    (results / "gb200").mkdir()  # not even a machine.json
    records, problems = load_results(results)
    bad = only_injected_failure(problems)
    assert sorted((p.kind, p.machine) for p in bad) == [
        ("empty-machine", "b200"),
        ("empty-machine", "gb200"),
        ("missing-machine-json", "gb200"),
    ]
    assert all("no result files" in p.message for p in bad if p.kind == "empty-machine")
    assert len({r.machine for r in records}) == 3


@pytest.mark.parametrize(
    "content, kind",
    [(None, "missing-machine-json"), ("{garbage", "bad-machine-json")],
    ids=["missing", "garbage"],
)
def test_bad_machine_json_still_loads_results(hist, content, kind):
    _, results = hist
    clean, _ = load_results(results)
    path = results / "h200" / "machine.json"
    if content is None:
        path.unlink()
    else:
        path.write_text(content)
    records, problems = load_results(results)
    bad = only_injected_failure(problems)
    assert [(p.kind, p.machine) for p in bad] == [(kind, "h200")]
    assert "asv publish" in bad[0].message
    h200 = [r for r in records if r.machine == "h200"]
    assert len(h200) == sum(r.machine == "h200" for r in clean)
    assert all(dict(r.machine_info) == {} for r in h200)


def test_result_filed_under_the_wrong_machine(hist):
    _, results = hist
    stray = result_files(results, "h200")[0]
    target = results / "a100-sxm4-80gb" / ("ffffffff-" + stray.name.split("-", 1)[1])
    shutil.copy(stray, target)
    clean_a100 = sum(r.machine == "a100-sxm4-80gb" for r in load_results(results)[0])
    records, problems = load_results(results)
    bad = only_injected_failure(problems)
    assert [(p.kind, p.machine, p.path) for p in bad] == [
        ("machine-mismatch", "a100-sxm4-80gb", str(target))
    ]
    assert sum(r.machine == "a100-sxm4-80gb" for r in records) == clean_a100


@pytest.mark.parametrize("windowed", [False, True])
def test_result_measured_on_another_gpu_than_its_machine_json_names(hist, windowed):
    """Two runners with different GPUs under one machine name (LTX2K_MACHINE): a result
    file of the other GPU is not mixed into this GPU's history, where every cell of it
    read as a step. It is a "machine-mismatch", and a window counts its commit as not
    measured, as the full load does. A GPU name spelled otherwise is the same GPU."""
    _, results = hist
    by_date = sorted(result_files(results, "h200"), key=lambda p: json.loads(p.read_text())["date"])
    respelled, stray, newest = by_date
    _edit(stray, lambda d: d["params"].__setitem__("gpu", "NVIDIA A100-SXM4-80GB"))
    _edit(respelled, lambda d: d["params"].__setitem__("gpu", "nvidia  h200"))
    other = json.loads(stray.read_text())["commit_hash"]
    head = json.loads(newest.read_text())["commit_hash"]
    select = Window(head, last=5) if windowed else None
    records, problems = load_results(results, select=select)
    bad = only_injected_failure(problems)
    assert [(p.kind, p.machine, p.path) for p in bad] == [("machine-mismatch", "h200", str(stray))]
    assert "NVIDIA A100-SXM4-80GB" in bad[0].message and "NVIDIA H200" in bad[0].message
    h200 = [r for r in records if r.machine == "h200"]
    assert {r.commit for r in h200} == {head, json.loads(respelled.read_text())["commit_hash"]}
    if windowed:
        assert other not in {c for m, c in select(_index(results)) if m == "h200"}


def _index(results: Path) -> dict:
    """The FileIndex load_results hands a select: (machine, commit) -> (date, envs)."""
    seen: dict = {}
    load_results(results, select=lambda index: seen.update(index) or set())
    return seen


def _edit(path: Path, fn) -> None:
    data = json.loads(path.read_text())
    fn(data)
    path.write_text(json.dumps(data))


def _column(data, name: str) -> int:
    return data["result_columns"].index(name)


def test_timeout_failure_and_skip_are_told_apart(hist):
    _, results = hist
    path = result_files(results, "h200")[0]
    timeout = json.loads((results / "benchmarks.json").read_text())[
        "bench_kernels.AdaValues9.time_host_latency"
    ]["timeout"]

    def damage(data):
        rows = data["results"]
        # asv keeps no exit code: a timed-out benchmark is all-None and ran as long as its timeout
        row = rows["bench_kernels.AdaValues9.time_host_latency"]
        row[_column(data, "result")] = None
        row[_column(data, "duration")] = timeout + 0.4
        for col in ("stats_ci_99_a", "stats_ci_99_b", "stats_q_25", "stats_q_75", "samples"):
            row[_column(data, col)] = None
        # setup raised NotImplementedError for one combination: asv stores NaN
        row = rows["bench_kernels.SplitRope.track_allocations"]
        row[_column(data, "result")][0] = float("nan")
        # a plain failure of one combination, quickly
        row = rows["bench_kernels.AdaValues9.track_allocations"]
        row[_column(data, "result")][2] = None

    _edit(path, damage)
    records, problems = load_results(results)
    bad = {p.kind: p for p in only_injected_failure(problems)}
    assert set(bad) == {"timeout", "skipped", "failed"}
    assert "AdaValues9.time_host_latency" in bad["timeout"].message
    v, s = suite()["bench_kernels.AdaValues9.time_host_latency"]
    n_ada = len(v) * len(s)
    assert f"{n_ada} of {n_ada}" in bad["timeout"].message and "timed out" in bad["timeout"].message
    assert "SplitRope.track_allocations" in bad["skipped"].message
    assert "AdaValues9.track_allocations" in bad["failed"].message
    assert all(p.path == str(path) and p.machine == "h200" for p in bad.values())
    missing = [r for r in records if r.value is None and r.machine == "h200"]
    assert len(missing) == n_ada + 1 + 1
    assert not any(r.value is not None and math.isnan(r.value) for r in records)


def test_malformed_benchmark_row_loses_only_that_benchmark(hist):
    _, results = hist
    path = result_files(results, "h100-80gb-hbm3")[0]
    name = "bench_kernels.SplitRope.time_device_cold"
    n_rope = len(variants.TIMED_VARIANTS["split_rope"]) * len(shapes.ROPE_SHAPES)
    _edit(path, lambda d: d["results"][name][0].pop())  # one value short
    clean = n_records_in(path) + 1
    records, problems = load_results(results)
    bad = [p for p in only_injected_failure(problems)]
    assert [(p.kind, p.machine) for p in bad] == [("corrupt", "h100-80gb-hbm3")]
    assert name in bad[0].message and f"{n_rope - 1} values for {n_rope}" in bad[0].message
    commit = json.loads(path.read_text())["commit_hash"]
    mine = [r for r in records if r.machine == "h100-80gb-hbm3" and r.commit == commit]
    assert len(mine) == clean - n_rope


def test_missing_benchmarks_json(hist):
    _, results = hist
    (results / "benchmarks.json").unlink()
    records, problems = load_results(results)
    bad = only_injected_failure(problems)
    assert [p.kind for p in bad] == ["missing-benchmarks-json"]
    assert records and all(r.unit == "" for r in records)
    # asv itself cannot name parameters without benchmarks.json; values are still unquoted
    assert {r.params[0][0] for r in records} == {"param1"}
    assert "blocked" in {r.params[0][1] for r in records}


def test_unknown_benchmark_is_reported_once(hist):
    _, results = hist
    bench = json.loads((results / "benchmarks.json").read_text())
    del bench["bench_kernels.SplitRope.track_allocations"]
    (results / "benchmarks.json").write_text(json.dumps(bench))
    _, problems = load_results(results)
    bad = only_injected_failure(problems)
    assert [p.kind for p in bad] == ["unknown-benchmark"]
    assert "bench_kernels.SplitRope.track_allocations" in bad[0].message


def test_results_dir_must_be_a_directory(tmp_path):
    with pytest.raises(ValueError, match="results_dir"):
        load_results(tmp_path / "nope")


def test_records_are_hashable_values():
    r = Record(
        "m",
        "c" * 40,
        1,
        "b.K.time_x",
        (("variant", "v"),),
        1.0,
        None,
        None,
        None,
        None,
        None,
        None,
        "seconds",
        "env",
    )
    assert r == Record(**{**r.__dict__, "machine_info": {"ignored": True}})
    assert len({r, r}) == 1


def test_every_cut_of_a_result_file_reads_as_truncated(tmp_path):
    """A file cut at any byte (mid-number, mid-literal, mid-string) is "truncated", never
    "corrupt": the parser reports a cut literal or string at its first character."""
    from ltx2k.history.jsonfile import _cut_short

    text = json.dumps(
        {
            "version": 2,
            "commit_hash": "abc",
            "results": {"b": [[1.5e-06, None, True, False]]},
            "params": {"cpu": 'x "quoted" y'},
            "durations": {"d": float("nan")},
        }
    )
    for n in range(1, len(text)):
        cut = text[:n]
        with pytest.raises(json.JSONDecodeError) as e:
            json.loads(cut)
        assert _cut_short(cut, e.value.pos), repr(cut)
    for garbage in ('{"a": 1} trailing', '{"a": nope}', '{"a": [1 2]}', '{"a": "x" "y"}'):
        with pytest.raises(json.JSONDecodeError) as e:
            json.loads(garbage)
        assert not _cut_short(garbage, e.value.pos), garbage


def test_gpu_uuid_comes_from_the_shard_run_tag(hist):
    """Records carry the GPU shard-run wrote into their file; untagged files say None."""
    from ltx2k.history.tags import TAG_KEY, tag_results
    from ltx2k.runner.machine import Gpu

    _, results = hist
    gpu = Gpu(1, "GPU-0a1b2c3d-aaaa-bbbb-cccc-000000000001", "NVIDIA H200")
    assert tag_results(results, "h200", gpu, {}, {})  # asv's writer, as shard-run writes it
    files = result_files(results, "h200")
    broken = "bench_kernels.SplitRope.time_device_cold"
    _edit(files[0], lambda d: d[TAG_KEY]["benchmarks"].__setitem__(broken, "not a tag"))
    records, problems = load_results(results)
    assert only_injected_failure(problems) == []  # a tag never makes a problem
    first = files[0].stem.split("-", 1)[0]  # <commit[:8]>-<env>.json
    for r in records:
        if r.machine != "h200":
            assert r.gpu_uuid is None
        elif r.benchmark == broken and r.commit.startswith(first):
            assert r.gpu_uuid is None  # a malformed entry is "GPU unknown", never a guess
        else:
            assert r.gpu_uuid == gpu.uuid, r
