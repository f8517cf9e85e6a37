"""Click to card in Chromium: Explore on the embedded model (EAP, an IOI prompt), then a click on
each of a few graph nodes, twice round, timed from the click until that node's card is on screen
(the card's title and the URL's ``view`` naming it, looked at every animation frame). The second round's cards have their figures
cached: the target is under 300 ms for those. Prints each click, the medians, and the load average.

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
CARD_SHOWN = """(node) => {
  const view = new URLSearchParams(location.search).get('view');
  if (!view || JSON.parse(view).clicked !== node) return false;
  return [...document.querySelectorAll('strong')].some(s => s.innerText.trim() === node);
}"""


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
            page.goto(f"{url}/?{urllib.parse.urlencode(IOI)}")
            wait_for(page, button_ready("Run"), 15 * 60 * 1000)
            settled(page)
            page.get_by_role("button", name="Run", exact=True).first.click()
            wait_for(page, "() => document.querySelectorAll('.cv-root canvas').length >= 1", 15 * 60 * 1000)
            settled(page)
            nodes = [n for n in graph_node_ids(page) if n not in ("input", "logits")][: args.nodes]
            rounds: list[list[float]] = []
            for _ in range(2):
                times = []
                for node in nodes:
                    started = time.perf_counter()
                    click_node(page, node)
                    # looked at every animation frame (wait_for's 0.2 s polling would add up to 0.2 s)
                    page.wait_for_function(CARD_SHOWN, arg=node, timeout=120_000, polling="raf")
                    times.append(time.perf_counter() - started)
                    settled(page)
                rounds.append(times)
            browser.close()
    finally:
        stop_app(server)
    for number, times in enumerate(rounds, 1):
        shown = ", ".join(f"{node} {t * 1000:.0f} ms" for node, t in zip(nodes, times))
        print(f"round {number}: {shown}; median {statistics.median(times) * 1000:.0f} ms")
    print("load average:", open("/proc/loadavg").read().split()[:3])
    print(
        json.dumps(
            {
                "first_round_ms": [round(t * 1000) for t in rounds[0]],
                "cached_round_ms": [round(t * 1000) for t in rounds[1]],
            }
        )
    )


if __name__ == "__main__":
    main()
