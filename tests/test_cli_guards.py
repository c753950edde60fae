"""What the commands refuse before they touch anything: a path where a machine name belongs,
a machine a report does not have, an asv config that is JSON but not a config, outputs that
would overwrite each other; and an output that cannot be written does not cost the others."""

from __future__ import annotations

import json
from pathlib import Path

import histories as H
import pytest
import torch

import ltx2k
from ltx2k import cli
from ltx2k.analysis import regress
from ltx2k.confirm.asv import WORK_MARKER

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def _cli(capsys, *argv):
    try:
        rc = cli.main([str(a) for a in argv])
    except SystemExit as e:  # argparse's own usage errors
        rc = e.code
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture(scope="module")
def hist(tmp_path_factory):
    root = tmp_path_factory.mktemp("guards")
    repo = H.shared_repo(str(root))
    names = H.template().names
    h = H.History(
        5,
        {"h200": tuple(H.Run(i, names) for i in range(5))},
        (H.Step("bench_kernels.AdaValues9.time_device_cold", None, 4, 1.3),),
        0.01,
        None,
        None,
        1,
    )
    results = H.write(h, root / "h", repo)
    report = root / "report.json"
    rep = regress.triage(results, repo.commits[4], last=4, repo=repo.path, log=None)
    report.write_text(json.dumps(rep.to_json()))
    return root / "h", repo, report


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("LTX2K_MACHINE", raising=False)
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


@pytest.mark.parametrize("name", ["{victim}", "../../victim", "..", "a/b"])
def test_confirm_machine_must_be_a_name_not_a_path(capsys, tmp_path, home, hist, name):
    root, repo, _ = hist
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "data.txt").write_text("precious")
    work = tmp_path / "cw"  # an earlier confirm's
    (work / "results").mkdir(parents=True)
    (work / WORK_MARKER).write_text("")
    rc, _, err = _cli(
        capsys, "confirm", "--config", root / "asv.conf.json", "--work", work,
        "--machine", name.format(victim=victim), "--benchmark", "SplitRope.time_device_cold",
        "--good", repo.commits[0], "--bad", repo.commits[4],
    )  # fmt: skip
    assert rc == 1 and "--machine" in err and "Traceback" not in err, err
    assert (victim / "data.txt").read_text() == "precious"


@pytest.mark.parametrize("dry_run", [False, True])
def test_confirm_never_takes_over_a_work_folder_it_did_not_make(
    capsys, tmp_path, home, hist, dry_run
):
    """confirm empties its --work's results: a folder holding anything else (another
    results dir, a checkout) is refused before anything runs, dry run or not."""
    root, repo, _ = hist
    work = tmp_path / "someone"
    (work / "results" / "h200").mkdir(parents=True)
    (work / "results" / "h200" / "abc.json").write_text("{}")
    (work / "asv.conf.json").write_text("{}")
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    for given, why in (
        (work, "did not make"),
        (a_file, "not a folder"),
        ("", "must name a folder"),
    ):
        rc, _, err = _cli(
            capsys, "confirm", "--config", root / "asv.conf.json", "--work", given,
            "--machine", "h200", "--benchmark", "SplitRope.time_device_cold",
            "--good", repo.commits[0], "--bad", repo.commits[4], *(["--dry-run"] * dry_run),
        )  # fmt: skip
        assert rc == 1 and "--work" in err and why in err and "Traceback" not in err, err
    assert (work / "results" / "h200" / "abc.json").read_text() == "{}"
    assert (work / "asv.conf.json").read_text() == "{}"
    assert a_file.read_text() == "x"


def test_confirm_names_a_machine_the_report_does_not_have(capsys, home, hist):
    root, _, report = hist
    rc, _, err = _cli(
        capsys, "confirm", "--config", root / "asv.conf.json", "--machine", "nosuch",
        "--report", report, "--dry-run",
    )  # fmt: skip
    assert rc == 1, err
    assert "--machine 'nosuch' is not a machine of --report" in err and "h200" in err


