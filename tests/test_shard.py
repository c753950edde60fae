"""ltx2k shard-run: GPU listing, commit split, phases, tags and merge, on fake GPUs.

The fake launcher (:class:`FakeAsv`) stands in for ``asv run``: it applies
asv's own ``-b`` filter (asv.benchmarks.Benchmarks) and writes result files
with asv's own :class:`asv.results.Results`, merging into a file already
there exactly as ``asv run`` does, so merge and tag logic see real files.
"""

from __future__ import annotations

import dataclasses
import datetime
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ltx2k.history import merge
from ltx2k.history.tags import read_tags
from ltx2k.runner import asv_launch, machine, partition, shard

REPO_ROOT = Path(__file__).resolve().parents[1]
MACHINE = "h200"
ENV_NAME = "ltx2k-inherit-py3.11"
H200 = "NVIDIA H200"


def _bench(name: str) -> dict:
    kind = "time" if ".time_" in name else "track"
    return {
        "name": name,
        "params": [["'a'", "'b'"], ["'s1'", "'s2'"]],
        "param_names": ["variant", "shape"],
        "type": kind,
        "unit": "seconds" if kind == "time" else "allocations",
        "version": "v1",
        "timeout": 60.0,
    }


SUITE = [
    _bench(f"bench_kernels.{cls}.{metric}")
    for cls in ("SplitRope", "AdaValues9")
    for metric in ("time_device_cold", "time_host_latency", "track_allocations")
]
SUITE_NAMES = sorted(b["name"] for b in SUITE)
HOST = sorted(n for n in SUITE_NAMES if n.endswith(".time_host_latency"))
NOT_HOST = sorted(set(SUITE_NAMES) - set(HOST))


def gpus(n: int, name: str = H200) -> list[machine.Gpu]:
    return [machine.Gpu(i, f"GPU-{i:04d}aaaa-bbbb", name) for i in range(n)]


def commits(n: int) -> list[str]:
    return [f"{i:02x}" * 20 for i in range(1, n + 1)]


class FakeAsv:
    """``run_one`` that writes what ``asv run --record-samples`` would, instantly."""

    def __init__(self, suite=SUITE, *, delay=0.0, hook=None, fail_on=None):
        self.suite = suite
        self.delay = delay
        self.hook = hook  # called as hook(commits, env, results_dir, bench) before writing
        self.fail_on = fail_on  # GPU uuid whose calls raise
        self.calls: list[dict] = []
        self.lock = threading.Lock()
        self.active = 0
        self.max_active = {"concurrent": 0, "exclusive": 0}

    def __call__(self, commits, env, results_dir, bench):
        from asv import util
        from asv.benchmarks import Benchmarks
        from asv.results import Results
        from asv.runner import BenchmarkResult

        results_dir = Path(results_dir)
        util.write_json(str(results_dir / "benchmarks.json"), {b["name"]: b for b in self.suite}, 2)
        if list(bench) == ["just-discover"]:
            with self.lock:
                self.calls.append(
                    {"commits": tuple(commits), "env": dict(env), "phase": "discover"}
                )
            return 0
        selected = Benchmarks(
            argparse_ns(), self.suite, regex=list(bench) or None
        )  # asv's own filter
        phase = "exclusive" if any("time_host_latency" in n for n in selected) else "concurrent"
        with self.lock:
            self.active += 1
            self.max_active[phase] = max(self.max_active[phase], self.active)
            self.calls.append(
                {
                    "commits": tuple(commits),
                    "env": dict(env),
                    "phase": phase,
                    "selected": {n: list(selected.benchmark_selection[n]) for n in selected},
                    "results_dir": results_dir,
                    "t0": time.monotonic(),
                }
            )
            call = self.calls[-1]
        try:
            if self.fail_on and env.get("CUDA_VISIBLE_DEVICES") == self.fail_on:
                raise RuntimeError("launcher broke")
            time.sleep(self.delay)
            if self.hook:
                self.hook(commits, env, results_dir, bench)
            gpu_index = int(env["LTX2K_GPU_INDEX"])
            info = {"machine": MACHINE, "gpu": H200, "version": 1}
            util.write_json(str(results_dir / MACHINE / "machine.json"), info, 1)
            for c in commits:
                res = Results(
                    {"machine": MACHINE, "python": "3.11"}, {}, c, 1000, "3.11", ENV_NAME, {}
                )
                res.load_data(str(results_dir))  # what asv run does with an existing file
                for name in selected:
                    idx = selected.benchmark_selection[name]
                    n = len(list(itertools.product(*selected[name]["params"])))
                    value = 1.0 + gpu_index  # which GPU measured it, readable in the file
                    is_time = ".time_" in name
                    res.add_result(
                        selected[name],
                        BenchmarkResult(
                            result=[value] * n,
                            samples=[[value] * 3 if is_time else None] * n,
                            number=[1 if is_time else None] * n,
                            errcode=0,
                            stderr="",
                            profile=None,
                        ),
                        started_at=datetime.datetime.now(datetime.timezone.utc),
                        duration=0.1,
                        record_samples=True,
                        selected_idx=set(idx),
                    )
                res.save(str(results_dir))
            return 0
        finally:
            with self.lock:
                self.active -= 1
                call["t1"] = time.monotonic()


def argparse_ns():
    import argparse

    return argparse.Namespace(benchmark_dir="benchmarks")


def load_file(dest: Path, commit: str) -> dict:
    return json.loads((dest / MACHINE / f"{commit[:8]}-{ENV_NAME}.json").read_text())


HOST_EXCLUSIVE = partition.Policy(partition.CONSERVATIVE_EXCLUSIVE)  # exercises both phases


