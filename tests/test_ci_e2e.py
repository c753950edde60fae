"""The CI scripts end to end on a CPU: real ltx2k, real asv, real git; no fakes.

A local bare repository plays GitHub (``origin``), another one the results
store. Fake runners are checkouts of ``origin``, as actions/checkout makes
them, whose GPU is the Triton interpreter (machine ``cpu-interpreter``):

1. runner_bench.sh benchmarks two real commits of this repository into an
   empty store;
2. a new commit lands on main; a fresh checkout's runner_bench.sh pulls the
   store, benchmarks only that commit and pushes it without touching the
   first run's files; a third run, with nothing new, pushes nothing;
3. publish_site.sh builds asv's site and our summary page from the store;
4. regress_report.sh renders the per-GPU report of the newest commit;
5. pr_gate.sh runs asv continuous merge base vs head in a detached checkout
   with no local ``main`` (what pr-bench.yml checks out);
6. bisect.sh runs asv find over three commits;
7. cpu_dashboard.sh (ci.yml's dashboard job) runs --quick on a PR's merge
   commit, which is on no local ``main``, and draws it on asv's graphs.

tests/test_ci_scripts.py covers the scripts' branches with fake tools and
tests/test_history_store.py concurrent pushes; this file proves the real
pieces fit together. Every asv run is limited (``--bench``) to a few
parameter combinations of tiny CPU shapes, so the whole module takes about
two minutes on two cores.

The checkouts hold the commits of this repository's HEAD and, on top, its
working tree (tracked and untracked files), so the scripts, the benchmark
suite and asv.conf.json under test are the ones being edited; ``ltx2k``
runs this working tree's CLI.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ltx2k.workload import cases, shapes, variants

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
MACHINE = "cpu-interpreter"
STORE_BRANCH = "asv-results"
SCRIPT_TIMEOUT = 300  # seconds; a hung asv must fail the test, not the whole CI job

# The subset every benchmarking step runs: sglang's original and the default variant of
# each kernel on its first CPU shape, for cold device time, host latency and % of copy
# bandwidth (what the summary's history, speedup and roofline plots draw). asv matches
# --bench against "name('variant', 'shape')"; the regex holds no whitespace because
# LTX2K_RUN_ARGS is split on it.
KERNELS = {
    cls: (
        (variants.BASELINE_VARIANT[kernel], variants.DEFAULT_VARIANT[kernel]),
        cpu_shapes[0].label,
    )
    for cls, kernel, cpu_shapes in (
        ("SplitRope", "split_rope", shapes.ROPE_SHAPES_CPU),
        ("AdaValues9", "ada_values9", shapes.ADA_SHAPES_CPU),
    )
}
METRICS = ("time_device_cold", "time_host_latency", "track_pct_copy_bandwidth")
RUN_BENCH = "({}).({}).*'({})'.*'({})'".format(
    "|".join(KERNELS),
    "|".join(METRICS),
    "|".join(v for names, _ in KERNELS.values() for v in names),
    "|".join(shape for _, shape in KERNELS.values()),
)
SELECTED = {
    (f"bench_kernels.{cls}.{metric}", variant, shape)
    for cls, (names, shape) in KERNELS.items()
    for metric in METRICS
    for variant in names
}
# The PR gate and bisect need one kernel's host latency only.
GATE_BENCH = "SplitRope.time_host_latency.*'({})'.*'{}'".format(
    "|".join(KERNELS["SplitRope"][0]), KERNELS["SplitRope"][1]
)
BISECT_BENCH = "SplitRope.time_host_latency.'{}', '{}'".format(
    KERNELS["SplitRope"][0][1], KERNELS["SplitRope"][1]
)


def git(cwd, *args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=_GIT_ENV)
    assert proc.returncode == 0, f"git {' '.join(args)}: {proc.stderr}"
    return proc.stdout.strip()


# Commits made here need an identity, which a CI machine need not have.
_GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "e2e",
    "GIT_AUTHOR_EMAIL": "e2e@localhost",
    "GIT_COMMITTER_NAME": "e2e",
    "GIT_COMMITTER_EMAIL": "e2e@localhost",
}


class Stack:
    """origin, the store, launchers for the real CLI, and the runners' environment."""

    def __init__(self, root: Path):
        self.root = root
        self.origin = root / "origin.git"
        git(root, "init", "-q", "--bare", str(self.origin))
        # HEAD of this checkout as origin's main (HEAD may be detached, e.g. a
        # PR's merge commit in CI, so fetch the commit rather than clone a branch).
        git(self.origin, "fetch", "-q", str(REPO), "+HEAD:refs/heads/main")
        git(self.origin, "symbolic-ref", "HEAD", "refs/heads/main")  # what clones check out
        self.commits = git(self.origin, "rev-list", "--first-parent", "main").split()
        if len(self.commits) < 3:
            pytest.fail(
                f"{REPO} has {len(self.commits)} commit(s); the end-to-end test benchmarks "
                "real commits and needs 3 (in CI: actions/checkout with fetch-depth: 0)"
            )
        self.store = root / "store.git"
        git(root, "init", "-q", "--bare", str(self.store))
        # A store that refuses anything but fast-forwards: a force-push fails loudly.
        git(self.store, "config", "receive.denyNonFastForwards", "true")
        git(self.store, "config", "receive.denyDeletes", "true")
        # One copy of the working tree for every checkout and the CLI: files
        # edited while the module runs must not make two runners differ.
        self.tree, self.deleted = _snapshot_working_tree(root / "tree")

        bin_dir = root / "bin"
        bin_dir.mkdir()
        # The real CLI of this working tree and the real asv, on this interpreter.
        # Not the installed console script, which may belong to another checkout.
        (bin_dir / "ltx2k").write_text(
            f"#!{sys.executable}\n"
            "import sys\n"
            f"sys.path.insert(0, {str(self.tree)!r})\n"
            "from ltx2k.cli import main\n"
            "sys.exit(main())\n"
        )
        (bin_dir / "asv").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m asv "$@"\n')
        for tool in ("ltx2k", "asv"):
            (bin_dir / tool).chmod(0o755)

        home = root / "home"  # ~/.asv-machine.json and caches: not the user's
        home.mkdir()
        self.github_output = root / "github_output"
        # Nothing from the calling job leaks in: GITHUB_* would append to the
        # real job's summary, LTX2K_* could name another store or machine, and
        # PYTHONPATH would shadow the per-commit wheels in asv's environments.
        inherited = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("GITHUB_", "RUNNER_", "LTX2K_", "TRITON_"))
            and k not in ("PYTHONPATH", "HOME", "CUDA_VISIBLE_DEVICES")
        }
        self.env = {
            **inherited,
            "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            "HOME": str(home),
            # The matplotlib font cache outlives HOME: rebuilding it costs seconds.
            "MPLCONFIGDIR": os.environ.get("MPLCONFIGDIR") or _mpl_config_dir(),
            "CUDA_VISIBLE_DEVICES": "",  # a CPU runner even on a GPU machine
            "LTX2K_SKIP_BOOTSTRAP": "1",  # never pip-install from a test
            "LTX2K_PYTHON": sys.executable,  # the python with ltx2k and asv, not python3
            "LTX2K_STORE": str(self.store),
            "GITHUB_OUTPUT": str(self.github_output),
            "RUNNER_TEMP": str(root),
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PIP_NO_INDEX": "1",
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0",
        }

    def checkout(self, name: str, *, detach_at: str | None = None) -> Path:
        """A fresh clone of origin (local branch main), plus this working tree's files.

        ``detach_at``: a detached HEAD at that commit and no local branch, as
        actions/checkout leaves a PR's ``ref: head.sha``.
        """
        dest = self.root / name
        git(self.root, "clone", "-q", str(self.origin), str(dest))
        if detach_at is not None:
            git(dest, "checkout", "-q", "--detach", detach_at)
            git(dest, "branch", "-q", "-D", "main")
        shutil.copytree(self.tree, dest, symlinks=True, dirs_exist_ok=True)
        for rel in self.deleted:
            (dest / rel).unlink(missing_ok=True)
        return dest

    def run(self, checkout: Path, script: str, *args: str, **env: str):
        self.github_output.write_text("")
        proc = subprocess.run(
            ["bash", f"scripts/ci/{script}", *args],
            cwd=checkout,
            env={**self.env, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=SCRIPT_TIMEOUT,
        )
        return proc

    def ltx2k(self, checkout: Path, *args: str):
        """The ltx2k CLI of this working tree, in *checkout*, as a runner calls it."""
        return subprocess.run(
            ["ltx2k", *args],
            cwd=checkout,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=SCRIPT_TIMEOUT,
        )

    def outputs(self) -> dict[str, str]:
        lines = self.github_output.read_text().splitlines()
        return dict(line.split("=", 1) for line in lines)

    def store_files(self, ref: str = STORE_BRANCH) -> list[str]:
        return git(self.store, "ls-tree", "-r", "--name-only", ref).split()


def _mpl_config_dir() -> str:
    import matplotlib

    return matplotlib.get_configdir()


def _snapshot_working_tree(dest: Path) -> tuple[Path, list[str]]:
    """Copy this working tree's files (tracked and untracked, not ignored) to dest.

    Returns dest and the tracked files the working tree has deleted.
    """
    listed = git(REPO, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    deleted = []
    for rel in filter(None, listed.split("\0")):
        src = REPO / rel
        if src.is_file() and not src.is_symlink():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
        elif not src.exists():
            deleted.append(rel)
    return dest, deleted


def _ok(proc, what: str) -> str:
    assert proc.returncode == 0, f"{what} exited {proc.returncode}:\n{proc.stdout[-6000:]}"
    return proc.stdout


def _result_file(files, commit: str) -> str:
    (match,) = [f for f in files if f.startswith(f"results/{MACHINE}/{commit[:8]}-")]
    return match


def _selected_values(path: Path) -> dict[tuple[str, str, str], tuple[float | None, list]]:
    """{(benchmark, variant, shape): (value, samples)} of every param combination stored."""
    from asv.results import Results

    res = Results.load(str(path), machine_name=MACHINE)
    out = {}
    for key in res.get_all_result_keys():
        params = res.get_result_params(key)
        values = res.get_result_value(key, params)
        samples = res.get_result_samples(key, params)
        for (variant, shape), value, sample in zip(
            itertools.product(*params), values, samples, strict=True
        ):
            out[(key, variant.strip("'"), shape.strip("'"))] = (value, sample)
    return out


def _measured(value) -> bool:
    return value is not None and not math.isnan(value)


# --- the pipeline, step by step (module fixtures: each step builds on the last) ---------


@pytest.fixture(scope="module")
def stack(tmp_path_factory) -> Stack:
    return Stack(tmp_path_factory.mktemp("ci-e2e"))


@pytest.fixture(scope="module")
def first_run(stack: Stack):
    """A runner benchmarks main~1 and main into the empty store."""
    checkout = stack.checkout("runner-1")
    proc = stack.run(
        checkout,
        "runner_bench.sh",
        LTX2K_RANGE="HEAD~2..HEAD",
        LTX2K_RUN_ARGS=f"--bench {RUN_BENCH} --show-stderr",
    )
    return proc, stack.outputs(), checkout


@pytest.fixture(scope="module")
def second_run(stack: Stack, first_run):
    """A commit lands on main; a fresh checkout's runner adds only that commit."""
    _, _, first_checkout = first_run
    first_tip = git(stack.store, "rev-parse", STORE_BRANCH)
    git(first_checkout, "commit", "-q", "--allow-empty", "-m", "e2e: a new commit on main")
    git(first_checkout, "push", "-q", "origin", "HEAD:main")
    checkout = stack.checkout("runner-2")
    head = git(checkout, "rev-parse", "HEAD")
    proc = stack.run(
        checkout,
        "runner_bench.sh",
        # Two commits already in the store, one new: only the new one may run.
        LTX2K_RANGE="HEAD~3..HEAD",
        LTX2K_RUN_ARGS=f"--bench {RUN_BENCH}",
    )
    return proc, first_tip, head, checkout


@pytest.fixture(scope="module")
def published(stack: Stack, second_run):
    """The gpu-bench report job: a fresh checkout of main, the store pulled, the site built."""
    checkout = stack.checkout("report")
    proc = stack.run(checkout, "publish_site.sh")
    return proc, checkout


# --- runner_bench.sh -----------------------------------------------------------------------


def test_runner_bench_stores_both_commits_with_samples_of_the_selected_benchmarks(stack, first_run):
    proc, outputs, _ = first_run
    _ok(proc, "runner_bench.sh")
    assert outputs["machine"] == MACHINE
    files = stack.store_files()
    assert f"results/{MACHINE}/machine.json" in files
    assert "results/benchmarks.json" in files
    benchmarked = stack.commits[:2]  # HEAD~2..HEAD
    assert f"results/{MACHINE}/.runner" in files  # who pushes this machine's results
    results = [f for f in files if f.startswith(f"results/{MACHINE}/") and "/." not in f]
    assert len(results) == 3, files
    show = Path(stack.root) / "show"
    show.mkdir(exist_ok=True)
    for commit in benchmarked:
        rel = _result_file(files, commit)
        path = show / Path(rel).name
        path.write_text(git(stack.store, "show", f"{STORE_BRANCH}:{rel}"))
        values = _selected_values(path)
        for key in SELECTED:
            value, samples = values[key]
            if commit != stack.commits[0] and not _measured(value):
                continue  # an older commit may lack what the suite measures: a skip
            assert _measured(value), f"{commit[:8]} {key}: no value ({value!r})"
            if key[0].split(".")[-1].startswith("time_"):
                # ltx2k run adds --record-samples: ltx2k regress needs them.
                assert samples and len(samples) >= 2, f"{commit[:8]} {key}: samples {samples}"
        # --bench was honoured: nothing outside the subset was measured.
        extra = [k for k, (v, _) in values.items() if _measured(v) and k not in SELECTED]
        assert not extra, f"{commit[:8]}: measured outside the --bench subset: {extra}"
    # % of copy bandwidth is bytes / the median the same cell's time_device_cold process
    # recorded / one copy bandwidth, for every cell of the newest commit: pct x cold / bytes
    # is then one constant (100 / the bandwidth). Timed again in a process of its own, the
    # interpreter's wall time would differ from that median by far more than rounding.
    values = _selected_values(show / Path(_result_file(files, stack.commits[0])).name)
    per_byte = []
    for spec in cases.KERNELS.values():
        if spec.asv_class not in KERNELS:
            continue  # a kernel outside the --bench subset
        names, label = KERNELS[spec.asv_class]
        (shape,) = [s for s in spec.cpu_shapes if s.label == label]
        for variant in names:
            cold = values[(f"bench_kernels.{spec.asv_class}.time_device_cold", variant, label)][0]
            pct = values[
                (f"bench_kernels.{spec.asv_class}.track_pct_copy_bandwidth", variant, label)
            ][0]
            per_byte.append(pct * cold / spec.bytes_moved(shape))
    assert max(per_byte) == pytest.approx(min(per_byte), rel=1e-9), per_byte


def test_a_later_runner_benchmarks_only_the_new_commit_and_keeps_the_old_files(stack, second_run):
    proc, first_tip, head, _ = second_run
    _ok(proc, "runner_bench.sh (second run)")
    tip = git(stack.store, "rev-parse", STORE_BRANCH)
    # One new store commit on top of the first: linear, never forced.
    assert git(stack.store, "rev-parse", f"{tip}^") == first_tip
    changed = git(stack.store, "diff", "--name-only", first_tip, tip).split()
    # Re-measuring an old commit would rewrite its file with new timings.
    assert changed == [_result_file(stack.store_files(), head)], changed
    results = [
        f for f in stack.store_files() if f.startswith(f"results/{MACHINE}/") and "/." not in f
    ]
    assert len(results) == 4  # machine.json and three commits


def test_a_nightly_run_with_nothing_new_succeeds_and_pushes_nothing(stack, second_run):
    tip = git(stack.store, "rev-parse", STORE_BRANCH)
    checkout = stack.checkout("nightly")
    proc = stack.run(
        checkout,
        "runner_bench.sh",
        LTX2K_RANGE="HEAD~3..HEAD",
        LTX2K_RUN_ARGS=f"--bench {RUN_BENCH}",
    )
    out = _ok(proc, "runner_bench.sh (nothing new)")
    assert "nothing to push" in out
    assert git(stack.store, "rev-parse", STORE_BRANCH) == tip


# --- ltx2k power over a real partial re-run --------------------------------------------------


def test_power_over_a_real_partial_rerun_tests_only_the_cells_measured_again(stack, first_run):
    """A runner re-runs one commit for one kernel only (``--bench``): asv keeps the other
    kernel's cells as the first run left them, samples and all. ``ltx2k power`` must test
    the re-run cells and name the copied ones as left out, not count them as stable."""
    _, _, first_checkout = first_run
    commit = stack.commits[0]
    checkout = stack.checkout("power")
    shutil.copytree(first_checkout / "results", checkout / "results")
    run_a = stack.root / "power-run-a"
    shutil.copytree(checkout / "results", run_a)
    names, shape = KERNELS["SplitRope"]
    partial = "SplitRope.({}).*'({})'.*'{}'".format("|".join(METRICS), "|".join(names), shape)
    _ok(stack.ltx2k(checkout, "run", "--", "--bench", partial, f"{commit}^!"), "ltx2k run")
    (a_file,) = (run_a / MACHINE).glob(f"{commit[:8]}-*.json")
    a_values = _selected_values(a_file)
    b_values = _selected_values(checkout / "results" / MACHINE / a_file.name)
    rerun = {k for k in SELECTED if k[0].startswith("bench_kernels.SplitRope.")}
    kept = SELECTED - rerun
    assert all(b_values[k] == a_values[k] for k in kept)  # asv's merge, as assumed
    assert any(b_values[k] != a_values[k] for k in rerun)

    report_path = stack.root / "power.json"
    proc = stack.ltx2k(
        checkout, "power", str(run_a), str(checkout / "results"), "--commit", commit,
        "--benchmarks", "*", "--min-us", "0", "--json", str(report_path),
    )  # fmt: skip
    out = _ok(proc, "ltx2k power")
    (report,) = json.loads(report_path.read_text())
    measured_again = [k for k in rerun if _measured(a_values[k][0]) and b_values[k] != a_values[k]]
    assert report["cells"] == len(measured_again) > 0
    copied = [k for k in kept if _measured(a_values[k][0])]
    assert report["left_out"]["not re-run: run B holds run A's own result"] == len(copied) > 0
    assert f"{len(copied)} not re-run" in out


# --- publish_site.sh -----------------------------------------------------------------------


def test_publish_site_builds_asv_site_and_summary_for_every_commit(stack, published, second_run):
    proc, checkout = published
    out = _ok(proc, "publish_site.sh")
    # Skipped parameter combinations are expected (outside --bench); a file or
    # commit left off the dashboard (unknown-commit, asv-warning, ...) is not.
    problems = [ln for ln in out.splitlines() if re.match(r"ltx2k publish: [a-z-]+: ", ln)]
    assert not problems, problems
    html = checkout / "html"
    index = (html / "index.html").read_text()
    assert 'id="ltx2k-summary-link"' in index  # our post-processing ran on asv's page
    assert "https://code.jquery.com" not in index  # offline assets
    meta = json.loads((html / "index.json").read_text())
    assert meta["params"]["machine"] == [MACHINE]
    head = second_run[2]
    expected = {*stack.commits[:2], head}
    assert expected <= set(meta["revision_to_hash"].values())
    assert {b for b, _, _ in SELECTED} <= set(meta["benchmarks"])
    graphs = list((html / "graphs").rglob(f"machine-{MACHINE}/**/*.json"))
    assert graphs, "asv publish drew no graph for the machine"

    summary = (html / "summary.html").read_text()
    assert MACHINE in summary
    pngs = {p.name for p in (html / "summary").glob("*.png")}
    for kernel in ("split_rope", "ada_values9"):
        for kind in ("speedup", "bandwidth"):
            assert f"{kind}_{kernel}.png" in pngs, pngs
        # one history figure per kernel and metric, GPUs side by side
        assert any(p.startswith(f"history_{kernel}_") for p in pngs), pngs
    assert "matrix.png" in pngs  # latest vs previous commit: data on both sides
    for name in pngs:
        assert (html / "summary" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
        assert f"summary/{name}" in summary


# --- regress_report.sh ---------------------------------------------------------------------


def test_regress_report_renders_the_machine_column(stack, published, second_run):
    _, checkout = published
    head = second_run[2]
    proc = stack.run(checkout, "regress_report.sh")
    _ok(proc, "regress_report.sh")  # exit 0 for ok, regressed and insufficient alike
    out = checkout / "regress"
    status = (out / "status").read_text().strip()
    # Interpreter timings on a shared CPU are noise, so any verdict is a real
    # one; what must not happen is a crash (the script exits non-zero then).
    assert status in {"ok", "regressed", "insufficient"}
    assert stack.outputs()["status"] == status
    markdown = (out / "report.md").read_text()
    assert f"| kernel | metric | variant | shape | {MACHINE} |" in markdown
    report = json.loads((out / "report.json").read_text())
    assert report["machines"] == [MACHINE]
    assert report["head"] == head
    assert set(report["baseline"]["commits_by_machine"][MACHINE]) == set(stack.commits[:2])
    judged = {
        (r["benchmark"], r["variant"], r["shape"])
        for r in report["rows"]
        if r["cells"][MACHINE]["flag"] != "insufficient"
    }
    assert judged == SELECTED
    if status != "regressed":
        assert "regression" not in {r["cells"][MACHINE]["flag"] for r in report["rows"]}


# --- pr_gate.sh -------------------------------------------------------------------------------


def test_pr_gate_in_a_detached_checkout_gives_a_verdict(stack, second_run):
    head = second_run[2]
    base = stack.commits[0]
    checkout = stack.checkout("pr", detach_at=head)
    proc = stack.run(
        checkout, "pr_gate.sh", base, head, LTX2K_BENCH=GATE_BENCH, LTX2K_PR_NUMBER="7"
    )
    out = checkout / "pr-bench"
    assert (out / "verdict.json").is_file(), proc.stdout[-6000:]
    verdict = json.loads((out / "verdict.json").read_text())
    # Noise may call a regression; a crash ("error") is never acceptable.
    assert verdict["verdict"] in {"ok", "insufficient", "regressed"}, proc.stdout[-6000:]
    assert (proc.returncode == 0) == (verdict["verdict"] != "regressed")
    assert (verdict["base"], verdict["head"], verdict["pr"]) == (base, head, 7)
    assert verdict["asv_continuous_rc"] in (0, 1)
    report = (out / "report.md").read_text()
    assert f"### {MACHINE}: {verdict['verdict']}" in report
    assert f"| {MACHINE} |" in report
    regress = json.loads((out / "regress.json").read_text())
    judged = {
        r["variant"] for r in regress["rows"] if r["cells"][MACHINE]["flag"] != "insufficient"
    }
    assert judged == set(KERNELS["SplitRope"][0])


# --- bisect.sh ---------------------------------------------------------------------------------


def test_bisect_measures_good_and_names_a_later_commit(stack):
    good, bad = stack.commits[2], stack.commits[0]
    checkout = stack.checkout("bisect")
    proc = stack.run(checkout, "bisect.sh", good, bad, BISECT_BENCH)
    _ok(proc, "bisect.sh")
    found = (checkout / "bisect" / "summary.md").read_text()
    assert "Greatest regression found" in found
    named = [c for c in stack.commits[:2] if f"found: {c[:8]}" in found]
    assert len(named) == 1, found
    # asv find measured good itself (its range starts there), not just good's child.
    for commit in (good, *stack.commits[:2]):
        assert list((checkout / "results" / MACHINE).glob(f"{commit[:8]}-*.json")), commit


# --- cpu_dashboard.sh ----------------------------------------------------------------------


def test_cpu_dashboard_of_a_pr_merge_commit_draws_it(stack):
    # ci.yml's dashboard job on a PR: a detached merge commit on no local main.
    checkout = stack.checkout("dashboard", detach_at=stack.commits[0])
    git(checkout, "commit", "-q", "--allow-empty", "-m", "e2e: a PR's merge commit")
    head = git(checkout, "rev-parse", "HEAD")
    proc = stack.run(checkout, "cpu_dashboard.sh", LTX2K_RUN_ARGS=f"--quick --bench {GATE_BENCH}")
    out = _ok(proc, "cpu_dashboard.sh")
    # Its default range, HEAD^!: this commit only.
    assert [p.name[:8] for p in (checkout / "results" / MACHINE).glob("*-*.json")] == [head[:8]]
    assert "Couldn't find" not in out  # asv dropping the commit from its graphs
    html = checkout / "html"
    meta = json.loads((html / "index.json").read_text())
    revision = {h: int(r) for r, h in meta["revision_to_hash"].items()}[head]
    name = "bench_kernels.SplitRope.time_host_latency.json"
    points = [
        point
        for graph in (html / "graphs").rglob(f"machine-{MACHINE}/**/{name}")
        for point in json.loads(graph.read_text())
    ]
    assert any(rev == revision and any(v is not None for v in values) for rev, values in points)
    assert MACHINE in (html / "summary.html").read_text()
    assert not list(checkout.glob(".asv-dashboard*"))  # its temporary config is gone