@pytest.mark.parametrize(
    ("conf", "match"),
    [
        ([], "must hold a JSON object, got list"),
        ({"results_dir": 5}, "'results_dir' must be a non-empty path string, got 5"),
        ({"results_dir": None}, "'results_dir' must be a non-empty path string"),
        ({"repo": ["."]}, "'repo' must be a non-empty path string"),
    ],
)
@pytest.mark.parametrize("command", ["publish", "confirm", "run"])
def test_an_asv_config_that_is_json_but_not_a_config_is_one_line(
    capsys, tmp_path, home, hist, command, conf, match
):
    _, _, report = hist
    path = tmp_path / "asv.conf.json"
    path.write_text(json.dumps(conf))
    args = {
        "publish": ["publish", "--config", path],
        "confirm": ["confirm", "--config", path, "--machine", "h200", "--report", report,
                    "--dry-run"],
        "run": ["run", "--config", path, "--dry-run", "HEAD^!"],
    }[command]  # fmt: skip
    rc, _, err = _cli(capsys, *args)
    assert rc == 1, err
    assert "Traceback" not in err and match in err, err


def test_confirm_refuses_an_output_it_cannot_write_before_any_work(capsys, tmp_path, hist):
    """Checked after the re-measurements, the error came after hours of GPU work and
    kept the summary from stdout too."""
    _, _, report = hist
    rc, out, err = _cli(
        capsys, "confirm", "--report", report, "--machine", "h200", "--config",
        hist[0] / "asv.conf.json", "--work", tmp_path / "work", "--dry-run",
        "--markdown", tmp_path / "nope" / "c.md",
    )  # fmt: skip
    assert rc == 1 and out == "", err
    assert err.strip().splitlines() == [
        f"ltx2k: error: --markdown {str(tmp_path / 'nope' / 'c.md')!r}: its folder "
        f"{str(tmp_path / 'nope')!r} does not exist; create it first"
    ]
    assert not (tmp_path / "work").exists()


def test_regress_writes_every_output_it_can(capsys, tmp_path, hist):
    root, repo, _ = hist
    md = tmp_path / "ok.md"
    rc, _, err = _cli(
        capsys, "regress", "--results", root / "results", "--head", repo.commits[4],
        "--repo", repo.path, "--last", "4", "--json", tmp_path / "no" / "dir" / "x.json",
        "--markdown", md,
    )  # fmt: skip
    assert "--json" in err and "cannot write" in err
    assert md.is_file() and "regression" in md.read_text().lower()
    assert rc == 1  # a bad argument, though the other outputs were written
    rc, _, err = _cli(
        capsys, "regress", "--results", root / "results", "--head", repo.commits[4],
        "--repo", repo.path, "--last", "4", "--json", tmp_path / "same",
        "--markdown", tmp_path / "same",
    )  # fmt: skip
    assert rc == 1 and "name the same file" in err
    assert not (tmp_path / "same").exists()


def test_an_unwritable_json_without_a_regression_exits_1(capsys, tmp_path, hist):
    _, repo, _ = hist
    names = H.template().names
    steady = H.History(
        4, {"h200": tuple(H.Run(i, names) for i in range(4))}, (), 0.0, None, None, 1
    )
    results = H.write(steady, tmp_path / "steady", repo)
    rc, _, err = _cli(
        capsys, "regress", "--results", results, "--head", repo.commits[3],
        "--repo", repo.path, "--last", "3", "--json", tmp_path / "no" / "x.json",
        "--markdown", tmp_path / "ok.md",
    )  # fmt: skip
    assert rc == 1 and (tmp_path / "ok.md").is_file(), err


