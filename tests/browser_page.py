"""What the browser test does to a page of the app: wait for it, read it, type, click, look.

Playwright helpers for ``tests/test_browser.py`` (streamlit's own DOM: its test ids, its status
widget, its sliders), kept apart so the test reads as the flows a user goes through.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "test-output"
WIDTH = 1500
RUN_WAIT_MS = 15 * 60 * 1000


def wait_for(page, condition: str, timeout_ms: int, arg=None) -> None:
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


def button_ready(label: str) -> str:
    return f"() => [...document.querySelectorAll('button')].some(b => b.innerText.trim() === {label!r} && !b.disabled)"


def settled(page, timeout_ms: int = RUN_WAIT_MS) -> None:
    """Wait until streamlit has finished its script runs: no 'running' indicator in two looks
    0.7 s apart (a rerun's indicator appears a moment after the input that caused it)."""
    idle = "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"
    for _ in range(60):
        page.wait_for_timeout(700)
        wait_for(page, idle, timeout_ms)
        page.wait_for_timeout(700)
        if page.evaluate(idle):
            return


def graph_drawn(page, started: float, timeout_s: float = RUN_WAIT_MS / 1000) -> float:
    """Seconds from ``started`` until the result's metrics are on the page and the circuit graph
    has drawn its canvas (looked at every 0.1 s; the graph is the point a user waits for, the
    rest of the page below it may still be filling in)."""
    wait_for(page, "() => document.body.innerText.includes('edges kept')", int(timeout_s * 1000))
    while time.perf_counter() - started < timeout_s:
        if page.locator(".cv-root canvas").count():
            return time.perf_counter() - started
        page.wait_for_timeout(100)
    raise AssertionError("The circuit graph was not drawn.")


def metrics(page) -> dict[str, str]:
    """{label: value} of every st.metric on screen."""
    return page.evaluate(
        """() => Object.fromEntries([...document.querySelectorAll('[data-testid="stMetric"]')].map(m => [
            m.querySelector('[data-testid="stMetricLabel"]').innerText.trim(),
            m.querySelector('[data-testid="stMetricValue"]').innerText.trim()]))"""
    )


def metric_values(page, label: str) -> list[str]:
    return page.evaluate(
        """(label) => [...document.querySelectorAll('[data-testid="stMetric"]')]
            .filter(m => m.querySelector('[data-testid="stMetricLabel"]').innerText.trim() === label)
            .map(m => m.querySelector('[data-testid="stMetricValue"]').innerText.trim())""",
        label,
    )


def input_value(page, label: str) -> str:
    return page.get_by_label(label, exact=True).input_value()


def type_into(page, label: str, text: str) -> None:
    """Replace an input's text and commit it (Enter for a line, Ctrl+Enter for a text area)."""
    box = page.get_by_label(label, exact=True)
    box.click()
    box.fill(text)
    multiline = box.evaluate("e => e.tagName") == "TEXTAREA"
    page.keyboard.press("Control+Enter" if multiline else "Enter")
    settled(page)


class GraphHandle:
    """The ``index``-th circuit drawing on the page (``ui.graph_view``'s component, in the page's
    own DOM): ``evaluate`` runs a script in which ``network`` is that drawing's vis-network, and
    ``locator``/``get_by_role`` look inside its element."""

    def __init__(self, page, index: int = 0):
        self.page, self.index = page, index
        self.element = page.locator(".cv-root").nth(index)

    def evaluate(self, script: str, arg=None):
        wrapped = (
            "([index, arg]) => { const network = document.querySelectorAll('.cv-root')[index].cvNetwork;"
            f" return ({script})(arg); }}"
        )
        return self.page.evaluate(wrapped, [self.index, arg])

    def locator(self, selector: str):
        return self.element.locator(selector)

    def get_by_role(self, role: str, **options):
        return self.element.get_by_role(role, **options)


def graph_frame(page, index: int = 0) -> GraphHandle:
    """The ``index``-th circuit drawing on the page, in page order."""
    return GraphHandle(page, index)


def drawn_edge_count(page, index: int = 0) -> int:
    return int(graph_frame(page, index).evaluate("() => network.body.data.edges.length"))


def budget_shown(page) -> int:
    """The budget the slider shows now (its thumb's value)."""
    text = page.get_by_role("slider").first.get_attribute("aria-valuetext") or ""
    return int(text.replace(",", ""))


def shot(page, name: str, locator=None, full: bool = False, height: int = 1000) -> None:
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


ESTIMATE = r"Estimate: (?:about |[\d.]+ (?:s|min|h) to )([\d.]+) (s|min|h)"


def estimate_seconds(text: str) -> float:
    """An estimate line's seconds: its one figure, or a range's most (Edge Pruning, ACDC: "4 s to
    36 s"), which its progress line counts down from."""
    found = re.search(ESTIMATE, text)
    assert found, text
    return float(found.group(1)) * {"s": 1, "min": 60, "h": 3600}[found.group(2)]


def open_page(page, name: str) -> None:
    """Switch page by its link in the sidebar, as a user clicks it (a script click: the link is
    handled inside the app, so there is no navigation for the browser to wait for)."""
    page.get_by_role("link", name=name).evaluate("link => link.click()")


def choose(page, label: str, option: str) -> None:
    """Pick ``option`` in the select box labelled ``label``: type to filter, Enter to choose."""
    box = page.locator('[data-testid="stSelectbox"]').filter(has=page.get_by_text(label, exact=True)).first
    box.locator("input").first.click()
    page.keyboard.type(option)
    page.wait_for_timeout(500)
    page.keyboard.press("Enter")
    settled(page)


def body_text(page) -> str:
    return page.locator("body").inner_text()


def computed_seconds(page, method: str | None = None) -> list[float]:
    """Every "computed in N s" of the page's run statuses (of ``method`` only, when named), in order."""
    prefix = re.escape(method) if method else r"\S+"
    return [
        float(found) for found in re.findall(prefix + r" on \S+: computed in ([\d.]+) s", body_text(page))
    ]


def estimates(page) -> list[float]:
    """Every estimate line's seconds on the page, in order."""
    return [estimate_seconds(found.group(0)) for found in re.finditer(ESTIMATE, body_text(page))]


def progress_texts(page, until: str, timeout_s: float, every_s: float = 1.0) -> list[str]:
    """The run's progress line looked at every ``every_s`` seconds until ``until`` is on the page."""
    seen, start = [], time.perf_counter()
    while time.perf_counter() - start < timeout_s:
        if until in body_text(page):
            return seen
        texts = page.evaluate(
            "() => [...document.querySelectorAll('[data-testid=\"stProgress\"]')].map(p => p.innerText.trim())"
        )
        seen.extend(text for text in texts if text and text != "done")
        page.wait_for_timeout(int(1000 * every_s))
    raise AssertionError(f"{until!r} did not appear in {timeout_s:.0f} s; progress seen: {seen[-5:]}")


# ----- what the app stored --------------------------------------------------------------------------
def stored_results(cache: Path) -> list:
    """Every result the app stored, read back as CircuitResult objects."""
    import torch

    from circuitviz.core.results import CircuitResult

    found = []
    for path in sorted((cache / "results" / "result").glob("*.pt")):
        state = torch.load(path, map_location="cpu", weights_only=True)
        found.append(CircuitResult.from_state(state))
    return found


def result_of(cache: Path, method: str, prompt: str):
    matching = [r for r in stored_results(cache) if r.method == method and r.task.clean == prompt]
    assert matching, f"no stored {method} result for {prompt!r}"
    return matching[-1]


def readable(result) -> int:
    """The budget a first view of ``result`` opens at."""
    from circuitviz.render import readable_budget

    return readable_budget(result.curve)


def gallery_result(slug: str):
    """A stored Gallery example's result, read as the page reads it."""
    import torch

    from circuitviz.core.results import CircuitResult

    state = torch.load(ROOT / "assets" / "gallery" / f"{slug}.pt", map_location="cpu", weights_only=True)
    return CircuitResult.from_state(state["result"])


def bench_engine_total() -> float:
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


# ----- the circuit drawings (``ui.graph_view``'s components) ---------------------------------------
GRAPH_BOXES = """() => [...document.querySelectorAll('.cv-root')].map(root => {
  const network = root.cvNetwork; const frame = root.querySelector('.cv-canvas').getBoundingClientRect();
  const boxes = network.body.data.nodes.getIds().map(id => {
    const box = network.getBoundingBox(id);
    const a = network.canvasToDOM({x: box.left, y: box.top}), b = network.canvasToDOM({x: box.right, y: box.bottom});
    return {id: String(id), l: a.x, t: a.y, r: b.x, b: b.y, shape: network.body.data.nodes.get(id).shape};
  });
  return {key: root.dataset.cvGraph, width: frame.width, height: frame.height, boxes};
})"""


def graph_problems(page) -> list[str]:
    """For every circuit drawing on the page, read from vis-network itself: each node's box that
    is not inside its frame, and each pair of node boxes that overlap (none, when all is well)."""
    problems = []
    for graph in page.evaluate(GRAPH_BOXES):
        for box in graph["boxes"]:
            if (
                box["l"] < -0.5
                or box["t"] < -0.5
                or box["r"] > graph["width"] + 0.5
                or box["b"] > graph["height"] + 0.5
            ):
                problems.append(
                    f"{graph['key']}: {box['id']} outside its {graph['width']:.0f} x {graph['height']:.0f} frame"
                )
        shapes = [box for box in graph["boxes"] if box["shape"] != "text"]
        for i, a in enumerate(shapes):
            for b in shapes[i + 1 :]:
                if a["l"] < b["r"] and b["l"] < a["r"] and a["t"] < b["b"] and b["t"] < a["b"]:
                    problems.append(f"{graph['key']}: {a['id']} overlaps {b['id']}")
    return problems


def graph_count(page) -> int:
    return int(page.evaluate("() => document.querySelectorAll('.cv-root canvas').length"))


def graph_node_ids(page, index: int = 0) -> list[str]:
    return page.evaluate(
        "(i) => document.querySelectorAll('.cv-root')[i].cvNetwork.body.data.nodes.getIds().map(String)",
        index,
    )


def click_node(page, node: str, index: int = 0, modifiers=None) -> None:
    """Click node ``node`` of the ``index``-th drawing where vis-network draws it."""
    x, y = page.evaluate(
        """([node, index]) => { const root = document.querySelectorAll('.cv-root')[index];
        root.scrollIntoView({block: 'center'}); const network = root.cvNetwork;
        const p = network.canvasToDOM(network.getPosition(node));
        const r = root.querySelector('canvas').getBoundingClientRect(); return [p.x + r.left, p.y + r.top]; }""",
        [node, index],
    )
    for key in modifiers or []:
        page.keyboard.down(key)
    page.mouse.click(x, y)
    for key in modifiers or []:
        page.keyboard.up(key)


def serve_app(cache: Path, log_name: str = "streamlit.log", script: Path | None = None):
    """(the URL, the server process) of a streamlit server of this checkout on 127.0.0.1 (on a
    free port), its caches under ``cache``; stop it with ``stop_app``. ``script``: a streamlit
    script of its own instead of the app (``make app``'s launcher, which loads the model)."""
    import signal as _signal  # noqa: F401  (stop_app uses it)
    import socket
    import urllib.request

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    OUTPUT.mkdir(exist_ok=True)
    log = open(OUTPUT / log_name, "w")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "CIRCUITVIZ_CACHE": str(cache)}
    launcher = ["circuitviz.ui.serve"] if script is None else ["streamlit", "run", str(script)]
    command = [sys.executable, "-m", *launcher, "--server.port", str(port)]
    command += ["--server.address", "127.0.0.1", "--server.headless", "true"]
    command += ["--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"]
    server = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.status == 200:
                    return url, server
        except OSError:
            pass
        if server.poll() is not None or time.monotonic() > deadline:
            stop_app(server)
            raise RuntimeError(f"streamlit did not start; see {OUTPUT / log_name}")
        time.sleep(0.5)


def stop_app(server) -> None:
    import signal

    os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)


CHROMIUM = "/usr/bin/chromium"  # Debian's: the tests never download a browser
# the IOI example as a link gives it to the embedded models' pages (the Chromium tests' task)
IOI_LINK = {
    "prompt": "When Mary and John went to the store, John gave a drink to",
    "corrupted": "When Alice and Bob went to the store, Carl gave a drink to",
    "answer": " Mary",
    "foil": " John",
}


@contextlib.contextmanager
def chromium_on_app(cache: Path, log_name: str = "streamlit.log"):
    """(the URL, a headless Chromium) of the app served on ``cache`` (``serve_app``) for a test's
    block; the browser and the server are stopped after it, whatever it raised."""
    from playwright.sync_api import sync_playwright

    url, server = serve_app(cache, log_name)
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=CHROMIUM, args=["--headless", "--no-sandbox"]
            )
            try:
                yield url, browser
            finally:
                browser.close()
    finally:
        stop_app(server)