def run(tmp_path, fake, n_gpus=3, n_commits=7, bench=(), policy=HOST_EXCLUSIVE, dest=None):
    return shard.shard_run(
        commits(n_commits),
        gpus(n_gpus),
        dest or tmp_path / "results",
        fake,
        machine=MACHINE,
        policy=policy,
        bench=bench,
        base_env={"PATH": os.environ.get("PATH", "")},
        work_dir=tmp_path,
        log=False,
    )


# --- GPUs ---------------------------------------------------------------------------------

SMI = (
    "0, GPU-0a1b2c3d-0000, NVIDIA H200\n"
    "1, GPU-1a1b2c3d-1111, NVIDIA H200\n"
    "2, GPU-2a1b2c3d-2222, NVIDIA H200\n"
)


def test_parse_gpu_query_and_visible_devices():
    all_gpus = machine.parse_gpu_query(SMI)
    assert [(g.index, g.uuid, g.name) for g in all_gpus] == [
        (0, "GPU-0a1b2c3d-0000", H200),
        (1, "GPU-1a1b2c3d-1111", H200),
        (2, "GPU-2a1b2c3d-2222", H200),
    ]
    assert machine.visible_gpus(all_gpus, {}) == all_gpus
    # CUDA's order is the list's order, indices and unique UUID prefixes alike.
    seen = machine.visible_gpus(all_gpus, {"CUDA_VISIBLE_DEVICES": "2,GPU-0a1b"})
    assert [g.index for g in seen] == [2, 0]
    assert machine.visible_gpus(all_gpus, {"CUDA_VISIBLE_DEVICES": ""}) == []
    with pytest.raises(ValueError, match="'7'"):
        machine.visible_gpus(all_gpus, {"CUDA_VISIBLE_DEVICES": "0,7"})
    with pytest.raises(ValueError, match="GPU-"):  # ambiguous prefix
        machine.visible_gpus(all_gpus, {"CUDA_VISIBLE_DEVICES": "GPU-"})
    with pytest.raises(ValueError, match="nvidia-smi line"):
        machine.parse_gpu_query("0, not-a-uuid, NVIDIA H200\n")


