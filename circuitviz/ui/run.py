"""Starting a run and waiting for it: the model's load, the estimate, the progress, the outcome.

A discovery runs in a background thread while the page's script draws its progress every
quarter second, so the bar moves through every phase (clean and corrupted runs, scoring,
faithfulness) even when the engine reports nothing for a while, and the time left is computed
from the estimate and from how fast the run is actually going, never shown growing. A run keeps
going when the page reruns (a widget touched meanwhile); the page attaches to it again. The
model loads the same way, with its elapsed time and what to expect on screen. Finished runs
calibrate the estimates (``calibration.py``).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import streamlit as st

from . import loaders, state

POLL_S = 0.1  # how often a waiting page redraws the bar (and notices the run has ended)


# ----- the model ----------------------------------------------------------------------------------
def load_model_or_stop(model_id: str, device: str):
    """The shared model; while it loads, how long it has taken and what to expect. A load error
    is one sentence and stops the page."""
    from .. import calibration

    future = loaders.model_future(model_id, device)
    if not future.done():
        last = calibration.last_load(model_id)
        expect = (
            f"about {last:.0f} s, as last time"
            if last is not None
            else "seconds when its converted weights are cached, about a minute on a first start that converts them"
        )
        line = st.empty()
        start = time.perf_counter()
        while not future.done():
            line.info(f"Loading the model {model_id}: {time.perf_counter() - start:.0f} s ({expect})…")
            time.sleep(POLL_S)
        line.empty()
    error = future.exception()
    if error is None:
        return future.result()
    from ..models import ModelLoadError

    if isinstance(error, (ModelLoadError, ValueError, OSError)):
        st.error(str(error))
        st.stop()
    raise error


# ----- progress -----------------------------------------------------------------------------------
PHASE_ORDER = ("prepare", "work", "evaluate")
WORK_NAMES = {
    "score": "scoring edges",
    "paraphrases": "checking paraphrases",
    "observe": "observing activations",
    "regress": "fitting the regression",
    "knockout": "knockout check",
    "trace": "tracing attention decisions",
}


def phase_of(reported: str) -> str:
    """The bucket an engine report belongs to: faithfulness, or the method's own work."""
    return "evaluate" if reported == "evaluate" else "work"


def time_fraction(spent: float, expected: float) -> float:
    """How far a phase is by the clock: linear up to 80 % of the time expected, then ever slower
    towards 99 % (a phase that takes longer than expected still moves, and never looks done)."""
    if expected <= 0:
        return 0.0
    ratio = spent / expected
    if ratio <= 0.8:
        return ratio
    return 0.8 + 0.19 * (1 - math.exp(-(ratio - 0.8) / 0.6))


