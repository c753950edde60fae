"""The published site in a real browser: headless Debian Chromium driven by playwright.

The site is served over HTTP on 127.0.0.1 (asv's pages fetch JSON with XHR,
which file:// URLs refuse), exactly as a static host would serve it.
Screenshots land in artifacts/ (gitignored) for CI to keep; the first screen at
1400x900 is artifacts/dashboard-first-screen.png (docs/img/ holds a copy).

Every request the pages make is routed through the test: anything that is not
the local server is aborted and recorded, and each test asserts there was none.

Needs /usr/bin/chromium and the ``playwright`` package
(``scripts/install_browser.sh``). Without chromium the tests skip locally;
with ``CI=true`` they fail instead, so CI can never go green by not looking.
"""

from __future__ import annotations

import functools
import http.server
import io
import json
import os
import threading
from pathlib import Path
from urllib.parse import quote

import pytest

from ltx2k.report import asv_site, firstscreen, page, plots, publish
from ltx2k.workload import cases
from tools.synthetic_history import generate_history

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
FIRST_SCREEN_PNG = "dashboard-first-screen.png"
BENCHMARK = "bench_kernels.SplitRope.time_device_cold"
SHAPE = "B1_S1024_H32_D128"
N_COMMITS = 20
STEP_GPU = "a100-sxm4-80gb"
VARIANT = firstscreen.default_variant("split_rope")
# An A100-only step of the default variant at the head commit: the first screen
# must name that GPU, the cell and the commit, and colour it on the A100 only.
STEP = f"{STEP_GPU}:SplitRope.time_device_cold:{VARIANT}:{SHAPE}:commit={N_COMMITS - 1}:+30%"
COMMIT_URL = "https://github.com/example-owner/ltx2k/commit/"
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
    h = generate_history(
        tmp_path_factory.mktemp("synth") / "h", n_commits=N_COMMITS, steps=[STEP], seed=3
    )
    conf = json.loads(h.conf.read_text())
    conf["show_commit_url"] = COMMIT_URL  # the configured pattern the links must follow
    h.conf.write_text(json.dumps(conf))
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
def page_(browser, base_url):
    """A fresh page that records failed requests and JS errors, and keeps every request
    on the local server: others are aborted and listed in ``page_.external``."""
    pg = browser.new_page(viewport={"width": 1400, "height": 900})
    pg.set_default_timeout(TIMEOUT_MS)
    errors: list[str] = []
    external: list[str] = []

    def route(r):
        url = r.request.url
        if url.startswith((base_url + "/", "data:", "blob:")):
            r.continue_()
        else:
            external.append(url)
            r.abort()

    pg.route("**/*", route)
    pg.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    pg.on(
        "requestfailed",
        lambda r: r.url in external or errors.append(f"request failed: {r.url}"),
    )
    pg.on("response", lambda r: r.status >= 400 and errors.append(f"HTTP {r.status}: {r.url}"))
    pg.errors = errors
    pg.external = external
    yield pg
    assert not external, f"requests that would leave the machine: {external}"
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
    hits = [text for text, href in links if BENCHMARK in text and STEP_GPU in href]
    assert hits and all(SHAPE in text and VARIANT in text for text in hits), links
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
    page_.click(f"#{asv_site.SUMMARY_LINK_ID} a")
    page_.wait_for_url(f"{base_url}/{page.SUMMARY_HTML}")
    page_.wait_for_load_state("load")
    images = page_.evaluate(
        "Array.from(document.images).map(i => [i.getAttribute('src'), i.complete, i.naturalWidth])"
    )
    # matrix + per kernel: two histories, speedup over each of sglang's kernels,
    # bandwidth, roofline, cross-GPU
    assert len(images) == 1 + sum(5 + len(plots.speedup_baselines(k)) for k in cases.KERNELS)
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


# --- the first screen ---------------------------------------------------------------------


def _fs_cell(machine: str, kernel: str, shape: str, col: str) -> str:
    return f"#{firstscreen.table_id(machine, kernel)} tr[data-shape='{shape}'] td[data-col='{col}']"


def _stored_value(result_dir: Path, machine: str, commit: str, benchmark: str, combo) -> float:
    """The value asv stored in the result file (the median of its samples for timings)."""
    import itertools

    from asv.results import Results

    (path,) = (result_dir / machine).glob(f"{commit[:8]}-*.json")
    res = Results.load(str(path))
    params = res.get_result_params(benchmark)
    values = res.get_result_value(benchmark, params)
    combos = [tuple(c) for c in itertools.product(*params)]
    return values[combos.index(tuple(repr(x) for x in combo))]


def _show_gpu(pg, machine: str) -> None:
    pg.click(f".gpu-btn[data-machine='{machine}']")
    pg.wait_for_selector(f"#gpu-{machine}", state="visible")


