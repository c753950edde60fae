"""The store under hostile input: option-like URLs, links in the branch, refusing servers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ltx2k.history import store, store_git
from ltx2k.history.store import pull_results, push_results
from tests.test_history_store import BRANCH, Runner, bare, git  # noqa: F401 (fixture)


@pytest.mark.parametrize(
    "url",
    ["--upload-pack=touch {pwned}", "-u touch {pwned}", "--receive-pack=touch {pwned}"],
)
@pytest.mark.parametrize("op", ["push", "pull"])
def test_option_like_url_is_a_clear_error_and_runs_nothing(tmp_path, url, op):
    pwned = tmp_path / "PWNED"
    url = url.format(pwned=pwned)
    a = Runner(tmp_path, "h200")
    a.run_commit(1)
    with pytest.raises(ValueError, match="store_url="):
        if op == "push":
            push_results(url, a.dir, branch=BRANCH, machine="h200", log=None)
        else:
            pull_results(url, tmp_path / "dest", branch=BRANCH, log=None)
    assert not pwned.exists()


def test_a_transport_that_runs_a_command_is_refused(tmp_path, monkeypatch):
    # Even where git's own config would allow it.
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "protocol.ext.allow")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "always")
    pwned = tmp_path / "PWNED"
    with pytest.raises(RuntimeError, match="cannot reach store"):
        pull_results(f"ext::sh -c touch% {pwned}", tmp_path / "d", branch=BRANCH, log=None)
    assert not pwned.exists()


def test_git_gets_a_double_dash_before_the_url(tmp_path, monkeypatch):
    # Past the clear error: even a URL that reached git would be read as a URL.
    monkeypatch.setattr(store_git, "check_url", lambda u: u)
    pwned = tmp_path / "PWNED"
    with pytest.raises(RuntimeError, match="cannot reach store"):
        pull_results(f"--upload-pack=touch {pwned}", tmp_path / "d", branch=BRANCH, log=None)
    assert not pwned.exists()


def _commit_into_store(bare_repo: Path, tmp_path: Path, add) -> None:
    """Put arbitrary tree entries into the store branch, as a hostile writer could."""
    work = tmp_path / "evil"
    git(tmp_path, "clone", "-q", "-b", BRANCH, str(bare_repo), str(work))
    add(work)
    git(work, "add", "-A")
    git(work, "-c", "user.name=x", "-c", "user.email=x@x", "commit", "-q", "-m", "evil")
    git(work, "push", "-q", "origin", f"HEAD:{BRANCH}")


@pytest.mark.parametrize("target", ["absolute", "relative", "directory"])
def test_pull_never_follows_a_symlink_in_the_store(bare, tmp_path, target):  # noqa: F811
    a = Runner(tmp_path, "h200")
    a.run_commit(1)
    a.push(bare)
    secret_dir = tmp_path / "private"
    secret_dir.mkdir()
    secret = secret_dir / "secret.json"
    secret.write_text(json.dumps({"token": "s3cr3t", "version": 2}))

    def add(work: Path):
        link = work / "results" / "h200" / "leak.json"
        if target == "absolute":
            link.symlink_to(secret)
        elif target == "relative":
            link.symlink_to(Path("../" * 20) / str(secret).lstrip("/"))
        else:
            link = work / "results" / "leakdir"
            link.symlink_to(secret_dir)

    _commit_into_store(bare, tmp_path, add)
    dest = tmp_path / "dest"
    res = pull_results(str(bare), dest, branch=BRANCH, log=None)
    assert res.refused, "the link was not reported"
    for p in dest.rglob("*"):
        assert not p.is_symlink()
        if p.is_file():
            assert "s3cr3t" not in p.read_text()
    assert (dest / "h200" / a.files[0].split("/")[1]).is_file()  # the rest still pulled


def test_push_skips_a_local_symlink(bare, tmp_path):  # noqa: F811
    a = Runner(tmp_path, "h200")
    a.run_commit(1)
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps({"private": 1}))
    (a.dir / "h200" / "link.json").symlink_to(outside)
    res = a.push(bare)
    assert any(s.endswith("link.json") for s in res.skipped)
    assert "results/h200/link.json" not in res.files


def test_refusing_hook_fails_at_once_with_its_message(bare, tmp_path, monkeypatch):  # noqa: F811
    hook = bare / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'results frozen for the release' >&2\nexit 1\n")
    hook.chmod(0o755)
    a = Runner(tmp_path, "h200")
    a.run_commit(1)
    sleeps = []
    monkeypatch.setattr(store.time, "sleep", sleeps.append)
    with pytest.raises(RuntimeError, match="results frozen for the release") as e:
        a.push(bare, retries=5, backoff=0.0)
    assert "refused" in str(e.value)
    assert sleeps == []  # no retry


@pytest.mark.parametrize(
    "err, retry",
    [
        (" ! [remote rejected] HEAD -> b (pre-receive hook declined)", False),
        (" ! [remote rejected] HEAD -> b (unpacker error)\nerror: unpack failed", False),
        (" ! [remote rejected] HEAD -> b (failed to update ref)", True),
        (" ! [remote rejected] HEAD -> b (cannot lock ref 'refs/heads/b')", True),
        (" ! [rejected]        HEAD -> b (fetch first)", True),
        (" ! [rejected]        HEAD -> b (non-fast-forward)", True),
        ("fatal: Authentication failed", False),
    ],
)
def test_moved_tip_is_told_from_a_refusal(err, retry):
    assert store_git.moved_tip(err) is retry


def test_two_runners_one_machine_name_are_refused(bare, tmp_path):  # noqa: F811
    a = Runner(tmp_path / "a", "h200")
    b = Runner(tmp_path / "b", "h200")
    a.run_commit(1)
    b.run_commit(1)
    (b.dir / "h200" / b.files[0].split("/")[1]).write_text(
        json.dumps({"commit_hash": f"{1:040x}", "machine": "h200", "version": 2, "x": 1})
    )
    a.push(bare, runner="runner-a")
    with pytest.raises(RuntimeError, match="two runners share one machine name"):
        b.push(bare, runner="runner-b")
    got = pull_results(str(bare), tmp_path / "d", branch=BRANCH, log=None)
    assert '"x"' not in (tmp_path / "d" / a.files[0]).read_text()  # a's file kept
    assert got.commit
    # The same runner re-measuring its own file may replace it.
    b.push(bare, runner="runner-a")


def test_option_like_branch_is_refused(tmp_path):
    with pytest.raises(ValueError, match="branch="):
        pull_results(str(tmp_path), tmp_path / "d", branch="--upload-pack=x", log=None)


def test_runner_name_is_checked(bare, tmp_path):  # noqa: F811
    a = Runner(tmp_path, "h200")
    a.run_commit(1)
    with pytest.raises(ValueError, match="runner must be"):
        a.push(bare, runner="a\nb")


def test_a_second_runner_of_the_type_adds_commits_and_may_update_machine_json(bare, tmp_path):  # noqa: F811
    a = Runner(tmp_path / "a", "h200")
    b = Runner(tmp_path / "b", "h200")
    a.run_commit(1)
    b.run_commit(2)
    (b.dir / "h200" / "machine.json").write_text(
        json.dumps({"machine": "h200", "version": 1, "driver": "575.1"})
    )
    a.push(bare, runner="runner-a")
    res = b.push(bare, runner="runner-b")
    assert res.pushed and "results/h200/00000002-env.json" in res.files
