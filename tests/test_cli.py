"""The ``ltx2k`` command line as a user meets it: help, errors, streaming output."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ltx2k import cli, pipeline, runtime
from ltx2k.analysis.model import Baseline, Cell, Report, Row, StepInfo
from ltx2k.workload import cases

ROOT = Path(__file__).resolve().parent.parent
CONFIG = str(ROOT / "asv.conf.json")
# What a library parameter looks like in a message (results_dir=..., store_url=...).
INTERNAL_NAME = re.compile(r"(?<![\w-])[a-z]+_[a-z_]+=")


def _walk(parser: argparse.ArgumentParser, path: tuple[str, ...]):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {c.dest: c.help for c in action._choices_actions}
            for name, sub in action.choices.items():
                yield (*path, name), "(subcommand)", helps.get(name)
                yield from _walk(sub, (*path, name))
        elif not isinstance(action, argparse._HelpAction):
            yield path, "/".join(action.option_strings) or action.dest, action.help


def test_every_subcommand_and_option_has_help():
    items = list(_walk(cli.build_parser(), ("ltx2k",)))
    assert len(items) > 50  # the walk reached the subcommands' options
    missing = [f"{' '.join(p)} {name}" for p, name, text in items if not (text or "").strip()]
    assert missing == []


def _one_error_line(capsys) -> str:
    """The error, in one line after any progress lines."""
    _, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert lines and lines[-1].startswith("ltx2k: error: "), err
    assert sum(ln.startswith("ltx2k: error") for ln in lines) == 1, err
    assert "Traceback" not in err and not INTERNAL_NAME.search(err), err
    return lines[-1]


def test_quick_unknown_kernel_lists_the_kernels(capsys):
    assert cli.main(["quick", "--kernel", "nope"]) == cli.EXIT_ERROR
    line = _one_error_line(capsys)
    assert "--kernel 'nope'" in line
    assert all(k in line for k in cases.KERNELS)


def test_quick_unknown_shape_lists_the_shapes_of_this_device(capsys):
    assert cli.main(["quick", "--shape", "nope"]) == cli.EXIT_ERROR
    line = _one_error_line(capsys)
    assert "--shape 'nope'" in line
    on_gpu = runtime.device() == "cuda"
    for kernel in cases.KERNELS:
        for shape in cases.shapes_for(kernel, on_gpu):
            assert shape.label in line


def test_quick_shape_of_another_kernel_is_an_error(capsys):
    ada = cases.shapes_for("ada_values9", False)[0].label
    assert cli.main(["quick", "--kernel", "split_rope", "--shape", ada]) == cli.EXIT_ERROR
    assert "--kernel split_rope" in _one_error_line(capsys)


def test_quick_prints_each_row_as_it_is_measured(monkeypatch, capsys):
    from ltx2k.measure import suite

    seen = []

    def rows(kernels=None, shapes=None, seconds=0.2, on_error=None):
        for i in range(3):
            yield ("split_rope", "blocked", f"S{i}", "1.00", "1.00", "1.00", "10.0", "1")
            # Resumed only after the caller handled the row: it must be on stdout by now.
            seen.append(capsys.readouterr().out)

    monkeypatch.setattr(suite, "quick_rows", rows)
    assert cli.main(["quick"]) == cli.EXIT_OK
    assert "kernel" in seen[0] and "S0" in seen[0]
    assert "S1" in seen[1] and "S0" not in seen[1]
    assert "S2" in seen[2]


def test_quick_names_a_failed_case_and_measures_the_rest(monkeypatch, capsys):
    """A case that fails (here an error no handler knows, as dynamo's are) is one line on
    stderr and a ``failed`` row; the other cases are still measured, and the exit is 1."""
    from ltx2k.measure import suite
    from ltx2k.workload import cases

    class CompilerError(Exception):  # no ValueError/RuntimeError: cli.main would re-raise
        pass

    real = suite.device_seconds

    def device_seconds(kernel, variant, shape, *a, **k):
        if variant == "eager":
            raise CompilerError("recompile limit hit\nsecond line")
        return real(kernel, variant, shape, *a, **k)

    monkeypatch.setattr(suite, "device_seconds", device_seconds)
    label = cases.shapes_for("split_rope", False)[0].label
    args = ["quick", "--kernel", "split_rope", "--shape", label, "--seconds", "0.01"]
    assert cli.main(args) == cli.EXIT_ERROR
    out, err = capsys.readouterr()
    rows = {ln.split()[1]: ln.split() for ln in out.splitlines()[1:]}
    assert rows["eager"][3:] == ["failed", "-", "-", "-", "-"]
    measured = [v for v, r in rows.items() if v != "eager"]
    assert len(measured) >= 2 and all(float(rows[v][3]) > 0 for v in measured)
    assert f"split_rope eager {label}: CompilerError: recompile limit hit\n" in err
    assert "Traceback" not in err and "second line" not in err
    last = err.strip().splitlines()[-1]
    assert last == f"ltx2k quick: 1 case(s) failed: split_rope eager {label}"


def test_quick_table_still_returns_the_whole_table(monkeypatch):
    from ltx2k.measure import suite

    row = ("ada_values9", "slab", "B1_S1_D256_bf16", "2.00", "1.00", "3.00", "4.0", "1")
    monkeypatch.setattr(suite, "quick_rows", lambda *a, **k: iter([row, row]))
    lines = suite.quick_table().splitlines()
    assert lines[0].split() == [w for c in suite.QUICK_COLUMNS for w in c.split()]
    assert len(lines) == 3 and lines[1].split() == list(row)


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--config", CONFIG, "--dry-run", "nosuchref..alsonone"],
        ["run", "--config", CONFIG, "--dry-run", "--quick", "nosuchref^!"],
        ["all", "--config", CONFIG, "--store", "", "--commits", "nosuchref..alsonone"],
    ],
    ids=["run-range", "run-options-then-range", "all-commits"],
)
def test_bad_commit_range_is_one_line_naming_the_revision(argv, capsys):
    assert cli.main(argv) == cli.EXIT_ERROR
    line = _one_error_line(capsys)
    assert "'nosuchref'" in line
    if argv[0] == "all":
        assert "--commits" in line


def test_good_commit_range_passes_the_check(capsys):
    assert cli.main(["run", "--config", CONFIG, "--dry-run", "HEAD~1..HEAD"]) == cli.EXIT_OK
    assert "HEAD~1..HEAD" in capsys.readouterr().err


def _user_errors(tmp: Path) -> list[tuple[list[str], str]]:
    empty = tmp / "empty"
    (empty / "somemachine").mkdir(parents=True)
    missing = str(tmp / "missing")
    return [
        (["store", "push", "--store", str(tmp / "s.git"), "--results", missing], "--results"),
        (["store", "push", "--store", str(tmp / "s.git"), "--results", str(empty)], "--results"),
        (["store", "pull", "--store", missing, "--dest", str(tmp / "d")], "store"),
        (["publish", "--config", CONFIG, "--results", missing], "--results"),
        (["regress", "--results", missing, "--head", "x", "--last", "3"], "--results"),
        (["power", missing, str(empty)], "RUN_A"),
        (["interference", "--condition", f"a={empty}", "--out", str(tmp / "o")], "--condition"),
        (["run", "--config", missing, "HEAD^!"], "--config"),
        (["machine", "--write", "--path", str(tmp / "no" / "such" / "dir" / "m.json")], "m.json"),
    ]


def test_user_errors_name_flags_in_one_line(tmp_path, capsys):
    for argv, flag in _user_errors(tmp_path):
        code = cli.main(argv)
        assert code == cli.EXIT_ERROR, argv
        line = _one_error_line(capsys)
        assert flag in line, (argv, line)


def test_name_flags_rewrites_parameters_as_flags():
    parser = cli._subparser(
        cli.build_parser(), argparse.Namespace(command="store", store_command="push")
    )
    msg = "machine=None but results_dir='/r' holds several machines; pass machine="
    assert cli._name_flags(msg, parser) == (
        "--machine None but --results '/r' holds several machines; pass --machine"
    )
    assert cli._name_flags("retries must be an int", parser) == "--retries must be an int"


def test_a_bug_still_shows_its_traceback(monkeypatch):
    def broken(args):
        raise KeyError("internal")

    monkeypatch.setattr(cli, "cmd_check", broken)
    with pytest.raises(KeyError):
        cli.main(["check"])


def test_publish_of_an_empty_results_dir_claims_nothing(tmp_path, capsys):
    results = tmp_path / "results"
    results.mkdir()
    html = tmp_path / "html"
    code = cli.main(["publish", "--config", CONFIG, "--results", str(results), "--html", str(html)])
    assert code == cli.EXIT_ERROR
    line = _one_error_line(capsys)
    assert "holds no asv results" in line and "nothing published" in line
    assert "wrote" not in line
    assert not (html / "index.html").exists()


def test_usage_errors_exit_non_zero_without_traceback():
    proc = subprocess.run(
        [sys.executable, "-m", "ltx2k.cli", "store", "push", "--store", "x", "--retries", "-1"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode != 0
    assert "--retries" in proc.stderr and "Traceback" not in proc.stderr


# --- the main job's terminal summary ---------------------------------------------------


def _report(n_regressions: int) -> Report:
    rows = []
    for i in range(n_regressions):
        step = StepInfo(
            last_good=f"{i:040x}",
            first_bad=f"{i + 1:040x}",
            range=(f"{i + 1:040x}",),
            ratio=1.05 + i / 100,
            ci=(1.04, 1.06 + i / 100),
            p_value=1e-6,
            persists=True,
            runs_after=3,
            direction="regression",
        )
        cell = Cell(
            ratio=1.05 + i / 100,
            flag="regression",
            head=1.05e-5,
            base=1e-5,
            p_value=1e-6,
            test="change-point",
            step=step,
        )
        rows.append(
            Row(
                benchmark="bench_kernels.SplitRope.time_device_cold",
                kernel="SplitRope",
                metric="time_device_cold",
                variant="blocked",
                shape=f"B1_S{i}_H32_D128",
                params=(("variant", "blocked"), ("shape", f"B1_S{i}_H32_D128")),
                unit="seconds",
                higher_is_better=False,
                threshold=1.03,
                cells={"h200": cell},
            )
        )
    return Report(
        head="f" * 40,
        baseline=Baseline(kind="last-n", ref="20", commits=()),
        status="regression" if n_regressions else "ok",
        machines=("h200",),
        rows=tuple(rows),
    )


@pytest.mark.parametrize("n", [0, 3, 150])
def test_main_job_summary_is_short_and_says_where_the_report_is(n, tmp_path):
    md = tmp_path / "html" / "regress.md"
    text = pipeline.terminal_summary(_report(n), md, tmp_path / "html")
    lines = text.splitlines()
    assert len(lines) <= 20
    assert f"full report (Markdown): {md}" in lines
    assert "|---" not in text and "<details>" not in text
    if n > pipeline.SUMMARY_ROWS:
        assert f"and {n - pipeline.SUMMARY_ROWS} more regression(s)" in text
        # the worst step is listed first
        assert f"B1_S{n - 1}_H32_D128" in lines[1]


@pytest.mark.parametrize(
    "kinds, bad, skipped",
    [(("skipped",) * 4, 0, 4), (("corrupt", "skipped"), 1, 1), (("truncated", "failed"), 2, 0)],
)
def test_main_job_summary_counts_deliberate_skips_apart_from_problems(
    kinds, bad, skipped, tmp_path
):
    from dataclasses import replace

    from ltx2k.history.records import Problem
    from ltx2k.report.markdown import render_markdown

    problems = tuple(Problem(f"/r/{i}.json", "h200", k, f"{k} {i}") for i, k in enumerate(kinds))
    report = replace(_report(0), problems=problems)
    text = pipeline.terminal_summary(report, tmp_path / "regress.md", tmp_path / "html")
    assert ("problem(s) reading the results" in text) == bool(bad)
    assert (f"{bad} problem(s) reading the results" in text) == bool(bad)
    assert (f"{skipped} skipped benchmark group(s)" in text) == bool(skipped)
    md = render_markdown(report)
    assert f"<details><summary>{bad} problem(s)" in md if bad else "problem(s) reading" not in md
    for p in problems:  # every one is still listed in the full report
        assert p.message in md


# --- the project from any directory -----------------------------------------------------


def _project(root: Path) -> Path:
    (root / "results").mkdir(parents=True)
    (root / "asv.conf.json").write_text('{"version": 1, "results_dir": "results"}')
    return root / "asv.conf.json"


def test_config_is_found_next_to_the_results_from_another_directory(tmp_path, monkeypatch):
    from ltx2k.commands import common

    conf = _project(tmp_path / "proj")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert common.find_config(None, tmp_path / "proj" / "results") == str(conf)


def test_config_is_found_at_the_git_top_level_of_the_current_directory(tmp_path, monkeypatch):
    from ltx2k.commands import common

    conf = _project(tmp_path / "proj")
    subprocess.run(["git", "init", "-q", str(tmp_path / "proj")], check=True)
    (tmp_path / "proj" / "deep" / "er").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "proj" / "deep" / "er")
    assert Path(common.find_config(None)).resolve() == conf.resolve()


def test_no_config_anywhere_names_the_places_looked_in(tmp_path, monkeypatch, capsys):
    from ltx2k.commands import common

    monkeypatch.setattr(common, "CHECKOUT", tmp_path / "not-a-checkout")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["publish"]) == cli.EXIT_ERROR
    line = _one_error_line(capsys)
    assert str(tmp_path) in line and "--config" in line and "asv.conf.json" in line
    # A --config that is not there names the directory it was looked for in.
    assert cli.main(["publish", "--config", "nope.json"]) == cli.EXIT_ERROR
    line = _one_error_line(capsys)
    assert "--config 'nope.json'" in line and str(tmp_path) in line


def test_a_missing_relative_results_dir_names_where_it_was_looked(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    argv = [["regress", "--results", "results", "--head", "x", "--last", "3"]]
    argv.append(["publish", "--config", CONFIG, "--results", "results"])
    for a in argv:
        assert cli.main(a) == cli.EXIT_ERROR
        line = _one_error_line(capsys)
        assert "--results 'results'" in line and str(tmp_path) in line, line


def test_publish_names_each_file_it_could_not_read(tmp_path, capsys):
    machine = tmp_path / "results" / "gpu"
    machine.mkdir(parents=True)
    (machine / "machine.json").write_text('{"machine": "gpu", "version": 1}')
    victim = machine / "0123abcd-env.json"
    victim.write_text('{"commit_hash": "0123abcd", "results": {')
    argv = ["publish", "--config", CONFIG, "--results", str(tmp_path / "results")]
    assert cli.main([*argv, "--html", str(tmp_path / "html")]) == cli.EXIT_ERROR
    err = capsys.readouterr().err
    assert f"ltx2k publish: truncated: Result file {victim}" in err
    assert "Traceback" not in err


def _typed_options(parser: argparse.ArgumentParser, path: tuple[str, ...]):
    """(argv prefix, option) of every option that parses a number, in every subcommand."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _typed_options(sub, (*path, name))
        elif action.option_strings and action.type is not None and action.nargs is None:
            yield path, action.option_strings[-1]


def test_usage_errors_exit_1_in_every_subcommand(capsys):
    options = list(_typed_options(cli.build_parser(), ()))
    assert len(options) > 10 and (("quick",), "--seconds") in options
    for path, option in options:
        with pytest.raises(SystemExit) as e:
            cli.main([*path, option, "not-a-number"])
        assert e.value.code == cli.EXIT_ERROR, (path, option)
        assert "Traceback" not in capsys.readouterr().err