def test_first_screen_values_are_the_result_files_medians(site, base_url, page_):
    h, _ = site
    head = h.commits[-1]
    page_.goto(f"{base_url}/{page.SUMMARY_HTML}")
    cells = [
        ("split_rope", "SplitRope", "time_device_cold", "cold", SHAPE, "µs"),
        ("split_rope", "SplitRope", "time_host_latency", "host", "B4_S25_H32_D64", "µs"),
        ("ada_values9", "AdaValues9", "track_pct_copy_bandwidth", "bw", "B2_S6144_D4096_bf16", "%"),
    ]
    for machine in h.machines:
        _show_gpu(page_, machine)
        for kernel, cls, metric, col, shape, unit in cells:
            variant = firstscreen.default_variant(kernel)
            stored = _stored_value(
                h.results_dir, machine, head, f"bench_kernels.{cls}.{metric}", (variant, shape)
            )
            want = stored * 1e6 if unit == "µs" else stored
            td = page_.locator(_fs_cell(machine, kernel, shape, col))
            assert td.is_visible()
            assert float(td.get_attribute("data-value")) == pytest.approx(want, rel=1e-12)
            assert td.locator(".v").inner_text() == firstscreen.fmt(want, unit)
            assert f"machine {machine}" in td.get_attribute("title")
    assert not page_.errors, page_.errors


def test_first_screen_names_the_a100_step_and_colours_it_there_only(site, base_url, page_):
    h, _ = site
    head = h.commits[-1]
    page_.goto(f"{base_url}/{page.SUMMARY_HTML}")
    page_.wait_for_load_state("load")
    # The GPU with the regression is the one shown first, and the status line names it,
    # the cell and the commit, with the commit linked to the configured URL pattern.
    assert page_.locator(f"#gpu-{STEP_GPU}").is_visible()
    status = page_.locator("#status-line")
    text = " ".join(status.inner_text().split())
    # The cold time and the % of copy bandwidth computed from it: one verdict, two cells.
    assert f"2 regressions on {STEP_GPU} since {head[:8]}" in text
    assert f"split_rope {VARIANT} {SHAPE} device time, cold L2" in text
    assert "0 elsewhere" in text
    commit_links = status.locator("a.commit").evaluate_all("as => as.map(a => a.href)")
    assert commit_links and set(commit_links) == {COMMIT_URL + head}
    cell = page_.locator(_fs_cell(STEP_GPU, "split_rope", SHAPE, "cold"))
    box = cell.bounding_box()
    assert box and box["y"] + box["height"] <= 900, "the flagged cell is below the fold"
    _screenshot(page_, FIRST_SCREEN_PNG)
    red = "rgb(214, 39, 40)"  # plots.FLAG_COLOURS["regression"], #d62728
    assert cell.evaluate("td => getComputedStyle(td).backgroundColor") == red
    assert cell.get_attribute("data-first-bad") == head
    step_link = cell.locator(".step a.commit")
    assert step_link.get_attribute("href") == COMMIT_URL + head
    for machine in h.machines:
        if machine == STEP_GPU:
            continue
        _show_gpu(page_, machine)
        assert not page_.locator(f"#gpu-{STEP_GPU}").is_visible()
        other = page_.locator(_fs_cell(machine, "split_rope", SHAPE, "cold"))
        assert other.get_attribute("data-flag") == "ok"
        assert other.evaluate("td => getComputedStyle(td).backgroundColor") != red
    # The status line's link brings the flagged cell (and its GPU) back.
    status.locator("a[href^='#']").first.click()
    # The page shows the GPU from its hashchange handler, after the click returns: wait
    # for it (is_visible() does not), up to 5 s.
    page_.locator(f"#gpu-{STEP_GPU}").wait_for(state="visible", timeout=5000)
    assert cell.is_visible()
    assert not page_.errors, page_.errors


def test_a_first_screen_value_opens_asvs_graph_of_that_cell(site, base_url, page_):
    page_.goto(f"{base_url}/{page.SUMMARY_HTML}")
    page_.locator(_fs_cell(STEP_GPU, "split_rope", SHAPE, "cold")).locator("a.v").click()
    page_.wait_for_url(f"{base_url}/index.html#{BENCHMARK}?*")
    page_.wait_for_selector("#main-graph canvas.flot-base")
    panel = page_.locator("#graphdisplay-navigation .panel", has_text="machine").first
    active = panel.locator(".panel-body a.btn.active").all_inner_texts()
    assert [a.strip() for a in active] == [STEP_GPU]
    legend = page_.inner_text("#main-graph .legend")
    assert VARIANT in legend and SHAPE in legend
    page_.wait_for_load_state("networkidle")
    assert not page_.errors, page_.errors


# --- hostile names from the store ------------------------------------------------------

