"""asv's own site: ``asv publish`` run in a process group of its own, then its index.html
made to work offline and to link the summary page.

asv 0.6's index.html pulls jQuery, flot and bootstrap from CDNs; we copy vendored
copies (static/vendor/VENDORED.txt) into ``html/vendor/`` and point the page at
them, so the site works on an air-gapped runner, from a CI artifact, or on a host
without internet.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import re
import signal
import subprocess
import sys
from importlib import resources
from pathlib import Path

from ltx2k.history.records import Problem
from ltx2k.report import page

# --- asv publish, bounded ---------------------------------------------------------------


# `asv publish` on a 1,000-commit history finishes in minutes; one that runs
# for an hour is stuck (asv's step detection can spin on pathological input).
ASV_PUBLISH_TIMEOUT_S = 3600.0
# asv log lines worth surfacing: they mean data was left out of the dashboard.
_ASV_DROPS = re.compile(r"(Couldn't find .* in branches|Skipping results|Error parsing JSON)")


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


def run_asv_publish(
    tmp_conf: Path, conf_path: Path, problems: list[Problem], timeout: float
) -> bool:
    """``asv publish`` with the staged conf *tmp_conf*, bounded by *timeout* seconds; what
    it dropped and whether it failed become Problems. True when it succeeded."""
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


def post_process_index(html: Path, problems: list[Problem]) -> None:
    """Point asv's index.html at the vendored assets and add the summary link to its
    navigation; what cannot be done becomes a Problem."""
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
