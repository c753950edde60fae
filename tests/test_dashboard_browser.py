"""The published site in a real browser: headless Debian Chromium driven by playwright.

The site is served over HTTP on 127.0.0.1 (asv's pages fetch JSON with XHR,
which file:// URLs refuse), exactly as a static host would serve it.
Screenshots land in artifacts/ (gitignored) for CI to keep.

Needs /usr/bin/chromium and the ``playwright`` package
(``scripts/install_browser.sh``). Without chromium the tests skip locally;
with ``CI=true`` they fail instead, so CI can never go green by not looking.
"""

from __future__ import annotations

import functools
import http.server
import io
import os
import threading
from pathlib import Path
from urllib.parse import quote

import pytest

from ltx2k.history.synthetic import generate_history
from ltx2k.report import page, publish

pytestmark = pytest.mark.slow

# Outside CI a missing playwright skips the module; in CI it still fails below.
if os.environ.get("CI", "").strip().lower() not in ("true", "1", "yes"):
    pytest.importorskip(
        "playwright.sync_api",
        reason="playwright is not installed (pip install -e '.[browser]' or "
        "scripts/install_browser.sh)",
    )

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
BENCHMARK = "bench_kernels.SplitRope.time_device_cold"
SHAPE = "B1_S1024_H32_D128"
# A visible head-commit step, so the screenshot shows what the dashboard is for.
STEP = f"h100-80gb-hbm3:SplitRope.time_device_cold:blocked:{SHAPE}:commit=9:+30%"
TIMEOUT_MS = 30_000


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def _sync_playwright():
    install = "run scripts/install_browser.sh"
    if not CHROMIUM.exists():
        if _in_ci():
            pytest.fail(f"{CHROMIUM} is missing in CI ({install}); the browser test must run")
        pytest.skip(f"{CHROMIUM} is not installed ({install} to run the browser test)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as e:
        pytest.fail(f"chromium is installed but the playwright package is not ({install}): {e}")
    return sync_playwright


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the stdlib's parameter name
        pass


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    h = generate_history(tmp_path_factory.mktemp("synth") / "h", n_commits=10, steps=[STEP], seed=3)
    html = tmp_path_factory.mktemp("site") / "html"
    report = publish.latest_vs_previous(h.results_dir, repo=h.repo)  # as `ltx2k publish` does
    result = publish.publish(
        h.conf, h.results_dir, html, regress_json=report, repo=h.repo, log=io.StringIO()
    )
    assert result.asv_ok, [p.message for p in result.problems]
    return h, result


@pytest.fixture(scope="module")
def base_url(site):
    _, result = site
    handler = functools.partial(_QuietHandler, directory=str(result.html_dir))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


@pytest.fixture(scope="module")
def browser():
    sync_playwright = _sync_playwright()
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page_(browser):
    """A fresh page that records failed requests and JS errors."""
    pg = browser.new_page(viewport={"width": 1400, "height": 900})
    pg.set_default_timeout(TIMEOUT_MS)
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    pg.on("requestfailed", lambda r: errors.append(f"request failed: {r.url}"))
    pg.on("response", lambda r: r.status >= 400 and errors.append(f"HTTP {r.status}: {r.url}"))
    pg.errors = errors
    yield pg
    pg.close()


def _screenshot(pg, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    pg.screenshot(path=str(ARTIFACTS / name))


def test_asv_graph_page_renders_every_machine(site, base_url, page_):
    h, _ = site
    # asv's URL state: "p-<param>" selects benchmark parameter values (as reprs).
    state = f"p-shape={quote(repr(SHAPE))}&p-variant='blocked'&p-variant='per_head'"
    page_.goto(f"{base_url}/index.html#{BENCHMARK}?{state}")
    page_.wait_for_selector("#main-graph canvas.flot-base")
    # One legend entry per machine x selected variant, drawn by flot from asv's JSON.
    page_.wait_for_selector("#main-graph .legend table", state="attached")
    assert page_.url.startswith(f"{base_url}/index.html"), "asv fell back to error.html"
    panel = page_.locator("#graphdisplay-navigation .panel", has_text="machine").first
    buttons = panel.locator(".panel-body a.btn").all_inner_texts()
    assert sorted(b.strip() for b in buttons) == sorted(h.machines)
    legend = page_.inner_text("#main-graph .legend")
    for m in h.machines:
        assert f"machine-{m};" in legend, f"{m} has no line on the graph"
    page_.wait_for_timeout(300)  # let flot finish the overview before the screenshot
    _screenshot(page_, "dashboard.png")
    assert not page_.errors, page_.errors


def test_asv_regressions_page_lists_the_injected_step(site, base_url, page_):
    page_.goto(f"{base_url}/index.html#regressions")
    page_.wait_for_selector("#regressions-body table")
    # asv names the GPU in each regression's graph link (its URL state), not in the text.
    links = page_.locator("#regressions-body table:not(.ignored) tbody a").evaluate_all(
        "links => links.map(a => [a.textContent, decodeURIComponent(a.href)])"
    )
    hits = [text for text, href in links if BENCHMARK in text and "h100-80gb-hbm3" in href]
    assert hits and all(SHAPE in text and "blocked" in text for text in hits), links
    _screenshot(page_, "regressions.png")
    assert not page_.errors, page_.errors


def test_summary_page_renders_with_all_images(site, base_url, page_):
    h, result = site
    page_.goto(f"{base_url}/index.html")
    page_.wait_for_selector("#summarygrid-display .benchmark-container, #summarygrid-display a")
    # asv's grid fetches one graphs/summary/*.json per benchmark after the first tiles show;
    # leaving before they finish aborts them (a "request failed" of the test's making).
    page_.wait_for_load_state("networkidle")
    # The link publish adds to asv's navigation bar leads to the summary.
    page_.click(f"#{publish.SUMMARY_LINK_ID} a")
    page_.wait_for_url(f"{base_url}/{page.SUMMARY_HTML}")
    page_.wait_for_load_state("load")
    images = page_.evaluate(
        "Array.from(document.images).map(i => [i.getAttribute('src'), i.complete, i.naturalWidth])"
    )
    assert len(images) == 7  # matrix + history, speedup, bandwidth per kernel
    broken = [src for src, complete, width in images if not complete or width <= 0]
    assert not broken, f"images that did not load: {broken}"
    listed = page_.locator("#machines-table tbody tr").evaluate_all(
        "rows => rows.map(r => r.dataset.machine)"
    )
    assert sorted(listed) == sorted(h.machines)
    # The injected step is red in the matrix table, in the browser's computed style.
    cell = page_.locator("#matrix-flagged td.flag-regression").first
    colour = cell.evaluate("td => getComputedStyle(td).backgroundColor")
    assert colour == "rgb(214, 39, 40)"  # plots.FLAG_COLOURS["regression"], #d62728
    _screenshot(page_, "summary.png")
    page_.screenshot(path=str(ARTIFACTS / "summary_full.png"), full_page=True)
    assert not page_.errors, page_.errors
