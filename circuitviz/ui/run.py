"""Starting a run and waiting for it: the model's load, the estimate, the progress, the outcome.

A discovery runs in a background thread while the page's script draws its progress ten times
a second, so the bar moves through every phase (clean and corrupted runs, scoring,
faithfulness) even when the engine reports nothing for a while, and the time left is computed
from the estimate and from how fast the run is actually going, never shown growing. A run keeps
going when the page reruns (a widget touched meanwhile) or is reloaded: runs in flight are kept
per process by request key, so any session that asks for the same request attaches to it. The
model loads the same way, with its elapsed time and what to expect on screen. Finished runs
calibrate the estimates (``calibration.py``).
"""

from __future__ import annotations

import atexit
import dataclasses
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import streamlit as st

from ..core.phases import ONE_OFF_REPORTS, Phase, phase_of_report, phase_seconds, report_words
from ..core.text import markdown_sentence, markdown_text
from ..entry import calibration
from ..entry.calibration import part_shares, phase_shares
from ..entry.cpu_share import threads_for_run
from ..models import EMBEDDED_MODEL, ModelLoadError
from . import background, kept_results, loaders, startup

POLL_S = 0.1  # how often a waiting page redraws the bar (and notices the run has ended)


# ----- the model ----------------------------------------------------------------------------------
def load_model_or_stop(model_id: str, device: str):
    """The shared model; while it loads, how long it has taken and what to expect. A load error
    is one sentence and stops the page."""
    future = loaders.model_future(model_id, device)
    startup.mark_once("the page asks for the model")
    if not future.done():
        last = calibration.last_load(model_id)
        expect = (
            f"about {last:.0f} s, as last time"
            if last is not None
            else "seconds once its converted weights are cached; a first start converts them, once: "
            "half a minute to minutes, by how busy the machine is"
        )
        line, shown = st.empty(), markdown_text(model_id)  # a typed folder
        start = loaders.load_started(future)  # opened mid-load: the load's seconds, not the page's
        while not future.done():
            line.info(f"Loading the model {shown}: {time.perf_counter() - start:.0f} s ({expect})…")
            time.sleep(POLL_S)
        line.empty()
    error = future.exception()
    if error is None:
        startup.mark_once("the page has the model")
        return future.result()

    if isinstance(error, (ModelLoadError, ValueError, OSError)):
        # may name the user's model, folder or settings; the sidebar's list is the way on
        way_on = f" Or pick another model in the sidebar: {EMBEDDED_MODEL} is built in and loads offline."
        st.error(markdown_sentence(str(error) + (way_on if model_id != EMBEDDED_MODEL else "")))
        st.stop()
    raise error