# Markup that runs script wherever asv's pages concatenate a name into HTML.
XSS = "<img src=x onerror=alert(document.domain)>"
XSS_ATTR = "\"'><img src=y onerror=alert(2)>"


def _edit_json(path: Path, fn) -> None:
    data = json.loads(path.read_text())
    fn(data)
    path.write_text(json.dumps(data))


def _make_hostile(results: Path) -> None:
    """Names a hostile store could hold, in every place asv's pages show one."""
    bench = results / "benchmarks.json"
    renamed = BENCHMARK.replace("time_device_cold", "time_kernel" + XSS)
    ada = "bench_kernels.AdaValues9.time_device_cold"

    def edit_bench(d):
        d[renamed] = dict(d.pop(BENCHMARK), name=renamed)
        d[ada]["pretty_name"] = "AdaLN" + XSS
        d["bench_kernels.SplitRope.time_device_warm"]["params"][0].append(repr(XSS_ATTR))

    _edit_json(bench, edit_bench)
    for path in results.glob("*/*.json"):
        if path.name == "machine.json":
            continue

        def edit(d):
            d["results"][renamed] = d["results"].pop(BENCHMARK)

        _edit_json(path, edit)
    # a machine whose name is markup, consistent in its folder, machine.json and results
    evil = "h200" + XSS_ATTR.replace('"', "").replace("/", "")
    os.rename(results / "h200", results / evil)
    _edit_json(results / evil / "machine.json", lambda d: d.__setitem__("machine", evil))
    for path in (results / evil).glob("*.json"):
        if path.name != "machine.json":
            _edit_json(path, lambda d: d["params"].__setitem__("machine", evil))


@pytest.fixture(scope="module")
def hostile_site(tmp_path_factory):
    h = generate_history(tmp_path_factory.mktemp("synth") / "h", n_commits=3, seed=5)
    _make_hostile(h.results_dir)
    html = tmp_path_factory.mktemp("site") / "html"
    result = publish.publish(h.conf, h.results_dir, html, repo=h.repo, log=io.StringIO())
    assert result.asv_ok, [p.message for p in result.problems]
    handler = functools.partial(_QuietHandler, directory=str(html))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield result, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def test_hostile_names_run_no_script_in_asvs_pages(hostile_site, browser):
    result, url = hostile_site
    assert {"bad-name", "bad-machine-name"} <= {p.kind for p in result.problems}
    pg = browser.new_page(viewport={"width": 1400, "height": 900})
    pg.set_default_timeout(TIMEOUT_MS)
    dialogs: list[str] = []

    def on_dialog(d):
        dialogs.append(d.message)
        d.dismiss()

    pg.on("dialog", on_dialog)
    pg.route("**/*", lambda r: r.continue_() if r.request.url.startswith(url) else r.abort())
    for where in ("", "#summarylist", "#regressions", f"#{BENCHMARK.replace('cold', 'warm')}"):
        pg.goto(f"{url}/index.html{where}")
        pg.wait_for_load_state("networkidle")
        pg.wait_for_timeout(500)
        # an <img src=x> that asv built from a name would also show up here
        assert pg.locator("img[src='x'], img[src='y']").count() == 0, where
    pg.goto(f"{url}/{page.SUMMARY_HTML}")
    pg.wait_for_load_state("networkidle")
    pg.close()
    assert dialogs == []


def test_plots_are_shown_whole_and_every_column_explains_its_unit(site, base_url, page_):
    page_.goto(f"{base_url}/{page.SUMMARY_HTML}")
    page_.wait_for_load_state("load")
    # Each figure is shown whole: its aspect ratio kept (nothing cropped), inside the page.
    images = page_.evaluate(
        "Array.from(document.images).map(i => { const r = i.getBoundingClientRect();"
        " return [i.getAttribute('src'), i.naturalWidth, i.naturalHeight, r.width, r.height,"
        " r.left, r.right, document.documentElement.clientWidth]; })"
    )
    assert images
    for src, nw, nh, w, h, left, right, page_width in images:
        if w == 0:  # on a GPU tab not shown
            continue
        assert abs(nw / nh - w / h) < 0.02, (src, nw, nh, w, h)
        assert left >= 0 and right <= page_width + 1, (src, left, right, page_width)
    # Every first-screen column says what its number is, visibly, in its header.
    headers = page_.locator("table.fs-table th[data-col]").evaluate_all(
        "ths => ths.filter(th => th.offsetParent !== null).map(th => [th.dataset.col,"
        " (th.querySelector('.explain') || {}).innerText || ''])"
    )
    assert headers and all(text.strip() for _, text in headers), headers
    explained = dict(headers)
    assert "÷" in explained["x-baseline"] and "÷" in explained["x-eager"]
    assert not page_.errors, page_.errors
