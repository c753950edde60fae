"""Numbers on the command line and in the library: NaN and infinity are no number of
seconds, ratio or minimum; the error names the flag (or parameter) and says why."""

from __future__ import annotations

import argparse
import math

import pytest

from ltx2k import cli
from ltx2k.commands.common import at_least, positive
from ltx2k.history.store import push_results


def _usage_error(capsys, argv: list[str]) -> str:
    """The argparse error line of *argv*: exit 1, no traceback, one error line."""
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    assert e.value.code == cli.EXIT_ERROR
    _, err = capsys.readouterr()
    assert "Traceback" not in err
    errors = [ln for ln in err.splitlines() if ": error: " in ln]
    assert len(errors) == 1, err
    return errors[0]


@pytest.mark.parametrize("text", ["nan", "NaN", "inf", "-inf", "infinity", "1e999"])
@pytest.mark.parametrize(
    "argv, flag",
    [
        (["store", "push", "--store", "x", "--backoff"], "--backoff"),
        (["quick", "--seconds"], "--seconds"),
        (["power", "a", "b", "--min-us"], "--min-us"),
    ],
    ids=["backoff", "seconds", "min_us"],
)
def test_non_finite_numbers_are_refused_naming_the_flag(capsys, argv, flag, text):
    line = _usage_error(capsys, [*argv[:-1], f"{flag}={text}"])  # "=": "-inf" is no option
    assert f"argument {flag}: {text!r} is not a finite number" in line


@pytest.mark.parametrize(
    "argv, flag, text, why",
    [
        (["power", "a", "b", "--min-us"], "--min-us", "-5", "below the minimum, 0"),
        (["store", "push", "--store", "x", "--backoff"], "--backoff", "-1", "below the minimum"),
        (["quick", "--seconds"], "--seconds", "0", "not greater than 0"),
    ],
)
def test_out_of_range_numbers_are_refused_naming_the_flag(capsys, argv, flag, text, why):
    line = _usage_error(capsys, [*argv, text])
    assert f"argument {flag}: {text!r}" in line and why in line


@pytest.mark.parametrize("text", ["0.5", "nan", "inf", "1e999", "-1"])
def test_a_power_ratio_that_is_no_threshold_is_one_line_naming_the_flag(tmp_path, capsys, text):
    # checked before the runs are read: these folders need not exist
    rc = cli.main(["power", str(tmp_path / "a"), str(tmp_path / "b"), f"--ratio={text}"])
    assert rc == cli.EXIT_ERROR
    _, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"ltx2k: error: --ratio {float(text)!r} must be a finite ratio")
    assert "threshold for" not in err


def test_power_takes_what_it_always_took(monkeypatch):
    seen = {}
    monkeypatch.setattr(cli, "cmd_power", lambda args: seen.update(vars(args)) or 0)
    assert cli.main(["power", "a", "b", "--min-us", "0", "--ratio", "1", "--ratio", "1.03"]) == 0
    assert seen["min_us"] == 0.0 and seen["ratio"] == [1.0, 1.03]
    assert cli.main(["power", "a", "b"]) == 0
    assert seen["min_us"] == 10.0 and seen["ratio"] == []


def test_the_argparse_types_refuse_non_finite_values():
    for parse in (at_least(float, 0), positive(float)):
        assert parse("1.5") == 1.5
        for text in ("nan", "inf", "-inf"):
            with pytest.raises(argparse.ArgumentTypeError, match="not a finite number"):
                parse(text)
    assert at_least(int, 1)("3") == 3
    with pytest.raises(ValueError):
        at_least(int, 1)("nan")  # argparse: "invalid int value"


@pytest.mark.parametrize("backoff", [math.nan, math.inf, -0.5, "1"])
def test_push_refuses_a_backoff_that_is_no_number_of_seconds(tmp_path, backoff):
    results = tmp_path / "results"
    (results / "h200").mkdir(parents=True)
    (results / "h200" / "machine.json").write_text("{}")
    with pytest.raises(ValueError, match=r"backoff must be a finite number of seconds >= 0"):
        push_results(str(tmp_path / "store"), results, backoff=backoff, log=None)


@pytest.mark.parametrize("ratio", [math.nan, math.inf, 0.5, -1.0, True, "1.05"])
def test_the_library_power_refuses_a_ratio_before_any_report(ratio):
    from ltx2k.analysis import detection_power

    # The records are never read: the ratio is refused when the call is made.
    with pytest.raises(ValueError, match=r"ratios: .* is no device-time threshold ratio"):
        detection_power.at_ratios([], [], [1.03, ratio])


@pytest.mark.parametrize("seconds", [math.nan, math.inf, 0.0, -1.0])
def test_quick_refuses_a_budget_that_is_no_number_of_seconds(seconds):
    from ltx2k.measure import suite

    with pytest.raises(ValueError, match=r"seconds must be a finite number > 0"):
        next(suite.quick_rows(seconds=seconds))
    with pytest.raises(TypeError, match=r"seconds must be a number of seconds, got str"):
        next(suite.quick_rows(seconds="0.2"))


class _FakeClock:
    """A clock where each call of run() costs *cost* seconds of (fake) wall time."""

    def __init__(self, monkeypatch, cost):
        from ltx2k.measure import device_time

        self.now = 0.0
        self.cost = cost
        monkeypatch.setattr(device_time.time, "perf_counter", lambda: self.now)

    def __call__(self):
        return self.now

    def run(self):
        self.now += self.cost


def test_the_time_budget_sets_how_many_samples_are_taken(monkeypatch):
    from ltx2k.measure import device_time

    clock = _FakeClock(monkeypatch, 0.001)
    assert len(device_time.device_times(clock, samples=5)) == 5  # no budget: the minimum
    got = device_time.sampled(clock, clock.run, 5, seconds=0.1)
    assert 95 <= len(got) <= 105 and all(v == pytest.approx(0.001) for v in got)
    slow = _FakeClock(monkeypatch, 1.0)  # a sample longer than the budget: the minimum
    assert len(device_time.sampled(slow, slow.run, 3, seconds=0.1)) == 3
    assert len(device_time.sampled(clock, clock.run, 1, seconds=1e9, max_samples=50)) == 50
    with pytest.raises(ValueError, match=r"seconds must be a finite number > 0, got nan"):
        device_time.sampled(clock, clock.run, 1, seconds=math.nan)
