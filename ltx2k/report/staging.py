"""What ``asv publish`` is given: a copy of asv.conf.json and of the result files asv can
read, every file left out a listed Problem.

asv publish crashes on one unreadable machine.json and on a result whose commit
the repository lacks, and merely logs (and drops) a corrupt result file. We copy
only the files both ``ltx2k.history.records.load_results`` and asv's own loaders
accept into a temporary directory and point a temporary copy of asv.conf.json at
it, so a bad file becomes a listed Problem instead of a failed or silently
thinner dashboard.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from ltx2k.history.jsonfile import is_regular, parse_json
from ltx2k.history.records import Problem
from ltx2k.report import links
from ltx2k.runner import asv_compat

# Problems that make a result file unusable (asv must not see it): the whole file
# when the Problem names no benchmark, else only that benchmark of the file.
_BAD_FILE_KINDS = {
    "corrupt",
    "truncated",
    "unreadable",
    "wrong-version",
    "machine-mismatch",
    "not-a-file",
    "too-large",
    "bad-value",
    "bad-name",
}
# Problems that make asv publish skip or crash on a whole machine directory, or
# that keep a machine off asv's pages.
_BAD_MACHINE_KINDS = {"missing-machine-json", "bad-machine-json", "bad-machine-name"}


def staged_conf(conf_path: Path, html: Path, repo) -> dict:
    """asv.conf.json with every path absolute: asv resolves them against the conf's folder."""
    conf = asv_compat.load_conf(conf_path)
    base = conf_path.parent
    repo_value = os.fspath(repo) if repo is not None else conf.get("repo", ".")
    if "://" not in repo_value and not repo_value.startswith("git@"):
        repo_value = str((base / repo_value).resolve())
    conf["repo"] = repo_value
    conf["html_dir"] = str(html)
    for key, default in (("benchmark_dir", "benchmarks"), ("env_dir", "env")):
        conf[key] = str((base / conf.get(key, default)).resolve())
    return conf


def commit_base(conf: dict) -> str | None:
    """Commit-link prefix for both sites; asv's pages get it through the staged conf.

    asv.conf.json's ``show_commit_url`` when it is an absolute URL, otherwise
    the GitHub URL of the repository's ``origin`` remote; without either the
    staged conf keeps asv's default ("#": no commit page).
    """
    repo = conf.get("repo", ".")
    local = None if "://" in repo or repo.startswith("git@") else repo
    base = links.commit_url_base(conf.get("show_commit_url"), local)
    if base is None and local is None:
        base = links.github_commit_base(repo)  # a remote repo URL names the project itself
    conf["show_commit_url"] = base or "#"
    return base


