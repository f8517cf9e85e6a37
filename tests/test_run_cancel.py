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
    at = AppTest.from_file("../app.py", default_timeout=300)
    for name, value in {
        "prompt": IOI_TASK.clean,
        "corrupted": IOI_TASK.corrupted,
        "answer": " Mary",
        "foil": " John",
        "method": "eap",
        "budgets": "5,10,20,40",
    }.items():
        at.query_params[name] = value
    at.run()
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
