"""Click to card in Chromium: Explore on the embedded model (EAP, an IOI prompt), then a click on
each of a few graph nodes, twice round, timed from the click until that node's card is on screen
(its title shown, looked at every animation frame), then until the URL's ``view`` names it (Python
has the click and its rerun is done). The second round's cards have their figures cached: the
target is under 300 ms for those. Prints each click, the medians, each phase of a click (from the
page's own log of its websocket messages) and the load average.

    PYTHONPATH=tests .venv/bin/python benchmarks/bench_click_card.py [--nodes 4]

It drives the app with the browser tests' helpers (tests/browser_page.py), so ``tests`` must be on
``PYTHONPATH``: the script itself never edits ``sys.path``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
from browser_page import button_ready, click_node, graph_node_ids, serve_app, settled, stop_app, wait_for  # noqa: E402

IOI = {
    "prompt": "When Mary and John went to the store, John gave a drink to",
    "corrupted": "When Alice and Bob went to the store, Carl gave a drink to",
    "answer": " Mary",
    "foil": " John",
    "method": "eap",
}
# every websocket message to and from the server, and every click, timed in the page (for the
# phases: click -> the trigger sent -> the rerun's first and last message back -> card on screen)
RECORDER = """(() => {
  window.cvLog = [];
  const log = (kind, size) => window.cvLog.push([kind, performance.now(), size]);
  document.addEventListener('pointerdown', () => log('click', 0), true);
  const Native = window.WebSocket;
  window.WebSocket = function (...args) {
    const socket = new Native(...args);
    const send = socket.send.bind(socket);
    socket.send = (data) => { log('sent', data.byteLength || data.length || 0); send(data); };
    socket.addEventListener('message', (event) => log('received', event.data.byteLength || event.data.size || 0));
    return socket;
  };
  window.WebSocket.prototype = Native.prototype;
  Object.assign(window.WebSocket, Native);
})();"""
# the card on screen: a visible <strong> naming the node (the card's title); then the view kept by
# Python, in the URL (the round trip the click causes)
CARD_SHOWN = """(node) => { const shown = [...document.querySelectorAll('strong')].some(s =>
  s.innerText.trim() === node && s.getClientRects().length > 0);
  if (shown) window.cvShownAt = performance.now();  // in the frame that first shows it
  return shown; }"""
VIEW_KEPT = """(node) => { const view = new URLSearchParams(location.search).get('view');
  return !!view && JSON.parse(view).clicked === node; }"""


def _phases(log: list, shown: float) -> dict:
    """Milliseconds of one click's phases from the page's log (the pointer going down, every
    websocket message) and ``shown`` (the frame that first showed the card): click -> card on
    screen; click -> the click's message sent to Python; -> its first reply; -> its last (the
    rerun); and the bytes that came back before the card showed and in all."""
    click = next((t for kind, t, _ in log if kind == "click"), log[0][1] if log else shown)
    sent = next((t for kind, t, _ in log if kind == "sent" and t >= click), click)
    back = [t for kind, t, _ in log if kind == "received" and t >= sent]
    first, last = (back[0], back[-1]) if back else (sent, sent)
    return {
        "click to card on screen": shown - click,
        "click to its message sent": sent - click,
        "message to the first reply": first - sent,
        "first to last reply (the rerun)": last - first,
        "bytes back before the card showed": float(
            sum(size for kind, t, size in log if kind == "received" and click <= t <= shown)
        ),
        "bytes back in all (the rerun)": float(
            sum(size for kind, t, size in log if kind == "received" and t >= click)
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=4)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    cache = Path(tempfile.mkdtemp(prefix="click-card-"))
    base = os.environ.get("CIRCUITVIZ_CACHE")
    models = (Path(base).expanduser() if base else Path.home() / ".cache" / "circuitviz") / "models"
    if models.exists():
        (cache / "models").symlink_to(models, target_is_directory=True)
    url, server = serve_app(cache, "streamlit-click-card.log")
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path="/usr/bin/chromium", args=["--headless", "--no-sandbox"]
            )
            page = browser.new_page(viewport={"width": 1500, "height": 1000})
            page.add_init_script(RECORDER)
            page.goto(f"{url}/?{urllib.parse.urlencode(IOI)}")
            wait_for(page, button_ready("Run"), 15 * 60 * 1000)
            settled(page)
            page.get_by_role("button", name="Run", exact=True).first.click()
            wait_for(page, "() => document.querySelectorAll('.cv-root canvas').length >= 1", 15 * 60 * 1000)
            settled(page)
            nodes = [n for n in graph_node_ids(page) if n not in ("input", "logits")][: args.nodes]
            rounds: list[list[float]] = []
            phases: list[dict] = []
            kept: list[float] = []
            for _ in range(2):
                times = []
                for node in nodes:
                    page.evaluate("() => { window.cvLog = []; }")
                    started = time.perf_counter()
                    click_node(page, node)
                    # looked at every animation frame (wait_for's 0.2 s polling would add up to 0.2 s)
                    page.wait_for_function(CARD_SHOWN, arg=node, timeout=120_000, polling="raf")
                    shown = page.evaluate("() => window.cvShownAt")
                    times.append(time.perf_counter() - started)
                    page.wait_for_function(VIEW_KEPT, arg=node, timeout=120_000, polling="raf")
                    kept.append(time.perf_counter() - started)
                    phases.append(_phases(page.evaluate("() => window.cvLog"), shown))
                    settled(page)
                rounds.append(times)
            browser.close()
    finally:
        stop_app(server)
    for number, times in enumerate(rounds, 1):
        shown = ", ".join(f"{node} {t * 1000:.0f} ms" for node, t in zip(nodes, times))
        print(f"round {number}, click to card: {shown}; median {statistics.median(times) * 1000:.0f} ms")
        urls = kept[(number - 1) * len(nodes) : number * len(nodes)]
        print(
            f"round {number}, click to the view in the URL (Python's rerun done): "
            + ", ".join(f"{t * 1000:.0f}" for t in urls)
            + f" ms; median {statistics.median(urls) * 1000:.0f} ms"
        )
    cached = phases[len(phases) // 2 :]
    print("second round, median ms of each phase (in the page's clock, from the pointer going down;")
    print("the card is on screen in the first animation frame that shows it):")
    for name in cached[0]:
        print(f"  {name}: {statistics.median(p[name] for p in cached):.0f}")
    for number, part in enumerate((phases[: len(phases) // 2], cached), 1):
        in_page = [p["click to card on screen"] for p in part]
        print(
            f"round {number}, click to card in the page's clock: "
            + ", ".join(f"{t:.0f}" for t in in_page)
            + f" ms; median {statistics.median(in_page):.0f} ms"
        )
    print("load average:", open("/proc/loadavg").read().split()[:3])
    print(
        json.dumps(
            {
                "first_round_ms": [round(t * 1000) for t in rounds[0]],
                "cached_round_ms": [round(t * 1000) for t in rounds[1]],
                "click_to_url_ms": [round(t * 1000) for t in kept],
            }
        )
    )


if __name__ == "__main__":
    main()
