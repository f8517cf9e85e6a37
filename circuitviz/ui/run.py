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

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import streamlit as st

from ..phases import Phase, phase_of_report, phase_seconds, report_words
from . import loaders, state

POLL_S = 0.25


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
class RunProgress:
    """Overall progress and time left of a run, from its expected phase durations, the engine's
    reports and the clock.

    The fraction inside a phase is the engine's last report or, between reports, the time spent
    over the time expected (capped below 1, so a phase never looks finished before it is). The
    overall fraction never goes back, and the time left never grows: it blends the estimate with
    the speed observed so far, and is shown as the smallest value shown yet.
    """

    def __init__(
        self, expected: dict[str, float], n_budgets: int = 0, clock: Callable[[], float] = time.perf_counter
    ):
        self.expected = {phase: max(float(expected.get(phase, 0.0)), 0.0) for phase in Phase}
        self.total = sum(self.expected.values()) or 1.0
        self.n_budgets = n_budgets
        self.clock = clock
        self.start = clock()
        self.phase = Phase.PREPARE
        self.phase_start = self.start
        self.reported = 0.0
        self.work_name = ""
        self.fraction = 0.0
        self.left: float | None = None

    def report(self, reported: str, fraction: float) -> None:
        """An engine report (a ``phases.Report`` or another name) and the fraction done of it."""
        phase = phase_of_report(reported)
        if phase is Phase.WORK:
            self.work_name = report_words(reported)
        if phase.step > self.phase.step:
            self.phase, self.phase_start, self.reported = phase, self.clock(), 0.0
        if phase == self.phase:
            self.reported = min(max(float(fraction), 0.0), 1.0)

    def update(self) -> tuple[float, str]:
        """(overall fraction, the line to show) now."""
        now = self.clock()
        expected = self.expected[self.phase]
        by_time = min((now - self.phase_start) / expected, 0.95) if expected > 0 else 0.0
        inside = max(self.reported, by_time)
        before = sum(self.expected[p] for p in Phase if p.step < self.phase.step)
        self.fraction = max(self.fraction, min((before + inside * expected) / self.total, 0.99))
        elapsed = now - self.start
        planned = self.total - elapsed
        observed = elapsed * (1 - self.fraction) / self.fraction if self.fraction > 0.05 else planned
        blended = max(self.fraction * observed + (1 - self.fraction) * planned, 0.0)
        self.left = blended if self.left is None else min(self.left, blended)
        return self.fraction, self.text(inside, elapsed)

    def phase_name(self) -> str:
        if self.phase is Phase.PREPARE:
            return "clean and corrupted runs"
        if self.phase is Phase.EVALUATE:
            return (
                f"measuring faithfulness at {self.n_budgets} budgets"
                if self.n_budgets
                else "measuring faithfulness"
            )
        return self.work_name or "the method's own work"

    def text(self, inside: float, elapsed: float) -> str:
        step = self.phase.step
        left = f"about {self.left:.0f} s left" if self.left and self.left >= 1 else "finishing"
        return (
            f"step {step} of 3, {self.phase_name()}: {100 * inside:.0f}% · {100 * self.fraction:.0f}% in all · "
            f"{elapsed:.0f} s so far, {left}"
        )


def expected_phases(estimate, method: str, n_budgets: int) -> dict[Phase, float]:
    """Expected seconds per phase: this method's last measured split on this device, else the
    split of its forward passes (2 clean/corrupted runs, one patched pass per budget)."""
    from ..calibration import phase_shares

    shares = phase_shares(estimate.device, method) if estimate is not None else None
    total = estimate.seconds if estimate is not None else 10.0
    if not shares:
        passes = max(estimate.sequences if estimate is not None else 0.0, 3.0 + n_budgets)
        shares = {Phase.PREPARE: 2 / passes, Phase.EVALUATE: n_budgets / passes}
        shares[Phase.WORK] = max(1 - shares[Phase.PREPARE] - shares[Phase.EVALUATE], 0.0)
    return {phase: total * shares.get(phase, 0.0) for phase in Phase}


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
    reports: list[tuple[str, float]] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return self.thread is not None and not self.thread.is_alive()


def _jobs() -> dict[str, Job]:
    return st.session_state.setdefault("run.jobs", {})


def running(key: str) -> bool:
    """Whether a run of this request is under way in this session."""
    job = _jobs().get(key)
    return job is not None and not job.done


def _start(model, request) -> Job:
    estimate = request.estimate
    progress = RunProgress(
        expected_phases(estimate, request.method, len(request.budgets)), n_budgets=len(request.budgets)
    )
    job = Job(request.key, request.method, progress)
    lock = threading.Lock()
    store = loaders.get_store()  # here, in the page's thread: the worker cannot reach streamlit's caches

    def report(phase: str, fraction: float) -> None:
        with lock:
            job.reports.append((phase, fraction))
            progress.report(phase, fraction)

    def work() -> None:
        start = time.perf_counter()
        try:
            job.result, job.cached = loaders.discover(model, request, progress=report, store=store)
        except BaseException as error:  # shown by the page, in one sentence when it is the user's
            job.error = error
        job.seconds = time.perf_counter() - start
        if job.result is not None and not job.cached and estimate is not None:
            from .. import calibration

            seconds = phase_seconds(job.result.timings, job.seconds)
            phases = {phase.value: value for phase, value in seconds.items()}
            calibration.record(estimate.device, request.method, estimate.flops, job.seconds, phases)

    job.thread = threading.Thread(target=work, name=f"run {request.method}", daemon=True)
    _jobs()[request.key] = job
    job.thread.start()
    return job


def run_with_status(model, request):
    """Run a discovery ``request`` (or attach to the one under way) with its progress on screen;
    the result, or None after its error sentence is shown, open, below the status."""
    from ..graph import GraphError
    from ..tasks import TaskError

    method, model_id = request.method, request.model_id
    job = _jobs().get(request.key)
    if job is None or (job.done and job.result is None):
        job = _start(model, request)
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
    _jobs().pop(request.key, None)
    if isinstance(job.error, (TaskError, GraphError, ValueError)):
        st.error(f"The run could not start: {job.error}")
        return None
    if job.error is not None:
        raise job.error
    state.keep_result(job.result)
    return job.result


# ----- before the run -------------------------------------------------------------------------------
def request_line(model, model_id: str, task, method: str, settings, budgets):
    """The page's one request, priced, with its estimate shown above Run; (request, None), or
    (None, the sentence) when it is refused (over a limit, or settings that do not make a config)."""
    try:
        request = loaders.request_for(model, model_id, task, method, settings, budgets)
    except ValueError as error:
        st.error(str(error))
        return None, str(error)
    if request.refusal is not None:
        st.error(request.refusal)
        return None, request.refusal
    st.caption(request.estimate.summary())
    return request, None


def run_button(label: str, ready: bool, key: str | None = None) -> bool:
    """The primary button, disabled (saying why) while an input above has a problem."""
    return st.button(
        label,
        type="primary",
        disabled=not ready,
        key=key,
        help=None if ready else "fix the inputs marked above first",
    )
