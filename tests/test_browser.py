"""End to end in headless Chromium: the real app, the embedded model, a real browser, at 1500 px.

Starts ``streamlit run app.py`` on a free local port with a fresh result store and calibration
(the converted model is reused, so "model ready" is the warm start), then drives what a new user
does: the Explore page from a shared URL (its phase shown while the model loads), EAP-IG on the
15-token IOI prompt (timed against ``benchmarks/bench_engine.py`` run in the same test), the
numbers on screen checked against the result the app stored, the graph's wheel scrolling the
page, a new prompt (answer, foil and corrupted prompt proposed for it), a multi-token answer
(its error beside it, Run disabled), the budget kept across a page switch, Compare, iBoN with 9
paraphrases (timed) and a click on an UpSet bar, Steer on the circuit at the chosen budget, and
the Gallery. Screenshots and the measured figures go to ``test-output/`` (look at them);
``CIRCUITVIZ_UPDATE_SCREENSHOTS=1`` also writes ``docs/images/explore.png``.

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
DOCS_SCREENSHOT = ROOT / "docs" / "images" / "explore.png"
BROWSER_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",  # a container's small /dev/shm would crash the renderer on long pages
]
WIDTH = 1500
MODEL_WAIT_MS = 15 * 60 * 1000  # the first load of the embedded model converts its GGUF
RUN_WAIT_MS = 15 * 60 * 1000

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect
pytestmark = [
    pytest.mark.browser,
    pytest.mark.embedded,  # the app it drives loads the embedded model
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed"),
]

IOI_PROMPT = "When Mary and John went to the store, John gave a drink to"
IOI_VIEW = {"prompt": IOI_PROMPT, "method": "eap-ig"}
NEW_PROMPT = "When Tom and Anna went to the park, Anna gave a ball to"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _cache_root() -> Path:
    base = os.environ.get("CIRCUITVIZ_CACHE")
    return Path(base).expanduser() if base else Path.home() / ".cache" / "circuitviz"


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """A fresh cache (results, calibration) that reuses the converted models: a warm start that
    has computed nothing yet."""
    root = tmp_path_factory.mktemp("cache")
    models = _cache_root() / "models"
    if models.exists():
        (root / "models").symlink_to(models, target_is_directory=True)
    return root


@pytest.fixture(scope="module")
def bench_seconds():
    """``benchmarks/bench_engine.py``'s EAP-IG time, measured in this test run before the app
    starts (so the two never share the CPU or hold two models at once)."""
    return _bench_engine_total()


@pytest.fixture(scope="module")
def app_url(cache, bench_seconds):
    """A streamlit server of this checkout on 127.0.0.1, stopped (with its children) at the end."""
    port = _free_port()
    OUTPUT.mkdir(exist_ok=True)
    log = open(OUTPUT / "streamlit.log", "w")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "CIRCUITVIZ_CACHE": str(cache)}
    command = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port)]
    command += ["--server.address", "127.0.0.1", "--server.headless", "true"]
    command += ["--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"]
    server = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
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


# ----- helpers ---------------------------------------------------------------------------------------
def _wait(page, condition: str, timeout_ms: int, arg=None) -> None:
    """Wait for a JS condition; fail at once with the app's message when it shows an exception."""
    script = (
        "(arg) => { if (document.querySelector('[data-testid=\"stException\"]')) return 'exception';"
        f" return ({condition})(arg) ? 'ok' : false; }}"
    )
    handle = page.wait_for_function(script, arg=arg, timeout=timeout_ms, polling=200)
    if handle.json_value() == "exception":
        text = page.locator('[data-testid="stException"]').first.inner_text()
        page.screenshot(path=str(OUTPUT / "failure.png"), full_page=True)
        raise AssertionError(f"the app raised: {text[:2000]}")


def _button_ready(label: str) -> str:
    return f"() => [...document.querySelectorAll('button')].some(b => b.innerText.trim() === {label!r} && !b.disabled)"


