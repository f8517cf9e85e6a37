"""How long a new user waits: from `make app`'s command to an enabled Run, in Chromium.

Starts the server exactly as ``make app`` does (the package's bytecode brought up to date, then
``python -m circuitviz.ui.serve``, the default model loading from the start) with ``CIRCUITVIZ_CACHE`` pointing at a folder of its own, and
times, from the moment the process is started:

- **healthy**: the server answers ``/_stcore/health`` (looked at every 50 ms);
- **painted**: the Explore page's title is on screen (the browser opens the page as soon as the
  server is healthy; Chromium is started before the server, as a user's browser already runs);
- **prompt box**: the prompt input is on screen;
- **Run enabled**: the Run button is enabled (the model loaded and the page drawn around it);
- **CPU**: the server process's CPU seconds at that moment (user and system, all its threads, from
  ``/proc``): on this shared machine a steadier figure than the clock, as the server's threads
  share one interpreter lock and other work stretches the wall time;
- **the waiting line**: while the model loads the page redraws "Loading the model ...: N s" every
  second; the browser notes each change of N (every 100 ms, in the page), and the figures give the
  median and longest seconds between two changes: about 1 s while the server keeps up with the
  page, longer while something holds its interpreter lock.

``--open-at S`` opens the page S seconds after the process's start instead of when it answers:
on a cold start, a page opened in the middle of the conversion.

A **cold** start uses an empty cache folder (the embedded GGUF is converted on the way); a
**warm** start reuses the folder a start left behind (converted weights, calibration). The order
is one cold start, then ``--warm`` warm starts on the same folder. With ``--cache DIR`` the folder
is used as it is (no cold start). Prints figures and the load average around each start; asserts
nothing. Run it with no other benchmark running:

    .venv/bin/python benchmarks/bench_startup.py --warm 3
    .venv/bin/python benchmarks/bench_startup.py --cache ~/.cache/circuitviz --warm 3 --no-cold

The phases of the model's load inside the server (imports, weights, the timed pass) are printed
from the server's log (``CIRCUITVIZ_STARTUP_LOG=1``, written by ``circuitviz.ui.serve``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
BROWSER_ARGS = ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"]
RUN_READY = (
    "() => [...document.querySelectorAll('button')].some(b => b.innerText.trim() === 'Run' && !b.disabled)"
)
TITLE = "Explore a prompt's circuit"
# in the page, from its first script: [milliseconds, N] at each change of the waiting line's N
WAITING_LINE = """
window.__waitingLine = [];
setInterval(() => {
  const line = [...document.querySelectorAll('[data-testid="stAlert"]')]
    .map((alert) => alert.innerText.match(/Loading the model .*?: (\\d+) s/))
    .find(Boolean);
  const seen = window.__waitingLine;
  if (line && (!seen.length || seen[seen.length - 1][1] !== line[1])) seen.push([Date.now(), line[1]]);
}, 100);
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _process_cpu(pid: int) -> float | None:
    """CPU seconds (user and system) process ``pid`` has used so far; None without ``/proc``."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def source_copy(root: Path, into: Path) -> Path:
    """A copy of the checkout ``root``'s files (git's tracked and untracked ones, none it ignores)
    in ``into``, without any bytecode: the server of a start without bytecode runs from it, so the
    checkout's own ``__pycache__`` folders are never touched (``--no-bytecode`` deleted them until
    2026-12-07, and every later start of anyone using the checkout compiled the package again)."""
    listed = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=False,
    )
    into.mkdir(parents=True, exist_ok=True)
    if listed.returncode != 0:  # not a git checkout: everything but bytecode and environments
        ignored = shutil.ignore_patterns("__pycache__", "*.pyc", ".git", ".venv", "*.egg-info")
        shutil.copytree(root, into, ignore=ignored, dirs_exist_ok=True)
        return into
    for name in filter(None, listed.stdout.decode().split("\0")):
        source = root / name
        if "__pycache__" in Path(name).parts or name.endswith(".pyc") or not source.is_file():
            continue  # a file git lists that was deleted since, or bytecode someone committed
        (into / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, into / name)
    return into


def server_environment(root: Path, cache: Path, bytecode: bool = True) -> tuple[Path, dict]:
    """(the folder the server starts in, its environment). Without ``bytecode``, the server runs
    from a copy of the checkout without bytecode (``source_copy``, in a new temporary folder) and
    writes none (``PYTHONDONTWRITEBYTECODE``), so the package compiles from source at every start,
    as before `make app` compiled it, while the installed libraries keep their bytecode (an
    empty ``PYTHONPYCACHEPREFIX`` would compile torch and every other library too)."""
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "CIRCUITVIZ_CACHE": str(cache),
        "CIRCUITVIZ_STARTUP_LOG": "1",
    }
    where = root
    if not bytecode:
        where = source_copy(root, Path(tempfile.mkdtemp(prefix="circuitviz-source-")))
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONPATH"] = str(where)
    return where, env


def one_start(
    browser,
    cache: Path,
    timeout_s: float = 600.0,
    root: Path = ROOT,
    bytecode: bool = True,
    open_at: float | None = None,
) -> dict:
    """Start the server of the checkout ``root`` on ``cache``, open the page, return the seconds
    of each milestone; ``bytecode``: bring the package's bytecode up to date first, as `make app`
    does (off: the server runs from a copy of the checkout without bytecode and compiles the
    package in memory, ``server_environment``; the checkout is not touched); ``open_at``: open the
    page that many seconds after the start, not when the server answers."""
    port = _free_port()
    where, env = server_environment(root, cache, bytecode)
    command = [sys.executable, "-m", "circuitviz.ui.serve", "--server.port", str(port)]
    command += ["--server.address", "127.0.0.1", "--server.headless", "true"]
    command += ["--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"]
    log_path = cache / f"server-{port}.log"
    figures: dict = {"load_before": _load_average()}
    url = f"http://127.0.0.1:{port}"
    with open(log_path, "w") as log:
        start, started_at = time.perf_counter(), time.time()
        # as `make app` does: the package's bytecode first (Python writes none itself where
        # PYTHONDONTWRITEBYTECODE is set), timed as part of the start
        if bytecode:
            compile_package = [sys.executable, "-m", "compileall", "-q", "circuitviz"]
            subprocess.run(compile_package, cwd=root, check=True, stdout=log)
        figures["bytecode_s"] = time.perf_counter() - start
        server = subprocess.Popen(
            command,
            cwd=where,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            while True:
                try:
                    with urllib.request.urlopen(f"{url}/_stcore/health", timeout=1) as response:
                        if response.status == 200:
                            break
                except OSError:
                    pass
                if server.poll() is not None or time.perf_counter() - start > timeout_s:
                    raise RuntimeError(f"the server did not start; see {log_path}")
                time.sleep(0.05)
            figures["healthy_s"] = time.perf_counter() - start
            page = browser.new_page(viewport={"width": 1500, "height": 1000})
            page.add_init_script(WAITING_LINE)
            if open_at is not None:
                time.sleep(max(0.0, open_at - (time.perf_counter() - start)))
            figures["opened_s"] = time.perf_counter() - start
            page.goto(url)
            page.get_by_text(TITLE).first.wait_for(timeout=timeout_s * 1000)
            figures["painted_s"] = time.perf_counter() - start
            page.get_by_label("Prompt", exact=True).wait_for(timeout=timeout_s * 1000)
            figures["prompt_box_s"] = time.perf_counter() - start
            page.wait_for_function(RUN_READY, timeout=timeout_s * 1000, polling=50)
            figures["run_enabled_s"] = time.perf_counter() - start
            figures["cpu_s"] = _process_cpu(server.pid)
            changes = page.evaluate("window.__waitingLine || []")
            figures["waiting_line"] = _waiting_line(changes, started_at)
            page.close()
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
            if where != root:  # the copy without bytecode: one a start
                shutil.rmtree(where, ignore_errors=True)
    figures["load_after"] = _load_average()
    figures["phases"] = _phases(log_path)
    return figures


def _waiting_line(changes: list, started_at: float) -> dict:
    """The waiting line's changes ([epoch milliseconds, N], as the page noted them) in numbers: how
    many, the median and longest seconds between two of them, and when the longest began (seconds
    since ``started_at``, the start's epoch seconds); None for each with fewer than two."""
    gaps = [((later[0] - earlier[0]) / 1000, earlier[0]) for earlier, later in zip(changes, changes[1:])]
    longest = max(gaps, default=None)
    return {
        "changes": len(changes),
        "median_gap_s": statistics.median(gap for gap, _ in gaps) if gaps else None,
        "longest_gap_s": longest[0] if longest else None,
        "longest_gap_at_s": longest[1] / 1000 - started_at if longest else None,
    }


def _phases(log_path: Path) -> dict:
    """The server's own ``startup:`` lines (seconds since its process started)."""
    phases = {}
    for line in log_path.read_text(errors="replace").splitlines():
        if line.startswith("startup: "):
            name, _, seconds = line.removeprefix("startup: ").rpartition(" ")
            try:
                phases[name] = float(seconds)
            except ValueError:
                continue
    return phases


def _show(kind: str, figures: dict) -> None:
    phases = ", ".join(f"{name} {seconds:.2f}" for name, seconds in figures["phases"].items())
    print(
        f"{kind:5s} healthy {figures['healthy_s']:5.2f} s  painted {figures['painted_s']:5.2f} s  "
        f"prompt box {figures['prompt_box_s']:5.2f} s  Run enabled {figures['run_enabled_s']:5.2f} s  "
        + (f"server CPU {figures['cpu_s']:5.2f} s  " if figures.get("cpu_s") is not None else "")
        + f"(load {figures['load_before']} -> {figures['load_after']}; bytecode {figures['bytecode_s']:.2f} s)"
    )
    line = figures.get("waiting_line") or {}
    if line.get("longest_gap_s") is not None:
        print(
            f"      page opened {figures['opened_s']:.2f} s; its waiting line changed {line['changes']} "
            f"times, median {line['median_gap_s']:.2f} s apart, longest {line['longest_gap_s']:.2f} s "
            f"(from {line['longest_gap_at_s']:.1f} s)"
        )
    if phases:
        print(f"      in the server (s since start): {phases}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--warm", type=int, default=3, help="warm starts after the cold one")
    parser.add_argument("--no-cold", action="store_true", help="skip the cold start (needs --cache)")
    parser.add_argument("--cache", type=Path, help="the cache folder to start on (default: a new one)")
    parser.add_argument("--json", type=Path, help="write every start's figures here")
    parser.add_argument(
        "--root",
        type=Path,
        default=ROOT,
        help="the checkout whose app to start (another branch's, to compare)",
    )
    parser.add_argument(
        "--open-at",
        type=float,
        help="open the page this many seconds after the server's start (default: when it answers)",
    )
    parser.add_argument(
        "--no-bytecode",
        action="store_true",
        help="start the server without `make app`'s bytecode step, from a copy of the checkout "
        "without bytecode in a temporary folder (as before 2026-12-06); the checkout is not touched",
    )
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    cache = args.cache or Path(tempfile.mkdtemp(prefix="circuitviz-startup-"))
    cache.mkdir(parents=True, exist_ok=True)
    print(f"cache {cache}; {os.cpu_count()} CPUs; OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}")
    starts: list[tuple[str, dict]] = []
    bytecode = not args.no_bytecode
    options = {"root": args.root, "bytecode": bytecode, "open_at": args.open_at}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        try:
            if not args.no_cold:
                if any((cache / "models").glob("*")):
                    raise SystemExit(f"{cache} holds converted models already; give an empty folder")
                starts.append(("cold", one_start(browser, cache, **options)))
                _show(*starts[-1])
            for _ in range(args.warm):
                starts.append(("warm", one_start(browser, cache, **options)))
                _show(*starts[-1])
        finally:
            browser.close()
    warm = [figures["run_enabled_s"] for kind, figures in starts if kind == "warm"]
    if warm:
        print(f"warm Run enabled: median {statistics.median(warm):.2f} s over {len(warm)} ({warm})")
        cpu = [
            figures["cpu_s"]
            for kind, figures in starts
            if kind == "warm" and figures.get("cpu_s") is not None
        ]
        if cpu:
            print(f"warm server CPU at Run enabled: median {statistics.median(cpu):.2f} s ({cpu})")
    if args.json:
        args.json.write_text(json.dumps(starts, indent=1))


if __name__ == "__main__":
    main()
