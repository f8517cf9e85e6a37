"""Load: N browser sessions at once against one local ``streamlit run``, on a cached result.

Starts the app, computes the IOI example once (EAP-IG, 2 steps) so it is in the result store,
then opens N separate browser contexts (N sessions) on the same shared URL at the same moment
and times each until its graph is drawn (the graph iframe's canvas and the metrics are on the
page). Prints how many sessions were served (graph drawn, no exception shown) and the median,
95th-percentile and slowest time to a rendered graph. Figures depend on what else the machine
runs; nothing here asserts a time.

    python benchmarks/bench_load_sessions.py               # 8 sessions
    python benchmarks/bench_load_sessions.py --sessions 16

Needs Debian's chromium at /usr/bin/chromium and the playwright package.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run"]
VIEW = {
    "prompt": "When Mary and John went to the store, John gave a drink to",
    "corrupted": "When Alice and Bob went to the store, Carl gave a drink to",
    "answer": " Mary",
    "foil": " John",
    "method": "eap-ig",
    "settings": json.dumps({"ig_steps": 2}),
    "budgets": "20,50,100,200,500,1000",
    "budget": "100",
}
DRAWN = "() => !!document.querySelector('iframe') && document.body.innerText.includes('edges kept')"
FAILED = "() => !!document.querySelector('[data-testid=\"stException\"]')"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_app(port: int, log_path: Path) -> subprocess.Popen:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    command = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port)]
    command += ["--server.address", "127.0.0.1", "--server.headless", "true"]
    command += ["--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"]
    log = open(log_path, "w")
    server = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as response:
                if response.status == 200:
                    return server
        except OSError:
            pass
        if server.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"streamlit did not start; see {log_path}")
        time.sleep(0.5)


async def warm(browser, url: str, timeout_ms: int) -> float:
    """Make sure the view's result is stored: open it, press Run unless it is already drawn."""
    page = await browser.new_page()
    start = time.perf_counter()
    await page.goto(url)
    await page.wait_for_function(
        "() => [...document.querySelectorAll('button')].some(b => b.innerText.trim() === 'Run' && !b.disabled)",
        timeout=timeout_ms,
    )
    await page.wait_for_timeout(1500)
    if not await page.evaluate(DRAWN):
        await page.get_by_role("button", name="Run", exact=True).click()
    await page.wait_for_function(DRAWN, timeout=timeout_ms)
    await page.frame_locator("iframe").first.locator("canvas").wait_for(timeout=timeout_ms)
    await page.close()
    return time.perf_counter() - start


async def one_session(browser, url: str, timeout_ms: int) -> dict:
    context = await browser.new_context()
    page = await context.new_page()
    start = time.perf_counter()
    try:
        await page.goto(url)
        await page.wait_for_function(f"() => ({DRAWN})() || ({FAILED})()", timeout=timeout_ms)
        failed = await page.evaluate(FAILED)
        if not failed:
            await page.frame_locator("iframe").first.locator("canvas").wait_for(timeout=timeout_ms)
        return {"served": not failed, "seconds": time.perf_counter() - start}
    except Exception as error:  # a timeout or a closed page: not served
        return {"served": False, "seconds": time.perf_counter() - start, "error": type(error).__name__}
    finally:
        await context.close()


async def measure(url: str, sessions: int, timeout_ms: int) -> dict:
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            warm_s = await warm(browser, url, timeout_ms)
            runs = await asyncio.gather(*(one_session(browser, url, timeout_ms) for _ in range(sessions)))
        finally:
            await browser.close()
    times = sorted(run["seconds"] for run in runs if run["served"])
    p95 = times[min(len(times) - 1, max(0, int(round(0.95 * len(times) + 0.5)) - 1))] if times else None
    return {
        "sessions": sessions,
        "served": len(times),
        "warm_s": round(warm_s, 2),
        "median_s": round(statistics.median(times), 2) if times else None,
        "p95_s": round(p95, 2) if p95 is not None else None,
        "max_s": round(times[-1], 2) if times else None,
        "failures": [run for run in runs if not run["served"]],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=600, help="seconds a session may take")
    args = parser.parse_args()
    port = _free_port()
    output = ROOT / "test-output"
    output.mkdir(exist_ok=True)
    server = start_app(port, output / "bench_load_sessions.log")
    try:
        url = f"http://127.0.0.1:{port}/?{urllib.parse.urlencode(VIEW)}"
        figures = asyncio.run(measure(url, args.sessions, int(args.timeout * 1000)))
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
    print(
        f"{figures['served']}/{figures['sessions']} sessions served; time to a rendered graph: "
        f"median {figures['median_s']} s, p95 {figures['p95_s']} s, slowest {figures['max_s']} s "
        f"(first session, computing or loading the stored result: {figures['warm_s']} s)"
    )
    print(json.dumps(figures))
    return 0 if figures["served"] == figures["sessions"] else 1


if __name__ == "__main__":
    sys.exit(main())