def _settled(page, timeout_ms: int = RUN_WAIT_MS) -> None:
    """Wait until streamlit has finished its script runs: no 'running' indicator in two looks
    0.7 s apart (a rerun's indicator appears a moment after the input that caused it)."""
    idle = "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"
    for _ in range(60):
        page.wait_for_timeout(700)
        _wait(page, idle, timeout_ms)
        page.wait_for_timeout(700)
        if page.evaluate(idle):
            return


def _graph_drawn(page, started: float, timeout_s: float = RUN_WAIT_MS / 1000) -> float:
    """Seconds from ``started`` until the result's metrics are on the page and the circuit graph
    has drawn its canvas inside its frame (looked at every 0.1 s; the graph is the point a user
    waits for, the rest of the page below it may still be filling in)."""
    _wait(page, "() => document.body.innerText.includes('edges kept')", int(timeout_s * 1000))
    while time.perf_counter() - started < timeout_s:
        for frame in page.frames:
            if frame is not page.main_frame and frame.locator("canvas").count():
                return time.perf_counter() - started
        page.wait_for_timeout(100)
    raise AssertionError("The circuit graph was not drawn.")


def _metrics(page) -> dict[str, str]:
    """{label: value} of every st.metric on screen."""
    return page.evaluate(
        """() => Object.fromEntries([...document.querySelectorAll('[data-testid="stMetric"]')].map(m => [
            m.querySelector('[data-testid="stMetricLabel"]').innerText.trim(),
            m.querySelector('[data-testid="stMetricValue"]').innerText.trim()]))"""
    )


def _metric_values(page, label: str) -> list[str]:
    return page.evaluate(
        """(label) => [...document.querySelectorAll('[data-testid="stMetric"]')]
            .filter(m => m.querySelector('[data-testid="stMetricLabel"]').innerText.trim() === label)
            .map(m => m.querySelector('[data-testid="stMetricValue"]').innerText.trim())""",
        label,
    )


def _input_value(page, label: str) -> str:
    return page.get_by_label(label, exact=True).input_value()


def _type(page, label: str, text: str) -> None:
    """Replace an input's text and commit it (Enter for a line, Ctrl+Enter for a text area)."""
    box = page.get_by_label(label, exact=True)
    box.click()
    box.fill(text)
    multiline = box.evaluate("e => e.tagName") == "TEXTAREA"
    page.keyboard.press("Control+Enter" if multiline else "Enter")
    _settled(page)


def _graph_frame(page, index: int = 0):
    """The Playwright frame of the ``index``-th graph iframe (srcdoc frames, in page order)."""
    handles = page.locator("iframe").element_handles()
    return handles[index].content_frame()


def _drawn_edge_count(page, index: int = 0) -> int:
    return int(_graph_frame(page, index).evaluate("() => network.body.data.edges.length"))


def _stored_results(cache: Path) -> list:
    """Every result the app stored, read back as CircuitResult objects."""
    import torch

    from circuitviz.results import CircuitResult

    found = []
    for path in sorted((cache / "results" / "result").glob("*.pt")):
        state = torch.load(path, map_location="cpu", weights_only=True)
        found.append(CircuitResult.from_state(state))
    return found


def _result_of(cache: Path, method: str, prompt: str):
    matching = [r for r in _stored_results(cache) if r.method == method and r.task.clean == prompt]
    assert matching, f"no stored {method} result for {prompt!r}"
    return matching[-1]


def _budget_shown(page) -> int:
    """The budget the slider shows now (its thumb's value)."""
    text = page.get_by_role("slider").first.get_attribute("aria-valuetext") or ""
    return int(text.replace(",", ""))


