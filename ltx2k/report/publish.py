"""Publish the dashboard: asv's own site plus our summary page next to it, built aside and
swapped in whole.

``asv publish`` builds the per-GPU graphs, the regressions page and the Atom
feed; we never re-implement those. What we add around it: the results asv is
given are staged (:mod:`ltx2k.report.staging`); asv runs bounded, and its
index.html is made to work offline and to link the summary
(:mod:`ltx2k.report.asv_site`); the summary page is written next to it
(:mod:`ltx2k.report.page`). The whole site is built next to html/ and swapped
in at the end.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ltx2k.analysis.model import Report
from ltx2k.history import commits as git_commits
from ltx2k.history.jsonfile import is_regular, parse_json
from ltx2k.history.records import QUIET_KINDS, Problem, load_results
from ltx2k.history.store import exit_on_signals, signals_deferred
from ltx2k.history.window import DRAWN, Window
from ltx2k.report import asv_site, page, staging
from ltx2k.report.plots.data import commit_rank
from ltx2k.runner import asv_compat

FAILED_SUFFIX = ".failed"  # html.failed/: the build of a publish whose asv step failed


@dataclass
class PublishResult:
    html_dir: Path
    summary: Path
    problems: list[Problem] = field(default_factory=list)
    asv_ok: bool = True  # False: asv's site is missing or stale; the summary page is still there
    kept_old: bool = False  # asv failed and html_dir still holds the previous complete site
    # Outputs an error inside ltx2k left out (a figure, the verdicts, the summary page),
    # each with its exception; everything else was written.
    internal_errors: list[tuple[str, BaseException]] = field(default_factory=list)

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
    asv_timeout: float = asv_site.ASV_PUBLISH_TIMEOUT_S,
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
    check_site_dir(html, results, conf_path.parent)

    # *loaded*: load_results(results_dir) already done by the caller (publish_dashboard),
    # so a large history is read once, not once per step.
    _, _, conf_repo = conf_dirs(conf_path)
    repo_dir = Path(repo).resolve() if repo else conf_repo
    branch = conf_branch(conf_path)
    records, problems = (
        loaded if loaded is not None else load_drawn(results, last, repo_dir, branch)
    )
    problems = list(problems)
    order = drawn_order(records, repo_dir, branch)
    html.parent.mkdir(parents=True, exist_ok=True)
    sweep_stale_builds(html)
    # Everything is built next to html/ and swapped in at the end, so a publish
    # killed at any point leaves the previous site (or none), never half of one.
    work = Path(tempfile.mkdtemp(prefix=_build_prefix(html) + f"{os.getpid()}-", dir=html.parent))
    kept_old = False
    internal: list[tuple[str, BaseException]] = []
    with exit_on_signals():
        try:
            summary, asv_ok, kept_old = _build_and_swap(
                work,
                html,
                conf_path,
                results,
                repo,
                records,
                problems,
                report,
                last,
                asv_timeout,
                internal,
                order,
            )
        finally:
            with signals_deferred():  # a signal here must not leave the swap half-done
                old = work / _OLD
                if old.is_dir() and not os.path.lexists(html):
                    os.rename(old, html)  # the fallback swap failed half-way: keep the old site
                shutil.rmtree(work, ignore_errors=True)
    _log_problems(problems, log)
    return PublishResult(
        html_dir=html,
        summary=summary,
        problems=problems,
        asv_ok=asv_ok,
        kept_old=kept_old,
        internal_errors=internal,
    )


# What a folder publish made holds; it replaces only such a folder (or an empty one).
SITE_FILES = ("index.html", "summary.html")


def check_site_dir(html: Path, results: Path, conf_dir: Path) -> None:
    """ValueError unless *html* is a path publish may replace whole: a new path, an empty
    folder, or a dashboard (a folder holding ``index.html`` or ``summary.html``), and
    neither the results folder, nor asv.conf.json's folder, nor a folder above them."""
    where = f"html_dir={str(html)!r}"
    for what, path in (("the results folder", results), ("asv.conf.json's folder", conf_dir)):
        if html == path or html in path.parents:
            raise ValueError(
                f"{where} is or holds {what} {str(path)!r}; publish replaces the dashboard "
                "folder whole, so name a folder of its own (asv.conf.json's html_dir)"
            )
    if not os.path.lexists(html):
        return
    if not html.is_dir():
        raise ValueError(
            f"{where} exists and is not a folder; publish replaces the dashboard folder "
            "whole, so it must be a new path, an empty folder or an earlier dashboard"
        )
    if any(html.iterdir()) and not any((html / name).is_file() for name in SITE_FILES):
        raise ValueError(
            f"{where} holds files but no dashboard ({' or '.join(SITE_FILES)}); publish "
            "replaces the folder whole and refuses one it did not make"
        )


