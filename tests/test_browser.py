"""End to end in headless Chromium: the real app, the embedded model, a real browser.

Starts ``streamlit run app.py`` on a free local port, opens the Explore page from a shared URL
(the IOI example, EAP-IG with 2 steps, a few budgets), runs it, checks that the graph's canvas
and the curve render, moves the budget slider and checks that the graph changes, hovers a node,
then opens the Compare and Gallery pages. Screenshots and the measured times (first paint, slider
answer, gallery open) go to ``test-output/``; nothing here asserts a time.

Needs Debian's chromium (``scripts/install-test-deps.sh``) and the playwright package; the
browser build of ``playwright install`` is never used.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "test-output"
DOCS_SCREENSHOT = ROOT / "docs" / "images" / "explore.png"  # CIRCUITVIZ_UPDATE_SCREENSHOTS=1 rewrites it
DOCS_VIEWPORT = {"width": 1500, "height": 1320}  # the metrics and the whole graph below them
BROWSER_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
MODEL_WAIT_MS = 15 * 60 * 1000  # the first load of the embedded model converts its GGUF
RUN_WAIT_MS = 15 * 60 * 1000

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.browser,
    pytest.mark.embedded,  # the app it drives loads the embedded model
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed"),
]

IOI_VIEW = {
    "prompt": "When Mary and John went to the store, John gave a drink to",
    "corrupted": "When Alice and Bob went to the store, Carl gave a drink to",
    "answer": " Mary",
    "foil": " John",
    "method": "eap-ig",
    "settings": json.dumps({"ig_steps": 2}),
    "budgets": "20,50,100,200,500,1000",
    "budget": "100",
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def app_url():
    """A streamlit server of this checkout on 127.0.0.1, stopped (with its children) at the end."""
    port = _free_port()
    OUTPUT.mkdir(exist_ok=True)
    log = open(OUTPUT / "streamlit.log", "w")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            "app.py",
            "--server.port",
            str(port),
            "--server.address",
            "127.0.0.1",
            "--server.headless",
            "true",
            "--browser.gatherUsageStats",
            "false",
            "--server.fileWatcherType",
            "none",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"streamlit did not start; see {OUTPUT / 'streamlit.log'}")
            time.sleep(0.5)
        yield url
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
        log.close()


@pytest.fixture(scope="module")
def browser():
    with playwright_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        yield chromium
        chromium.close()


def _wait(page, condition: str, timeout_ms: int, arg=None) -> None:
    """Wait for a JS condition; fail at once with the app's message when it shows an exception."""
    script = (
        "(arg) => { if (document.querySelector('[data-testid=\"stException\"]')) return 'exception';"
        f" return ({condition})(arg) ? 'ok' : false; }}"
    )
    handle = page.wait_for_function(script, arg=arg, timeout=timeout_ms)
    if handle.json_value() == "exception":
        text = page.locator('[data-testid="stException"]').first.inner_text()
        page.screenshot(path=str(OUTPUT / "failure.png"), full_page=True)
        raise AssertionError(f"the app raised: {text[:2000]}")


HIDE_HEADER = "header[data-testid='stHeader'] { display: none !important; }"


def _screenshot_from(page, locator, path: Path, viewport: dict | None = None) -> None:
    """A screenshot of the page scrolled so that ``locator`` is at the top (streamlit scrolls
    its main area itself, so a full-page screenshot would show only the first screen)."""
    page.add_style_tag(content=HIDE_HEADER)  # streamlit's fixed header would cover the top
    if viewport:
        page.set_viewport_size(viewport)
        page.wait_for_timeout(800)
    locator.evaluate("element => element.scrollIntoView({block: 'start'})")
    page.wait_for_timeout(600)
    page.screenshot(path=str(path))
    if viewport:
        page.set_viewport_size({"width": 1400, "height": 1000})
        page.wait_for_timeout(500)


def _graph_frame(page, index: int = 0):
    return page.frame_locator("iframe").nth(index)


def _drawn_edge_count(page, index: int = 0) -> int:
    """Edges in the vis network of the ``index``-th graph iframe, read from the live page."""
    frame = page.frames[1 + index] if len(page.frames) > 1 + index else None
    assert frame is not None, "no graph iframe"
    return int(frame.evaluate("() => network.body.data.edges.length"))


def _graph_html(page) -> str:
    return page.locator("iframe").first.get_attribute("srcdoc") or ""


