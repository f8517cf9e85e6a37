"""Tab click to tab drawn on the Dataset page in Chromium: a stored atlas opened, then a click on
each tab (Consensus circuit, Clusters, Prompts, Curves), ``--rounds`` times round, timed from the
click until the page's last change (no change in the page for 1.5 s after it: the rerun a tab
click starts, since the tab is in the link, is then done and drawn), and until the open tab's
panel is drawn (over 100 px high, none of its elements greyed as stale, no "running" sign). Prints
each click and each tab's medians.

    PYTHONPATH=tests .venv/bin/python benchmarks/bench_dataset_tabs.py --url http://localhost:8501 [--atlas ioi]

The app must be running at ``--url``. It uses the browser tests' helpers (tests/browser_page.py),
so ``tests`` must be on ``PYTHONPATH``: the script itself never edits ``sys.path``.
"""

from __future__ import annotations

import argparse
import statistics

from browser_page import settled
from playwright.sync_api import sync_playwright

TABS = ["Consensus circuit", "Clusters", "Prompts", "Curves"]
WATCH = """() => { window.__last = performance.now(); if (window.__watch) window.__watch.disconnect();
 window.__watch = new MutationObserver(() => { window.__last = performance.now(); });
 window.__watch.observe(document.body, {subtree: true, childList: true, attributes: true, characterData: true}); }"""
PANEL = """() => { const p = [...document.querySelectorAll('[role=tabpanel]')].find(e => e.offsetHeight > 0);
 const drawn = !!p && p.offsetHeight > 100 && !p.querySelector('[data-stale=true]')
   && !document.querySelector('[data-testid=stStatusWidget]');
 return [performance.now(), window.__last, drawn]; }"""
QUIET_MS = 1500


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="the running app, e.g. http://localhost:8501")
    parser.add_argument("--atlas", default="ioi")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--width", type=int, default=1500)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    last_change = {tab: [] for tab in TABS}
    drawn = {tab: [] for tab in TABS}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=args.chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": args.width, "height": 1200})
        page.goto(f"{args.url.rstrip('/')}/dataset?atlas={args.atlas}", timeout=300_000)
        settled(page)
        page.wait_for_timeout(3000)
        for round_ in range(args.rounds):
            for tab in TABS:
                page.evaluate(WATCH)
                start = page.evaluate("() => performance.now()")
                page.get_by_role("tab", name=tab, exact=True).click()
                seen = None
                while True:
                    page.wait_for_timeout(20)
                    now, last, ready = page.evaluate(PANEL)
                    if seen is None and ready:
                        seen = now
                    if now - last > QUIET_MS and now - start > QUIET_MS and seen is not None:
                        break
                drawn[tab].append((seen - start) / 1000)
                last_change[tab].append((last - start) / 1000)
                print(
                    f"round {round_} {tab}: drawn {drawn[tab][-1]:.2f} s, last change {last_change[tab][-1]:.2f} s"
                )
        browser.close()
    for tab in TABS:
        print(
            f"{tab}: drawn {statistics.median(drawn[tab]):.2f} s, "
            f"last change {statistics.median(last_change[tab]):.2f} s (medians of {args.rounds})"
        )


if __name__ == "__main__":
    main()