def _build_and_swap(
    work, html, conf_path, results, repo, records, problems, report, last, timeout, internal, order
):
    """The build of :func:`publish` in *work*; returns (summary path, asv ok, old site kept).
    Errors inside ltx2k that cost one output go to *internal*."""
    build = work / "html"
    conf = staging.staged_conf(conf_path, build, repo)
    commit_base = staging.commit_base(conf)
    drawn = _drawn_files(records, last, order)
    staged = staging.stage_results(results, work / "results", conf, problems, drawn)
    conf["results_dir"] = str(staged)
    tmp_conf = work / "asv.conf.json"
    tmp_conf.write_text(json.dumps(conf, indent=2), encoding="utf-8")
    asv_ok = asv_site.run_asv_publish(tmp_conf, conf_path, problems, timeout)
    if asv_ok:
        asv_site.post_process_index(build, problems)
    else:
        build.mkdir(parents=True, exist_ok=True)

    try:
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
            failed=internal,
            order=order,
        )
    except Exception as e:  # a bug in the page must not cost asv's site
        internal.append(("the summary page", e))
        summary = page.write_unavailable(build, e)
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
    branch = conf_branch(asv_conf)
    records, problems = load_drawn(results, last, repo_dir, branch)
    if not records:
        # A dashboard of nothing would only hide that the results are missing.
        raise ValueError(
            f"{where} holds no asv results ({len(problems)} problem(s)); nothing published, "
            f"{str(html)!r} left as it was (fill it with ltx2k run or ltx2k store pull)"
        )
    internal: list[tuple[str, BaseException]] = []
    if regress_json is None:
        try:
            regress_json = latest_vs_previous(
                results,
                repo=repo_dir if repo_dir.is_dir() else None,
                loaded=(records, problems),
                branch=branch,
            )
        except Exception as e:  # a bug in the verdicts must not cost the dashboard
            internal.append(("the regression verdicts (the page shows none)", e))
    res = publish(
        asv_conf,
        results,
        html,
        regress_json=regress_json,
        repo=repo_dir,
        last=last,
        log=log,
        loaded=(records, problems),
    )
    res.internal_errors[:0] = internal
    return res


def load_drawn(
    results: Path, last: int | None, repo=None, branch: str | None = None
) -> tuple[list, list[Problem]]:
    """The results of each GPU's last *last* commits (None: all) up to the dashboard's
    head (:func:`ltx2k.history.commits.newest`), and the last ``regress.DEFAULT_LAST``
    at least, which :func:`latest_vs_previous` judges."""
    if last is None:
        return load_results(results)
    from ltx2k.analysis import regress

    n = max(last, regress.DEFAULT_LAST)
    repo = Path(repo) if repo is not None and Path(repo).is_dir() else None
    try:
        return load_results(results, select=Window(last=n, repo=repo, branch=branch))
    except ValueError:  # git could not order the head's history: order by date
        return load_results(results, select=Window(last=n))


def drawn_order(records, repo=None, branch: str | None = None) -> list[str] | None:
    """The order the dashboard draws commits in, oldest first: git's first-parent history
    of its head (:func:`ltx2k.history.commits.newest`) where *repo* knows it; None where
    only the stored dates can order them."""
    repo = Path(repo) if repo is not None and Path(repo).is_dir() else None
    if repo is None:
        return None
    dates = {r.commit: r.date for r in records}
    head, in_git = git_commits.newest(dates, repo, branch)
    if head is None or not in_git:
        return None
    try:
        return git_commits.mainline(head, repo, dates)
    except ValueError:
        return None


