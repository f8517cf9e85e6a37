"""Cancel for a run in flight: it stops at the run's next progress report, for every session
watching the request, stores nothing, and the page says so in one sentence."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from circuitviz.bench.toy_models import IOI_TASK  # noqa: E402
from circuitviz.ui import loaders, run  # noqa: E402

pytestmark = pytest.mark.usefixtures("tiny_app")  # the tiny model; results under tmp_path (conftest)


def _slow(cancel_at: int | None = None):
    """A discovery that reports progress for a minute (cancelled, here, at report ``cancel_at``:
    another session's Cancel); it fails if the reports never stop it."""
    calls = []

    def discover(model, request, progress=None, store=None):
        calls.append(request.key)
        for step in range(6000):
            if step == cancel_at:
                run.cancel(request.key)
            progress("score", step / 6000)
            time.sleep(0.01)
        raise AssertionError("the run was not cancelled")

    return discover, calls


def test_cancel_stops_the_thread_at_its_next_report_and_frees_the_request(monkeypatch):
    discover, _ = _slow()
    monkeypatch.setattr(loaders, "discover", discover)
    monkeypatch.setattr(loaders, "get_store", lambda: None)
    request = SimpleNamespace(key="cancel-me", method="eap", estimate=None, budgets=[5])
    job = run._start(None, request)
    time.sleep(0.1)
    assert run.running("cancel-me") and run.cancelled_sentence("cancel-me") is None
    run.cancel("cancel-me")
    job.thread.join(timeout=5)
    assert not job.thread.is_alive(), "the run went on after Cancel"
    assert isinstance(job.error, run.RunCancelled) and job.result is None
    assert "cancel-me" not in run._JOBS and not run.running("cancel-me")
    assert run.failed("cancel-me") is None  # a cancelled run is not a failed one
    assert (
        run.cancelled_sentence("cancel-me") == f"Cancelled after {job.cancelled:.0f} s; nothing was stored."
    )


def test_a_page_watching_a_cancelled_run_says_so_and_can_run_again(monkeypatch):
    discover, calls = _slow(cancel_at=3)
    real = loaders.discover
    monkeypatch.setattr(loaders, "discover", discover)
    at = _explore_with_eap()
    next(b for b in at.button if b.label == "Run").click()
    at.run()
    assert not at.exception, at.exception
    said = [info.value for info in at.info if info.value.startswith("Cancelled after ")]
    assert len(said) == 1 and said[0].endswith(" s; nothing was stored."), [i.value for i in at.info]
    assert len(calls) == 1
    at.run()  # a rerun still says it, and runs nothing
    assert any(info.value.startswith("Cancelled after ") for info in at.info)
    assert len(calls) == 1
    assert not next(b for b in at.button if b.label == "Run").disabled
    monkeypatch.setattr(loaders, "discover", real)
    next(b for b in at.button if b.label == "Run").click()
    at.run()  # the form runs again: the result, and no word of the cancelled run
    assert not at.exception, at.exception
    assert not any(info.value.startswith("Cancelled after ") for info in at.info)
    assert run.cancelled_sentence(calls[0]) is None


def test_a_run_cancelled_after_its_last_report_stores_nothing(monkeypatch, tmp_path):
    from circuitviz.services.store import ResultStore

    store = ResultStore(tmp_path / "store")
    started, release = threading.Event(), threading.Event()

    def discover(model, request, progress=None, store=None):
        def compute():
            started.set()
            release.wait(5)  # its work after its last report
            return "a result"

        return store.get_or_compute(request.key, compute)

    monkeypatch.setattr(loaders, "discover", discover)
    monkeypatch.setattr(loaders, "get_store", lambda: store)
    request = SimpleNamespace(key="late-cancel", method="eap", estimate=None, budgets=[5])
    job = run._start(None, request)
    started.wait(5)
    run.cancel("late-cancel")
    release.set()
    job.thread.join(timeout=5)
    assert isinstance(job.error, run.RunCancelled) and job.result is None
    assert store.get("late-cancel") is None


def test_compare_names_each_cancelled_method(monkeypatch):
    """Compare runs several methods: two cancelled runs each read 'Cancelled after N s; nothing
    was stored.', neither saying whose."""
    discover, calls = _slow(cancel_at=2)
    monkeypatch.setattr(loaders, "discover", discover)
    at = AppTest.from_file("../app.py", default_timeout=300)
    link = {"prompt": IOI_TASK.clean, "corrupted": IOI_TASK.corrupted, "answer": " Mary", "foil": " John"}
    for name, value in {**link, "budgets": "5,10,20,40", "compare": "eap,eap-ig"}.items():
        at.query_params[name] = value
    at.run()
    at = at.switch_page("pages/compare.py").run()
    at.button(key="compare.run").click().run()
    assert not at.exception, at.exception
    said = [info.value for info in at.info if "Cancelled after " in info.value]
    assert sorted(line.split(":")[0] for line in said) == ["eap", "eap-ig"], said
    assert len(calls) == 2
    at.run()  # a rerun still names each, and runs nothing
    assert sorted(i.value.split(":")[0] for i in at.info if "Cancelled after " in i.value) == [
        "eap",
        "eap-ig",
    ]
    assert len(calls) == 2


def _explore_with_eap() -> AppTest:
    """Explore on the IOI example with EAP at budgets 5 to 40, run once (nothing pressed)."""
    at = AppTest.from_file("../app.py", default_timeout=300)
    link = {"prompt": IOI_TASK.clean, "corrupted": IOI_TASK.corrupted, "answer": " Mary", "foil": " John"}
    for name, value in {**link, "method": "eap", "budgets": "5,10,20,40"}.items():
        at.query_params[name] = value
    return at.run()


def _until_cancelled(step_s: float = 0.0, log: list | None = None):
    """A discovery that reports until cancelled, ``step_s`` of work between reports (a method's
    long step: its thread computes that long after Cancel); ``log`` gets (key, start, end)."""

    def discover(model, request, progress=None, store=None):
        start = time.perf_counter()
        try:
            for step in range(100000):
                progress("score", step / 100000)
                time.sleep(step_s or 0.01)
        finally:
            if log is not None:
                log.append((request.key, start, time.perf_counter()))
        raise AssertionError("the run was not cancelled")

    return discover


def _request(key: str):
    return SimpleNamespace(key=key, method="eap", estimate=None, budgets=[5])


def test_the_cancelled_requests_kept_are_bounded_oldest_forgotten_first(monkeypatch):
    """A server cancelling runs all day kept every request's sentence ('Cancelled after N s')."""
    monkeypatch.setattr(loaders, "discover", _until_cancelled())
    monkeypatch.setattr(loaders, "get_store", lambda: None)
    monkeypatch.setattr(run, "KEEP_CANCELLED", 3)
    monkeypatch.setattr(run, "_CANCELLED", {})
    jobs = []
    for index in range(5):
        jobs.append(run._start(None, _request(f"bounded-{index}")))
        time.sleep(0.05)
        run.cancel(f"bounded-{index}")
    for job in jobs:
        job.thread.join(timeout=5)
        assert not job.thread.is_alive()
    assert list(run._CANCELLED) == ["bounded-2", "bounded-3", "bounded-4"]
    assert run.cancelled_sentence("bounded-0") is None and run.cancelled_sentence("bounded-4")
    assert run.stopping() == []  # the stopped threads are not kept either


def test_run_pressed_after_cancel_waits_for_the_cancelled_thread_to_stop(monkeypatch):
    """A method between two reports when Cancel is pressed computes on; a Run pressed then (here
    on another request: the form changed) starts once that thread has ended, not beside it, and
    nothing of the cancelled run is shown or stored."""
    log = []
    monkeypatch.setattr(loaders, "discover", _until_cancelled(step_s=1.0, log=log))
    monkeypatch.setattr(loaders, "get_store", lambda: None)
    old = run._start(None, _request("stopping-old"))
    time.sleep(0.2)  # inside its first long step
    run.cancel("stopping-old")
    assert old.thread.is_alive() and run.stopping() == [old]
    said, slept = [], []

    class Line:
        def info(self, text):
            said.append(text)

        def empty(self):
            said.append(None)

    monkeypatch.setattr(run.st, "empty", Line)
    run.wait_for_stopping(sleep=lambda s: (slept.append(s), time.sleep(s)))
    assert not old.thread.is_alive() and run.stopping() == []
    assert said[0].startswith("Waiting for the cancelled run of eap to stop (0 s so far)"), said
    assert said[-1] is None  # the line goes once the run has stopped
    new = run._start(None, _request("stopping-new"))
    time.sleep(0.1)
    run.cancel("stopping-new")
    new.thread.join(timeout=5)
    (_, _, old_end), (_, new_start, _) = log
    assert new_start >= old_end, "the new run started while the cancelled one still computed"
    assert old.result is None and "stopping-old" not in run._JOBS


def test_the_page_waits_for_a_run_cancelled_in_its_long_step_before_running_again(monkeypatch):
    """Explore: Cancel, then Run at once; the new run's thread starts after the old one ended."""
    log, calls = [], []

    def discover(model, request, progress=None, store=None):
        first, start = not calls, time.perf_counter()
        calls.append(request.key)
        try:
            for step in range(100000):
                progress("score", step / 100000)
                if step == 2:  # Cancel (another session's), the first run inside a long step
                    run.cancel(request.key)
                time.sleep(1.5 if first and step >= 2 else 0.01)
        finally:
            log.append((request.key, start, time.perf_counter()))

    monkeypatch.setattr(loaders, "discover", discover)
    at = _explore_with_eap()
    next(b for b in at.button if b.label == "Run").click()
    at.run()
    assert any(i.value.startswith("Cancelled after ") for i in at.info)
    assert run.stopping(), "the cancelled run ended at once: the test needs it still computing"
    next(b for b in at.button if b.label == "Run").click()
    at.run(timeout=30)  # the new run waits for the old thread, then runs (and is cancelled)
    assert not at.exception, at.exception
    assert len(calls) == 2 and any(i.value.startswith("Cancelled after ") for i in at.info)
    for _ in range(50):  # the second run's thread ends just after the page saw it cancelled
        if len(log) == 2:
            break
        time.sleep(0.1)
    (_, _, old_end), (_, new_start, _) = log
    assert new_start >= old_end, "the new run started while the cancelled one still computed"


def test_two_starts_of_one_request_share_one_run(monkeypatch):
    """Two sessions pressing Run on one request while a cancelled run stopped: one run, not two
    threads, the second overwriting the first in the registry and the first running unseen."""
    monkeypatch.setattr(loaders, "discover", _until_cancelled())
    monkeypatch.setattr(loaders, "get_store", lambda: None)
    first = run._start(None, _request("shared"))
    second = run._start(None, _request("shared"))
    assert second is first and run._JOBS["shared"] is first
    run.cancel("shared")
    first.thread.join(timeout=5)


def test_cancel_once_the_result_is_being_stored_leaves_the_run_be(monkeypatch, tmp_path):
    """Cancel between the run's last step and its result going into the store said 'nothing was
    stored' of a stored result; now it comes too late and the page shows the result."""
    from circuitviz.services.store import ResultStore

    store = ResultStore(tmp_path / "store")
    storing, release, stored = threading.Event(), threading.Event(), []

    def put(key, result):
        storing.set()
        release.wait(5)
        stored.append(key)

    monkeypatch.setattr(store, "put", put)

    def discover(model, request, progress=None, store=None):
        return store.get_or_compute(request.key, lambda: computed)

    computed = SimpleNamespace(timings={})
    monkeypatch.setattr(loaders, "discover", discover)
    monkeypatch.setattr(loaders, "get_store", lambda: store)
    job = run._start(None, _request("too-late"))
    storing.wait(5)
    run.cancel("too-late")
    release.set()
    job.thread.join(timeout=5)
    assert job.cancelled is None and job.error is None and job.result is computed
    assert stored == ["too-late"]
    assert run.cancelled_sentence("too-late") is None and run._JOBS["too-late"] is job


def test_a_cancelled_run_that_kept_work_on_the_way_says_so_and_keeps_none_after(monkeypatch, tmp_path):
    """Best-of-N stores each pair's scores as it goes ('cache scores'): cancelled after some,
    'nothing was stored' was not true; and none is stored once Cancel is pressed."""
    from circuitviz.services.store import ResultStore

    store = ResultStore(tmp_path / "store")
    cancelled = threading.Event()

    def discover(model, request, progress=None, store=None):
        store.save_state("pair-0", {"scores": 1}, kind="scores")  # work kept on the way
        run.cancel(request.key)
        cancelled.set()
        store.save_state("pair-1", {"scores": 2}, kind="scores")  # after Cancel: not kept
        raise AssertionError("the run was not stopped")

    monkeypatch.setattr(loaders, "discover", discover)
    monkeypatch.setattr(loaders, "get_store", lambda: store)
    job = run._start(None, _request("kept-work"))
    job.thread.join(timeout=5)
    assert isinstance(job.error, run.RunCancelled)
    assert store.load_state("pair-0", kind="scores") == {"scores": 1}
    assert store.load_state("pair-1", kind="scores") is None
    said = run.cancelled_sentence("kept-work")
    assert said.endswith(
        "its result was not stored; the work it had stored on the way stays for the next run."
    )
    assert "nothing was stored" not in said
    assert run.cancelled_words(3.0).endswith("nothing was stored.")  # a run that kept none


_EXIT_DURING_A_RUN = """
import threading, time, torch
from circuitviz.ui import run

job = run.Job("exit-during-a-run", "eap", run.RunProgress({"work": 1.0}))
x = torch.randn(400, 400, device="cpu")

def work():  # a run's thread: torch work between reports, each report raising once cancelled
    try:
        while True:
            if job.cancelled is not None:
                raise run.RunCancelled(job.key)
            x @ x
    except run.RunCancelled:
        pass

job.thread = threading.Thread(target=work, daemon=True)
run._register(job)
job.thread.start()
time.sleep(0.3)
"""


def test_the_process_exits_cleanly_during_a_run():
    """A run's thread is a daemon: still inside a torch product when the interpreter finalized,
    it aborted the process ("terminate called without an active exception", exit status 134;
    the server stopped during a run, or just after a Cancel). At exit the runs are cancelled and
    their threads waited for (``run.stop_runs_at_exit``)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", _EXIT_DURING_A_RUN], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0 and "terminate called" not in done.stderr, done.stderr[-500:]