# ----- progress -----------------------------------------------------------------------------------
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
    part at 100 % may be followed by others (Edge Pruning's bar sat at 97 % for 18 s that way).
    The overall fraction never goes back, and the time left never grows: it blends the estimate
    with the speed observed so far, and is shown as the smallest value shown yet.
    """

    def __init__(
        self,
        expected: dict[str, float],
        n_budgets: int = 0,
        clock: Callable[[], float] = time.perf_counter,
        parts: dict[str, float] | None = None,
    ):
        self.expected = {phase: max(float(expected.get(phase, 0.0)), 0.0) for phase in Phase}
        self.total = sum(self.expected.values()) or 1.0
        self.n_budgets = n_budgets
        self.clock = clock
        self.parts = dict(parts or {})
        self.start = clock()
        self.phase = Phase.PREPARE
        self.phase_start = self.start
        self.reported = 0.0
        self.part = ""
        self.parts_seen: list[str] = []
        self.fraction = 0.0
        self.left: float | None = None

    @property
    def work_name(self) -> str:
        return report_words(self.part)

    def report(self, reported: str, fraction: float) -> None:
        """An engine report (a ``phases.Report`` or another name) and the fraction done of it."""
        phase = phase_of_report(reported)
        if phase.step > self.phase.step:
            self.phase, self.phase_start, self.reported = phase, self.clock(), 0.0
        if phase != self.phase:
            return
        name = str(getattr(reported, "value", reported))
        if phase is Phase.WORK and name != self.part:
            self.part = name
            if name not in self.parts_seen:
                self.parts_seen.append(name)
        self.reported = min(max(float(fraction), 0.0), 1.0)

    def _reported_inside(self) -> float:
        """The phase's fraction by the engine's reports (0 when they cannot say it)."""
        if self.phase is not Phase.WORK:
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
        before = sum(self.expected[p] for p in Phase if p.step < self.phase.step)
        self.fraction = max(self.fraction, min((before + inside * expected) / self.total, 0.99))
        elapsed = now - self.start
        planned = self.total - elapsed
        observed = elapsed * (1 - self.fraction) / self.fraction if self.fraction > 0.05 else planned
        blended = max(self.fraction * observed + (1 - self.fraction) * planned, 0.0)
        self.left = blended if self.left is None else min(self.left, blended)
        return self.fraction, self.text(elapsed)

    def phase_name(self) -> str:
        if self.phase is Phase.PREPARE:
            return "clean and corrupted runs"
        if self.phase is Phase.EVALUATE:
            return (
                f"measuring faithfulness at {self.n_budgets} budgets"
                if self.n_budgets
                else "measuring faithfulness"
            )
        if not self.part:
            return "the method's own work"
        if self.reported <= 0:  # begun, nothing done reported yet (a CPU's IG steps run as one chunk)
            return self.work_name
        return f"{self.work_name} ({100 * self.reported:.0f}%)"

    def text(self, elapsed: float) -> str:
        left = f"about {self.left:.0f} s left" if self.left and self.left >= 1 else "finishing"
        return (
            f"step {self.phase.step} of 3, {self.phase_name()} · {100 * self.fraction:.0f}% in all · "
            f"{elapsed:.0f} s so far, {left}"
        )


def expected_phases(estimate, method: str, n_budgets: int) -> dict[Phase, float]:
    """Expected seconds per phase: this method's last measured split on this device, else the
    split of its forward passes (2 clean/corrupted runs, one patched pass per budget)."""
    shares = phase_shares(estimate.device, method) if estimate is not None else None
    total = estimate.seconds if estimate is not None else 10.0
    if not shares:
        passes = max(estimate.sequences if estimate is not None else 0.0, 3.0 + n_budgets)
        shares = {Phase.PREPARE: 2 / passes, Phase.EVALUATE: n_budgets / passes}
        shares[Phase.WORK] = max(1 - shares[Phase.PREPARE] - shares[Phase.EVALUATE], 0.0)
    return {phase: total * shares.get(phase, 0.0) for phase in Phase}


def work_parts(reports: list[tuple[str, float, float]], start: float) -> dict[str, float]:
    """Seconds of each part of a run's work, from its timed reports ((name, fraction, time)): a
    part lasts from the previous part's last report (``start`` for the first) to its own last
    report. Faithfulness reports are not work, and one-off work (``ONE_OFF_REPORTS``: a first
    run's SVD, whose seconds ``record_run`` leaves out) is no part, only where the next begins."""
    last: dict[str, float] = {}
    for name, _, at in reports:
        if phase_of_report(name) is Phase.WORK:
            name = str(getattr(name, "value", name))
            last.pop(name, None)
            last[name] = at
    parts, previous = {}, start
    for name, at in sorted(last.items(), key=lambda item: item[1]):
        if name not in ONE_OFF_REPORTS:
            parts[name] = max(at - previous, 0.0)
        previous = at
    return parts


def record_run(estimate, method: str, result, seconds: float, parts: dict[str, float], share=None) -> None:
    """Calibrate the next estimates with a finished run: its work, wall time, phases, the parts
    of its work (``work_parts``), its own timings (what a sibling variant may find stored) and how
    busy the machine was when it began and over the run (``share``, a ``cpu_share.Share``;
    estimates prefer quiet runs and scale the others to a quiet machine)."""
    if estimate is None or (share is not None and not share.own_figures):
        return  # (a run with several threads that another run of this process overlapped)

    # a cache this run filled for the model's next runs (ACC++'s SVD) is not their work
    seconds = max(seconds - calibration.one_off_seconds(result), 1e-3)
    phases = {phase.value: value for phase, value in phase_seconds(result.timings, seconds).items()}
    calibration.record(
        estimate.device,
        method,
        estimate.flops_done(method, result),
        seconds,
        phases,
        parts,
        result.timings,
        estimate.model,
        **calibration.share_figures(share),
    )


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
    started: float = field(default_factory=time.perf_counter)
    cancelled: float | None = None  # seconds it had run when Cancel was pressed (in any session)
    storing: bool = False  # its result is computed and going into the store: too late to cancel
    kept_work: bool = False  # it stored work on the way (Best-of-N's pair scores): a rerun reads it

    @property
    def done(self) -> bool:
        return self.thread is not None and not self.thread.is_alive()


# the runs of this process by request key, shared by every session: a page reloaded (a new
# session) while its run goes on finds the run by its request and shows its progress, then its
# result
_JOBS: dict[str, Job] = {}
_JOBS_GUARD = threading.Lock()
KEEP_FINISHED = 16  # finished runs kept (their outcome is in the store; these only bound memory)
# requests whose last run here was cancelled: {key: seconds it had run}, for the sentence a page
# shows afterwards (the job itself leaves the registry); a new run of the request forgets it, and
# past KEEP_CANCELLED the oldest is forgotten (a server cancelling all day kept every one)
_CANCELLED: dict[str, tuple[float, bool]] = {}  # {key: (seconds, whether it kept work on the way)}
KEEP_CANCELLED = 64
# cancelled runs whose thread has not ended yet (it ends at the method's next progress report): a
# new run waits for them (``wait_for_stopping``), so a Run pressed just after Cancel never shares
# the cores with the run it replaces; bounded by the threads alive, the ended ones pruned on reading
_STOPPING: list[Job] = []


class RunCancelled(BaseException):
    """Raised in a run's thread at its next progress report once Cancel was pressed. A
    BaseException, like KeyboardInterrupt: a method's own ``except Exception`` fallback must not
    take it for a failure and go on."""


def _jobs() -> dict[str, Job]:
    return _JOBS


def _register(job: Job) -> Job:
    """Register ``job`` as its request's run, unless a run of the request is under way already
    (another session's Run, pressed while this one waited): that one is returned instead."""
    with _JOBS_GUARD:
        under_way = _JOBS.get(job.key)
        if under_way is not None and not under_way.done:
            return under_way
        _JOBS[job.key] = job
        _CANCELLED.pop(job.key, None)
        finished = [key for key, kept in _JOBS.items() if kept.done]
        for key in finished[: max(len(finished) - KEEP_FINISHED, 0)]:
            del _JOBS[key]
    return job


def running(key: str | None) -> bool:
    """Whether a run of this request is under way in this process (started by any session)."""
    job = _JOBS.get(key) if key else None
    return job is not None and not job.done


def failed(key: str | None) -> BaseException | None:
    """The error this request's last run in this process ended in (None: never run here, under
    way, or finished with a result): a page that leaves the method out can say why afterwards."""
    job = _JOBS.get(key) if key else None
    if job is None or not job.done or isinstance(job.error, RunCancelled):
        return None
    return job.error


def cancel(key: str) -> None:
    """Cancel this request's run for every session watching it: its thread stops at its next
    progress report, stores nothing, and the job leaves the registry (a new Run starts afresh)."""
    with _JOBS_GUARD:
        job = _JOBS.get(key)
        if job is None or job.done or job.storing:  # the result is there: the page shows it
            return
        job.cancelled = time.perf_counter() - job.started
        _CANCELLED.pop(key, None)  # the newest last: the oldest is forgotten first
        _CANCELLED[key] = (job.cancelled, job.kept_work)
        while len(_CANCELLED) > KEEP_CANCELLED:
            del _CANCELLED[next(iter(_CANCELLED))]
        del _JOBS[key]
        _STOPPING.append(job)


def stopping() -> list[Job]:
    """The cancelled runs whose thread is still computing (until the method's next progress
    report), oldest first."""
    with _JOBS_GUARD:
        _STOPPING[:] = [job for job in _STOPPING if not job.done]
        return list(_STOPPING)


# how long the process waits at its exit for the runs it cancels there to stop (each stops at its
# next progress report, within about a second on a CPU)
STOP_AT_EXIT_S = 10.0


def stop_runs_at_exit(wait: float = STOP_AT_EXIT_S) -> None:
    """At the process's exit (the server stopped): cancel every run under way and wait, up to
    ``wait`` s in all, for every run's thread to end. A run's thread is a daemon, and one still
    inside a torch pass when the interpreter finalizes aborted the process ("terminate called
    without an active exception", exit status 134), a cancelled run's as any other."""
    with _JOBS_GUARD:
        keys = [key for key, job in _JOBS.items() if not job.done]
    for key in keys:
        cancel(key)  # a run storing its result is left to finish
    with _JOBS_GUARD:
        threads = [job.thread for job in [*_JOBS.values(), *_STOPPING] if job.thread is not None]
    deadline = time.perf_counter() + wait
    for thread in threads:
        if thread.is_alive():
            thread.join(max(deadline - time.perf_counter(), 0.0))


atexit.register(stop_runs_at_exit)


def stopping_words(jobs: list[Job], waited: float) -> str:
    """The line a new run shows while it waits for cancelled runs to stop."""
    names = ", ".join(dict.fromkeys(job.method for job in jobs))
    return (
        f"Waiting for the cancelled run of {names} to stop ({waited:.0f} s so far): it stops at its next "
        "progress report, then this run starts."
    )


def wait_for_stopping(sleep: Callable[[float], None] = time.sleep) -> None:
    """Wait, with a line on screen, until no cancelled run's thread is computing any more: a Run
    pressed just after Cancel starts once the run it replaces has stopped, not beside it."""
    jobs = stopping()
    if not jobs:
        return
    line, start = st.empty(), time.perf_counter()
    while jobs:
        line.info(stopping_words(jobs, time.perf_counter() - start))
        sleep(POLL_S)
        jobs = stopping()
    line.empty()


def cancelled_sentence(key: str | None) -> str | None:
    """'Cancelled after N s; nothing was stored.' when this request's last run here was
    cancelled (and not run again since), else None."""
    found = _CANCELLED.get(key) if key else None
    return None if found is None else cancelled_words(found[0], kept=found[1])


def cancelled_words(seconds: float, method: str | None = None, kept: bool = False) -> str:
    """The sentence a cancelled run leaves; ``method`` named first where a page runs several
    (Compare: two cancelled runs read the same sentence twice, neither saying whose). ``kept``:
    the run had stored work on the way (Best-of-N's pair scores, with 'cache scores'), so
    'nothing was stored' would not be true."""
    stored = (
        "its result was not stored; the work it had stored on the way stays for the next run."
        if kept
        else "nothing was stored."
    )
    said = f"Cancelled after {seconds:.0f} s; {stored}"
    return f"{method}: {said}" if method else said


class _UnlessCancelled:
    """What the result store asks of a run's job (``GuardedStore``): a result whose run was
    cancelled after its last progress report is not kept (the page says nothing was stored);
    everything else passes. Once a result is going in, Cancel comes too late and leaves the run
    be (``Job.storing``), so 'nothing was stored' is never said of a stored result. Work kept on
    the way (Best-of-N's pair scores): the job says so once cancelled, and none is kept after
    Cancel."""

    def __init__(self, job: Job):
        self._job = job

    def before_work_kept(self, key: str) -> None:
        with _JOBS_GUARD:  # against ``cancel``: the sentence it leaves says whether work was kept
            if self._job.cancelled is not None:
                raise RunCancelled(key)
            self._job.kept_work = True

    def before_result_kept(self, key: str) -> None:
        with _JOBS_GUARD:  # against ``cancel``: cancelled, or storing, never both
            if self._job.cancelled is not None:
                raise RunCancelled(key)
            self._job.storing = True


def _start(model, request) -> Job:
    estimate = request.estimate

    parts = part_shares(estimate.device, request.method) if estimate is not None else None
    progress = RunProgress(
        expected_phases(estimate, request.method, len(request.budgets)),
        n_budgets=len(request.budgets),
        parts=parts,
    )
    job = Job(request.key, request.method, progress)
    lock = threading.Lock()
    store = loaders.get_store()  # here, in the page's thread: the worker cannot reach streamlit's caches

    def report(phase: str, fraction: float) -> None:
        if job.cancelled is not None:
            raise RunCancelled(request.key)
        with lock:
            job.reports.append((phase, fraction, time.perf_counter()))
            progress.report(phase, fraction)

    def work() -> None:
        start = time.perf_counter()
        share = found = None
        try:
            found = estimate and estimate.as_run_finds(model, request.task)  # kept prompt runs, as now
            # on a CPU other work keeps busy, the cores it leaves free (entry/cpu_share.py)
            with threads_for_run(estimate.device if estimate is not None else "cpu") as share:
                from ..services.store import GuardedStore  # here: keeps torch out of the first paint

                kept = GuardedStore(store, _UnlessCancelled(job)) if store is not None else None
                job.result, job.cached = loaders.discover(model, request, progress=report, store=kept)
        except BaseException as error:  # shown by the page, in one sentence when it is the user's
            job.error = error
        job.seconds = time.perf_counter() - start
        if job.result is not None and not job.cached and job.cancelled is None:
            work_start = start + float(job.result.timings.get("clean_corrupted_s", 0.0))
            parts = work_parts(job.reports, work_start)
            record_run(found, request.method, job.result, job.seconds, parts, share)

    job.thread = threading.Thread(target=work, name=f"run {request.method}", daemon=True)
    registered = _register(job)
    if registered is job:
        job.thread.start()
        background.watch(job.thread)  # still going after its stop at exit: said, and the exit not aborted
    return registered


# a run goes on in its thread whatever the page does: Streamlit's Stop (and leaving the page) ends
# the script, not the run, and froze the progress line ("6 s so far, about 42 s left" 90 s later,
# the run long done: Edge Pruning on Compare, an audit)
RUNS_ON = (
    "The run goes on in the background if you stop or leave the page: come back, or rerun the page, "
    "to see its progress and then its result."
)

CANCEL_HELP = (
    "Stops this run at its next progress report and stores nothing. It cancels the run for everyone "
    "watching it: other tabs or sessions showing the same request."
)


def run_with_status(model, request, named: bool = False):
    """Run a discovery ``request`` (or attach to the one under way) with its progress on screen;
    the result, or None after its error sentence is shown, open, below the status. ``named``: a
    cancelled run's sentence names its method (a page running several)."""
    # here, not at the top: keeps torch out of the first paint
    from ..core.graph import GraphError
    from ..core.tasks import TaskError

    method, shown = request.method, markdown_text(request.model_id)  # a typed local folder's name
    job = _jobs().get(request.key)
    if job is None or job.done:  # a finished run's result is in the store: a new start reads it
        wait_for_stopping()  # a run cancelled just before (this request's or another's) stops first
        job = _start(model, request)
    holder = st.empty()  # emptied when the run is cancelled: the page keeps one sentence
    with holder.container(), st.status(f"Running {method} on {shown}…", expanded=True) as status:
        st.caption(RUNS_ON)  # stays on screen where Stop froze the progress line below it
        bar = st.progress(0.0, text="starting")
        st.button(
            "Cancel",
            key=f"run.cancel.{request.key}",
            on_click=cancel,
            args=(request.key,),
            help=CANCEL_HELP,
        )
        while not job.done and job.cancelled is None:
            fraction, text = job.progress.update()
            bar.progress(fraction, text=text)
            time.sleep(POLL_S)
        if job.cancelled is not None:
            status.update(label=f"{method} cancelled", state="error", expanded=False)
        elif job.error is None:
            bar.progress(1.0, text="done")
            source = (
                "from the result store (computed before)"
                if job.cached
                else f"computed in {job.seconds:.1f} s"
            )
            status.update(label=f"{method} on {shown}: {source}", state="complete", expanded=False)
        else:
            status.update(label=f"{method} could not run", state="error", expanded=False)
    if job.cancelled is not None:  # here or in another session watching the same request
        holder.empty()
        st.info(cancelled_words(job.cancelled, method if named else None, job.kept_work))
        return None
    if isinstance(job.error, (TaskError, GraphError, ValueError)):
        said = getattr(job.error, "said_as", "The run could not start")  # NonFiniteScoresError: it ran
        st.error(markdown_sentence(f"{said}: {job.error}"))  # may quote the user's text
        return None
    if job.error is not None:
        raise job.error
    kept_results.keep_result(job.result, request.key)
    return job.result


# ----- before the run -------------------------------------------------------------------------------
def request_line(model, model_id: str, task, method: str, settings, budgets):
    """The page's one request, priced, with its estimate shown above Run; (request, None), or
    (None, the sentence) when it is refused (over a limit, or settings that do not make a config).
    The estimate leaves out the work an earlier run stored that this one reads (the method's own
    ``stored_work``: iBoN after BoN finds its pair scores)."""
    # here, not at the top: keeps torch out of the first paint
    from ..entry.limits import priced_with_stored_work
    from ..methods import config_to_dict

    try:
        request = loaders.request_for(model, model_id, task, method, settings, budgets)
    except ValueError as error:
        st.error(markdown_sentence(str(error)))  # may name the user's model, folder or settings
        return None, str(error)
    if request.refusal is not None:
        st.error(request.refusal)
        return None, request.refusal
    estimate = priced_with_stored_work(
        request.estimate, model, model_id, task, method, config_to_dict(request.config),
        len(request.budgets), loaders.get_store(),
    )  # fmt: skip
    request = dataclasses.replace(request, estimate=estimate)
    st.caption(request.estimate.summary())
    return request, None


def run_button(label: str, ready: bool, key: str | None = None) -> bool:
    """The primary button, disabled (saying why) while an input above has a problem."""
    if ready:
        startup.mark_once(f"{label} drawn enabled")
    return st.button(
        label,
        type="primary",
        disabled=not ready,
        key=key,
        help=None if ready else "fix the inputs marked above first",
    )