def test_indices_on_a_mixed_host_need_pci_bus_order():
    mixed = machine.parse_gpu_query("0, GPU-a, NVIDIA A100-SXM4-80GB\n1, GPU-b, NVIDIA H100\n")
    with pytest.raises(ValueError, match="CUDA_DEVICE_ORDER=PCI_BUS_ID"):
        machine.visible_gpus(mixed, {"CUDA_VISIBLE_DEVICES": "1"})
    env = {"CUDA_VISIBLE_DEVICES": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert [g.uuid for g in machine.visible_gpus(mixed, env)] == ["GPU-b"]
    assert [g.uuid for g in machine.visible_gpus(mixed, {"CUDA_VISIBLE_DEVICES": "GPU-b"})] == [
        "GPU-b"
    ]


def test_select_gpus():
    four = gpus(4)
    assert shard.select_gpus(four, "auto") == four
    assert shard.select_gpus(four, "2") == four[:2]
    assert shard.select_gpus(four, 3) == four[:3]
    for bad in (0, -1, "x", True, 1.5):
        with pytest.raises(ValueError, match="gpus"):
            shard.select_gpus(four, bad)
    with pytest.raises(ValueError, match="only 4"):
        shard.select_gpus(four, 5)
    with pytest.raises(ValueError, match="no GPU visible"):
        shard.select_gpus([], "auto")
    mixed = [*gpus(1), machine.Gpu(1, "GPU-x", "NVIDIA H100")]
    with pytest.raises(ValueError, match="different models"):
        shard.select_gpus(mixed, "auto")


def test_listing_gpus_never_imports_torch(tmp_path):
    """The parent asks nvidia-smi, so it never holds a CUDA context while shards run."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "nvidia-smi"
    fake.write_text(f"#!/bin/sh\nprintf '{SMI}'\n")
    fake.chmod(0o755)
    code = (
        "import sys; from ltx2k.runner import machine; g = machine.list_gpus(); "
        "print(len(g), [x.index for x in g], 'torch' in sys.modules)"
    )
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "CUDA_VISIBLE_DEVICES": "1,2"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=REPO_ROOT, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["2", "[1,", "2]", "False"]


# --- commits and arguments ----------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(n_commits=st.integers(1, 40), n=st.integers(1, 9))
def test_split_covers_every_commit_exactly_once(n_commits, n):
    cs = commits(n_commits)
    parts = partition.split_commits(cs, n)
    assert len(parts) == n
    flat = [c for p in parts for c in p]
    assert sorted(flat) == sorted(cs)  # every commit, none twice
    sizes = [len(p) for p in parts]
    assert max(sizes) - min(sizes) <= 1  # balanced
    for p in parts:  # round-robin: neighbours in the range land on different GPUs
        idx = [cs.index(c) for c in p]
        assert all(b - a == n for a, b in itertools.pairwise(idx))


def test_split_rejects_bad_input():
    with pytest.raises(ValueError, match="duplicates"):
        partition.split_commits(["a", "b", "a"], 2)
    with pytest.raises(ValueError, match="n must be"):
        partition.split_commits(["a"], 0)


def test_parse_asv_args_consumes_range_bench_and_steps():
    a = asv_launch.parse_asv_args(
        ["--", "-b", "Split", "--quick", "--bench=Ada", "-bX", "-s", "4", "main~9..main", "-e"]
    )
    assert a.range_spec == "main~9..main"
    assert a.bench == ("Split", "Ada", "X")
    assert a.steps == 4
    assert a.passthrough == ("--quick", "-e")
    b = asv_launch.parse_asv_args(["--skip-existing-commits", "-a", "repeat=3", "ALL"])
    assert (b.range_spec, b.skip_existing_commits) == ("ALL", True)
    assert b.passthrough == ("--skip-existing-commits", "-a", "repeat=3")
    assert asv_launch.parse_asv_args([]).range_spec is None
    with pytest.raises(ValueError, match="--machine"):
        asv_launch.parse_asv_args(["--machine", "h100", "HEAD^!"])
    with pytest.raises(ValueError, match="asv run arguments"):
        asv_launch.parse_asv_args(["A..B", "C..D"])
    with pytest.raises(ValueError, match="asv run arguments"):
        asv_launch.parse_asv_args(["--no-such-option"])


USER_FILTERS = [
    r"SplitRope",
    r"time_",
    r"\('a'",
    r"track_allocations\('b', 's2'\)",
    r"^bench_kernels\.AdaValues9",
    r"(device|host)_",
    r"nothing-matches",
]


@settings(max_examples=80, deadline=None)
@given(
    names=st.sets(st.sampled_from(SUITE_NAMES), min_size=1),
    user=st.lists(st.sampled_from(USER_FILTERS), max_size=3, unique=True),
)
def test_phase_regexes_select_the_phase_within_the_user_filter(names, user):
    """asv's filter with the phase regexes == the user's filter restricted to the phase."""
    from asv.benchmarks import Benchmarks

    ns = argparse_ns()
    want = Benchmarks(ns, SUITE, regex=user or None)
    got = Benchmarks(ns, SUITE, regex=partition.phase_regexes(sorted(names), user))
    expected = {n: want.benchmark_selection[n] for n in want if n in names}
    assert {n: got.benchmark_selection[n] for n in got} == expected


def test_partition_follows_policy_and_filter():
    conc, excl = partition.partition(SUITE, [], HOST_EXCLUSIVE)
    assert (list(conc), list(excl)) == (NOT_HOST, HOST)
    conc, excl = partition.partition(SUITE, [], partition.Policy())  # the measured default
    assert (list(conc), excl) == (SUITE_NAMES, ())
    conc, excl = partition.partition(SUITE, [r"SplitRope\.time_"], HOST_EXCLUSIVE)
    assert conc == ("bench_kernels.SplitRope.time_device_cold",)
    assert excl == ("bench_kernels.SplitRope.time_host_latency",)
    conc, excl = partition.partition(SUITE, [], partition.Policy(()))
    assert (list(conc), excl) == (SUITE_NAMES, ())


def test_policy_load_and_validation(tmp_path):
    p = tmp_path / "policy.json"
    p.write_text(json.dumps({"exclusive": [r"\.time_device_cold$"], "decided_by": "x"}))
    pol = partition.Policy.load(p)
    assert pol.is_exclusive("bench_kernels.SplitRope.time_device_cold")
    assert not pol.is_exclusive("bench_kernels.SplitRope.time_host_latency")
    assert HOST_EXCLUSIVE.is_exclusive("bench_kernels.AdaValues9.time_host_latency")
    assert not partition.Policy().is_exclusive("bench_kernels.AdaValues9.time_host_latency")
    with pytest.raises(ValueError, match="does not compile"):
        partition.Policy(("(",))
    with pytest.raises(TypeError, match="sequence of regex"):
        partition.Policy(r"\.time_host_latency$")
    p.write_text(json.dumps({"exclusive": "oops"}))
    with pytest.raises(ValueError, match="'exclusive' list"):
        partition.Policy.load(p)
    # Entries that are not strings were the constructor's TypeError (a traceback on the
    # command line); a regex that does not compile did not say which file held it.
    for entries, said in (([1], "must list regex strings, got 1"), ([None], "got None"),
                          (["("], "exclusive regex '(' does not compile")):  # fmt: skip
        p.write_text(json.dumps({"exclusive": entries}))
        with pytest.raises(ValueError, match=re.escape(f"policy file {str(p)!r}: ")) as e:
            partition.Policy.load(p)
        assert said in str(e.value)


def test_shard_run_names_a_bad_policy_file_in_one_line(tmp_path, capsys):
    from ltx2k import cli

    p = tmp_path / "policy.json"
    p.write_text(json.dumps({"exclusive": [r"\.time_host_latency$", 7]}))
    rc = cli.main(["shard-run", "--dry-run", "--policy", str(p), "--", "HEAD^!"])
    err = capsys.readouterr().err
    assert rc == 1 and "Traceback" not in err, err
    assert err.strip().splitlines() == [
        f"ltx2k: error: policy file {str(p)!r}: 'exclusive' must list regex strings, got 7"
    ]


def test_a_policy_file_keeps_where_it_was_measured(tmp_path):
    p = tmp_path / "policy.json"
    p.write_text(json.dumps({"exclusive": [], "machine": "h100", "commit": "abcdef0123"}))
    pol = partition.Policy.load(p)
    assert (pol.machine, pol.commit) == ("h100", "abcdef0123")
    assert pol.mismatch("h100") is None
    why = pol.mismatch("a100")
    assert "'h100' at commit abcdef01" in why and "'a100'" in why
    assert partition.Policy().mismatch("a100") is None  # no file: nothing to compare
    for bad in ({"machine": 3}, {"machine": ""}, {"commit": ["x"]}):
        p.write_text(json.dumps({"exclusive": [], **bad}))
        field = next(iter(bad))
        with pytest.raises(ValueError, match=f"'{field}' must be a non-empty string"):
            partition.Policy.load(p)


def test_policy_from_options_maps_each_flag(tmp_path):
    """shard-run's three flags, one at a time, and none: each gives its own list."""
    host = "bench_kernels.SplitRope.time_host_latency"
    cold = "bench_kernels.SplitRope.time_device_cold"
    assert partition.policy_from_options().exclusive == partition.DEFAULT_EXCLUSIVE
    assert partition.policy_from_options(no_exclusive=True).exclusive == ()
    pol = partition.policy_from_options(exclusive=[r"\.time_host_latency$", "Rope"])
    assert pol.exclusive == (r"\.time_host_latency$", "Rope")
    assert pol.is_exclusive(host) and pol.is_exclusive(cold)
    p = tmp_path / "policy.json"
    p.write_text(json.dumps({"exclusive": [r"\.time_device_cold$"]}))
    pol = partition.policy_from_options(policy_file=str(p))
    assert pol.exclusive == (r"\.time_device_cold$",)
    assert pol.is_exclusive(cold) and not pol.is_exclusive(host)
    with pytest.raises(ValueError, match="unreadable"):
        partition.policy_from_options(policy_file=str(tmp_path / "missing.json"))
    with pytest.raises(ValueError, match="does not compile"):
        partition.policy_from_options(exclusive=["("])


def test_policy_from_options_without_flags_is_the_default_not_empty(monkeypatch):
    """The measured default is empty today, so "no flag" and --no-exclusive look alike;
    a default with content tells them apart."""

    @dataclasses.dataclass(frozen=True)
    class Marked(partition.Policy):
        exclusive: tuple[str, ...] = ("default-marker",)

    monkeypatch.setattr(partition, "Policy", Marked)
    assert partition.policy_from_options().exclusive == ("default-marker",)
    assert partition.policy_from_options(exclusive=[]).exclusive == ("default-marker",)
    assert partition.policy_from_options(no_exclusive=True).exclusive == ()
    assert partition.policy_from_options(exclusive=["x"]).exclusive == ("x",)


@pytest.mark.parametrize(
    "kwargs, named",
    [
        ({"policy_file": "p.json", "exclusive": ["x"]}, "--policy and --exclusive"),
        ({"policy_file": "p.json", "no_exclusive": True}, "--policy and --no-exclusive"),
        ({"exclusive": ["x"], "no_exclusive": True}, "--exclusive and --no-exclusive"),
    ],
)
def test_policy_from_options_refuses_two_flags(kwargs, named):
    with pytest.raises(ValueError, match=f"^{named} cannot be combined"):
        partition.policy_from_options(**kwargs)


def test_shard_run_command_passes_the_flags_policy(monkeypatch, tmp_path):
    from ltx2k import cli

    seen = []
    monkeypatch.setattr(shard, "run", lambda asv_args, **kw: seen.append(kw["policy"]) or 0)
    assert cli.main(["shard-run", "--dry-run", "--no-exclusive", "--", "HEAD^!"]) == 0
    assert cli.main(["shard-run", "--dry-run", "--exclusive", "a", "--exclusive", "b"]) == 0
    assert cli.main(["shard-run", "--dry-run"]) == 0
    assert seen == [partition.Policy(()), partition.Policy(("a", "b")), partition.Policy()]


def git_repo(root: Path, n: int):
    """A git repo of *n* commits (oldest first) and an asv.conf.json beside it."""
    repo = root / "repo"
    repo.mkdir(parents=True)

    def git(*args):
        return subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
            cwd=repo,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()

    git("init", "-q", "-b", "main")
    out = []
    for i in range(n):
        (repo / "f.txt").write_text(f"{i}\n")
        git("add", "f.txt")
        git("commit", "-q", "-m", f"commit {i}")
        out.append(git("rev-parse", "HEAD"))
    conf = root / "asv.conf.json"
    conf.write_text(
        json.dumps(
            {
                "version": 1,
                "project": "t",
                "repo": "repo",
                "branches": ["main"],
                "environment_type": "existing",
                "benchmark_dir": "benchmarks",
                "results_dir": "results",
            }
        )
    )
    return out, conf


def test_resolve_commits_matches_git_and_skips_existing(tmp_path, monkeypatch):
    from asv.config import Config

    cs, conf_path = git_repo(tmp_path, 5)
    results = tmp_path / "results"
    have = [c for i, c in enumerate(cs) if i != 3]
    FakeAsv()(have, {"LTX2K_GPU_INDEX": "0"}, results, [])  # results for all but commit 3
    monkeypatch.chdir(tmp_path)  # asv resolves the config's "repo" against the cwd
    conf = Config.load(str(conf_path))
    newest_first = list(reversed(cs))
    got = asv_launch.resolve_commits(conf, asv_launch.parse_asv_args(["ALL"]), results, MACHINE)
    assert got == newest_first
    rng = f"{cs[0]}..{cs[4]}"
    assert (
        asv_launch.resolve_commits(conf, asv_launch.parse_asv_args([rng]), results, MACHINE)
        == (newest_first[:4])
    )
    skip = asv_launch.parse_asv_args(["--skip-existing-commits", "ALL"])
    assert asv_launch.resolve_commits(conf, skip, results, MACHINE) == [cs[3]]
    hashfile = tmp_path / "hashes.txt"
    hashfile.write_text(f"{cs[1][:10]}\n\n{cs[2]}\n")
    got = asv_launch.resolve_commits(
        conf, asv_launch.parse_asv_args([f"HASHFILE:{hashfile}"]), results, MACHINE
    )
    assert got == [cs[1], cs[2]]
    with pytest.raises(ValueError, match="unknown commit"):
        hashfile.write_text("deadbeefdeadbeef\n")
        asv_launch.resolve_commits(
            conf, asv_launch.parse_asv_args([f"HASHFILE:{hashfile}"]), results, MACHINE
        )


# --- shard_run with fake GPUs ---------------------------------------------------------------


def test_shard_run_three_fake_gpus(tmp_path):
    fake = FakeAsv(delay=0.2)
    res = run(tmp_path, fake, n_gpus=3, n_commits=7)
    dest = tmp_path / "results"
    assert res.exit_code == 0 and res.work_dir is None
    assert not list(tmp_path.glob("ltx2k-shard-*")), "work directory left behind"
    assert (res.concurrent, res.exclusive) == (tuple(NOT_HOST), tuple(HOST))

    runs = [c for c in fake.calls if c["phase"] != "discover"]
    # Each shard ran each phase once; together they cover every commit exactly once per phase.
    for phase, names in (("concurrent", NOT_HOST), ("exclusive", HOST)):
        calls = [c for c in runs if c["phase"] == phase]
        assert len(calls) == 3
        assert sorted(c for call in calls for c in call["commits"]) == sorted(commits(7))
        assert all(sorted(c["selected"]) == names for c in calls)
    # Pinned by UUID, one GPU per shard, the same GPU for both phases of a shard.
    by_gpu = {}
    for c in runs:
        by_gpu.setdefault(c["env"]["CUDA_VISIBLE_DEVICES"], set()).update(c["commits"])
    assert sorted(by_gpu) == sorted(g.uuid for g in gpus(3))
    assert sum(len(v) for v in by_gpu.values()) == 7
    for c in runs:
        assert c["env"]["LTX2K_GPU_UUID"] == c["env"]["CUDA_VISIBLE_DEVICES"]
        assert c["env"]["PYTORCH_NVML_BASED_CUDA_CHECK"] == "1"
        assert "TRITON_INTERPRET" not in c["env"]
    # Device-time phase overlapped on all GPUs; host latency ran strictly one at a time.
    assert fake.max_active == {"concurrent": 3, "exclusive": 1}
    last_concurrent_end = max(c["t1"] for c in runs if c["phase"] == "concurrent")
    assert min(c["t0"] for c in runs if c["phase"] == "exclusive") >= last_concurrent_end

    # Merged: one file per commit, every benchmark, valued and tagged by the GPU that ran it.
    files = sorted((dest / MACHINE).glob("*.json"))
    assert len(files) == 8  # 7 commits + machine.json
    for uuid, cs in by_gpu.items():
        gpu = next(g for g in gpus(3) if g.uuid == uuid)
        for c in cs:
            data = load_file(dest, c)
            assert sorted(data["results"]) == SUITE_NAMES
            assert {v[0][0] for v in data["results"].values()} == {1.0 + gpu.index}
            tags = read_tags(dest / MACHINE / f"{c[:8]}-{ENV_NAME}.json")
            assert set(tags) == set(SUITE_NAMES)
            for name, tag in tags.items():
                assert (tag["gpu_index"], tag["gpu_uuid"], tag["gpu_name"]) == (
                    gpu.index,
                    uuid,
                    H200,
                )
                exclusive = name in HOST
                assert tag["mode"] == ("exclusive" if exclusive else "concurrent")
                assert tag["concurrent_gpus"] == (1 if exclusive else 3)
    bench = json.loads((dest / "benchmarks.json").read_text())
    assert sorted(k for k in bench if k != "version") == SUITE_NAMES
    # The files are still asv's: its loader and ours read them without problems.
    from ltx2k.history.records import load_results

    records, problems = load_results(dest)
    assert problems == []
    assert len({r.commit for r in records}) == 7


def test_more_gpus_than_commits_leaves_gpus_idle(tmp_path):
    fake = FakeAsv()
    res = run(tmp_path, fake, n_gpus=4, n_commits=2)
    assert res.exit_code == 0
    used = {c["env"]["CUDA_VISIBLE_DEVICES"] for c in fake.calls if c["phase"] != "discover"}
    assert len(used) == 2
    assert [len(o.commits) for o in res.shards] == [1, 1, 0, 0]
    assert len(list((tmp_path / "results" / MACHINE).glob("*-*.json"))) == 2


def test_user_filter_limits_both_phases_and_empty_phase_is_skipped(tmp_path):
    fake = FakeAsv()
    res = run(tmp_path, fake, n_gpus=2, n_commits=3, bench=[r"SplitRope\.time_device_cold\('a'"])
    assert res.exit_code == 0 and res.exclusive == ()
    runs = [c for c in fake.calls if c["phase"] != "discover"]
    assert {c["phase"] for c in runs} == {"concurrent"}
    for c in runs:  # only variant 'a' (indices 0, 1 of the product), as asv -b would pick
        assert c["selected"] == {"bench_kernels.SplitRope.time_device_cold": [0, 1]}
    with pytest.raises(ValueError, match="selects no benchmark"):
        run(tmp_path, FakeAsv(), n_gpus=2, n_commits=3, bench=["no-such-benchmark"])
    assert not list(tmp_path.glob("ltx2k-shard-*"))


def test_copied_in_file_is_updated_and_old_tags_survive(tmp_path):
    dest = tmp_path / "results"
    cs = commits(2)
    # A first run measured host latency of both commits on two GPUs...
    run(tmp_path, FakeAsv(), n_gpus=2, n_commits=2, bench=["time_host_latency"])
    before = {c: load_file(dest, c) for c in cs}
    old_tags = {c: read_tags(dest / MACHINE / f"{c[:8]}-{ENV_NAME}.json") for c in cs}
    # ...a second one adds device time on one GPU: asv merges into the copied-in files.
    res = shard.shard_run(
        cs,
        gpus(1),
        dest,
        FakeAsv(),
        machine=MACHINE,
        bench=["time_device_cold"],
        base_env={},
        work_dir=tmp_path,
        log=False,
    )
    assert res.exit_code == 0 and sorted(res.merge.replaced) == sorted(
        f"{MACHINE}/{c[:8]}-{ENV_NAME}.json" for c in cs
    )
    for c in cs:
        after = load_file(dest, c)
        host = [n for n in after["results"] if n.endswith("time_host_latency")]
        assert sorted(host) == HOST
        for n in host:  # old measurements kept, untouched
            assert after["results"][n] == before[c]["results"][n]
        tags = read_tags(dest / MACHINE / f"{c[:8]}-{ENV_NAME}.json")
        for n in HOST:
            assert tags[n] == old_tags[c][n]  # measured by the first run's GPU
        for n in (x for x in SUITE_NAMES if x.endswith("time_device_cold")):
            assert tags[n]["gpu_uuid"] == gpus(1)[0].uuid
            assert tags[n]["mode"] == "concurrent" and tags[n]["concurrent_gpus"] == 1


def test_a_file_changed_during_the_run_is_a_conflict_not_an_overwrite(tmp_path):
    dest = tmp_path / "results"
    cs = commits(2)
    run(tmp_path, FakeAsv(), n_gpus=2, n_commits=2, bench=["time_host_latency"])
    target = dest / MACHINE / f"{cs[0][:8]}-{ENV_NAME}.json"
    other_writer = target.read_bytes().replace(b'"env_vars": {}', b'"env_vars": {"X": "1"}')
    assert other_writer != target.read_bytes()

    def meanwhile(commits_, env, results_dir, bench):
        target.write_bytes(other_writer)  # e.g. a store pull landed during the run

    res = shard.shard_run(
        cs,
        gpus(2),
        dest,
        FakeAsv(hook=meanwhile),
        machine=MACHINE,
        bench=["time_device_cold"],
        base_env={},
        work_dir=tmp_path,
        log=False,
    )
    assert res.exit_code == 1
    rel = f"{MACHINE}/{target.name}"
    assert [c.path for c in res.merge.conflicts] == [rel]
    assert "changed since it was copied into the shard" in res.merge.conflicts[0].reason
    assert target.read_bytes() == other_writer  # never overwritten
    kept = Path(res.merge.conflicts[0].kept)
    assert kept.exists() and res.work_dir is not None and kept.is_relative_to(res.work_dir)
    assert "bench_kernels.SplitRope.time_device_cold" in json.loads(kept.read_text())["results"]
    # The other commit merged normally.
    assert f"{MACHINE}/{cs[1][:8]}-{ENV_NAME}.json" in res.merge.replaced
    shutil.rmtree(res.work_dir)


def test_merge_results_rules(tmp_path):
    dest, a, b = tmp_path / "dest", tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        (d / MACHINE).mkdir(parents=True)
        (d / MACHINE / "machine.json").write_text('{"machine": "h200", "driver": "2"}')
    (dest / MACHINE).mkdir(parents=True)
    (dest / MACHINE / "machine.json").write_text('{"machine": "h200", "driver": "1"}')
    (dest / MACHINE / "same.json").write_text("S")
    (dest / MACHINE / "theirs.json").write_text("THEIRS")
    (a / MACHINE / "same.json").write_text("S")
    (a / MACHINE / "theirs.json").write_text("MINE")
    (a / MACHINE / "new.json").write_text("N")
    (a / MACHINE / "both.json").write_text("A")
    (b / MACHINE / "both.json").write_text("B")
    (a / "benchmarks.json").write_text(json.dumps({"x": {"v": 1}, "version": 2}))
    (b / "benchmarks.json").write_text(json.dumps({"y": {"v": 1}, "version": 2}))
    (dest / "benchmarks.json").write_text(json.dumps({"old": {"v": 0}, "x": {"v": 0}}))
    rep = merge.merge_results(dest, [a, b])
    assert sorted(rep.copied) == [f"{MACHINE}/both.json", f"{MACHINE}/new.json"]
    assert rep.unchanged == [f"{MACHINE}/same.json"]
    assert sorted(rep.replaced) == ["benchmarks.json", f"{MACHINE}/machine.json"]
    conflicts = {c.path: c for c in rep.conflicts}
    assert sorted(conflicts) == [f"{MACHINE}/both.json", f"{MACHINE}/theirs.json"]
    assert (dest / MACHINE / "theirs.json").read_text() == "THEIRS"
    assert (dest / MACHINE / "both.json").read_text() == "A"  # first shard's copy, b's reported
    assert conflicts[f"{MACHINE}/both.json"].kept == str(b / MACHINE / "both.json")
    bench = json.loads((dest / "benchmarks.json").read_text())
    assert bench == {"old": {"v": 0}, "x": {"v": 1}, "y": {"v": 1}, "version": 2}
    assert json.loads((dest / MACHINE / "machine.json").read_text())["driver"] == "2"
    assert not list(dest.rglob("*.tmp"))


def test_a_broken_shard_does_not_lose_the_others(tmp_path):
    broken = gpus(3)[1].uuid
    res = run(tmp_path, FakeAsv(fail_on=broken), n_gpus=3, n_commits=6)
    assert res.exit_code == 1
    bad = next(o for o in res.shards if o.gpu.uuid == broken)
    assert bad.errors and "launcher broke" in bad.errors[0]
    good = [c for o in res.shards if o.gpu.uuid != broken for c in o.commits]
    written = sorted(p.name[:8] for p in (tmp_path / "results" / MACHINE).glob("*-*.json"))
    assert written == sorted(c[:8] for c in good)
    assert res.work_dir is not None and res.work_dir.exists()
    shutil.rmtree(res.work_dir)


def test_a_failure_after_measuring_keeps_the_shard_results(tmp_path):
    def torn(commits_, env, results_dir, bench):
        (results_dir / MACHINE).mkdir(parents=True, exist_ok=True)
        (results_dir / MACHINE / "zzzzzzzz-torn.json").write_text('{"results": {')

    with pytest.raises(json.JSONDecodeError):
        run(tmp_path, FakeAsv(hook=torn), n_gpus=2, n_commits=2)
    (work,) = tmp_path.glob("ltx2k-shard-*")  # kept: nothing measured is thrown away
    assert len(list(work.glob("shard*/results/h200/*-*.json"))) >= 2
    assert not (tmp_path / "results").exists()  # and nothing half-merged
    with pytest.raises(ValueError, match="one GPU twice"):
        shard.shard_run(commits(2), gpus(1) * 2, tmp_path / "r", FakeAsv(), machine=MACHINE)


def test_a_run_stopped_in_its_exclusive_phase_keeps_the_concurrent_phase(tmp_path):
    """A timeout or a cancelled job in phase 2 must not lose what phase 1 measured."""

    def stop_in_exclusive(commits_, env, results_dir, bench):
        if any("time_host_latency" in b for b in bench):
            raise KeyboardInterrupt  # what the CLI turns SIGTERM into, too

    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, FakeAsv(hook=stop_in_exclusive), n_gpus=2, n_commits=4)
    dest = tmp_path / "results"
    for c in commits(4):
        data = load_file(dest, c)
        assert sorted(data["results"]) == NOT_HOST  # every device-time result landed
        tags = read_tags(dest / MACHINE / f"{c[:8]}-{ENV_NAME}.json")
        assert set(tags) == set(NOT_HOST)
        assert {t["mode"] for t in tags.values()} == {"concurrent"}
    (work,) = tmp_path.glob("ltx2k-shard-*")  # kept for inspection
    shutil.rmtree(work)


