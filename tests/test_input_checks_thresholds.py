"""A thresholds file (``ltx2k regress --thresholds F``): every error loading it is a
ValueError naming the file, and on the command line one line, never a traceback."""

from __future__ import annotations

import pytest
from test_interference import CELLS, COMMIT, records, write_results

from ltx2k import cli
from ltx2k.analysis.thresholds import Thresholds

BAD_FILES = {
    "list": (b"[]", "expected a JSON object, got list"),
    "null": (b"null", "expected a JSON object, got null"),
    "number": (b"3", "expected a JSON object, got int"),
    "thresholds_list": (b'{"thresholds": []}', "'thresholds' must map glob patterns"),
    "direction_string": (b'{"direction": "higher"}', "'direction' must map glob patterns"),
    "alpha_zero": (b'{"alpha": 0}', "alpha must be a number in (0, 1)"),
    "alpha_nan": (b'{"alpha": NaN}', "alpha must be a number in (0, 1)"),
    "history_alpha": (b'{"history_alpha": "low"}', "history_alpha must be a number in (0, 1)"),
    "ratio": (b'{"thresholds": {"*": 0.9}}', "threshold for '*' must be a finite ratio"),
    "step_inf": (b'{"steps": {"*": Infinity}}', "threshold for '*' must be a finite ratio"),
    "direction": (b'{"direction": {"*": "up"}}', "direction for '*' must be 'lower' or"),
    "not_utf8": (b'{"alpha": 0.01}\xff', "not UTF-8 text"),
    "not_json": (b'{"alpha": ', "is not valid JSON"),
    "nested": (b"[" * 100_000, "is not valid JSON"),
    # Past Python's int-digit limit, json.loads raised a ValueError naming no file.
    "digits": (b'{"alpha": 1' + b"0" * 5000 + b"}", "an integer of 5001 digits"),
    "huge_ratio": (b'{"steps": {"*": 1' + b"0" * 400 + b"}}", "is not valid JSON"),
}


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_every_error_names_the_file(tmp_path, case):
    text, message = BAD_FILES[case]
    path = tmp_path / "thr.json"
    path.write_bytes(text)
    with pytest.raises(ValueError) as e:
        Thresholds.load(path)
    assert str(e.value).startswith(f"thresholds file {str(path)!r}: ") or str(e.value).startswith(
        f"thresholds file {str(path)!r} "
    ), e.value
    assert message in str(e.value)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """An asv results dir holding one commit (the interference tests' synthetic runs)."""
    return write_results(tmp_path_factory.mktemp("results"), records({}, 1, cells=CELLS[:2]))


@pytest.mark.parametrize(
    "case", ["list", "null", "thresholds_list", "not_utf8", "alpha_zero", "digits", "huge_ratio"]
)
def test_regress_says_it_in_one_line(tmp_path, capsys, results, case):
    text, message = BAD_FILES[case]
    path = tmp_path / "thr.json"
    path.write_bytes(text)
    argv = ["regress", "--results", str(results), "--head", COMMIT, "--baseline", COMMIT]
    rc = cli.main([*argv, "--thresholds", str(path)])
    _, err = capsys.readouterr()
    assert rc == cli.EXIT_ERROR, err
    lines = err.strip().splitlines()  # after any notice of the results' own problems
    errors = [ln for ln in lines if ln.startswith("ltx2k: error")]
    assert errors == lines[-1:], err
    assert "Traceback" not in err and str(path) in errors[0] and message in errors[0]


def test_a_mapping_of_the_wrong_type_is_a_value_error_naming_the_source():
    with pytest.raises(ValueError, match=r"^my settings: expected a JSON object, got list"):
        Thresholds.from_mapping([], source="my settings")
    with pytest.raises(ValueError, match=r"^my settings: alpha must be a number in \(0, 1\)"):
        Thresholds.from_mapping({"alpha": 1}, source="my settings")
    # An int past a float's range: math.isfinite raised OverflowError (a traceback).
    with pytest.raises(ValueError, match=r"^my settings: threshold for '\*' must be a finite"):
        Thresholds.from_mapping({"thresholds": {"*": 10**400}}, source="my settings")


def test_a_good_file_still_loads(tmp_path):
    path = tmp_path / "thr.json"
    path.write_text('{"thresholds": {"*SplitRope.time_device_cold": 1.1}, "alpha": 0.01}')
    t = Thresholds.load(path)
    assert t.ratio_for("bench_kernels.SplitRope.time_device_cold") == 1.1 and t.alpha == 0.01


def test_settings_that_cannot_apply_are_said():
    """A ratio for --baseline given to a --last run (or the reverse), and a pattern that
    matches no benchmark, change nothing: the report says so rather than seem to apply them."""
    from ltx2k.analysis.thresholds import Thresholds

    t = Thresholds.from_mapping(
        {
            "thresholds": {"*SplitRope*": 1.5},
            "steps": {"*Nope*": 1.1},
            "direction": {"*x": "higher"},
        }
    )
    names = ["bench_kernels.SplitRope.time_device_cold"]
    history = t.unused(True, names)
    assert any("'thresholds' do not apply with --last" in n for n in history)
    assert any("steps pattern '*Nope*' matches no benchmark" in n for n in history)
    assert any("direction pattern '*x' matches no benchmark" in n for n in history)
    commit = t.unused(False, names)
    assert any("'steps' do not apply with --baseline" in n for n in commit)
    assert not any("'*SplitRope*'" in n for n in commit + history)
    assert Thresholds().unused(True, names) == [] and Thresholds().unused(False, names) == []