class RunProgress:
    """Overall progress and time left of a run, from its expected phase durations, the engine's
    reports and the clock.

    A run has three phases (clean and corrupted runs, the method's own work, faithfulness); the
    method's work may come in parts that report on their own (Edge Pruning: the warm start's
    scoring, then learning the masks). Inside a phase the fraction is the clock's
    (``time_fraction``) or, where it says more, the engine's reports: the faithfulness phase's,
    and the work's when this method's last run on this machine said how its work splits into
    parts (``parts``: {part: share of the work}). Before that the work follows the clock: a first
    part at 100 % may be followed by others (Edge Pruning's bar sat at 97 % for 18 s that way). The overall fraction never goes back, and the time left
    never grows: it blends the estimate with the speed observed so far, and is shown as the
    smallest value shown yet.
    """

    def __init__(
        self,
        expected: dict[str, float],
        n_budgets: int = 0,
        clock: Callable[[], float] = time.perf_counter,
        parts: dict[str, float] | None = None,
    ):
        self.expected = {phase: max(float(expected.get(phase, 0.0)), 0.0) for phase in PHASE_ORDER}
        self.total = sum(self.expected.values()) or 1.0
        self.n_budgets = n_budgets
        self.clock = clock
        self.parts = dict(parts or {})
        self.start = clock()
        self.phase = "prepare"
        self.phase_start = self.start
        self.reported = 0.0
        self.part = ""
        self.parts_seen: list[str] = []
        self.fraction = 0.0
        self.left: float | None = None

    @property
    def work_name(self) -> str:
        return WORK_NAMES.get(self.part, self.part.replace("_", " "))

    def report(self, reported: str, fraction: float) -> None:
        """An engine report: phase name and fraction done of it."""
        phase = phase_of(reported)
        if PHASE_ORDER.index(phase) > PHASE_ORDER.index(self.phase):
            self.phase, self.phase_start, self.reported = phase, self.clock(), 0.0
        if phase != self.phase:
            return
        if phase == "work" and reported != self.part:
            self.part = reported
            if reported not in self.parts_seen:
                self.parts_seen.append(reported)
            self.reported = 0.0
        self.reported = min(max(float(fraction), 0.0), 1.0)

    def _reported_inside(self) -> float:
        """The phase's fraction by the engine's reports (0 when they cannot say it)."""
        if self.phase != "work":
            return self.reported
        if self.parts and self.part in self.parts:
            done = sum(self.parts.get(name, 0.0) for name in self.parts_seen[:-1])
            return min(done + self.parts[self.part] * self.reported, 0.99)
        return 0.0  # parts of unknown weight (a first run here): a part at 100 % may not be the last

    def update(self) -> tuple[float, str]:
        """(overall fraction, the line to show) now."""
        now = self.clock()
        expected = self.expected[self.phase]
        inside = max(self._reported_inside(), time_fraction(now - self.phase_start, expected))
        before = sum(self.expected[p] for p in PHASE_ORDER[: PHASE_ORDER.index(self.phase)])
        self.fraction = max(self.fraction, min((before + inside * expected) / self.total, 0.99))
        elapsed = now - self.start
        planned = self.total - elapsed
        observed = elapsed * (1 - self.fraction) / self.fraction if self.fraction > 0.05 else planned
        blended = max(self.fraction * observed + (1 - self.fraction) * planned, 0.0)
        self.left = blended if self.left is None else min(self.left, blended)
        return self.fraction, self.text(elapsed)

    def phase_name(self) -> str:
        if self.phase == "prepare":
            return "clean and corrupted runs"
        if self.phase == "evaluate":
            return (
                f"measuring faithfulness at {self.n_budgets} budgets"
                if self.n_budgets
                else "measuring faithfulness"
            )
        if not self.part:
            return "the method's own work"
        return f"{self.work_name} ({100 * self.reported:.0f}%)"

    def text(self, elapsed: float) -> str:
        step = PHASE_ORDER.index(self.phase) + 1
        left = f"about {self.left:.0f} s left" if self.left and self.left >= 1 else "finishing"
        return (
            f"step {step} of 3, {self.phase_name()} · {100 * self.fraction:.0f}% in all · "
            f"{elapsed:.0f} s so far, {left}"
        )


def expected_phases(estimate, method: str, n_budgets: int) -> dict[str, float]:
    """Expected seconds per phase: this method's last measured split on this device, else the
    split of its forward passes (2 clean/corrupted runs, one patched pass per budget)."""
    from ..calibration import phase_shares

    shares = phase_shares(estimate.device, method) if estimate is not None else None
    total = estimate.seconds if estimate is not None else 10.0
    if not shares:
        passes = max(estimate.sequences if estimate is not None else 0.0, 3.0 + n_budgets)
        shares = {"prepare": 2 / passes, "evaluate": n_budgets / passes}
        shares["work"] = max(1 - shares["prepare"] - shares["evaluate"], 0.0)
    return {phase: total * shares.get(phase, 0.0) for phase in PHASE_ORDER}


def work_parts(reports: list[tuple[str, float, float]], start: float) -> dict[str, float]:
    """Seconds of each part of a run's work, from its timed reports ((name, fraction, time)): a
    part lasts from the previous part's last report (the run's start for the first) to its own
    last report. Faithfulness reports are not work."""
    last: dict[str, float] = {}
    for name, _, at in reports:
        if phase_of(name) == "work":
            last.pop(name, None)
            last[name] = at
    parts, previous = {}, start
    for name, at in sorted(last.items(), key=lambda item: item[1]):
        parts[name] = max(at - previous, 0.0)
        previous = at
    return parts


def timing_phases(timings: dict[str, float], seconds: float) -> dict[str, float]:
    """A result's timings as the three phases (whatever was not timed counts as the work)."""
    prepare = float(timings.get("clean_corrupted_s", 0.0))
    evaluate = float(timings.get("evaluation_s", 0.0))
    return {"prepare": prepare, "evaluate": evaluate, "work": max(seconds - prepare - evaluate, 0.0)}


def record_run(estimate, method: str, result, seconds: float, parts: dict[str, float]) -> None:
    """Calibrate the next estimates with a finished run: its work, wall time, phases and the
    parts of its work (``work_parts``)."""
    if estimate is None:
        return
    from .. import calibration

    phases = timing_phases(result.timings, seconds)
    calibration.record(estimate.device, method, estimate.flops, seconds, phases, parts, result.timings)


# ----- runs in the background ----------------------------------------------------------------------
@dataclass
class Job:
    """One discovery running in a background thread; its reports and outcome."""

    key: str
    method: str
    progress: RunProgress
    thread: threading.Thread | None = None
    result: object = None
    cached: bool = False
    error: BaseException | None = None
    seconds: float = 0.0
    reports: list[tuple[str, float, float]] = field(default_factory=list)  # (phase, fraction, clock)

    @property
    def done(self) -> bool:
        return self.thread is not None and not self.thread.is_alive()


