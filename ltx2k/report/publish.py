"""Publish the dashboard: asv's own site plus our summary page next to it.

``asv publish`` builds the per-GPU graphs, the regressions page and the
Atom feed; we never re-implement those. What we add around it:

* a **staged results directory**: asv publish crashes on one unreadable
  machine.json and on a result whose commit the repository lacks, and merely
  logs (and drops) a corrupt result file. We copy only the files both
  ``ltx2k.history.records.load_results`` and asv's own loaders accept into
  a temporary directory and point a temporary copy of asv.conf.json at it,
  so a bad file becomes a listed Problem instead of a failed or silently
  thinner dashboard;
* **offline assets**: asv 0.6's index.html pulls jQuery, flot and bootstrap
  from CDNs; we copy vendored copies (static/vendor/VENDORED.txt) into
  ``html/vendor/`` and point the page at them, so the site works on an
  air-gapped runner, from a CI artifact, or on a host without internet;
* a **link to summary.html** in asv's navigation bar, and the summary page.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from ltx2k import asv_compat
from ltx2k.analysis.model import Report
from ltx2k.history.records import QUIET_KINDS, Problem, load_results, parse_json
from ltx2k.history.store import exit_on_signals
from ltx2k.history.window import DRAWN, Window
from ltx2k.report import links, page

# CDN URL in asv 0.6.6's www/index.html -> vendored file in ltx2k/report/static/vendor/.
VENDORED_ASSETS = {
    "https://code.jquery.com/jquery-3.3.1.min.js": "jquery-3.3.1.min.js",
    "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.min.js": "jquery.flot.js",
    "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.time.min.js": (
        "jquery.flot.time.js"
    ),
    "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.selection.min.js": (
        "jquery.flot.selection.js"
    ),
    "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.categories.min.js": (
        "jquery.flot.categories.js"
    ),
    "https://cdn.jsdelivr.net/npm/flot-orderbars@1.0.0/js/jquery.flot.orderBars.js": (
        "jquery.flot.orderBars.js"
    ),
    "https://cdnjs.cloudflare.com/ajax/libs/stupidtable/1.0.1/stupidtable.min.js": (
        "stupidtable.min.js"
    ),
    "https://cdnjs.cloudflare.com/ajax/libs/blueimp-md5/2.19.0/js/md5.min.js": "md5.min.js",
    "https://cdn.jsdelivr.net/npm/bootstrap@3.1.1/dist/js/bootstrap.min.js": "bootstrap.min.js",
    "https://cdn.jsdelivr.net/npm/bootstrap@3.1.1/dist/css/bootstrap.min.css": (
        "bootstrap.min.css"
    ),
}
VENDOR_DIR = "vendor"
SUMMARY_LINK_ID = "ltx2k-summary-link"

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
# `asv publish` on a 1,000-commit history finishes in minutes; one that runs
# for an hour is stuck (asv's step detection can spin on pathological input).
ASV_PUBLISH_TIMEOUT_S = 3600.0
FAILED_SUFFIX = ".failed"  # html.failed/: the build of a publish whose asv step failed
# asv log lines worth surfacing: they mean data was left out of the dashboard.
_ASV_DROPS = re.compile(r"(Couldn't find .* in branches|Skipping results|Error parsing JSON)")


@dataclass
class PublishResult:
    html_dir: Path
    summary: Path
    problems: list[Problem] = field(default_factory=list)
    asv_ok: bool = True  # False: asv's site is missing or stale; the summary page is still there
    kept_old: bool = False  # asv failed and html_dir still holds the previous complete site

    @property
    def error(self) -> str | None:
        """Why this publish failed, or None. Only asv's pages count: a summary page
        without them would pass for a whole dashboard."""
        if self.asv_ok:
            return None
        if self.kept_old:
            return (
                f"asv publish failed (problems above): {self.html_dir} keeps the previous "
                f"site; this run's summary is {self.summary}"
            )
        return (
            f"asv publish failed (problems above): wrote {self.summary}, "
            f"but no new {self.html_dir / 'index.html'}"
        )


def publish(
    asv_conf: str | os.PathLike,
    results_dir: str | os.PathLike,
    html_dir: str | os.PathLike,
    *,
    regress_json: Report | str | os.PathLike | Mapping | None = None,
    repo: str | os.PathLike | None = None,
    last: int | None = DRAWN,
    log=None,
    asv_timeout: float = ASV_PUBLISH_TIMEOUT_S,
    loaded: tuple[list, list[Problem]] | None = None,
) -> PublishResult:
    """Build ``html_dir``: asv's dashboard, then ``summary.html`` + ``summary/*.png``.

    ``asv publish`` runs in its own process group, ended after *asv_timeout*
    seconds or when this process is interrupted or terminated. When it fails and
    ``html_dir`` holds a complete site, that site is left as it was and this
    run's build (its summary page) goes to ``<html_dir>.failed/``.

    ``regress_json`` is a report of ``ltx2k.analysis.regress``: a ``Report``,
    the path of one written as JSON, or that JSON as a mapping; without one
    the matrix section says so. ``repo`` overrides asv.conf.json's repository
    (it must hold every result's commit). Problems are printed to ``log``
    (default stderr) and listed on the page; none is fatal. Raises
    ValueError only for bad arguments, a report file that cannot be read or
    is not a report among them.
    """
    log = sys.stderr if log is None else log
    conf_path = Path(asv_conf).resolve()
    if not conf_path.is_file():
        raise ValueError(f"asv_conf={os.fspath(asv_conf)!r} is not a file")
    results = Path(results_dir).resolve()
    if not results.is_dir():
        raise ValueError(f"results_dir={os.fspath(results_dir)!r} is not a directory")
    if last is not None and last < 1:
        raise ValueError(f"last must be a positive number of commits, got {last!r}")
    if isinstance(asv_timeout, bool) or not isinstance(asv_timeout, (int, float)):
        raise ValueError(f"asv_timeout must be a number of seconds, got {asv_timeout!r}")
    if not 0 < asv_timeout < float("inf"):
        raise ValueError(f"asv_timeout must be a positive, finite number, got {asv_timeout!r}")
    report = _load_report(regress_json)
    html = Path(html_dir).resolve()

    # *loaded*: load_results(results_dir) already done by the caller (publish_dashboard),
    # so a large history is read once, not once per step.
    records, problems = loaded if loaded is not None else load_drawn(results, last, repo)
    problems = list(problems)
    html.parent.mkdir(parents=True, exist_ok=True)
    sweep_stale_builds(html)
    # Everything is built next to html/ and swapped in at the end, so a publish
    # killed at any point leaves the previous site (or none), never half of one.
    work = Path(tempfile.mkdtemp(prefix=_build_prefix(html) + f"{os.getpid()}-", dir=html.parent))
    kept_old = False
    with exit_on_signals():
        try:
            summary, asv_ok, kept_old = _build_and_swap(
                work, html, conf_path, results, repo, records, problems, report, last, asv_timeout
            )
        finally:
            old = work / _OLD
            if old.is_dir() and not os.path.lexists(html):
                os.rename(old, html)  # the fallback swap failed half-way: keep the old site
            shutil.rmtree(work, ignore_errors=True)
    _log_problems(problems, log)
    return PublishResult(
        html_dir=html, summary=summary, problems=problems, asv_ok=asv_ok, kept_old=kept_old
    )


def _build_and_swap(work, html, conf_path, results, repo, records, problems, report, last, timeout):
    """The build of :func:`publish` in *work*; returns (summary path, asv ok, old site kept)."""
    build = work / "html"
    conf = _staged_conf(conf_path, build, repo)
    commit_base = _commit_base(conf)
    drawn = _drawn_files(records, last)
    staged = _stage_results(results, work / "results", conf, problems, drawn)
    conf["results_dir"] = str(staged)
    tmp_conf = work / "asv.conf.json"
    tmp_conf.write_text(json.dumps(conf, indent=2), encoding="utf-8")
    asv_ok = _run_asv_publish(tmp_conf, conf_path, problems, timeout)
    if asv_ok:
        _post_process_index(build, problems)
    else:
        build.mkdir(parents=True, exist_ok=True)

    summary = page.build_summary(
        build,
        records,
        problems,
        report=report,
        machines_info=_machines_info(results),
        last=last,
        commit_base=commit_base,
        results_dir=results,
        results_label=_results_label(results, conf_path),
    )
    if not asv_ok and (html / "index.html").is_file():
        # A summary page over a site without asv's pages would link nowhere:
        # the previous complete site stays, this build goes aside for a look.
        failed = html.with_name(html.name + FAILED_SUFFIX)
        shutil.rmtree(failed, ignore_errors=True)
        os.rename(build, failed)
        return failed / summary.name, asv_ok, True
    swap_in(build, html)
    return html / summary.name, asv_ok, False


def publish_dashboard(
    asv_conf: str | os.PathLike,
    results_dir: str | os.PathLike | None = None,
    html_dir: str | os.PathLike | None = None,
    *,
    regress_json: Report | str | os.PathLike | Mapping | None = None,
    repo: str | os.PathLike | None = None,
    last: int | None = DRAWN,
    log=None,
) -> PublishResult:
    """``ltx2k publish``: :func:`publish` with asv.conf.json's folders as defaults
    (:func:`conf_dirs`), after the checks that keep an empty input from replacing a site.

    Without *regress_json* the summary shows :func:`latest_vs_previous` (git order
    when *repo*, else the conf's repository, is a directory). ValueError, and
    *html_dir* untouched, when the results folder is missing or holds no result;
    asv failing is not raised but in ``PublishResult.error``.
    """
    results, html, conf_repo = conf_dirs(asv_conf, results_dir, html_dir)
    # results_dir= when the caller named the folder (the CLI shows it as --results).
    where = f"results_dir={str(results)!r}" if results_dir else f"results dir {str(results)!r}"
    if not results.is_dir():
        raise ValueError(f"{where} is not a directory (asv run or ltx2k store pull fills it)")
    repo_dir = Path(repo).resolve() if repo else conf_repo
    records, problems = load_drawn(results, last, repo_dir)
    if not records:
        # A dashboard of nothing would only hide that the results are missing.
        raise ValueError(
            f"{where} holds no asv results ({len(problems)} problem(s)); nothing published, "
            f"{str(html)!r} left as it was (fill it with ltx2k run or ltx2k store pull)"
        )
    if regress_json is None:
        regress_json = latest_vs_previous(
            results, repo=repo_dir if repo_dir.is_dir() else None, loaded=(records, problems)
        )
    return publish(
        asv_conf,
        results,
        html,
        regress_json=regress_json,
        repo=repo_dir,
        last=last,
        log=log,
        loaded=(records, problems),
    )


def load_drawn(results: Path, last: int | None, repo=None) -> tuple[list, list[Problem]]:
    """The results of each GPU's last *last* commits (None: all), and the last
    ``regress.DEFAULT_LAST`` at least, which :func:`latest_vs_previous` judges."""
    if last is None:
        return load_results(results)
    from ltx2k.analysis import regress

    n = max(last, regress.DEFAULT_LAST)
    repo = Path(repo) if repo is not None and Path(repo).is_dir() else None
    try:
        return load_results(results, select=Window(last=n, repo=repo))
    except ValueError:  # the newest commit is not in the repository: order by date
        return load_results(results, select=Window(last=n))


def _drawn_files(records, last: int | None) -> set[str] | None:
    """The result files of each GPU's *last* newest commits (by commit date, as the
    plots pick them); None, every file, for the whole history or records that were
    not read from files."""
    if last is None or any(not r.path for r in records):
        return None
    dates: dict[str, dict[str, int]] = {}
    for r in records:
        dates.setdefault(r.machine, {})[r.commit] = r.date
    newest = {
        (m, c) for m, of in dates.items() for c in sorted(of, key=lambda c: (of[c], c))[-last:]
    }
    return {os.path.realpath(r.path) for r in records if (r.machine, r.commit) in newest}


def conf_dirs(
    asv_conf: str | os.PathLike,
    results_dir: str | os.PathLike | None = None,
    html_dir: str | os.PathLike | None = None,
) -> tuple[Path, Path, Path]:
    """(results_dir, html_dir, repo) with asv.conf.json's values as defaults.

    Relative paths in the conf are relative to the conf's folder, as asv reads them.
    """
    conf_path = Path(asv_conf).resolve()
    if not conf_path.is_file():
        raise ValueError(f"asv_conf={os.fspath(asv_conf)!r} is not a file")
    try:
        conf = asv_compat.load_json(conf_path, js_comments=True)
    except asv_compat.user_error() as e:
        raise ValueError(f"asv_conf={str(conf_path)!r} is not valid JSON: {e}") from e
    base = conf_path.parent
    results = (
        Path(results_dir) if results_dir is not None else base / conf.get("results_dir", "results")
    )
    html = Path(html_dir) if html_dir is not None else base / conf.get("html_dir", "html")
    return results.resolve(), html.resolve(), (base / str(conf.get("repo", "."))).resolve()


def latest_vs_previous(results_dir, *, repo=None, loaded=None) -> Report | None:
    """The regress report of the newest commit, judged along its history.

    The newest commit is the one with the latest stored commit date over all
    machines. Each GPU's last ``regress.DEFAULT_LAST`` commits up to it go
    through the change-point detector (``regress.compare(..., last=...)``),
    so a flagged cell names the step that caused it. None when there are
    fewer than two commits (no history yet).
    """
    from ltx2k.analysis import regress

    # *loaded*: load_results(results_dir), when the caller already has it.
    records, problems = loaded if loaded is not None else load_results(results_dir)
    dates: dict[str, int] = {}
    for r in records:
        dates[r.commit] = r.date
    commits = sorted(dates, key=lambda c: (dates[c], c))
    if len(commits) < 2:
        return None
    return regress.compare(
        records, commits[-1], last=regress.DEFAULT_LAST, repo=repo, problems=problems
    )


# --- building next to html/ and swapping it in ------------------------------------------

# Linux renameat2(2) flag: exchange two paths atomically (both must exist).
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100
_OLD = "old"  # where the two-rename fallback puts the previous site


def _build_prefix(html: Path) -> str:
    return f".{html.name}.publish-"


def _rename_exchange(a: Path, b: Path) -> bool:
    """Swap two directories in one step (Linux renameat2); False where unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes
    import errno

    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False  # a libc without renameat2 (glibc < 2.28, some musl)
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False  # a filesystem or kernel that cannot exchange
    raise OSError(err, os.strerror(err), str(b))


def swap_in(build: Path, html: Path) -> None:
    """Make the finished site ``build`` the content of ``html``; the old one goes to build's place.

    Without an html/ yet, one rename. With one, an atomic exchange where the
    OS has it; elsewhere two renames (html/ aside into the build folder, the
    build in), which a kill between them leaves without html/ until the next
    publish puts the old site back (:func:`sweep_stale_builds`).
    """
    if not os.path.lexists(html):
        try:
            os.rename(build, html)
            return
        except OSError:
            if not os.path.lexists(html):
                raise
            # another publish got there first: exchange with its result below
    if _rename_exchange(build, html):
        return
    aside = build.parent / _OLD
    os.rename(html, aside)
    os.rename(build, html)


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    return True


def sweep_stale_builds(html: Path) -> list[Path]:
    """Remove build folders that publishes killed before they finished; return them.

    A folder whose process still runs is left alone. If html/ is missing and a
    dead publish had moved the old site aside, that site is put back first.
    """
    removed = []
    prefix = _build_prefix(html)
    for d in sorted(html.parent.glob(prefix + "*")):
        m = re.match(re.escape(prefix) + r"(\d+)-", d.name)
        if not d.is_dir() or m is None or _pid_alive(int(m.group(1))):
            continue
        old = d / _OLD
        if old.is_dir() and not os.path.lexists(html):
            os.rename(old, html)
        shutil.rmtree(d, ignore_errors=True)
        removed.append(d)
    return removed


# --- inputs -----------------------------------------------------------------------------


def _load_report(regress_json) -> Report | None:
    if regress_json is None or isinstance(regress_json, Report):
        return regress_json
    if isinstance(regress_json, Mapping):
        return Report.from_json(regress_json, source="regress_json")
    if not isinstance(regress_json, (str, os.PathLike)):
        raise ValueError(
            "regress_json must be a Report, its JSON, a path or None, "
            f"got {type(regress_json).__name__}"
        )
    name = f"regress_json={os.fspath(regress_json)!r}"
    try:
        data = json.loads(Path(regress_json).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"{name} cannot be read: {e}") from e
    return Report.from_json(data, source=name)


def _machines_info(results: Path) -> dict[str, dict]:
    """machine.json contents of machines that have one (broken ones are already Problems)."""
    info = {}
    for d in sorted(p for p in results.iterdir() if p.is_dir() and not p.name.startswith(".")):
        if d.is_symlink() or not _is_regular(d / "machine.json"):
            info[d.name] = {}
            continue
        try:
            data = parse_json((d / "machine.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            info[d.name] = {}
            continue
        info[d.name] = data if isinstance(data, dict) else {}
    return info


def _results_label(results: Path, conf_path: Path) -> str:
    """How the page names the results folder: relative to the conf's folder when inside it."""
    try:
        return results.relative_to(conf_path.parent).as_posix() or "."
    except ValueError:
        return results.name


def _commit_base(conf: dict) -> str | None:
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


# --- staging ----------------------------------------------------------------------------


def _staged_conf(conf_path: Path, html: Path, repo) -> dict:
    """asv.conf.json with every path absolute: asv resolves them against the conf's folder."""
    try:
        conf = asv_compat.load_json(conf_path, js_comments=True)
    except asv_compat.user_error() as e:
        raise ValueError(f"asv_conf={str(conf_path)!r} is not valid JSON: {e}") from e
    base = conf_path.parent
    repo_value = os.fspath(repo) if repo is not None else conf.get("repo", ".")
    if "://" not in repo_value and not repo_value.startswith("git@"):
        repo_value = str((base / repo_value).resolve())
    conf["repo"] = repo_value
    conf["html_dir"] = str(html)
    for key, default in (("benchmark_dir", "benchmarks"), ("env_dir", "env")):
        conf[key] = str((base / conf.get(key, default)).resolve())
    return conf


def _stage_results(
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
    if _is_regular(bench_path):
        try:
            bench = parse_json(bench_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            bench = None  # load_results already reported it; asv publish will fail
        if isinstance(bench, dict):
            kept = {k: v for k, v in bench.items() if k != "version" and k not in refused}
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
            if not _is_regular(path):
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


def _is_regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except OSError:
        return False


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


def _run_bounded(cmd: list[str], timeout: float, **kwargs) -> tuple[int | None, str]:
    """Run *cmd* in a process group of its own; (exit status or None on timeout, output).

    The whole group is killed on timeout and when this process is interrupted or
    terminated (publish turns SIGTERM/SIGHUP into SystemExit), so no asv worker
    outlives us and writes into a build folder the next publish removes. The child
    also gets SIGKILL when this process dies by SIGKILL (Linux PR_SET_PDEATHSIG).
    """
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        start_new_session=True,
        preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
        **kwargs,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
        return proc.returncode, out
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, _ = proc.communicate()
        return None, out or ""
    except BaseException:
        _kill_group(proc)
        proc.wait()
        raise


def _kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _die_with_parent() -> None:  # runs in the child between fork and exec
    import ctypes

    pr_set_pdeathsig = 1
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)


def _run_asv_publish(
    tmp_conf: Path, conf_path: Path, problems: list[Problem], timeout: float
) -> bool:
    # A subprocess, not asv.commands.publish.Publish.run: asv's logger and its
    # multiprocessing pool are process-global, and a crash in asv must not
    # take the summary page down with it.
    cmd = [sys.executable, "-m", "asv", "publish", "--config", str(tmp_conf), "--no-pull"]
    # asv imports "."-prefixed plugins relative to the conf's folder; the
    # staged conf lives elsewhere, so the real folder goes on the path.
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(conf_path.parent), env.get("PYTHONPATH", "")) if p
    )
    returncode, output = _run_bounded(cmd, timeout, cwd=tmp_conf.parent, env=env)
    for line in output.splitlines():
        if _ASV_DROPS.search(line):
            problems.append(Problem(str(conf_path), None, "asv-warning", line.strip(" ·")))
    if returncode != 0:
        tail = "\n".join(output.strip().splitlines()[-15:])
        how = (
            f"ran past {timeout:g} s and was stopped"
            if returncode is None
            else (f"exited with {returncode}")
        )
        problems.append(
            Problem(
                str(conf_path),
                None,
                "asv-publish-failed",
                f"`asv publish` {how}; asv's pages are not updated. Last output:\n{tail}",
            )
        )
        return False
    return True


# --- asv's index.html -------------------------------------------------------------------


def _sri(data: bytes, algo: str) -> str:
    return f"{algo}-" + base64.b64encode(hashlib.new(algo, data).digest()).decode()


def _localize_assets(index: str, vendor: Path) -> tuple[str, list[str]]:
    """Point CDN <script>/<link> tags at vendored copies; return the page and unknown URLs.

    The integrity attribute stays when our copy hashes to the pinned value
    (the browser re-checks it); it goes where we vendor the unminified source
    of the same version, whose bytes differ by construction.
    """
    vendored = resources.files("ltx2k.report").joinpath("static", "vendor")
    vendor.mkdir(parents=True, exist_ok=True)
    external = []

    def fix(match: re.Match) -> str:
        tag = match.group(0)
        url = re.search(r'\b(?:src|href)="(https?://[^"]+)"', tag)
        if url is None:
            return tag
        name = VENDORED_ASSETS.get(url.group(1))
        if name is None:
            external.append(url.group(1))
            return tag
        data = vendored.joinpath(name).read_bytes()
        (vendor / name).write_bytes(data)
        tag = tag.replace(url.group(1), f"{VENDOR_DIR}/{name}")
        pinned = re.search(r'\bintegrity="(\w+)-[^"]*"', tag)
        if pinned and _sri(data, pinned.group(1)) not in tag:
            tag = re.sub(r'\s(?:integrity|crossorigin|referrerpolicy)="[^"]*"', "", tag)
        return tag

    return re.sub(r"<(?:script|link)\b[^>]*>", fix, index), external


def _add_summary_link(index: str) -> str | None:
    # A nav item next to asv's own, rather than asv.conf.json's "project_url":
    # that link is the project's home page, labelled with the project name and
    # opened in a new tab; hiding the summary behind it would lose both.
    # Its id avoids asv's "nav-li-*" ids, which asv.js toggles on navigation.
    anchor = re.search(r'<li id="nav-li-regressions">.*?</li>', index, flags=re.S)
    if anchor is None:
        return None
    item = f'\n\t<li id="{SUMMARY_LINK_ID}"><a href="{page.SUMMARY_HTML}">Summary (ltx2k)</a></li>'
    return index[: anchor.end()] + item + index[anchor.end() :]


def _post_process_index(html: Path, problems: list[Problem]) -> None:
    path = html / "index.html"
    index = path.read_text(encoding="utf-8")
    index, external = _localize_assets(index, html / VENDOR_DIR)
    for url in external:
        problems.append(
            Problem(
                str(path),
                None,
                "external-asset",
                f"asv's index.html loads {url}, which is not vendored: the dashboard "
                "needs internet access (update VENDORED_ASSETS for this asv version).",
            )
        )
    linked = _add_summary_link(index)
    if linked is None:
        problems.append(
            Problem(
                str(path),
                None,
                "asv-template",
                "asv's index.html has no regressions nav item to put the summary link "
                f"next to; open {page.SUMMARY_HTML} directly.",
            )
        )
    else:
        index = linked
    path.write_text(index, encoding="utf-8")


def _log_problems(problems: list[Problem], log) -> None:
    quiet = [p for p in problems if p.kind in QUIET_KINDS]
    for p in problems:
        if p.kind not in QUIET_KINDS:
            where = f"[{p.machine}] " if p.machine else ""
            print(f"ltx2k publish: {p.kind}: {where}{p.message}", file=log)
    if quiet:
        print(
            f"ltx2k publish: {len(quiet)} skipped benchmark group(s) (listed on the summary page)",
            file=log,
        )