def test_two_landings_report_each_file_once(tmp_path):
    res = run(tmp_path, FakeAsv(), n_gpus=2, n_commits=3)
    # Landed after each phase: new files count as new, not as "updated" by the second landing.
    names = sorted(f"{MACHINE}/{c[:8]}-{ENV_NAME}.json" for c in commits(3))
    assert sorted(r for r in res.merge.copied if r.endswith(f"{ENV_NAME}.json")) == names
    assert not set(res.merge.replaced) & set(res.merge.copied)
    assert not res.merge.unchanged and not res.merge.conflicts
    for c in commits(3):
        tags = read_tags(tmp_path / "results" / MACHINE / f"{c[:8]}-{ENV_NAME}.json")
        assert sorted(tags) == SUITE_NAMES  # phase-1 tags survived asv's phase-2 rewrite


def test_accumulate_keeps_the_strongest_change_and_one_conflict_per_path():
    total = merge.MergeReport()
    c1 = merge.Conflict("h200/x.json", "/w/1", "first")
    merge.accumulate(total, merge.MergeReport(copied=["a"], unchanged=["b"], conflicts=[c1]))
    c2 = merge.Conflict("h200/x.json", "/w/2", "second")
    merge.accumulate(total, merge.MergeReport(replaced=["a", "b"], copied=["c"], conflicts=[c2]))
    assert (sorted(total.copied), total.replaced, total.unchanged) == (["a", "c"], ["b"], [])
    assert total.conflicts == [c2]