def stage_results(
    results: Path, staged: Path, conf: dict, problems: list[Problem], drawn: set[str] | None
) -> Path:
    """Copy what asv can publish into ``staged``; add a Problem for everything left out.

    *drawn*: the result files the dashboard draws (None: all of them)."""
    staged.mkdir(parents=True)
    bad_files = {
        os.path.realpath(p.path)
        for p in problems
        if p.kind in _BAD_FILE_KINDS and p.benchmark is None
    }
    bad_machines = {p.machine for p in problems if p.kind in _BAD_MACHINE_KINDS}
    bench_path = results / "benchmarks.json"
    refused = {p.benchmark for p in problems if p.kind == "bad-name" and p.path == str(bench_path)}
    if is_regular(bench_path):
        try:
            bench = parse_json(bench_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            bench = None  # load_results already reported it; asv publish will fail
        if isinstance(bench, dict):
            # An entry that is not an object (load_results said so) would stop asv publish.
            kept = {
                k: v
                for k, v in bench.items()
                if k != "version" and k not in refused and isinstance(v, dict)
            }
            asv_compat.write_json(staged / "benchmarks.json", kept, api_version=2)
    # Result files with one unusable benchmark go to asv without it.
    strip: dict[str, set[str]] = {}
    for p in problems:
        if p.kind in _BAD_FILE_KINDS and p.benchmark is not None:
            strip.setdefault(os.path.realpath(p.path), set()).add(p.benchmark)
    stripped_dir = staged.parent / "stripped"

    cfg = asv_compat.config_from_dict(dict(conf, results_dir=str(staged)))
    try:
        benchmarks = asv_compat.load_benchmarks(cfg)
    except (ValueError, KeyError, TypeError):
        benchmarks = None  # load_results already reported it; asv publish will fail
    try:
        repo = asv_compat.open_repo(cfg)
    except Exception as e:  # asv raises bare Exceptions from git too; any means "no repo"
        problems.append(
            Problem(str(conf["repo"]), None, "no-repository", f"asv cannot open the repo: {e}")
        )
        repo = None

    candidates: list[tuple[Path, str, Any]] = []  # Any: asv's Results
    for mdir in sorted(p for p in results.iterdir() if p.is_dir() and not p.name.startswith(".")):
        if mdir.name in bad_machines or mdir.is_symlink():
            continue  # load_results already said why; asv would skip or crash on it
        for path in sorted(mdir.glob("*.json")):
            if path.name == "machine.json" or os.path.realpath(path) in bad_files:
                continue
            if drawn is not None and os.path.realpath(path) not in drawn:
                continue  # outside the window
            if not is_regular(path):
                continue  # load_results already reported it
            if os.path.realpath(path) in strip:
                path = _without(path, strip[os.path.realpath(path)], stripped_dir / mdir.name)
                if path is None:
                    continue
            try:
                res = asv_compat.load_result(path, machine_name=mdir.name)
                if benchmarks is not None:
                    # The calls asv publish makes: run them here, where a failure is ours to report.
                    for key in res.get_result_keys(benchmarks):
                        params = benchmarks[key]["params"]
                        res.get_result_value(key, params)
                        res.get_result_stats(key, params)
            except Exception as e:  # any failure here would abort asv publish
                problems.append(
                    Problem(str(path), mdir.name, "corrupt", f"asv cannot publish {path}: {e}")
                )
                continue
            candidates.append((path, mdir.name, res))

    known = set()
    if repo is not None:
        try:
            known = set(repo.get_revisions({res.commit_hash for _, _, res in candidates}))
        except Exception as e:  # git failing on the repo: treat every commit as unknown
            problems.append(
                Problem(str(conf["repo"]), None, "no-repository", f"git rev-list failed: {e}")
            )
    unknown: dict[str, list[tuple[Path, str]]] = {}
    for path, machine, res in candidates:
        if res.commit_hash not in known:
            unknown.setdefault(machine, []).append((path, res.commit_hash))
            continue
        (staged / machine).mkdir(exist_ok=True)
        shutil.copy2(path, staged / machine / path.name)
        if not (staged / machine / "machine.json").exists():
            shutil.copy2(results / machine / "machine.json", staged / machine / "machine.json")
    # One problem per machine: a wrong --repo makes every file of every machine
    # "unknown", and hundreds of identical lines would bury the cause.
    for machine, items in sorted(unknown.items()):
        shown = ", ".join(sorted({c[:8] for _, c in items})[:6])
        more = len({c for _, c in items}) - 6
        problems.append(
            Problem(
                str(items[0][0].parent),
                machine,
                "unknown-commit",
                f"{len(items)} result file(s) of {machine!r} are for commits not in the "
                f"repository {conf['repo']} ({shown}{f', and {more} more' if more > 0 else ''});"
                " asv cannot place them on its graphs, so they appear only on this summary "
                "(fetch the commits, or pass the right --repo).",
            )
        )
    return staged


def _without(path: Path, benchmarks: set[str], folder: Path) -> Path | None:
    """A copy of result file *path* in *folder* without *benchmarks*; None if unreadable."""
    try:
        data = parse_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    # Every per-benchmark mapping asv 0.6 keeps in a result file.
    for key in ("results", "durations", "benchmark_version"):
        if isinstance(data.get(key), dict):
            for name in benchmarks:
                data[key].pop(name, None)
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / path.name
    out.write_text(json.dumps(data), encoding="utf-8")
    return out
