"""Where a running batch stands (``BatchState``), the one-line progress bar that shows it, and the
``progress.json`` the command keeps in its folder for the Dataset page to read (``ProgressFile``)."""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..core.text import clock_duration


@dataclass
class BatchState:
    """Where a batch stands, for a progress display."""

    total: int = 0
    done: int = 0  # finished this run, ok or failed
    skipped: int = 0  # found finished in the store
    refused: int = 0  # could not start (the tokenizer refused the task): finished, not in the rate
    failed: int = 0  # failed while running (the refused ones not counted again)
    in_flight: float = 0.0  # finished share of the groups running now, in items
    driver_seconds: float = 0.0  # spent storing results and writing rows (the driver's share)
    started: float = field(default_factory=time.perf_counter)
    phase: str = "discover"
    unit: str = "items"  # what ``total`` counts, as the rate names it
    resumed: str = ""  # what was stored before, reused or computed again and why (``resumed``)

    @property
    def remaining(self) -> float:
        return max(self.total - self.skipped - self.refused - self.done - self.in_flight, 0.0)

    @property
    def rate(self) -> float:
        """Items computed a second this run (found and refused ones left out)."""
        elapsed = time.perf_counter() - self.started
        return (self.done + self.in_flight) / elapsed if elapsed > 0 else 0.0

    @property
    def eta(self) -> float | None:
        return self.remaining / self.rate if self.rate > 0 else None


class ProgressBar:
    """A one-line progress bar on stderr: items, rate, ETA, found and failed counts."""

    def __init__(self, stream=None, width: int = 24, every: float = 0.5):
        self.stream = stream or sys.stderr
        self.width, self.every = width, every
        self.last = 0.0

    def line(self, state: BatchState) -> str:
        finished = state.skipped + state.refused + state.done + state.in_flight
        share = finished / state.total if state.total else 1.0
        filled = int(round(self.width * share))
        rate = state.rate
        rate_text = (
            f"{rate:.2f} {state.unit}/s"
            if rate >= 0.1
            else (f"{60 * rate:.1f} {state.unit}/min" if rate else f"-- {state.unit}/s")
        )
        extra = [f"{state.skipped} from the store"] if state.skipped else []
        failed = state.failed + state.refused
        extra += [f"{failed} failed"] if failed else []
        note = f" ({', '.join(extra)})" if extra else ""
        return (
            f"{state.phase:<10} [{'#' * filled}{'.' * (self.width - filled)}] {int(finished)}/{state.total} "
            f"{rate_text}, ETA {clock_duration(state.eta)}, elapsed {clock_duration(time.perf_counter() - state.started)}{note}"
        )

    def __call__(self, state: BatchState) -> None:
        now = time.monotonic()
        if now - self.last < self.every:
            return
        self.last = now
        print("\r" + self.line(state), end="", file=self.stream, flush=True)

    def finish(self, state: BatchState) -> None:
        """The phase's last line, kept on screen."""
        print("\r" + self.line(state), file=self.stream, flush=True)


PROGRESS = "progress.json"  # in the batch folder: where the run stands, for the Dataset page


def state_record(state: BatchState) -> dict:
    """The state as plain values: what ``progress.json`` holds (``finished`` counts items found in
    the store and refused ones too; ``eta`` and ``rate`` are the progress bar's, None before a rate)."""
    finished = state.skipped + state.refused + state.done + state.in_flight
    return {
        "phase": state.phase,
        "unit": state.unit,
        "total": state.total,
        "finished": finished,
        "done": state.done,
        "skipped": state.skipped,
        "refused": state.refused,
        "failed": state.failed,
        "rate": state.rate or None,
        "eta": state.eta,
        "elapsed": time.perf_counter() - state.started,
        "written": time.time(),
        "resumed": state.resumed or None,
    }


class ProgressFile:
    """Writes the state to ``path`` (``progress.json`` in the batch folder) at most every ``every``
    seconds, whole (written aside, then renamed), so a page reading it never sees half a file. A
    folder not made yet (the model still loading) is skipped: the next state is written."""

    def __init__(self, path: str | Path, every: float = 1.0):
        self.path, self.every = Path(path), every
        self.last = 0.0

    def write(self, state: BatchState) -> None:
        if not self.path.parent.is_dir():
            return
        aside = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        try:
            aside.write_text(json.dumps(state_record(state)), encoding="utf-8")
            os.replace(aside, self.path)
        except OSError:  # a full disk must not stop the batch: the page says less
            pass

    def __call__(self, state: BatchState) -> None:
        now = time.monotonic()
        if now - self.last < self.every:
            return
        self.last = now
        self.write(state)

    def finish(self, state: BatchState) -> None:
        self.write(state)


class Progresses:
    """Several progress displays as one (the command's bar on stderr and its ``progress.json``)."""

    def __init__(self, *displays):
        self.displays = displays

    def __call__(self, state: BatchState) -> None:
        for display in self.displays:
            display(state)

    def finish(self, state: BatchState) -> None:
        for display in self.displays:
            report(display, state, final=True)


def read_progress(folder: str | Path) -> dict | None:
    """A batch folder's ``progress.json``, or None when there is none (or it does not read)."""
    try:
        found = json.loads((Path(folder) / PROGRESS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def report(progress, state: BatchState, final: bool = False) -> None:
    """Hand the state to ``progress``; at a phase's end ``progress.finish`` too, when it has one."""
    if progress is None:
        return
    if final and hasattr(progress, "finish"):
        progress.finish(state)
    else:
        progress(state)