# the runs of this process by request key, shared by every session: a page reloaded (a new
# session) while its run goes on finds the run by its request and shows its progress, then its
# result; finished runs stay a while so a session that arrives late still gets its outcome
_JOBS: dict[str, Job] = {}
_JOBS_GUARD = threading.Lock()
KEEP_FINISHED = 16  # finished runs kept (their outcome is in the store; these only bound memory)


def _jobs() -> dict[str, Job]:
    return _JOBS


def _register(job: Job) -> None:
    with _JOBS_GUARD:
        _JOBS[job.key] = job
        finished = [key for key, kept in _JOBS.items() if kept.done]
        for key in finished[: max(len(finished) - KEEP_FINISHED, 0)]:
            del _JOBS[key]


def running(key: str | None) -> bool:
    """Whether a run of this request is under way in this process (started by any session)."""
    job = _JOBS.get(key) if key else None
    return job is not None and not job.done


def _start(key, model, model_id, task, method, config, budgets, estimate) -> Job:
    from ..calibration import part_shares

    parts = part_shares(estimate.device, method) if estimate is not None else None
    progress = RunProgress(
        expected_phases(estimate, method, len(budgets)), n_budgets=len(budgets), parts=parts
    )
    job = Job(key, method, progress)
    lock = threading.Lock()
    store = loaders.get_store()  # here, in the page's thread: the worker cannot reach streamlit's caches

    def report(phase: str, fraction: float) -> None:
        with lock:
            job.reports.append((phase, fraction, time.perf_counter()))
            progress.report(phase, fraction)

    def work() -> None:
        start = time.perf_counter()
        try:
            job.result, job.cached = loaders.discover(
                model, model_id, task, method, config, budgets, progress=report, store=store
            )
        except BaseException as error:  # shown by the page, in one sentence when it is the user's
            job.error = error
        job.seconds = time.perf_counter() - start
        if job.result is not None and not job.cached:
            work_start = start + float(job.result.timings.get("clean_corrupted_s", 0.0))
            record_run(estimate, method, job.result, job.seconds, work_parts(job.reports, work_start))

    job.thread = threading.Thread(target=work, name=f"run {method}", daemon=True)
    _register(job)
    job.thread.start()
    return job


def run_with_status(model, model_id: str, task, method: str, config: dict, budgets, estimate=None):
    """Run a discovery (or attach to the one under way) with its progress on screen; the result,
    or None after its error sentence is shown, open, below the status."""
    from ..graph import GraphError
    from ..tasks import TaskError

    key = loaders.request_key(model, model_id, task, method, config, budgets)
    job = _jobs().get(key)
    if job is None or job.done:  # a finished run's result is in the store: a new start reads it
        job = _start(key, model, model_id, task, method, config, budgets, estimate)
    with st.status(f"Running {method} on {model_id}…", expanded=True) as status:
        bar = st.progress(0.0, text="starting")
        while not job.done:
            fraction, text = job.progress.update()
            bar.progress(fraction, text=text)
            time.sleep(POLL_S)
        if job.error is None:
            bar.progress(1.0, text="done")
            source = (
                "from the result store (computed before)"
                if job.cached
                else f"computed in {job.seconds:.1f} s"
            )
            status.update(label=f"{method} on {model_id}: {source}", state="complete", expanded=False)
        else:
            status.update(label=f"{method} could not run", state="error", expanded=False)
    if isinstance(job.error, (TaskError, GraphError, ValueError)):
        st.error(f"The run could not start: {job.error}")
        return None
    if job.error is not None:
        raise job.error
    state.keep_result(job.result)
    return job.result


# ----- before the run -------------------------------------------------------------------------------
def estimate_line(
    model, task, method: str, settings: dict, budgets, adjust=None
) -> tuple[object | None, str | None]:
    """The estimate shown above Run (None, and the limit's sentence, when the run is refused);
    ``adjust``: a page's correction of it (Paraphrases: the work an earlier run stored)."""
    from ..limits import check_run, estimate_request

    try:
        estimate = estimate_request(model, task, method, settings, n_budgets=len(budgets))
        if adjust is not None:
            estimate = adjust(estimate)
        check_run(estimate)
    except ValueError as error:
        st.error(str(error))
        return None, str(error)
    st.caption(estimate.summary())
    return estimate, None


def run_button(label: str, ready: bool, key: str | None = None) -> bool:
    """The primary button, disabled (saying why) while an input above has a problem."""
    return st.button(
        label,
        type="primary",
        disabled=not ready,
        key=key,
        help=None if ready else "fix the inputs marked above first",
    )