@pytest.mark.parametrize("kw", [{"variant": ["tiled"]}, {"variant": {}}, {"launch": ["native"]}])
def test_an_unhashable_variant_or_launch_is_named(kw):
    x = torch.zeros(1, 2, 64, dtype=torch.bfloat16)
    c = torch.zeros(1, 1, 2, 32, dtype=torch.bfloat16)
    w = torch.ones(64, dtype=torch.bfloat16)
    name = next(iter(kw))
    calls = [
        lambda: ltx2k.apply_ltx2_split_rotary_emb(x, c, c, **kw),
        lambda: ltx2k.apply_ltx2_split_rotary_emb_pair(x, x, c, c, c, c, **kw),
        lambda: ltx2k.ltx2_qknorm_split_rope_pair(x, x, w, w, c, c, c, c, 1e-6, **kw),
        lambda: ltx2k.ltx2_ada_values9(torch.zeros(9, 64), torch.zeros(1, 1, 576), **kw),
    ]
    for call in calls:
        with pytest.raises(ValueError, match=f"^{name} must be one of"):
            call()


def test_a_path_is_never_taken_for_a_machine_name_by_confirm_prepare(tmp_path):
    from ltx2k.confirm import orchestrate

    conf = tmp_path / "asv.conf.json"
    conf.write_text(json.dumps({"version": 1, "repo": ".", "results_dir": "results"}))
    (tmp_path / "victim").mkdir()
    (tmp_path / "victim" / "f").write_text("x")
    with pytest.raises(ValueError, match="is not a machine directory name"):
        orchestrate._prepare(conf, tmp_path / "w", "../../victim", None)
    assert (tmp_path / "victim" / "f").exists()
    assert Path(tmp_path / "victim").is_dir()


def test_regress_recent_with_baseline_is_refused(capsys, hist):
    root, repo, _ = hist
    rc, _, err = _cli(
        capsys, "regress", "--results", root / "results", "--head", repo.commits[4],
        "--baseline", repo.commits[0], "--recent", "2",
    )  # fmt: skip
    assert rc == 1 and "--recent applies to --last" in err


def test_a_failed_asv_command_is_one_line():
    """asv's ProcessError subclasses CalledProcessError without its attributes."""
    from asv.util import ProcessError

    e = ProcessError(["git", "clone", "--mirror", "."], 128, "", "warning\nfatal: not a repo\n")
    assert cli._user_error(e) == "`git clone --mirror .` exited 128: fatal: not a repo"
    import subprocess

    e = subprocess.CalledProcessError(2, "asv run", stderr=b"boom\n")
    assert cli._user_error(e) == "`asv run` exited 2: boom"