def test_discovery_failure_is_an_error(tmp_path):
    def no_discovery(commits_, env, results_dir, bench):
        return 1

    with pytest.raises(RuntimeError, match="discovery on gpu0"):
        run(tmp_path, no_discovery, n_gpus=2, n_commits=2)


def test_cpu_shards_use_the_interpreter(tmp_path):
    fake = FakeAsv()
    shard.shard_run(
        commits(2),
        gpus(2),
        tmp_path / "r",
        fake,
        machine="cpu-interpreter",
        cpu=True,
        base_env={},
        work_dir=tmp_path,
        log=False,
    )
    assert all(c["env"]["TRITON_INTERPRET"] == "1" for c in fake.calls)


def test_launcher_command_isolates_each_shard(tmp_path):
    conf = tmp_path / "asv.conf.json"
    conf.write_text(
        '{\n  // comment\n  "version": 1, "repo": ".", "benchmark_dir": "benchmarks",\n'
        '  "results_dir": "results", "env_dir": ".asv/env", "plugins": [".ltx2k.runner.asv_env"]\n}'
    )
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "ltx2k").mkdir()
    launcher = asv_launch.AsvLauncher(conf, "h200", ["--quick"], log=False)
    work = tmp_path / "w" / "shard0-gpu0"
    cmd = launcher.command(commits(2), work / "results", ["^x", "y"])
    assert cmd[:4] == [sys.executable, "-m", "asv", "run"]
    conf_path = Path(cmd[cmd.index("--config") + 1])
    assert conf_path.parent == work
    written = json.loads(conf_path.read_text())
    assert written["results_dir"] == str((work / "results").resolve())
    assert written["env_dir"] == str((work / "env").resolve())
    assert written["repo"] == str(tmp_path.resolve())
    assert written["benchmark_dir"] == str((tmp_path / "benchmarks").resolve())
    assert (work / "ltx2k").resolve() == (tmp_path / "ltx2k").resolve()  # plugin import
    assert cmd[cmd.index("--machine") + 1] == "h200" and "--record-samples" in cmd
    assert cmd[-6:-1] == ["--quick", "-b", "^x", "-b", "y"]
    hashfile = cmd[-1].removeprefix("HASHFILE:")
    assert Path(hashfile).read_text().split() == commits(2)
    # A second call (the exclusive phase) never overwrites the first one's files.
    cmd2 = launcher.command(commits(2), work / "results", ["z"])
    assert cmd2[cmd2.index("--config") + 1] != str(conf_path)