def _drawn_files(records, last: int | None, order=None) -> set[str] | None:
    """The result files of each GPU's *last* newest commits (in *order*, else by commit
    date, as the plots pick them); None, every file, for the whole history or records
    that were not read from files."""
    if last is None or any(not r.path for r in records):
        return None
    of = {}
    for r in records:
        of.setdefault(r.machine, set()).add(r.commit)
    rank = commit_rank(records, order)
    newest = {(m, c) for m, cs in of.items() for c in sorted(cs, key=rank)[-last:]}
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
    conf = asv_compat.load_conf(conf_path)
    base = conf_path.parent
    results = (
        Path(results_dir) if results_dir is not None else base / conf.get("results_dir", "results")
    )
    html = Path(html_dir) if html_dir is not None else base / conf.get("html_dir", "html")
    return results.resolve(), html.resolve(), (base / str(conf.get("repo", "."))).resolve()


def latest_vs_previous(results_dir, *, repo=None, loaded=None, branch=None) -> Report | None:
    """The regress report of the dashboard's head, judged along its history.

    The head is :func:`ltx2k.history.commits.newest`: with *repo*, the newest measured
    commit of *branch* (default the repository's ``HEAD``) in git's order, else the
    newest stored date. Each GPU's last ``regress.DEFAULT_LAST`` commits up to it go
    through the change-point detector (``regress.compare(..., last=...)``),
    so a flagged cell names the step that caused it. A GPU with results of one commit in
    several asv environments is left out with a note (``ltx2k regress --env`` picks one);
    the others are judged. None when there are fewer than two commits (no history yet).
    """
    from ltx2k.analysis import regress

    # *loaded*: load_results(results_dir), when the caller already has it.
    records, problems = loaded if loaded is not None else load_results(results_dir)
    dates: dict[str, int] = {}
    for r in records:
        dates[r.commit] = r.date
    if len(dates) < 2:
        return None
    head, in_git = git_commits.newest(dates, repo, branch)
    records, notes = _one_environment(records)
    report = regress.compare(
        records,
        head,
        last=regress.DEFAULT_LAST,
        repo=repo if in_git else None,
        problems=problems,
    )
    return dataclasses.replace(report, notes=report.notes + notes) if notes else report


def _one_environment(records) -> tuple[list, tuple[str, ...]]:
    """*records* without the GPUs that have one commit's cell in several asv environments
    (no verdict can choose among them unasked), and a note naming each."""
    seen: dict[tuple, str] = {}
    mixed: dict[str, set[str]] = {}
    for r in records:
        env = seen.setdefault((r.machine, r.commit, r.benchmark, r.params), r.env)
        if env != r.env:
            mixed.setdefault(r.machine, set()).update((env, r.env))
    if not mixed:
        return records, ()
    notes = tuple(
        f"{m}: not judged here: one commit has results in several asv environments "
        f"({', '.join(sorted(map(repr, envs)))}); `ltx2k regress --env NAME` judges one."
        for m, envs in sorted(mixed.items())
    )
    return [r for r in records if r.machine not in mixed], notes


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
        data = parse_json(Path(regress_json).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"{name} cannot be read: {e}") from e
    return Report.from_json(data, source=name)


def _machines_info(results: Path) -> dict[str, dict]:
    """machine.json contents of machines that have one (broken ones are already Problems)."""
    info = {}
    for d in sorted(p for p in results.iterdir() if p.is_dir() and not p.name.startswith(".")):
        if d.is_symlink() or not is_regular(d / "machine.json"):
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


def conf_branch(asv_conf: str | os.PathLike) -> str | None:
    """The branch asv.conf.json's ``branches`` names first (the one ``asv publish`` draws
    first), or None (the repository's ``HEAD``) where it names none or cannot be read."""
    try:
        conf = asv_compat.load_conf(Path(asv_conf))
    except (OSError, ValueError):
        return None
    branches = conf.get("branches")
    if isinstance(branches, list) and branches and isinstance(branches[0], str):
        return branches[0] or None
    return None
