"""The launcher's timeline: what a start spends its seconds on, printed when asked.

With ``CIRCUITVIZ_STARTUP_LOG=1`` the server prints ``startup: <what> <seconds>`` lines, the
seconds counted from the start of its process (the interpreter's own start included, read from
``/proc`` where there is one), e.g. ``startup: model loaded 3.41``. ``benchmarks/bench_startup.py``
reads them from the server's log beside the browser's figures. Without the variable nothing is
printed and nothing is measured.
"""

from __future__ import annotations

import os
import sys
import time

ENV = "CIRCUITVIZ_STARTUP_LOG"
_IMPORTED = time.perf_counter()


def _process_age() -> float:
    """Seconds since this process started: from ``/proc`` (Linux), else since this module's import."""
    try:
        with open("/proc/self/stat", encoding="ascii") as stream:
            started_ticks = int(stream.read().rpartition(")")[2].split()[19])
        with open("/proc/uptime", encoding="ascii") as stream:
            uptime = float(stream.read().split()[0])
        return uptime - started_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return time.perf_counter() - _IMPORTED


_OFFSET = _process_age() - (time.perf_counter() - _IMPORTED)  # the process's age at this import


def enabled() -> bool:
    return os.environ.get(ENV, "").strip() not in ("", "0")


def mark(what: str) -> None:
    """Print ``startup: <what> <seconds since the process started>`` when the log is on."""
    if enabled():
        seconds = _OFFSET + time.perf_counter() - _IMPORTED
        print(f"startup: {what} {seconds:.2f}", file=sys.stderr, flush=True)


_SEEN: set[str] = set()


def mark_once(what: str) -> None:
    """``mark(what)`` the first time it is asked for in this process (a page's first run)."""
    if enabled() and what not in _SEEN:
        _SEEN.add(what)
        mark(what)