def test_the_config_paths_are_the_config_folders_from_anywhere(tmp_path, monkeypatch):
    """As asv's command line (it changes into the config's folder): run from another
    directory, ``"repo": "."`` is the config's checkout, not the current directory."""
    from ltx2k.runner import asv_compat

    project = tmp_path / "project"
    project.mkdir()
    config = project / "asv.conf.json"
    config.write_text(
        json.dumps(
            {
                "version": 1,
                "project": "p",
                "repo": ".",
                "results_dir": "results",
                "html_dir": "html",
                "env_dir": ".asv/env",
                "benchmark_dir": "benchmarks",
            }
        )
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    conf = asv_compat.load_config(config)
    assert Path(conf.repo) == project
    assert Path(conf.results_dir) == project / "results"
    assert Path(conf.html_dir) == project / "html"
    config.write_text(config.read_text().replace('"repo": "."', '"repo": "git@host:x.git"'))
    assert asv_compat.load_config(config).repo == "git@host:x.git"  # a URL stays one


def test_confirm_knows_its_own_work_folder_from_before_the_marker(tmp_path, hist):
    from ltx2k.confirm.asv import check_work, private_config

    root, _, _ = hist
    work = tmp_path / "old-work"
    private_config(root / "asv.conf.json", work)
    (work / WORK_MARKER).unlink()  # as a work folder written before the marker existed
    (work / "results" / "h200").mkdir(parents=True)
    assert check_work(work) == work.resolve()
    (work / "asv.conf.json").write_text('{"results_dir": "/elsewhere"}')
    with pytest.raises(ValueError, match="did not make"):
        check_work(work)


def _tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_no_output_overwrites_an_input_or_another_output(capsys, tmp_path, hist):
    """regress, power, confirm: an output that is an input file, lies inside an input
    results dir, or names the same file as another output is refused before anything is
    read or written; every input is left byte for byte."""
    root, repo, report = hist
    results = root / "results"
    before = _tree(results)
    report_bytes = Path(report).read_bytes()
    machine_json = results / "h200" / "machine.json"
    regress_args = ["regress", "--results", results, "--head", repo.commits[4], "--repo",
                    repo.path, "--last", "4"]  # fmt: skip
    confirm_args = ["confirm", "--config", root / "asv.conf.json", "--machine", "h200",
                    "--report", report, "--dry-run"]  # fmt: skip
    cases = [
        (regress_args + ["--json", results / "benchmarks.json"], "--json", "lies inside --results"),
        (regress_args + ["--markdown", machine_json], "--markdown", "lies inside --results"),
        (regress_args + ["--json", tmp_path / "r", "--markdown", tmp_path / "r"], "--json and "
         "--markdown", "same file"),
        (["power", results, results, "--json", machine_json], "--json", "lies inside RUN_A"),
        (["power", results, tmp_path, "--json", tmp_path / "p", "--plot", tmp_path / "p"],
         "--json and --plot", "same file"),
        (confirm_args + ["--json", report], "--json", "is --report"),
        (confirm_args + ["--json", tmp_path / "c", "--markdown", tmp_path / "c"], "--json and "
         "--markdown", "same file"),
    ]  # fmt: skip
    for argv, flag, why in cases:
        rc, _, err = _cli(capsys, *argv)
        assert rc == 1 and flag in err and why in err and "Traceback" not in err, (argv, err)
    assert _tree(results) == before and Path(report).read_bytes() == report_bytes
    assert not any((tmp_path / n).exists() for n in ("r", "p", "c"))


def test_interference_writes_nowhere_inside_a_condition_and_compares_distinct_runs(
    capsys, tmp_path
):
    from test_interference import records, write_results

    alone = write_results(tmp_path / "alone", records({}, 1))
    suite = write_results(tmp_path / "suite", records({}, 2))
    before = _tree(alone)
    conditions = ["--condition", f"alone={alone}", "--condition", f"concurrent-suite={suite}"]
    rc, _, err = _cli(capsys, "interference", *conditions, "--out", alone / "h200")
    assert rc == 1 and "--out" in err and "lies inside --condition" in err, err
    assert _tree(alone) == before
    rc, _, err = _cli(
        capsys, "interference", "--condition", f"alone={alone}", "--condition",
        f"concurrent-suite={alone}/", "--out", tmp_path / "out",
    )  # fmt: skip
    assert rc == 1 and "each condition is its own run" in err, err
    assert not (tmp_path / "out").exists()


def test_regress_refuses_a_baseline_that_looks_like_a_typo(capsys, hist):
    """A short sha no result starts with, or a commit --repo does not know, is refused
    for --baseline as it is for --head: "not enough data" (exit 3, which the PR gate
    passes) would hide the typo behind a green check."""
    root, repo, _ = hist
    base = ["regress", "--results", root / "results", "--head", repo.commits[4]]
    for baseline, extra in (
        ("deadbeef", []),
        ("deadbeef", ["--repo", repo.path]),
        ("0" * 40, ["--repo", repo.path]),
    ):
        rc, _, err = _cli(capsys, *base, "--baseline", baseline, *extra)
        assert rc == 1 and f"--baseline '{baseline}'" in err and "Traceback" not in err, err
    # A full sha not measured yet is no typo: not enough data, as for --head.
    rc, _, err = _cli(capsys, *base, "--baseline", "0" * 40)
    assert rc == 3, err


def test_regress_refuses_head_as_its_own_baseline_and_notes_a_swapped_pair(capsys, tmp_path, hist):
    root, repo, _ = hist
    head, older = repo.commits[4], repo.commits[1]
    base = ["regress", "--results", root / "results"]
    for extra in ([], ["--repo", repo.path]):
        rc, _, err = _cli(capsys, *base, "--head", head, "--baseline", head[:10], *extra)
        assert rc == 1 and "is --head" in err and "itself" in err and "Traceback" not in err, err
        md = tmp_path / "swapped.md"
        rc, _, err = _cli(
            capsys, *base, "--head", older, "--baseline", head, *extra, "--markdown", md
        )
        assert rc in (0, 2, 3), err
        text = md.read_text()
        assert f"--head {older[:12]} comes before --baseline {head[:12]}" in text, text
        rc, _, _ = _cli(
            capsys, *base, "--head", head, "--baseline", older, *extra, "--markdown", md
        )
        assert "comes before" not in md.read_text()


_REGRESS = ["regress", "--results", "{results}", "--head", "{head}"]
_CONFIRM = ["confirm", "--report", "{report}", "--machine", "h200", "--config", "{conf}"]
_CONFIRM += ["--work", "{dir}/work", "--dry-run"]


@pytest.mark.parametrize(
    "argv, said",
    [
        (["regress", "--results", "{file}", "--head", "abc1", "--last", "3"], "is a file"),
        (["interference", "--out", "", "--condition", "alone={dir}"], "--out must name a folder"),
        (["interference", "--out", "{file}", "--condition", "alone={dir}"], "is a file"),
        (["quick", "--seconds", "1e9"], "--seconds must be at most 60"),
        (["publish", "--config", "{bad_json}"], "is not valid JSON"),
        (["publish", "--config", "{conf}", "--repo", "{dir}/nope"], "--repo"),
        # A folder git does not know: publish would run asv for nothing, and regress
        # would match the shas against the results alone, ordered by date, unsaid.
        (["publish", "--config", "{conf}", "--repo", "{dir}"], "is not a git repository"),
        ([*_REGRESS, "--baseline", "{base}", "--repo", "{dir}"], "--repo '{dir}' is not a git"),
        ([*_REGRESS, "--last", "3", "--repo", "{dir}"], "--repo '{dir}' is not a git repository"),
        # An output file in a missing folder: refused before the work (the power command's
        # cases are in test_detection_power.py).
        (_CONFIRM + ["--json", "{dir}/nope/c.json"], "--json '{dir}/nope/c.json': its folder"),
        (
            ["confirm", "--report", "{dir}", "--machine", "h200", "--config", "{conf}"],
            "is a folder",
        ),
    ],
)
def test_a_bad_path_or_number_is_one_line_before_any_work(capsys, tmp_path, hist, argv, said):
    root, repo, report = hist
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{\n")
    paths = {
        "file": a_file,
        "dir": tmp_path,
        "bad_json": bad_json,
        "conf": root / "asv.conf.json",
        "results": root / "results",
        "head": repo.commits[4],
        "base": repo.commits[3],
        "report": report,
    }
    rc, _, err = _cli(capsys, *(a.format(**paths) for a in argv))
    lines = err.strip().splitlines()
    assert rc == 1 and said.format(**paths) in err and "Traceback" not in err, err
    assert lines[-1].startswith("ltx2k: error:"), err
    assert a_file.read_text() == "x"
    assert not (tmp_path / "nope").exists()  # no folder made for an output refused


@pytest.mark.parametrize(
    "passed, said",
    [
        (["--machine", "other", "HEAD^!"], "LTX2K_MACHINE"),
        (["HEAD^!", "HEAD~1^!"], "does not take 'HEAD~1^!'"),
        (["--", "--config", "foo"], "--config belongs to ltx2k run"),
        (["--", "--config=foo", "HEAD^!"], "--config belongs to ltx2k run"),
    ],
)
def test_run_refuses_what_it_cannot_pass_to_asv(capsys, home, passed, said):
    rc, _, err = _cli(capsys, "run", "--dry-run", *passed)
    assert rc == 1 and said in err and "Traceback" not in err, err
    assert "+ " not in err  # no asv command was built


def test_run_passes_asvs_own_options(capsys, home):
    rc, _, err = _cli(capsys, "run", "--dry-run", "--quick", "-b", "SplitRope", "HEAD^!")
    assert rc == 0 and "--quick -b SplitRope HEAD^!" in err, err
