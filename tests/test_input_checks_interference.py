"""``ltx2k interference``: a --decide or --family it cannot follow is an error before anything
is written, never a run that leaves an older policy.json for shard-run --policy."""

from __future__ import annotations

import json

import pytest
from test_interference import CELLS, COMMIT, records, write_results

from ltx2k import cli
from ltx2k.analysis import interference as itf
from ltx2k.workload import metrics

# Few cells: the verdicts do not matter here, only what is written and refused.
FEW = CELLS[:6]
OLD_POLICY = '{"exclusive": ["from an earlier run"]}\n'


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("results")
    return {
        name: write_results(root / name, records(shifts, seed, cells=FEW))
        for name, shifts, seed in (
            ("alone", {}, 1),
            ("concurrent-suite", {"time_host_latency": 0.3}, 2),
            ("concurrent-load", {"time_host_latency": 0.3}, 3),
        )
    }


def _out(tmp_path):
    """An output folder holding an earlier run's policy.json."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "policy.json").write_text(OLD_POLICY)
    return out


def _run(capsys, dirs, out, *extra, conditions=("alone", "concurrent-suite", "concurrent-load")):
    argv = ["interference", "--out", str(out), *extra]
    for name in conditions:
        argv += ["--condition", f"{name}={dirs[name]}"]
    rc = cli.main(argv)
    printed, err = capsys.readouterr()
    return rc, printed, err


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ltx2k: error: "), err
    assert "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize("decide", ["nosuch", "alone"], ids=["unknown", "the_reference"])
def test_a_decide_not_among_the_conditions_is_an_error_and_writes_nothing(
    tmp_path, capsys, dirs, decide
):
    out = _out(tmp_path)
    rc, printed, err = _run(capsys, dirs, out, "--decide", decide)
    assert rc == cli.EXIT_ERROR and printed == ""
    line = _one_line(err)
    assert f"--decide {decide!r} is not among conditions" in line
    assert "concurrent-suite" in line and "concurrent-load" in line
    assert sorted(p.name for p in out.iterdir()) == ["policy.json"]  # nothing written
    assert (out / "policy.json").read_text() == OLD_POLICY


def test_an_unknown_family_is_an_error_naming_the_known_ones(tmp_path, capsys, dirs):
    out = _out(tmp_path)
    rc, printed, err = _run(
        capsys, dirs, out, "--family", "time_host_latency", "--family", "nosuch"
    )
    assert rc == cli.EXIT_ERROR and printed == ""
    line = _one_line(err)
    assert "--family 'nosuch'" in line
    assert all(name in line for name in metrics.METRICS)
    assert sorted(p.name for p in out.iterdir()) == ["policy.json"]


def test_a_family_given_twice_is_an_error_and_writes_nothing(tmp_path, capsys, dirs):
    out = _out(tmp_path)
    rc, printed, err = _run(
        capsys, dirs, out, "--family", "time_host_latency", "--family", "time_host_latency"
    )
    assert rc == cli.EXIT_ERROR and printed == ""
    assert "--family 'time_host_latency' is given more than once" in _one_line(err)
    assert (out / "policy.json").read_text() == OLD_POLICY


def test_a_known_family_and_a_named_decide_are_followed(tmp_path, capsys, dirs):
    out = _out(tmp_path)
    rc, _, err = _run(
        capsys, dirs, out, "--family", "time_host_latency", "--decide", "concurrent-load"
    )
    assert rc == 0, err
    policy = json.loads((out / "policy.json").read_text())
    assert policy["decided_by"] == "concurrent-load" and policy["commit"] == COMMIT
    data = json.loads((out / "interference.json").read_text())
    assert {f["family"] for f in data["families"]} == {"time_host_latency"}


def test_without_decide_and_without_the_suite_condition_no_policy_is_claimed(
    tmp_path, capsys, dirs
):
    """The default follows concurrent-suite where it was measured; without it the report is
    written and the output says that no policy.json was (the old one is not this run's)."""
    out = _out(tmp_path)
    rc, _, err = _run(capsys, dirs, out, conditions=("alone", "concurrent-load"))
    assert rc == 0, err
    assert (out / "interference.json").exists()
    assert "policy" not in json.loads((out / "interference.json").read_text())
    assert "no policy.json" in err and "--decide" in err and "earlier run" in err
    wrote = next(ln for ln in err.splitlines() if ln.startswith("wrote "))
    assert "policy.json" not in wrote
    # The old file says where it came from, or that it is no policy at all.
    (out / "policy.json").write_text('{"exclusive": [], "machine": "a100", "commit": "0123456789"}')
    _, _, err = _run(capsys, dirs, out, conditions=("alone", "concurrent-load"))
    assert "earlier run's, measured on a100 at commit 01234567" in err
    (out / "policy.json").write_text("not json")
    _, _, err = _run(capsys, dirs, out, conditions=("alone", "concurrent-load"))
    assert "earlier run's and unreadable as a policy" in err and "Traceback" not in err


def test_the_library_refuses_before_writing(tmp_path):
    alone = records({}, 1, cells=FEW)
    conds = {"alone": alone, "concurrent-load": records({}, 2, cells=FEW)}
    report = itf.analyse(conds)
    out = tmp_path / "out"
    with pytest.raises(ValueError, match=r"decide='concurrent-suite' is not among conditions"):
        itf.write_outputs(report, out)  # the default condition, not measured here
    with pytest.raises(ValueError, match=r"decide='nosuch' is not among conditions"):
        itf.write_outputs(report, out, decide="nosuch")
    assert not out.exists()
    assert "policy" not in itf.write_outputs(report, out, decide=None)
    with pytest.raises(ValueError, match=r"family='nosuch' is not a metric family .*known: "):
        itf.analyse(conds, families=("time_device_cold", "nosuch"))
    with pytest.raises(ValueError, match=r"family=\['x'\] is not a metric family"):
        itf.analyse(conds, families=(["x"],))
    with pytest.raises(ValueError, match=r"family='time_host_latency' is given more than once"):
        itf.analyse(conds, families=["time_host_latency", "time_device_cold", "time_host_latency"])