def test_explore_compare_gallery_in_chromium(app_url, browser):
    timings: dict[str, float] = {}
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    tall = {"width": 1400, "height": 2300}
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))

    start = time.perf_counter()
    page.goto(f"{app_url}/?{urllib.parse.urlencode(IOI_VIEW)}")
    page.get_by_text("Explore a prompt's circuit").wait_for(timeout=60_000)
    timings["first_paint_s"] = time.perf_counter() - start

    _wait(
        page,
        "() => [...document.querySelectorAll('button')].some(b => b.innerText.trim() === 'Run' && !b.disabled)",
        MODEL_WAIT_MS,
    )
    run = page.get_by_role("button", name="Run", exact=True)
    timings["model_ready_s"] = time.perf_counter() - start
    assert page.get_by_text("Both prompts are").count() >= 1
    page.screenshot(path=str(OUTPUT / "explore-inputs.png"), full_page=True)

    started = time.perf_counter()
    run.click()
    _wait(
        page,
        "() => document.querySelector('iframe') && document.body.innerText.includes('edges kept')"
        " && !document.body.innerText.includes('Running eap-ig')",
        RUN_WAIT_MS,
    )
    timings["run_s"] = time.perf_counter() - started
    frame = _graph_frame(page)
    frame.locator("canvas").wait_for(timeout=30_000)
    page.locator(".js-plotly-plot").first.wait_for(timeout=30_000)
    assert page.locator(".js-plotly-plot .scatterlayer .trace").count() >= 1
    page.wait_for_timeout(1500)
    before = _drawn_edge_count(page)
    assert before > 0
    html_before = _graph_html(page)
    _screenshot_from(page, page.get_by_text("edge budget").first, OUTPUT / "explore-result.png", tall)
    page.add_style_tag(content=HIDE_HEADER)
    page.set_viewport_size(tall)
    page.wait_for_timeout(800)
    page.locator("iframe").first.screenshot(path=str(OUTPUT / "explore-graph.png"))
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.wait_for_timeout(500)

    # hover a node: its tooltip names it and lists its logit-lens tokens
    page.locator("iframe").first.evaluate("element => element.scrollIntoView({block: 'start'})")
    page.wait_for_timeout(600)
    graph_frame = page.frames[1]
    point = graph_frame.evaluate(
        "() => { const ids = network.body.data.nodes.getIds().filter(i => i.startsWith('a'));"
        " const id = ids[0]; const p = network.getPositions([id])[id]; return network.canvasToDOM(p); }"
    )
    box = page.locator("iframe").first.bounding_box()
    canvas_box = frame.locator("canvas").bounding_box()
    page.mouse.move(canvas_box["x"] + point["x"], canvas_box["y"] + point["y"])
    page.wait_for_timeout(800)
    tooltip = frame.locator("div.vis-tooltip")
    assert "promotes" in tooltip.inner_text()
    page.screenshot(
        path=str(OUTPUT / "explore-hover.png"),
        clip={"x": box["x"], "y": box["y"], "width": box["width"], "height": min(box["height"], 900)},
    )

    # move the budget slider one step right: the graph is redrawn from the stored result
    slider = page.get_by_role("slider").first
    slider.focus()
    started = time.perf_counter()
    page.keyboard.press("ArrowRight")
    _wait(
        page,
        "(old) => { const f = document.querySelector('iframe'); return f && f.getAttribute('srcdoc') !== old; }",
        60_000,
        arg=html_before,
    )
    timings["slider_answer_s"] = time.perf_counter() - started
    page.wait_for_timeout(1500)
    after = _drawn_edge_count(page)
    assert after != before
    assert re.search(r"budget=200", page.url)
    if os.environ.get("CIRCUITVIZ_UPDATE_SCREENSHOTS") == "1":  # the committed picture of the docs
        _screenshot_from(page, page.get_by_text("edges kept").first, DOCS_SCREENSHOT, DOCS_VIEWPORT)
        from PIL import Image  # streamlit's own dependency; 256 colours keep the file small

        Image.open(DOCS_SCREENSHOT).convert("RGB").quantize(256).save(DOCS_SCREENSHOT, optimize=True)
    _screenshot_from(page, page.locator(".js-plotly-plot").first, OUTPUT / "explore-curve.png")

    # Compare: opens with the same prompt
    page.get_by_role("link", name="Compare").click()
    page.get_by_text("Compare methods").first.wait_for(timeout=120_000)
    _wait(
        page,
        "() => [...document.querySelectorAll('button')].some(b => b.innerText.includes('Run the comparison') && !b.disabled)",
        120_000,
    )
    page.get_by_role("button", name="Run the comparison").click()
    _wait(page, "() => document.querySelectorAll('iframe').length >= 2", RUN_WAIT_MS)
    page.wait_for_timeout(2500)
    _screenshot_from(page, page.get_by_text("edge budget").first, OUTPUT / "compare.png", tall)

    # Gallery: a stored example opens without any model pass
    started = time.perf_counter()
    page.get_by_role("link", name="Gallery").click()
    page.get_by_text("Indirect object").first.wait_for(timeout=60_000)
    page.locator("iframe").first.wait_for(timeout=60_000)
    _graph_frame(page).locator("canvas").wait_for(timeout=60_000)
    timings["gallery_open_s"] = time.perf_counter() - started
    page.wait_for_timeout(1500)
    _screenshot_from(page, page.get_by_text("Gallery").first, OUTPUT / "gallery.png", tall)
    page.set_viewport_size(tall)  # the graph is taller than a laptop screen; show all of it
    page.wait_for_timeout(800)
    page.locator("iframe").first.screenshot(path=str(OUTPUT / "gallery-graph.png"))

    assert not errors, errors
    (OUTPUT / "browser-timings.json").write_text(json.dumps(timings, indent=1))
    print("browser timings:", json.dumps(timings))