def test_dry_run_prints_the_split(tmp_path, monkeypatch, capsys):
    cs, conf = git_repo(tmp_path, 4)
    monkeypatch.chdir(tmp_path)

    def dry(**policy):
        rc = shard.run(
            ["HEAD~3..HEAD"],
            gpu_list=gpus(2),
            machine="h200",
            config=str(conf),
            results=str(tmp_path / "empty"),
            dry_run=True,
            **policy,
        )
        assert rc == 0
        captured = capsys.readouterr()
        errs.append(captured.err)
        return captured.out.splitlines()

    errs = []

    out = dry()
    newest_first = list(reversed(cs))[:3]
    assert out[0].split()[2:] == [newest_first[0][:8], newest_first[2][:8]]
    assert out[1].split()[2:] == [newest_first[1][:8]]
    assert out[2].startswith("exclusive: [];")  # the measured default: nothing waits
    assert re.search(r"time_host_latency", dry(policy=HOST_EXCLUSIVE)[2])
    # A policy measured on another GPU model: said before the split, and the split shown.
    other = partition.Policy((), machine="a100", commit=cs[0])
    out = dry(policy=other)
    assert out[2].startswith("exclusive: [] (measured on a100);")
    assert "warning: the policy was measured on machine 'a100'" in errs[-1]
    assert "'h200'" in errs[-1]
    dry(policy=partition.Policy((), machine="h200"))
    assert "warning" not in errs[-1]


