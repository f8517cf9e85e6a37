"""Load: N browser sessions at once against one local ``streamlit run``, on a cached result.

Starts the app, computes the IOI example once (EAP-IG, 2 steps) so it is in the result store,
then opens N separate browser contexts (N sessions) on the same shared URL at the same moment
and times each until its graph is drawn (the graph iframe's canvas and the metrics are on the
page). Prints how many sessions were served (graph drawn, no exception shown) and the median,
95th-percentile and slowest time to a rendered graph. Figures depend on what else the machine
runs; nothing here asserts a time. Because they do, it also prints the CPU time the concurrent
sessions cost per session, on the server (the streamlit process) and in the browser (chromium,
its exited renderers included), and the load average before and after: figures a busy machine
moves far less than wall times.

    python benchmarks/bench_load_sessions.py               # 8 sessions
    python benchmarks/bench_load_sessions.py --sessions 16
    python benchmarks/bench_load_sessions.py --floor       # also: one session's browser CPU on the
                                                           # About page (streamlit's own frontend) and
                                                           # on the stored view, one after the other

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


def _cpu_seconds(pid: int, children: bool = False) -> float:
    """User + system CPU seconds of a process (its threads; with ``children``, its exited and
    waited-for children too) from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    ticks = int(fields[11]) + int(fields[12])  # utime, stime
    if children:
        ticks += int(fields[13]) + int(fields[14])  # cutime, cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def _browser_cpu_seconds() -> float:
    """CPU seconds of every chromium process below this one (live ones and, through each live
    process's children counters, the renderers that exited)."""
    parents, names = {}, {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            head, _, rest = (entry / "stat").read_text().rpartition(")")
        except OSError:
            continue
        names[int(entry.name)] = head.partition("(")[2]
        parents[int(entry.name)] = int(rest.split()[1])

    def below_us(pid: int) -> bool:
        while pid > 1:
            pid = parents.get(pid, 0)
            if pid == os.getpid():
                return True
        return False

    chromium = [pid for pid, name in names.items() if "chrom" in name and below_us(pid)]
    return sum(_cpu_seconds(pid, children=True) for pid in chromium)


def _load_average() -> str:
    """The 1, 5 and 15 minute load averages ('4.1 3.2 2.0')."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


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


ABOUT_DRAWN = "() => document.body.innerText.includes('methods')"
SETTLE_MS = 3000  # the page's own work after the graph (curve, table, downloads) is counted too


async def browser_cpu_of_page(browser, url: str, drawn: str, timeout_ms: int) -> float:
    """Browser CPU seconds of one session opening ``url`` until ``drawn`` holds and 3 s more."""
    context = await browser.new_context()
    page = await context.new_page()
    before = _browser_cpu_seconds()
    await page.goto(url)
    await page.wait_for_function(drawn, timeout=timeout_ms)
    await page.wait_for_timeout(SETTLE_MS)
    await context.close()
    return round(_browser_cpu_seconds() - before, 2)


async def floor(browser, url: str, timeout_ms: int) -> dict:
    """One session's browser CPU on a page of text (About: what streamlit's frontend costs by
    itself) and on the stored view, twice each, alternating."""
    about = url.split("?")[0].rstrip("/") + "/about"
    found = {"about_page": [], "stored_view": []}
    for _ in range(2):
        found["about_page"].append(await browser_cpu_of_page(browser, about, ABOUT_DRAWN, timeout_ms))
        found["stored_view"].append(await browser_cpu_of_page(browser, url, DRAWN, timeout_ms))
    return found


async def measure(
    url: str, sessions: int, timeout_ms: int, server_pid: int, with_floor: bool = False
) -> dict:
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            warm_s = await warm(browser, url, timeout_ms)
            load_before = _load_average()
            server_cpu, browser_cpu = _cpu_seconds(server_pid), _browser_cpu_seconds()
            runs = await asyncio.gather(*(one_session(browser, url, timeout_ms) for _ in range(sessions)))
            server_cpu = _cpu_seconds(server_pid) - server_cpu
            browser_cpu = _browser_cpu_seconds() - browser_cpu
            load_after = _load_average()
            floors = await floor(browser, url, timeout_ms) if with_floor else None
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
        "server_cpu_s_per_session": round(server_cpu / sessions, 2),
        "browser_cpu_s_per_session": round(browser_cpu / sessions, 2),
        "load_average_before": load_before,
        "load_average_after": load_after,
        "browser_cpu_s_one_session": floors,
        "failures": [run for run in runs if not run["served"]],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=600, help="seconds a session may take")
    parser.add_argument(
        "--floor", action="store_true", help="also one session's browser CPU on the About page and the view"
    )
    args = parser.parse_args()
    port = _free_port()
    output = ROOT / "test-output"
    output.mkdir(exist_ok=True)
    server = start_app(port, output / "bench_load_sessions.log")
    try:
        url = f"http://127.0.0.1:{port}/?{urllib.parse.urlencode(VIEW)}"
        figures = asyncio.run(measure(url, args.sessions, int(args.timeout * 1000), server.pid, args.floor))
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
    print(
        f"CPU per session: server {figures['server_cpu_s_per_session']} s, browser "
        f"{figures['browser_cpu_s_per_session']} s; load average {figures['load_average_before']} before, "
        f"{figures['load_average_after']} after"
    )
    if figures["browser_cpu_s_one_session"]:
        floors = figures["browser_cpu_s_one_session"]
        print(
            f"one session's browser CPU (two each, +{SETTLE_MS / 1000:g} s settled): About page "
            f"{floors['about_page']} s, the stored view {floors['stored_view']} s"
        )
    print(json.dumps(figures))
    return 0 if figures["served"] == figures["sessions"] else 1


if __name__ == "__main__":
    sys.exit(main())