def _shot(page, name: str, locator=None, full: bool = False, height: int = 1000) -> None:
    """A screenshot into test-output/: the page scrolled so ``locator`` is at the top (in a
    viewport ``height`` px tall: streamlit scrolls its main area itself, so a taller viewport is
    how more of a page gets into one picture), or the element ``locator`` alone with ``full``."""
    page.add_style_tag(content="header[data-testid='stHeader'] { display: none !important; }")
    if locator is not None and full:
        locator.screenshot(path=str(OUTPUT / name))
        return
    if height != 1000:
        page.set_viewport_size({"width": WIDTH, "height": height})
        page.wait_for_timeout(800)
    if locator is not None:
        locator.evaluate("element => element.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(600)
    page.screenshot(path=str(OUTPUT / name))
    if height != 1000:
        page.set_viewport_size({"width": WIDTH, "height": 1000})
        page.wait_for_timeout(500)


def _bench_engine_total() -> float:
    """``benchmarks/bench_engine.py``'s EAP-IG discovery time (no load), run now, one repeat."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "benchmarks/bench_engine.py", "--repeats", "1"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    OUTPUT.mkdir(exist_ok=True)  # this fixture runs before the server's, on a fresh checkout too
    (OUTPUT / "bench-engine.txt").write_text(done.stdout)
    found = re.search(r"EAP-IG discovery total \(no load\)\s+([\d.]+)s", done.stdout)
    assert found, done.stdout[-2000:]
    return float(found.group(1))


def _estimate_seconds(text: str) -> float:
    found = re.search(r"Estimate: about ([\d.]+) (s|min|h)", text)
    assert found, text
    return float(found.group(1)) * {"s": 1, "min": 60, "h": 3600}[found.group(2)]


# ----- the test ---------------------------------------------------------------------------------------
def test_a_new_user_in_chromium(app_url, browser, cache, bench_seconds):
    figures: dict[str, object] = {"bench_engine_eap_ig_s": bench_seconds}
    page = browser.new_page(viewport={"width": WIDTH, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))

    # --- open: first paint, the prompt box before the model, the phase shown, then ready
    start = time.perf_counter()
    page.goto(f"{app_url}/?{urllib.parse.urlencode(IOI_VIEW)}")
    page.get_by_text("Explore a prompt's circuit").wait_for(timeout=60_000)
    figures["first_paint_s"] = time.perf_counter() - start
    page.get_by_label("Prompt", exact=True).wait_for(timeout=60_000)
    figures["prompt_box_s"] = time.perf_counter() - start
    loading = page.get_by_text("Loading the model")
    try:
        loading.first.wait_for(timeout=5_000)
        figures["load_phase_shown"] = loading.first.inner_text()
    except playwright_api.TimeoutError:
        figures["load_phase_shown"] = ""
    _wait(page, _button_ready("Run"), MODEL_WAIT_MS)
    figures["model_ready_s"] = time.perf_counter() - start
    _settled(page)
    assert figures["load_phase_shown"].startswith("Loading the model gemma-3-270m"), figures
    assert _input_value(page, "answer token (with its leading space)") == " Mary"
    assert _input_value(page, "foil token") == " John"  # the other name, not the next token
    corrupted = _input_value(page, "Corrupted prompt (the key fact or name replaced; same number of tokens)")
    assert corrupted and "Mary" not in corrupted and "John" not in corrupted
    assert page.get_by_text("Both prompts are 15 tokens").count() == 1
    estimate_text = page.get_by_text("Estimate: about").first.inner_text()
    figures["estimate_first_run"] = estimate_text
    _shot(page, "explore-inputs.png")

    # --- EAP-IG on the 15-token prompt: time it, then bench_engine in the same test run
    started = time.perf_counter()
    page.get_by_role("button", name="Run", exact=True).click()
    figures["eap_ig_click_to_graph_s"] = _graph_drawn(page, started)
    _settled(page)
    figures["eap_ig_click_to_settled_s"] = time.perf_counter() - started
    computed = re.search(r"computed in ([\d.]+) s", page.locator("body").inner_text())
    figures["eap_ig_computed_s"] = float(computed.group(1)) if computed else None
    figures["estimate_first_run_s"] = _estimate_seconds(estimate_text)

    # --- the numbers on screen are the stored result's
    result = _result_of(cache, "eap-ig", IOI_PROMPT)
    budget = _budget_shown(page)
    point = result.point(budget)
    assert point is not None and budget == _readable(result)
    metrics = _metrics(page)
    assert metrics["NDF"] == f"{point.ndf:.3f}" and metrics["NFS"] == f"{point.nfs:.3f}"
    assert metrics["edges kept"] == f"{point.n_edges:,} ({100 * point.n_edges / result.graph.n_edges:.2f}%)"
    assert metrics["clean L(M(q))"] == f"{result.baseline.clean:+.3f}"
    frame = _graph_frame(page)
    frame.locator("canvas").wait_for(timeout=30_000)
    assert _drawn_edge_count(page) == min(point.n_edges, 1500)
    figures["explore_shown"] = {"budget": budget, **metrics}
    # every drawn head carries its top promoted token on the canvas
    labels = frame.evaluate("() => network.body.data.nodes.get().map(n => n.label)")
    assert all("\n'" in label for label in labels if label.startswith(("a", "m")))

    # --- the wheel over the graph scrolls the page, it does not zoom the graph
    iframe = page.locator("iframe").first
    iframe.scroll_into_view_if_needed()
    box = iframe.bounding_box()
    scale_before = frame.evaluate("() => network.getScale()")
    scroller = "document.querySelector('[data-testid=\"stMain\"]') || document.scrollingElement"
    top_before = page.evaluate(f"() => ({scroller}).scrollTop")
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + min(box["height"] - 20, 300))
    page.mouse.wheel(0, 500)
    page.wait_for_timeout(800)
    assert frame.evaluate("() => network.getScale()") == scale_before
    figures["wheel_scrolled_px"] = page.evaluate(f"() => ({scroller}).scrollTop") - top_before
    assert figures["wheel_scrolled_px"] > 0
    figures["graph_frame_px"] = {"width": box["width"], "height": box["height"]}
    _shot(page, "explore-graph.png", iframe, full=True)
    if os.environ.get("CIRCUITVIZ_UPDATE_SCREENSHOTS") == "1":
        DOCS_SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        iframe.screenshot(path=str(DOCS_SCREENSHOT))
    page.get_by_text("Explain this circuit").first.click()
    page.wait_for_timeout(600)
    _shot(page, "explore-result.png", page.get_by_text("edge budget (").first, height=2400)

    # --- the budget survives a page switch and back
    slider = page.get_by_role("slider").first
    slider.focus()
    page.keyboard.press("ArrowRight")
    _settled(page)
    moved = _budget_shown(page)
    assert moved != budget and f"budget={moved}" in page.url
    assert _metric_values(page, "NDF") == [f"{result.point(moved).ndf:.3f}"]
    _open(page, "Compare")
    page.get_by_text("Compare methods").first.wait_for(timeout=60_000)
    _settled(page)
    assert _input_value(page, "Prompt") == IOI_PROMPT
    _open(page, "Explore")
    page.get_by_text("Explore a prompt's circuit").first.wait_for(timeout=60_000)
    _wait(page, "() => document.body.innerText.includes('edges kept')", 120_000)
    _settled(page)
    assert _budget_shown(page) == moved

    # --- Compare: EAP and EAP-IG side by side, their NDFs the stored results'
    _open(page, "Compare")
    _wait(page, _button_ready("Run the comparison"), 120_000)
    page.get_by_role("button", name="Run the comparison").click()
    _wait(page, "() => document.querySelectorAll('iframe').length >= 2", RUN_WAIT_MS)
    _settled(page)
    shown_budget = _budget_shown(page)
    eap = _result_of(cache, "eap", IOI_PROMPT)
    assert _metric_values(page, "NDF") == [
        f"{eap.point(shown_budget).ndf:.3f}",
        f"{result.point(shown_budget).ndf:.3f}",
    ]
    a = set(eap.graph.edge_names_of(eap.circuit(shown_budget)))
    b = set(result.graph.edge_names_of(result.circuit(shown_budget)))
    assert page.get_by_text(f"{len(a & b):,} edges are in every circuit.").count() == 1
    figures["compare_shown"] = {
        "budget": shown_budget,
        "shared": len(a & b),
        "jaccard": len(a & b) / len(a | b),
    }
    right = page.evaluate(
        "() => Math.max(...[...document.querySelectorAll('iframe')].map(f => f.getBoundingClientRect().right))"
    )
    main_right = page.evaluate(
        "() => document.querySelector('[data-testid=\"stMainBlockContainer\"]').getBoundingClientRect().right"
    )
    assert right <= main_right + 1, (right, main_right)  # no column clipped on the right
    _shot(page, "compare.png", page.get_by_text("edge budget (").first, height=2000)

    # --- a new prompt: its own answer, foil and corrupted prompt
    _open(page, "Explore")
    page.get_by_text("Explore a prompt's circuit").first.wait_for(timeout=60_000)
    _settled(page)
    _type(page, "Prompt", NEW_PROMPT)
    expect(page.get_by_label("foil token", exact=True)).to_have_value(" Anna", timeout=120_000)
    new_corrupted = _input_value(
        page, "Corrupted prompt (the key fact or name replaced; same number of tokens)"
    )
    assert new_corrupted and "Anna" not in new_corrupted and "Tom" not in new_corrupted
    answer = _input_value(page, "answer token (with its leading space)")
    assert answer and answer != " Mary"
    assert page.locator("iframe").count() == 0  # the old prompt's result is gone
    _shot(page, "explore-new-prompt.png")

    # --- a multi-token answer: the error beside it, Run disabled
    _type(page, "answer token (with its leading space)", " Mary-Jane Watson")
    error = page.get_by_text("use a single token").first
    error.wait_for(timeout=120_000)
    expect(page.get_by_role("button", name="Run", exact=True)).to_be_disabled(timeout=30_000)
    _shot(page, "explore-multi-token-answer.png")
    _type(page, "answer token (with its leading space)", answer)
    expect(page.get_by_role("button", name="Run", exact=True)).to_be_enabled(timeout=120_000)

    # --- the calibrated estimate of a second EAP-IG run, and its measured time
    estimate_text = page.get_by_text("Estimate: about").first.inner_text()
    started = time.perf_counter()
    page.get_by_role("button", name="Run", exact=True).click()
    figures["second_run_click_to_graph_s"] = _graph_drawn(page, started)
    _settled(page)
    computed = re.search(r"computed in ([\d.]+) s", page.locator("body").inner_text())
    figures["estimate_second_run"] = estimate_text
    figures["estimate_second_run_s"] = _estimate_seconds(estimate_text)
    figures["second_run_computed_s"] = float(computed.group(1))
    figures["second_run_click_to_settled_s"] = time.perf_counter() - started

    # --- Paraphrases: iBoN with 9 paraphrases and the page's defaults; an UpSet bar clicked
    _open(page, "Paraphrases")
    page.get_by_text("Paraphrases and Best-of-N").first.wait_for(timeout=60_000)
    _settled(page)
    _type(page, "Prompt", IOI_PROMPT)
    expect(page.get_by_label("foil token", exact=True)).to_have_value(" John", timeout=120_000)
    page.get_by_text("Both prompts are 15 tokens").first.wait_for(timeout=60_000)
    _choose(page, "method", "ibon")
    page.get_by_text("Estimate: about").first.wait_for(timeout=60_000)
    _settled(page)
    figures["ibon_estimate"] = page.get_by_text("Estimate: about").first.inner_text()
    started = time.perf_counter()
    page.get_by_role("button", name="Run Best-of-N").click()
    _wait(
        page, "() => document.body.innerText.includes('Edges shared across candidate circuits')", RUN_WAIT_MS
    )
    _settled(page)
    figures["ibon_click_to_view_s"] = time.perf_counter() - started
    computed = re.search(r"computed in ([\d.]+) s", page.locator("body").inner_text())
    figures["ibon_computed_s"] = float(computed.group(1)) if computed else None
    ibon = _result_of(cache, "ibon", IOI_PROMPT)
    figures["ibon_pairs"] = len(ibon.details.pairs) - 1
    _shot(page, "paraphrases.png", page.get_by_role("heading", name="Paraphrases", exact=True), height=2400)
    upset = page.locator(".js-plotly-plot").nth(1)
    upset.scroll_into_view_if_needed()
    bar = upset.locator(".barlayer .point path").first.bounding_box()  # plotly's drag layer takes the click
    page.mouse.click(bar["x"] + bar["width"] / 2, bar["y"] + bar["height"] / 2)
    _settled(page)
    chosen = page.get_by_role(
        "combobox", name="highlight the edges of one intersection in the graph (or click its bar above)"
    )
    expect(chosen).to_have_value(re.compile(r"\(\d+ edges\)$"), timeout=60_000)
    figures["upset_clicked"] = chosen.input_value()
    _shot(
        page,
        "paraphrases-upset.png",
        page.get_by_text("Edges shared across candidate circuits").first,
        height=2000,
    )

    # --- Steer: the nodes of the circuit at the chosen budget
    _open(page, "Steer")
    page.get_by_text("Steer with SAE features").first.wait_for(timeout=60_000)
    _wait(page, "() => document.body.innerText.includes('Features to zero')", RUN_WAIT_MS)
    _settled(page)
    caption = page.get_by_text(re.compile(r"circuit at [\d,]+ edges")).first.inner_text()
    figures["steer_caption"] = caption
    budget_now = int(re.search(r"circuit at ([\d,]+) edges", caption).group(1).replace(",", ""))
    assert budget_now == int(re.search(r"budget=(\d+)", page.url).group(1))
    _shot(page, "steer.png", page.get_by_text("Loaded:").first, height=1800)

    # --- Gallery: a stored example, at its readable budget, its numbers the stored result's
    _open(page, "Gallery")
    page.get_by_text("Indirect object").first.wait_for(timeout=60_000)
    page.locator("iframe").first.wait_for(timeout=60_000)
    _settled(page)
    _graph_frame(page).locator("canvas").wait_for(timeout=60_000)
    _settled(page)
    gallery = _gallery_result("ioi")
    gallery_budget = _budget_shown(page)
    assert gallery_budget == _readable(gallery)
    assert _metric_values(page, "NDF") == [f"{gallery.point(gallery_budget).ndf:.3f}"]
    assert "scoring_s" not in page.locator("body").inner_text()
    _shot(page, "gallery.png", page.get_by_text("edge budget (").first, height=2400)

    assert not errors, errors
    (OUTPUT / "browser-figures.json").write_text(json.dumps(figures, indent=1, default=str))
    print("browser figures:", json.dumps(figures, default=str))  # timings are reported, never asserted


def _open(page, name: str) -> None:
    """Switch page by its link in the sidebar, as a user clicks it (a script click: the link is
    handled inside the app, so there is no navigation for the browser to wait for)."""
    page.get_by_role("link", name=name).evaluate("link => link.click()")


def _choose(page, label: str, option: str) -> None:
    """Pick ``option`` in the select box labelled ``label``: type to filter, Enter to choose."""
    box = page.locator('[data-testid="stSelectbox"]').filter(has=page.get_by_text(label, exact=True)).first
    box.locator("input").first.click()
    page.keyboard.type(option)
    page.wait_for_timeout(500)
    page.keyboard.press("Enter")
    _settled(page)


def _readable(result) -> int:
    from circuitviz.render import readable_budget

    return readable_budget(result.curve)


def _gallery_result(slug: str):
    import torch

    from circuitviz.results import CircuitResult

    state = torch.load(ROOT / "assets" / "gallery" / f"{slug}.pt", map_location="cpu", weights_only=True)
    return CircuitResult.from_state(state["result"])