# --- end to end: real asv on the CPU interpreter, two fake GPUs ------------------------------


@pytest.mark.slow
def test_end_to_end_two_fake_gpus_on_the_interpreter(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    subprocess.run(["git", "clone", "-q", str(REPO_ROOT), str(repo)], check=True)
    monkeypatch.chdir(repo)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # asv's machine file lands here
    (tmp_path / "home").mkdir()
    heads = subprocess.run(
        ["git", "rev-list", "--first-parent", "-2", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    one = r"\('per_head', 'B2_S1_H5_D32'\)"
    rc = shard.run(
        ["-b", rf"SplitRope\.time_(device_warm|host_latency){one}", "HEAD~2..HEAD"],
        gpu_list=[machine.Gpu(0, "GPU-fake-0000", "Fake"), machine.Gpu(1, "GPU-fake-1111", "Fake")],
        results=str(tmp_path / "results"),
        policy=HOST_EXCLUSIVE,  # both phases, with real asv
    )
    assert rc == 0
    from ltx2k.history.records import load_results

    records, _ = load_results(tmp_path / "results")
    measured = {(r.commit, r.benchmark) for r in records if r.value is not None}
    names = (
        "bench_kernels.SplitRope.time_device_warm",
        "bench_kernels.SplitRope.time_host_latency",
    )
    assert measured == {(c, n) for c in heads for n in names}
    assert {r.machine for r in records} == {"cpu-interpreter"}
    files = sorted((tmp_path / "results" / "cpu-interpreter").glob("*-*.json"))
    uuids = set()
    for f in files:
        tags = read_tags(f)
        assert {t["mode"] for t in tags.values()} == {"concurrent", "exclusive"}
        assert tags[names[1]]["mode"] == "exclusive"
        uuids |= {t["gpu_uuid"] for t in tags.values()}
    assert uuids == {"GPU-fake-0000", "GPU-fake-1111"}  # one commit per fake GPU


def test_each_shard_gets_its_own_home_with_the_machine_file(tmp_path):
    """asv rewrites ~/.asv-machine.json as it starts; shards must not share one."""
    real = tmp_path / "real"
    real.mkdir()
    (real / ".asv-machine.json").write_text('{"h200": {"machine": "h200"}, "version": 1}\n')
    base = {"HOME": str(real), "TRITON_CACHE_DIR": "/data/triton"}
    gpus = [machine.Gpu(0, "GPU-a", "Fake"), machine.Gpu(1, "GPU-b", "Fake")]
    envs = [shard.shard_env(base, g, home=tmp_path / f"home{g.index}") for g in gpus]
    homes = [e["HOME"] for e in envs]
    assert len(set(homes)) == 2 and str(real) not in homes
    for e in envs:
        copied = Path(e["HOME"]) / ".asv-machine.json"
        assert copied.read_text() == (real / ".asv-machine.json").read_text()
        assert e["TRITON_CACHE_DIR"] == "/data/triton"  # an explicit cache dir is kept
        assert e["XDG_CACHE_HOME"] == str(real / ".cache")  # ltx2k's bandwidth cache stays
        assert e["PYTHONUSERBASE"] == str(real / ".local")
    no_dir = shard.shard_env({"HOME": str(real)}, gpus[0], home=tmp_path / "h")
    assert no_dir["TRITON_CACHE_DIR"] == str(real / ".triton" / "cache")


def test_sigterm_becomes_an_interrupt_and_the_handler_is_restored():
    import signal

    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt, match="signal 15"), shard.sigterm_as_interrupt():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler interrupts this
    assert signal.getsignal(signal.SIGTERM) is before
