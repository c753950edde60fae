"""GitHub Actions workflows and the scripts/ci/*.sh they call.

Two kinds of test:
- the security properties of .github/workflows/*.yml, read with pyyaml (minimal
  permissions, SHA pins, no pull_request_target, persist-credentials off, no
  expressions in shell text, GPU jobs behind the `benchmark` label, concurrency);
- the scripts' own logic, run in a scratch git repository with fake `ltx2k`,
  `asv` and `gh` executables that record how they were called. The real CLI,
  asv and git run the same scripts end to end in tests/test_ci_e2e.py.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml  # PyYAML: a dependency of asv (the `bench` extra); never skip these tests for it

REPO = Path(__file__).resolve().parents[1]
WORKFLOWS = REPO / ".github" / "workflows"
CI_SCRIPTS = REPO / "scripts" / "ci"
GPU_TYPES = ["h200", "h100", "a100"]
SHA_PIN = re.compile(r"^\s*-?\s*uses:\s*(?P<action>[^@\s]+)@(?P<ref>\S+)(?P<comment>.*)$")


def _load(path: Path) -> dict:
    doc = yaml.safe_load(path.read_text())
    # YAML 1.1 reads the bare key `on` as the boolean True.
    if True in doc:
        doc["on"] = doc.pop(True)
    return doc


WORKFLOW_DOCS = {p.name: _load(p) for p in sorted(WORKFLOWS.glob("*.yml"))}


def _jobs():
    for wf_name, doc in WORKFLOW_DOCS.items():
        for job_name, job in doc["jobs"].items():
            yield wf_name, job_name, job


def _steps():
    for wf_name, job_name, job in _jobs():
        for step in job.get("steps", []):
            yield wf_name, job_name, step


def _triggers(doc: dict) -> dict:
    on = doc["on"]
    if isinstance(on, str):
        return {on: None}
    if isinstance(on, list):
        return dict.fromkeys(on)
    return on


def _self_hosted(job: dict) -> bool:
    runs_on = job["runs-on"]
    return "self-hosted" in (runs_on if isinstance(runs_on, list) else [runs_on])


def test_the_expected_workflows_exist():
    expected = {"ci.yml", "gpu-bench.yml", "pr-bench.yml", "pr-bench-comment.yml", "bisect.yml"}
    assert expected <= set(WORKFLOW_DOCS)


# --- permissions ---------------------------------------------------------------------


def test_every_workflow_defaults_to_no_permissions():
    for name, doc in WORKFLOW_DOCS.items():
        assert doc.get("permissions") == {}, f"{name}: top-level permissions must be {{}}"


def test_every_job_declares_its_permissions():
    for wf, job_name, job in _jobs():
        perms = job.get("permissions")
        assert isinstance(perms, dict), f"{wf}:{job_name} has no permissions: block"
        assert set(perms.values()) <= {"read", "write", "none"}, f"{wf}:{job_name}: {perms}"


def test_write_scopes_exactly_where_results_are_pushed_or_reported():
    granted = {
        (wf, job_name, scope)
        for wf, job_name, job in _jobs()
        for scope, level in job["permissions"].items()
        if level == "write"
    }
    assert granted == {
        ("gpu-bench.yml", "bench", "contents"),  # push to the asv-results store
        ("gpu-bench.yml", "deploy", "pages"),
        ("gpu-bench.yml", "deploy", "id-token"),
        ("gpu-bench.yml", "issue", "issues"),
        ("pr-bench-comment.yml", "comment", "pull-requests"),
    }


# --- actions and checkouts -------------------------------------------------------------


def test_every_action_is_pinned_by_full_sha_with_a_version_comment():
    pins: dict[str, set[str]] = {}
    for path in WORKFLOWS.glob("*.yml"):
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            m = SHA_PIN.match(line)
            if not m or m["action"].startswith("./"):
                continue
            where = f"{path.name}:{lineno}"
            assert re.fullmatch(r"[0-9a-f]{40}", m["ref"]), f"{where}: not a SHA pin: {line}"
            assert re.fullmatch(r"\s+# v\d+\.\d+\.\d+", m["comment"]), f"{where}: no # vX.Y.Z"
            pins.setdefault(m["action"], set()).add(m["ref"] + m["comment"].strip())
    assert pins, "no uses: lines found"
    drifted = {a: p for a, p in pins.items() if len(p) > 1}
    assert not drifted, f"one action pinned to several commits: {drifted}"


def test_checkouts_never_persist_credentials():
    checkouts = [
        (wf, job, step)
        for wf, job, step in _steps()
        if step.get("uses", "").startswith("actions/checkout@")
    ]
    assert checkouts
    for wf, job, step in checkouts:
        assert step.get("with", {}).get("persist-credentials") is False, f"{wf}:{job}"


def test_no_expression_is_interpolated_into_shell_text():
    for wf, job, step in _steps():
        assert "${{" not in step.get("run", ""), f"{wf}:{job}: pass ${{{{ }}}} values via env:"


def test_no_pull_request_target_and_the_only_workflow_run_never_checks_out_pr_code():
    for name, doc in WORKFLOW_DOCS.items():
        triggers = _triggers(doc)
        assert "pull_request_target" not in triggers, name
        if "workflow_run" in triggers:
            assert name == "pr-bench-comment.yml"
            for wf, _, step in _steps():
                if wf == name and step.get("uses", "").startswith("actions/checkout@"):
                    # The default branch, i.e. our code: said explicitly, or the
                    # default ref of a workflow_run.
                    with_ = step.get("with", {})
                    assert "repository" not in with_, step
                    default = "${{ github.event.repository.default_branch }}"
                    assert with_.get("ref", default) == default, step


# --- GPU jobs ------------------------------------------------------------------------


ALLOWED_GPU_TRIGGERS = {"push", "schedule", "workflow_dispatch", "pull_request"}


def test_gpu_jobs_run_only_on_trusted_triggers():
    for wf, job_name, job in _jobs():
        if not _self_hosted(job):
            continue
        triggers = _triggers(WORKFLOW_DOCS[wf])
        assert set(triggers) <= ALLOWED_GPU_TRIGGERS, f"{wf}: {set(triggers)}"
        if "push" in triggers:
            assert triggers["push"] == {"branches": ["main"]}, f"{wf}: push to any branch"
        if "pull_request" in triggers:
            assert set(triggers["pull_request"]["types"]) <= {"labeled", "synchronize"}
            assert "if" in job, f"{wf}:{job_name}: a PR job on a GPU runner needs a label gate"


def test_gpu_jobs_cover_every_gpu_type_and_serialise_per_type():
    for wf, job_name, job in _jobs():
        if not _self_hosted(job):
            continue
        runs_on = job["runs-on"]
        assert runs_on[:2] == ["self-hosted", "gpu"], f"{wf}:{job_name}: {runs_on}"
        if "matrix" in job.get("strategy", {}):
            assert job["strategy"]["matrix"]["gpu"] == GPU_TYPES, wf
            gpu_expr = "matrix.gpu"
        else:
            options = WORKFLOW_DOCS[wf]["on"]["workflow_dispatch"]["inputs"]["gpu"]["options"]
            assert options == GPU_TYPES, wf
            gpu_expr = "inputs.gpu"
        assert runs_on[2] == f"${{{{ {gpu_expr} }}}}", f"{wf}:{job_name}"
        assert gpu_expr in job["concurrency"]["group"], f"{wf}:{job_name}: group per GPU type"
        assert isinstance(job.get("timeout-minutes"), int), f"{wf}:{job_name}: no timeout"


def test_every_job_has_a_concurrency_group():
    for wf, job_name, job in _jobs():
        assert "concurrency" in job or "concurrency" in WORKFLOW_DOCS[wf], f"{wf}:{job_name}"


def test_gpu_runner_labels_are_documented():
    doc = (REPO / "docs" / "runners.md").read_text()
    for gpu in GPU_TYPES:
        for role in ("trusted", "pr-untrusted"):
            assert f"[self-hosted, gpu, {gpu}, {role}]" in doc


def test_pr_code_and_the_store_token_never_share_a_runner_label():
    """PR jobs run on `pr-untrusted` runners, everything else on `trusted` ones."""
    for wf, job_name, job in _jobs():
        if not _self_hosted(job):
            continue
        roles = set(job["runs-on"]) & {"trusted", "pr-untrusted"}
        pr_code = "pull_request" in _triggers(WORKFLOW_DOCS[wf])
        assert roles == ({"pr-untrusted"} if pr_code else {"trusted"}), f"{wf}:{job_name}"


def test_pr_job_installs_into_a_venv_of_its_own():
    bench = WORKFLOW_DOCS["pr-bench.yml"]["jobs"]["bench"]
    gate = next(s for s in bench["steps"] if "pr_gate.sh" in s.get("run", ""))
    assert gate["env"]["LTX2K_VENV"].startswith("${{ runner.temp }}/")


def test_pr_comment_job_runs_the_default_branchs_script():
    comment = WORKFLOW_DOCS["pr-bench-comment.yml"]["jobs"]["comment"]
    checkout = next(
        s for s in comment["steps"] if s.get("uses", "").startswith("actions/checkout@")
    )
    assert checkout["with"]["ref"] == "${{ github.event.repository.default_branch }}"


def test_pr_job_checks_out_the_labelled_commit():
    bench = WORKFLOW_DOCS["pr-bench.yml"]["jobs"]["bench"]
    checkout = next(s for s in bench["steps"] if s.get("uses", "").startswith("actions/checkout@"))
    assert checkout["with"]["ref"] == "${{ github.event.pull_request.head.sha }}"


# A small evaluator for the subset of GitHub's expression language used in `if:`
# (https://docs.github.com/actions/learn-github-actions/expressions), so the label
# gate is tested by what it decides, not by how it is spelled.
_TOKEN = re.compile(r"\s*(?:(\|\||&&|==|!=|!|\(|\)|,)|'((?:[^']|'')*)'|([A-Za-z_][\w.*-]*))")


def _tokens(text: str):
    pos, out = 0, []
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        assert m and m.end() > pos, f"cannot parse {text[pos:]!r}"
        op, string, name = m.groups()
        out.append(
            ("op", op)
            if op
            else ("str", string.replace("''", "'"))
            if string is not None
            else ("name", name)
        )
        pos = m.end()
    return out


def _lookup(obj, parts):
    for i, part in enumerate(parts):
        if part == "*":
            items = obj if isinstance(obj, list) else list((obj or {}).values())
            return [_lookup(x, parts[i + 1 :]) for x in items]
        obj = obj.get(part) if isinstance(obj, dict) else None
    return obj


def _eq(a, b):
    if isinstance(a, str) and isinstance(b, str):
        return a.lower() == b.lower()  # GitHub compares strings case-insensitively
    return a == b


# Job status functions, as for a run in which every earlier job succeeded.
STATUS_FUNCTIONS = {"success": True, "always": True, "cancelled": False, "failure": False}


def evaluate(expr: str, context: dict):
    expr = expr.strip()
    if expr.startswith("${{") and expr.endswith("}}"):
        expr = expr[3:-2]
    toks = _tokens(expr)
    pos = 0

    def peek():
        return toks[pos] if pos < len(toks) else (None, None)

    def take(expected=None):
        nonlocal pos
        tok = toks[pos]
        assert expected is None or tok == ("op", expected), f"expected {expected}, got {tok}"
        pos += 1
        return tok

    def primary():
        kind, value = take()
        if (kind, value) == ("op", "("):
            v = or_()
            take(")")
            return v
        if (kind, value) == ("op", "!"):
            return not primary()
        if kind == "str":
            return value
        if value in ("true", "false", "null"):
            return {"true": True, "false": False, "null": None}[value]
        if peek() == ("op", "("):
            take("(")
            args = []
            while peek() != ("op", ")"):
                if args:
                    take(",")
                args.append(or_())
            take(")")
            if value in STATUS_FUNCTIONS:
                assert not args
                return STATUS_FUNCTIONS[value]
            assert value == "contains", f"unsupported function {value}"
            hay, needle = args
            if isinstance(hay, list):
                return any(_eq(x, needle) for x in hay)
            return str(needle).lower() in str(hay or "").lower()
        return _lookup(context, value.split("."))

    def cmp_():
        left = primary()
        if peek() in (("op", "=="), ("op", "!=")):
            _, op = take()
            right = primary()
            return _eq(left, right) if op == "==" else not _eq(left, right)
        return left

    def and_():
        v = cmp_()
        while peek() == ("op", "&&"):
            take()
            rhs = cmp_()
            v = v and rhs
        return v

    def or_():
        v = and_()
        while peek() == ("op", "||"):
            take()
            rhs = and_()
            v = v or rhs
        return v

    result = or_()
    assert pos == len(toks), f"trailing tokens in {expr!r}"
    return bool(result)


def _pr_context(action, *, fork, labels, label=None):
    repo = "ltx2k-org/ltx2k"
    return {
        "github": {
            "repository": repo,
            "event": {
                "action": action,
                "label": {"name": label} if label else None,
                "pull_request": {
                    "labels": [{"name": n} for n in labels],
                    "head": {"repo": {"full_name": "someone/ltx2k" if fork else repo}},
                },
            },
        }
    }


@pytest.mark.parametrize(
    "action, fork, labels, label, runs",
    [
        ("labeled", False, ["benchmark"], "benchmark", True),
        ("synchronize", False, ["benchmark"], None, True),
        ("synchronize", False, [], None, False),
        ("labeled", True, ["benchmark"], "benchmark", True),
        # A fork's new push is never benchmarked on the strength of an old label.
        ("synchronize", True, ["benchmark"], None, False),
        # Unrelated labels do not re-run the gate.
        ("labeled", False, ["benchmark", "docs"], "docs", False),
        ("labeled", True, ["benchmark", "docs"], "docs", False),
        # Label removed again before the job was scheduled.
        ("labeled", True, [], "benchmark", False),
        ("labeled", False, ["Benchmark"], "BENCHMARK", True),
    ],
)
def test_pr_gpu_jobs_run_only_with_the_maintainer_label(action, fork, labels, label, runs):
    gated = [
        (wf, job_name, job)
        for wf, job_name, job in _jobs()
        if _self_hosted(job) and "pull_request" in _triggers(WORKFLOW_DOCS[wf])
    ]
    assert gated, "no GPU job in a pull_request workflow?"
    ctx = _pr_context(action, fork=fork, labels=labels, label=label)
    for wf, job_name, job in gated:
        assert evaluate(job["if"], ctx) is runs, f"{wf}:{job_name}"


@pytest.mark.parametrize("ref, runs", [("refs/heads/main", True), ("refs/heads/try-this", False)])
def test_gpu_bench_writes_history_only_from_main(ref, runs):
    jobs = WORKFLOW_DOCS["gpu-bench.yml"]["jobs"]
    ctx = {"github": {"ref": ref}}
    for name in ("bench", "report"):
        assert evaluate(jobs[name]["if"], ctx) is runs, name


def test_expression_evaluator_handles_the_subset():
    ctx = {"a": {"b": [{"n": "X"}, {"n": "y"}]}, "s": "abc"}
    assert evaluate("contains(a.b.*.n, 'x')", ctx)
    assert not evaluate("contains(a.b.*.n, 'z') || s == 'abd'", ctx)
    assert evaluate("!(s != 'ABC') && contains(s, 'b')", ctx)
    assert evaluate("${{ !cancelled() && always() }}", ctx)


# --- scripts ---------------------------------------------------------------------------


def _called_scripts():
    for wf, job, step in _steps():
        for m in re.finditer(r"\bbash\s+(\S+\.sh|\.ci/run)\b", step.get("run", "")):
            yield wf, job, m.group(1)


def test_workflow_steps_are_thin_calls_of_scripts():
    for wf, job, step in _steps():
        if "run" in step:
            lines = [ln for ln in step["run"].splitlines() if ln.strip()]
            # "exec bash": a step whose shell would otherwise keep a token in its environ
            call = lines[0].removeprefix("exec ")
            assert len(lines) == 1 and call.startswith("bash "), f"{wf}:{job}: {step['run']!r}"


def test_every_called_script_exists_and_parses():
    # .ci/run is CI's entry point (it runs scripts/test.sh), not a script under scripts/.
    called = {path for _, _, path in _called_scripts() if path != ".ci/run"}
    assert called
    for rel in sorted(called | {str(p.relative_to(REPO)) for p in CI_SCRIPTS.glob("*.sh")}):
        path = REPO / rel
        assert path.is_file(), f"{rel} is called by a workflow but does not exist"
        subprocess.run(["bash", "-n", str(path)], check=True)
        for sourced in re.findall(r"^\s*source\s+(scripts/\S+)", path.read_text(), re.M):
            assert (REPO / sourced).is_file(), f"{rel} sources missing {sourced}"
    subprocess.run(["bash", "-n", str(REPO / "scripts" / "lint_workflows.sh")], check=True)


FAKE_TOOL = r'''#!{python}
"""Fake {{ltx2k, asv, gh}}: logs argv and the auth-relevant env, acts per FAKE_* vars."""
import json, os, sys
from pathlib import Path

tool, args = Path(sys.argv[0]).name, sys.argv[1:]
env = os.environ
seen = {{k: env.get(k) for k in ("LTX2K_STORE_TOKEN", "GIT_CONFIG_COUNT", "GIT_CONFIG_KEY_0",
                                  "GIT_CONFIG_VALUE_0", "TRITON_CACHE_DIR", "TRITON_INTERPRET",
                                  "PYTORCH_NVML_BASED_CUDA_CHECK", "PYTHONPYCACHEPREFIX",
                                  "PYTHONDONTWRITEBYTECODE") if k in env}}
record = {{"tool": tool, "args": args, "env": seen}}


def opt(name):
    return args[args.index(name) + 1] if name in args else None


rc, out = 0, ""
if tool == "ltx2k":
    if args[0] == "machine":
        out = "cpu-interpreter"
    elif args[0] == "run":
        rc = int(env.get("FAKE_RUN_RC", "0"))
        # What benchmark code could read: every ancestor's /proc/<pid>/environ.
        held, pid = [], os.getpid()
        while pid > 1:
            try:
                environ = Path(f"/proc/{{pid}}/environ").read_bytes()
                stat = Path(f"/proc/{{pid}}/stat").read_text()
            except OSError:
                break
            if b"LTX2K_STORE_TOKEN=" in environ or b"s3cret" in environ:
                held.append(pid)
            pid = int(stat.rsplit(")", 1)[1].split()[1])
        record["token_in_environ_of"] = held
    elif args[0] == "regress":
        Path(opt("--markdown")).write_text("| benchmark | ratio |\n| x | 1.3 |\n")
        Path(opt("--json")).write_text("{{}}")
        rc = int(env.get("FAKE_REGRESS_RC", "0"))
    elif args[0] == "confirm":
        status = env.get("FAKE_CONFIRM_STATUS", "not-confirmed")
        Path(opt("--markdown")).write_text(f"### ltx2k confirm on `cpu-interpreter`: {{status}}\n")
        Path(opt("--json")).write_text(json.dumps({{"status": status}}))
        rc = int(env.get("FAKE_CONFIRM_RC", "0"))
    elif args[0] == "publish":
        if opt("--config"):
            record["config"] = json.loads(Path(opt("--config")).read_text())
        Path(opt("--html")).mkdir(parents=True, exist_ok=True)
        (Path(opt("--html")) / "index.html").write_text("<html></html>")
elif tool == "asv":
    out = "asv output for " + " ".join(args)
    rc = int(env.get("FAKE_ASV_RC", "0"))
elif tool == "gh":
    joined = " ".join(args)
    for flag in ("--body-file",):
        if flag in args:
            record["body"] = Path(opt(flag)).read_text()
    for a in args:
        if a.startswith("body=@"):
            record["body"] = Path(a[len("body=@"):]).read_text()
    if args[:2] == ["issue", "list"]:
        out = env.get("FAKE_ISSUE", "")
    elif args[0] == "api" and args[-2:] == ["--jq", ".head.sha"]:
        out = env.get("FAKE_PR_HEAD", "")
    elif args[0] == "api" and args[-2:] == ["--jq", ".head.repo.full_name"]:
        out = env.get("FAKE_PR_HEAD_REPO", "o/r")
    elif args[0] == "api" and "/files" in joined:
        out = env.get("FAKE_PR_FILES", "README.md")
    elif args[0] == "api" and "/commits" in joined:
        out = env.get("FAKE_PR_COMMITS", "")
    elif args[0] == "api" and "/comments" in joined and "--method" not in args:
        out = env.get("FAKE_COMMENT_ID", "")
with open(env["FAKE_LOG"], "a") as f:
    f.write(json.dumps(record) + "\n")
if out:
    print(out)
sys.exit(rc)
'''


class Sandbox:
    """A scratch git repository holding scripts/ci, with fake tools first on PATH."""

    def __init__(self, root: Path):
        self.root = root / "repo"
        shutil.copytree(CI_SCRIPTS, self.root / "scripts" / "ci")
        self.log = root / "calls.jsonl"
        self.output = root / "github_output"
        bin_dir = root / "bin"
        bin_dir.mkdir()
        for tool in ("ltx2k", "asv", "gh"):
            path = bin_dir / tool
            path.write_text(FAKE_TOOL.format(python=sys.executable))
            path.chmod(path.stat().st_mode | stat.S_IEXEC)
        self.env = {
            "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            "HOME": str(root),
            "FAKE_LOG": str(self.log),
            "GITHUB_OUTPUT": str(self.output),
            "LTX2K_SKIP_BOOTSTRAP": "1",
            "LTX2K_PYTHON": sys.executable,  # the project's python, as a runner's .env names it
            "RUNNER_TEMP": str(root),
            "GIT_CONFIG_NOSYSTEM": "1",
            # what the PR comment workflow passes from its workflow_run event
            "LTX2K_RUN_PATH": ".github/workflows/pr-bench.yml",
            "LTX2K_RUN_HEAD_REPO": "o/r",
        }
        self.git("init", "-q", "-b", "main")
        self.commits = []
        for i in range(3):
            (self.root / "f.txt").write_text(str(i))
            self.git("add", ".")
            self.git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", f"c{i}")
            self.commits.append(self.git("rev-parse", "HEAD").strip())

    def store(self, *, with_branch: bool) -> str:
        """A bare store repository, with or without the asv-results branch."""
        store = self.root.parent / "store.git"
        subprocess.run(["git", "init", "-q", "--bare", str(store)], check=True)
        if with_branch:
            self.git("push", "-q", str(store), "HEAD:refs/heads/asv-results")
        return str(store)

    def git(self, *args):
        return subprocess.run(
            ["git", *args], cwd=self.root, env=self.env, check=True, capture_output=True, text=True
        ).stdout

    def run(self, script, *args, **env):
        return subprocess.run(
            ["bash", f"scripts/ci/{script}", *args],
            cwd=self.root,
            env={**self.env, **env},
            capture_output=True,
            text=True,
            timeout=60,
        )

    def calls(self, tool=None):
        if not self.log.exists():
            return []
        rows = [json.loads(line) for line in self.log.read_text().splitlines()]
        return [r for r in rows if tool is None or r["tool"] == tool]

    def outputs(self):
        return dict(line.split("=", 1) for line in self.output.read_text().splitlines())


@pytest.fixture
def sandbox(tmp_path):
    return Sandbox(tmp_path)


def test_runner_bench_pulls_runs_pushes_and_keeps_the_token_from_benchmarks(sandbox):
    store = sandbox.store(with_branch=True)
    r = sandbox.run("runner_bench.sh", LTX2K_STORE=store, LTX2K_STORE_TOKEN="s3cret")
    assert r.returncode == 0, r.stderr
    calls = sandbox.calls("ltx2k")
    assert [c["args"][:2] for c in calls] == [
        ["machine", "--write"],
        ["store", "pull"],
        ["run", "--"],  # `--`, or ltx2k's argparse rejects the asv options
        ["store", "push"],
    ]
    # Per-machine skipping over every commit, not asv's cross-machine NEW.
    assert calls[2]["args"][2:] == ["--skip-existing-commits", "ALL"]
    # Only this runner's machine directory is pushed.
    push = calls[3]["args"]
    assert push[push.index("--machine") + 1] == "cpu-interpreter"
    header = "AUTHORIZATION: basic " + base64.b64encode(b"x-access-token:s3cret").decode()
    for c in calls:
        assert "LTX2K_STORE_TOKEN" not in c["env"], c
        if c["args"][0] == "store":
            assert c["env"]["GIT_CONFIG_VALUE_0"] == header
            assert c["env"]["GIT_CONFIG_KEY_0"] == "http.https://github.com/.extraheader"
            assert store in c["args"]
        else:
            assert "GIT_CONFIG_VALUE_0" not in c["env"], c
    assert sandbox.outputs()["machine"] == "cpu-interpreter"


def test_no_process_above_the_benchmarks_holds_the_token_in_its_environ(sandbox):
    # `unset` alone leaves it in /proc/<pid>/environ of the script's shell.
    store = sandbox.store(with_branch=True)
    r = sandbox.run("runner_bench.sh", LTX2K_STORE=store, LTX2K_STORE_TOKEN="s3cret")
    assert r.returncode == 0, r.stderr
    (run,) = [c for c in sandbox.calls("ltx2k") if c["args"][0] == "run"]
    assert run["token_in_environ_of"] == []
    push = [c for c in sandbox.calls("ltx2k") if c["args"][:2] == ["store", "push"]]
    assert push and push[0]["env"]["GIT_CONFIG_VALUE_0"].startswith("AUTHORIZATION: basic ")


def test_a_step_given_the_store_token_execs_its_script():
    # The step's own shell is an ancestor of the benchmarks: it must become the script.
    for wf, job, step in _steps():
        if "LTX2K_STORE_TOKEN" in (step.get("env") or {}):
            assert step["run"].strip().startswith("exec bash "), f"{wf}:{job}"


def _feature_commit(sandbox) -> str:
    sandbox.git("checkout", "-q", "-b", "feature")
    (sandbox.root / "f.txt").write_text("unreviewed")
    sandbox.git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "feature")
    sha = sandbox.git("rev-parse", "HEAD").strip()
    sandbox.git("checkout", "-q", "main")
    return sha


def test_bisect_refuses_a_commit_that_is_not_on_main(sandbox):
    bad = _feature_commit(sandbox)
    r = sandbox.run("bisect.sh", sandbox.commits[0], bad, "bench_kernels.SplitRope.time_kernel")
    assert r.returncode != 0 and "not on the default branch 'main'" in r.stderr, r.stderr
    assert sandbox.calls() == []
    r = sandbox.run(
        "bisect.sh",
        sandbox.commits[0],
        sandbox.commits[-1],
        "bench_kernels.SplitRope.time_kernel",
        LTX2K_DEFAULT_BRANCH="feature",
    )
    assert r.returncode == 0, r.stderr  # the default branch is the one named


def test_confirm_refuses_a_report_naming_a_commit_off_main(sandbox):
    bad = _feature_commit(sandbox)
    _report_file(sandbox)
    report = sandbox.root / "regress" / "report.json"
    report.write_text(json.dumps({"steps": [{"first_bad": bad, "last_good": sandbox.commits[0]}]}))
    r = sandbox.run("confirm.sh")
    assert r.returncode != 0 and "not on the default branch" in r.stderr, r.stderr
    assert sandbox.calls() == []


def test_runner_bench_pushes_partial_results_when_the_run_fails(sandbox):
    store = sandbox.store(with_branch=True)
    r = sandbox.run("runner_bench.sh", LTX2K_STORE=store, FAKE_RUN_RC="2")
    assert r.returncode != 0
    assert [c["args"][:2] for c in sandbox.calls("ltx2k")][-1] == ["store", "push"]
    assert "exited 2" in r.stderr


def test_runner_bench_starts_a_new_store(sandbox):
    r = sandbox.run("runner_bench.sh", LTX2K_STORE=sandbox.store(with_branch=False))
    assert r.returncode == 0, r.stderr
    # Nothing to pull from a store without the branch; the push creates it.
    assert [c["args"][0] for c in sandbox.calls("ltx2k")] == ["machine", "run", "store"]


def test_runner_bench_stops_before_benchmarking_if_the_store_is_unreachable(sandbox):
    r = sandbox.run("runner_bench.sh", LTX2K_STORE=str(sandbox.root.parent / "no-such.git"))
    assert r.returncode != 0 and "cannot read store" in r.stderr
    assert [c["args"][0] for c in sandbox.calls("ltx2k")] == ["machine"]


def test_runner_bench_needs_a_store(sandbox):
    r = sandbox.run("runner_bench.sh")
    assert r.returncode != 0 and "LTX2K_STORE" in r.stderr
    assert sandbox.calls() == []


def test_runner_bench_passes_range_and_run_args(sandbox):
    r = sandbox.run(
        "runner_bench.sh",
        LTX2K_STORE=sandbox.store(with_branch=False),
        LTX2K_RANGE="HEAD^!",
        LTX2K_RUN_ARGS="--quick -e",
    )
    assert r.returncode == 0, r.stderr
    run = next(c for c in sandbox.calls("ltx2k") if c["args"][0] == "run")
    assert run["args"] == ["run", "--", "--skip-existing-commits", "--quick", "-e", "HEAD^!"]


def test_cpu_dashboard_runs_quick_and_publishes(sandbox):
    shutil.copy(REPO / "asv.conf.json", sandbox.root / "asv.conf.json")
    r = sandbox.run("cpu_dashboard.sh")
    assert r.returncode == 0, r.stderr
    calls = sandbox.calls("ltx2k")
    assert [c["args"][0] for c in calls] == ["machine", "run", "publish"]
    assert calls[1]["args"] == ["run", "--", "--quick", "HEAD^!"]
    assert (sandbox.root / "html" / "index.html").is_file()
    # Published along HEAD, not main: a PR's merge commit is on no local main,
    # and asv publish leaves commits outside its branches off every graph.
    # Everything else is asv.conf.json's, and the copy is gone afterwards.
    from asv import util

    conf = util.load_json(str(REPO / "asv.conf.json"), js_comments=True)
    assert calls[2]["config"] == {**conf, "branches": ["HEAD"]}
    assert not list(sandbox.root.glob(".asv-dashboard*"))
    r = sandbox.run("cpu_dashboard.sh", LTX2K_RUN_ARGS="")  # set but empty: a full run
    assert r.returncode == 0, r.stderr
    assert sandbox.calls("ltx2k")[-2]["args"] == ["run", "--", "HEAD^!"]


def test_publish_site_pulls_then_publishes(sandbox):
    r = sandbox.run("publish_site.sh", LTX2K_STORE="/tmp/s.git")
    assert r.returncode == 0, r.stderr
    assert [c["args"][0] for c in sandbox.calls("ltx2k")] == ["store", "publish"]
    assert (sandbox.root / "html" / "index.html").is_file()


@pytest.mark.parametrize("rc, status", [(0, "ok"), (2, "regressed"), (3, "insufficient")])
def test_regress_report_maps_exit_statuses(sandbox, rc, status):
    r = sandbox.run("regress_report.sh", FAKE_REGRESS_RC=str(rc), LTX2K_LAST="4")
    assert r.returncode == 0, r.stderr
    assert (sandbox.root / "regress" / "status").read_text().strip() == status
    assert sandbox.outputs()["status"] == status
    (call,) = sandbox.calls("ltx2k")
    assert call["args"][call["args"].index("--head") + 1] == sandbox.commits[-1]
    assert call["args"][call["args"].index("--last") + 1] == "4"


def test_regress_report_fails_on_a_crash_and_on_bad_input(sandbox):
    assert sandbox.run("regress_report.sh", FAKE_REGRESS_RC="1").returncode != 0
    r = sandbox.run("regress_report.sh", LTX2K_LAST="ten")
    assert r.returncode != 0 and "LTX2K_LAST" in r.stderr
    r = sandbox.run("regress_report.sh", LTX2K_HEAD="--output=/etc/x")
    assert r.returncode != 0 and "LTX2K_HEAD" in r.stderr


def _regress_dir(sandbox, status):
    d = sandbox.root / "regress"
    d.mkdir(exist_ok=True)
    (d / "status").write_text(status + "\n")
    (d / "report.md").write_text("| h200 | SplitRope.time_device_warm | 1.31x |\n")


def test_regress_issue_opens_one_issue(sandbox):
    _regress_dir(sandbox, "regressed")
    r = sandbox.run("regress_issue.sh", GH_REPO="o/r", LTX2K_RUN_URL="https://run/1")
    assert r.returncode == 0, r.stderr
    kinds = [c["args"][:2] for c in sandbox.calls("gh")]
    assert kinds == [["label", "create"], ["issue", "list"], ["issue", "create"]]
    create = sandbox.calls("gh")[-1]
    assert "SplitRope.time_device_warm" in create["body"] and "https://run/1" in create["body"]


def test_regress_issue_updates_the_existing_issue(sandbox):
    _regress_dir(sandbox, "regressed")
    r = sandbox.run("regress_issue.sh", GH_REPO="o/r", FAKE_ISSUE="17")
    assert r.returncode == 0, r.stderr
    kinds = [c["args"][:3] for c in sandbox.calls("gh")]
    assert ["issue", "edit", "17"] in kinds and ["issue", "comment", "17"] in kinds
    assert not any(k[:2] == ["issue", "create"] for k in kinds)


@pytest.mark.parametrize("status", ["ok", "insufficient"])
def test_regress_issue_is_quiet_without_a_regression(sandbox, status):
    _regress_dir(sandbox, status)
    assert sandbox.run("regress_issue.sh", GH_REPO="o/r").returncode == 0
    assert sandbox.calls("gh") == []


def _flagged_report(sandbox, *machines):
    d = sandbox.root / "regress"
    row = {
        "benchmark": "bench_kernels.SplitRope.time_device_cold",
        "cells": {m: {"flag": "regression", "ratio": 1.06} for m in machines},
    }
    (d / "report.json").write_text(json.dumps({"status": "regression", "rows": [row]}))


def _confirm_result(sandbox, gpu, machine, status, summary=None):
    d = sandbox.root / "confirm" / f"confirm-{gpu}"
    d.mkdir(parents=True)
    (d / "status").write_text(status + "\n")
    (d / "machine").write_text(machine + "\n")
    (d / "summary.md").write_text(summary or f"### confirm on {machine}: {status}\n")


def test_regress_issue_reports_only_confirmed_gpus(sandbox):
    _regress_dir(sandbox, "regressed")
    _flagged_report(sandbox, "h200", "a100-sxm4-80gb")
    _confirm_result(sandbox, "h200", "h200", "confirmed", "bisected to `abc123` c2: slower\n")
    _confirm_result(sandbox, "a100", "a100-sxm4-80gb", "not-confirmed")
    _confirm_result(sandbox, "h100", "h100-80gb-hbm3", "nothing-flagged")
    r = sandbox.run("regress_issue.sh", GH_REPO="o/r", LTX2K_CONFIRM_DIR="confirm")
    assert r.returncode == 0, r.stderr
    body = sandbox.calls("gh")[-1]["body"]
    assert "Confirmed on the GPU's own runner" in body and "h200." in body
    assert "bisected to `abc123` c2: slower" in body
    # The GPU whose re-measurement did not hold is named but its section left out.
    assert "not confirmed when re-measured (left out of this issue): a100-sxm4-80gb" in body
    assert "confirm on a100-sxm4-80gb" not in body and "h100" not in body
    assert "SplitRope.time_device_warm" in body  # the regress report follows


def test_regress_issue_stays_quiet_when_no_flag_is_confirmed(sandbox):
    _regress_dir(sandbox, "regressed")
    _flagged_report(sandbox, "h200")
    _confirm_result(sandbox, "h200", "h200", "not-confirmed")
    r = sandbox.run("regress_issue.sh", GH_REPO="o/r", LTX2K_CONFIRM_DIR="confirm")
    assert r.returncode == 0, r.stderr
    assert sandbox.calls("gh") == []
    assert "none held" in r.stderr


@pytest.mark.parametrize("status", ["error", "missing"])
def test_regress_issue_reports_a_flag_its_runner_could_not_confirm(sandbox, status):
    _regress_dir(sandbox, "regressed")
    _flagged_report(sandbox, "h200")
    if status != "missing":
        _confirm_result(sandbox, "h200", "h200", status)
    r = sandbox.run("regress_issue.sh", GH_REPO="o/r", LTX2K_CONFIRM_DIR="confirm")
    assert r.returncode == 0, r.stderr
    body = sandbox.calls("gh")[-1]["body"]
    assert "not re-measured" in body and "h200" in body


def test_regress_issue_rejects_doctored_confirm_results(sandbox):
    _regress_dir(sandbox, "regressed")
    _flagged_report(sandbox, "h200")
    _confirm_result(sandbox, "h200", "h200; rm -rf /", "confirmed")
    r = sandbox.run("regress_issue.sh", GH_REPO="o/r", LTX2K_CONFIRM_DIR="confirm")
    assert r.returncode != 0 and "not a machine name" in r.stderr
    assert not any(c["args"][:2] == ["issue", "create"] for c in sandbox.calls("gh"))


def _report_file(sandbox):
    d = sandbox.root / "regress"
    d.mkdir(exist_ok=True)
    (d / "report.json").write_text("{}")


@pytest.mark.parametrize(
    "rc, fake_status, status, exit_ok",
    [
        (0, "not-confirmed", "not-confirmed", True),
        (0, "nothing-flagged", "nothing-flagged", True),
        (2, "confirmed", "confirmed", True),
        (1, "error", "error", False),
    ],
)
def test_confirm_script_runs_ltx2k_confirm_on_the_report(sandbox, rc, fake_status, status, exit_ok):
    _report_file(sandbox)
    r = sandbox.run(
        "confirm.sh",
        FAKE_CONFIRM_RC=str(rc),
        FAKE_CONFIRM_STATUS=fake_status,
        LTX2K_ROUNDS="6",
        LTX2K_GPU="h200",
    )
    assert (r.returncode == 0) is exit_ok, r.stderr
    calls = sandbox.calls("ltx2k")
    assert [c["args"][0] for c in calls] == ["machine", "confirm"]
    args = calls[1]["args"]
    for flag, value in (
        ("--report", "regress/report.json"),
        ("--machine", "cpu-interpreter"),  # the runner's own, from ltx2k machine
        ("--rounds", "6"),
        ("--max-cells", "20"),
    ):
        assert args[args.index(flag) + 1] == value, args
    out = sandbox.root / "confirm"
    assert (out / "status").read_text().strip() == status
    assert (out / "machine").read_text().strip() == "cpu-interpreter"
    assert sandbox.outputs()["status"] == status
    assert "ltx2k confirm on" in (out / "summary.md").read_text()
    assert sandbox.calls("asv") == []  # asv is ltx2k confirm's business


@pytest.mark.parametrize(
    "env, message",
    [
        ({"LTX2K_REPORT": "nope.json"}, "LTX2K_REPORT"),
        ({"LTX2K_ROUNDS": "0"}, "LTX2K_ROUNDS"),
        ({"LTX2K_MAX_CELLS": "many"}, "LTX2K_MAX_CELLS"),
    ],
)
def test_confirm_script_validates_its_inputs(sandbox, env, message):
    _report_file(sandbox)
    r = sandbox.run("confirm.sh", **env)
    assert r.returncode != 0 and message in r.stderr
    assert sandbox.calls() == []


def _artifact(sandbox, gpu, **verdict):
    d = sandbox.root / "artifacts" / f"pr-bench-{gpu}"
    d.mkdir(parents=True)
    (d / "verdict.json").write_text(json.dumps({"gpu": gpu, **verdict}))
    (d / "report.md").write_text(f"### {gpu}: {verdict.get('verdict')}\nbody of {gpu}\n")


@pytest.mark.parametrize(
    "env, message",
    [
        ({"LTX2K_RUN_PATH": ".github/workflows/evil.yml"}, "not the PR gate"),
        ({"LTX2K_RUN_PATH": ""}, "LTX2K_RUN_PATH"),
        ({"LTX2K_RUN_HEAD_REPO": "o/r; rm -rf /"}, "LTX2K_RUN_HEAD_REPO"),
        ({"FAKE_PR_HEAD_REPO": "someone/else"}, "comes from 'someone/else'"),
        ({"FAKE_PR_FILES": "README.md\n.github/workflows/pr-bench.yml"}, "changes"),
        ({"LTX2K_RUN_URL": "javascript:alert(1)"}, "LTX2K_RUN_URL"),
    ],
)
def test_pr_comment_refuses_a_run_that_is_not_the_gates(sandbox, env, message):
    head = sandbox.commits[-1]
    _artifact(sandbox, "h200", pr=5, head=head, verdict="ok")
    r = sandbox.run(
        "pr_comment.sh", GH_REPO="o/r", LTX2K_RUN_HEAD_SHA=head, FAKE_PR_HEAD=head, **env
    )
    assert r.returncode != 0 and message in r.stderr, r.stderr
    assert not [c for c in sandbox.calls("gh") if "--method" in c["args"]]  # nothing posted


def test_pr_comment_shows_a_forks_report_as_inert_text(sandbox):
    head = sandbox.commits[-1]
    _artifact(sandbox, "h200", pr=5, head=head, verdict="ok")
    report = sandbox.root / "artifacts" / "pr-bench-h200" / "report.md"
    report.write_text("[click](https://evil.example) ![x](https://evil.example/p.png) ```` `")
    r = sandbox.run(
        "pr_comment.sh",
        GH_REPO="o/r",
        LTX2K_RUN_HEAD_SHA=head,
        FAKE_PR_HEAD=head,
        LTX2K_RUN_HEAD_REPO="fork/r",
        FAKE_PR_HEAD_REPO="fork/r",
    )
    assert r.returncode == 0, r.stderr
    (post,) = [c for c in sandbox.calls("gh") if "--method" in c["args"]]
    body = post["body"]
    start = body.index("`````text\n")  # a fence longer than any run of backticks inside
    assert body.index("[click]") > start and body.index("`````", start + 5) > body.index("[click]")


def test_pr_comment_posts_one_comment_covering_every_gpu(sandbox):
    head = sandbox.commits[-1]
    _artifact(sandbox, "h200", pr=5, head=head, verdict="regressed")
    _artifact(sandbox, "a100", pr=5, head=head, verdict="ok")
    r = sandbox.run("pr_comment.sh", GH_REPO="o/r", LTX2K_RUN_HEAD_SHA=head, FAKE_PR_HEAD=head)
    assert r.returncode == 0, r.stderr
    post = sandbox.calls("gh")[-1]
    assert (
        post["args"][:3] == ["api", "--method", "POST"]
        and "repos/o/r/issues/5/comments" in post["args"]
    )
    body = post["body"]
    assert body.startswith("<!-- ltx2k-pr-bench -->")
    assert "body of h200" in body and "body of a100" in body and "re-apply the label" in body


def test_pr_comment_updates_its_previous_comment(sandbox):
    head = sandbox.commits[-1]
    _artifact(sandbox, "h200", pr=5, head=head, verdict="ok")
    r = sandbox.run(
        "pr_comment.sh",
        GH_REPO="o/r",
        LTX2K_RUN_HEAD_SHA=head,
        FAKE_PR_HEAD=head,
        FAKE_COMMENT_ID="99",
    )
    assert r.returncode == 0, r.stderr
    patch = sandbox.calls("gh")[-1]
    assert patch["args"][:4] == ["api", "--method", "PATCH", "repos/o/r/issues/comments/99"]


def test_pr_comment_refuses_a_pr_that_does_not_contain_the_commit(sandbox):
    head = sandbox.commits[-1]
    _artifact(sandbox, "h200", pr=6, head=head, verdict="ok")
    r = sandbox.run(
        "pr_comment.sh", GH_REPO="o/r", LTX2K_RUN_HEAD_SHA=head,
        FAKE_PR_HEAD=sandbox.commits[0], FAKE_PR_COMMITS=sandbox.commits[0],
    )  # fmt: skip
    assert r.returncode != 0 and "does not contain" in r.stderr
    assert not any("--method" in c["args"] for c in sandbox.calls("gh"))


def test_pr_comment_accepts_an_older_commit_of_the_pr(sandbox):
    head = sandbox.commits[1]
    _artifact(sandbox, "h200", pr=6, head=head, verdict="ok")
    r = sandbox.run(
        "pr_comment.sh", GH_REPO="o/r", LTX2K_RUN_HEAD_SHA=head,
        FAKE_PR_HEAD=sandbox.commits[2], FAKE_PR_COMMITS="\n".join(sandbox.commits[1:]),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize(
    "verdict",
    [
        {"pr": "5; rm -rf /", "verdict": "ok"},
        {"pr": True, "verdict": "ok"},
        {"pr": 5, "verdict": "<script>"},
        {"pr": 5, "verdict": "ok", "head": "0" * 40},
    ],
)
def test_pr_comment_rejects_doctored_artifacts(sandbox, verdict):
    head = sandbox.commits[-1]
    _artifact(sandbox, "h200", **{"head": head, **verdict})
    r = sandbox.run("pr_comment.sh", GH_REPO="o/r", LTX2K_RUN_HEAD_SHA=head, FAKE_PR_HEAD=head)
    assert r.returncode != 0
    assert sandbox.calls("gh") == []


def test_pr_comment_is_capped_and_mentions_nobody(sandbox):
    head = sandbox.commits[-1]
    _artifact(sandbox, "h200", pr=5, head=head, verdict="regressed")
    report = sandbox.root / "artifacts" / "pr-bench-h200" / "report.md"
    report.write_text("@maintainer look\n" + "| a | b |\n" * 20_000)
    r = sandbox.run("pr_comment.sh", GH_REPO="o/r", LTX2K_RUN_HEAD_SHA=head, FAKE_PR_HEAD=head)
    assert r.returncode == 0, r.stderr
    body = sandbox.calls("gh")[-1]["body"]
    assert len(body) <= 20_000
    assert "truncated" in body and "artifacts" in body
    assert "@maintainer" not in body and "@\u200bmaintainer" in body


def test_pr_comment_without_artifacts_posts_nothing(sandbox):
    r = sandbox.run("pr_comment.sh", GH_REPO="o/r", LTX2K_RUN_HEAD_SHA=sandbox.commits[-1])
    assert r.returncode == 0 and sandbox.calls() == []


@pytest.mark.parametrize(
    "asv_rc, regress_rc, verdict, exit_ok",
    [
        (0, 0, "ok", True),
        (1, 2, "regressed", False),
        (0, 3, "insufficient", True),
        (2, None, "error", False),
    ],
)
def test_pr_gate_verdicts(sandbox, asv_rc, regress_rc, verdict, exit_ok):
    base, head = sandbox.commits[0], sandbox.commits[-1]
    env = {"FAKE_ASV_RC": str(asv_rc), "LTX2K_PR_NUMBER": "12", "LTX2K_GPU": "h200"}
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # a runner image that writes no bytecode
    if regress_rc is not None:
        env["FAKE_REGRESS_RC"] = str(regress_rc)
    r = sandbox.run("pr_gate.sh", base, head, **env)
    assert (r.returncode == 0) is exit_ok, r.stderr
    out = sandbox.root / "pr-bench"
    v = json.loads((out / "verdict.json").read_text())
    assert (v["verdict"], v["pr"], v["gpu"], v["head"], v["base"]) == (
        verdict,
        12,
        "h200",
        head,
        base,
    )
    assert f"### h200: {verdict}" in (out / "report.md").read_text()
    (asv,) = sandbox.calls("asv")
    assert asv["args"][:1] == ["continuous"] and asv["args"][-2:] == [base, head]
    assert asv["env"]["TRITON_CACHE_DIR"].startswith(str(sandbox.root.parent)), (
        "PR cache not private"
    )
    # Nor may it write the bytecode main's runs read (ltx2k/runner/bytecode.py); it keeps its own.
    assert asv["env"]["PYTHONPYCACHEPREFIX"].startswith(str(sandbox.root.parent)), (
        "PR bytecode not private"
    )
    assert "PYTHONDONTWRITEBYTECODE" not in asv["env"]
    # The environment `ltx2k run` would give asv: the fake machine is a CPU.
    assert asv["env"]["TRITON_INTERPRET"] == "1"
    assert asv["env"]["PYTORCH_NVML_BASED_CUDA_CHECK"] == "1"
    regress = [c for c in sandbox.calls("ltx2k") if c["args"][0] == "regress"]
    assert len(regress) == (regress_rc is not None)
    # asv mirrors refs, so both commits must be reachable from one.
    assert sandbox.git("rev-parse", "refs/ltx2k/pr-head").strip() == head


def test_pr_gate_compares_against_the_merge_base(sandbox):
    base_tip = sandbox.commits[-1]
    sandbox.git("checkout", "-q", "-b", "pr", sandbox.commits[1])
    (sandbox.root / "g.txt").write_text("pr")
    sandbox.git("add", ".")
    sandbox.git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "pr")
    head = sandbox.git("rev-parse", "HEAD").strip()
    r = sandbox.run("pr_gate.sh", base_tip, head)
    assert r.returncode == 0, r.stderr
    (asv,) = sandbox.calls("asv")
    assert asv["args"][-2:] == [sandbox.commits[1], head]


def test_pr_gate_rejects_option_like_refs(sandbox):
    r = sandbox.run("pr_gate.sh", "--upload-pack=touch /tmp/x", "HEAD")
    assert r.returncode != 0 and "not a git revision" in r.stderr
    assert sandbox.calls() == []


@pytest.mark.parametrize("good_index", [0, 1], ids=["root-commit", "inner-commit"])
def test_bisect_runs_asv_find_on_a_range_that_starts_at_good(sandbox, good_index):
    good, bad = sandbox.commits[good_index], sandbox.commits[-1]
    r = sandbox.run(
        "bisect.sh",
        good,
        bad,
        "bench_kernels.SplitRope.time_device_warm",
        LTX2K_BISECT_INVERT="true",
    )
    assert r.returncode == 0, r.stderr
    (find,) = sandbox.calls("asv")
    assert find["args"][0] == "find" and "--invert" in find["args"]
    assert find["args"][-1] == "bench_kernels.SplitRope.time_device_warm"
    # asv find never blames the oldest commit of its range, so that commit must be
    # `good` itself: with git's good..bad, good's child could never be found.
    # asv lists the range with `git rev-list --first-parent`, oldest last.
    listed = sandbox.git("rev-list", "--first-parent", find["args"][-2]).split()
    assert listed == sandbox.commits[good_index:][::-1]
    assert "asv find" in (sandbox.root / "bisect" / "summary.md").read_text()


@pytest.mark.parametrize(
    "good, bad, bench, invert, message",
    [
        ("HEAD", "HEAD~2", "b", "false", "not an ancestor"),
        ("HEAD", "HEAD", "b", "false", "same commit"),
        ("HEAD~2", "HEAD", "", "false", "LTX2K_BISECT_BENCH"),
        ("HEAD~2", "HEAD", "--dry-run", "false", "LTX2K_BISECT_BENCH"),
        ("HEAD~2", "HEAD", "b", "yes", "LTX2K_BISECT_INVERT"),
        ("$(id)", "HEAD", "b", "false", "not a git revision"),
    ],
)
def test_bisect_validates_its_inputs(sandbox, good, bad, bench, invert, message):
    r = sandbox.run(
        "bisect.sh",
        LTX2K_BISECT_GOOD=good,
        LTX2K_BISECT_BAD=bad,
        LTX2K_BISECT_BENCH=bench,
        LTX2K_BISECT_INVERT=invert,
    )
    assert r.returncode != 0 and message in r.stderr
    assert sandbox.calls("asv") == []


def test_cpu_dashboard_runs_its_python_on_the_set_up_interpreter(sandbox, tmp_path):
    # A python3 first on PATH that is not the project's (no asv): the script's own
    # snippet must run on the python the set-up chose, here LTX2K_PYTHON.
    shutil.copy(REPO / "asv.conf.json", sandbox.root / "asv.conf.json")
    wrong = tmp_path / "wrong-python"
    wrong.mkdir()
    (wrong / "python3").write_text("#!/bin/sh\necho 'not the project python' >&2\nexit 1\n")
    (wrong / "python3").chmod(0o755)
    env = {"PATH": f"{wrong}{os.pathsep}{sandbox.env['PATH']}", "LTX2K_PYTHON": sys.executable}
    proc = sandbox.run("cpu_dashboard.sh", **env)
    assert proc.returncode == 0, proc.stderr
    (publish,) = [c for c in sandbox.calls("ltx2k") if c["args"][0] == "publish"]
    assert publish["config"]["branches"] == ["HEAD"]
