"""The process exits cleanly while a background thread (the model's load, the node captions) is
inside torch: the thread is stopped at exit (``ui.background``), where it aborted the process."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

from circuitviz.ui import background

# torch work that never ends on its own, as a long load or a caption pass on a busy machine
_BUSY = """
import time, torch
x = torch.randn(400, 400, device="cpu")

def busy(*_args, **_kwargs):
    while True:
        x @ x
"""

_EXIT_DURING_A_LOAD = (
    _BUSY
    + """
from circuitviz.ui import loaders
loaders.MODEL_LOADER = busy
future = loaders.model_future("a-model", "cpu")
time.sleep(0.5)
assert not future.done()
"""
)

_EXIT_DURING_CAPTIONS = (
    _BUSY
    + """
from types import SimpleNamespace
from circuitviz.ui import loaders, prefetch
loaders.model_key = lambda model: "a-model"
loaders.get_store = lambda: None
loaders.node_labels = busy
prefetch.node_labels_soon(object(), "a-model", SimpleNamespace(clean="When Mary and John"))
time.sleep(0.5)
"""
)


# a thread whose time goes mostly to finalizers, where Python prints an exception it cannot raise
_EXIT_DURING_FINALIZERS = """
import time
from circuitviz.ui import loaders

class Slow:
    def __del__(self):
        total = 0
        for i in range(20000):
            total += i

def busy(*_args, **_kwargs):
    while True:
        Slow()

loaders.MODEL_LOADER = busy
future = loaders.model_future("a-model", "cpu")
time.sleep(0.5)
"""


# a page's thread (Streamlit names it so) inside torch when the server stops
_EXIT_DURING_A_PAGE = (
    _BUSY
    + """
import threading
from circuitviz.ui import background
threading.Thread(target=busy, name="ScriptRunner.scriptThread", daemon=True).start()
time.sleep(0.5)
"""
)


def test_the_page_thread_is_streamlits():
    """The name the stop looks for is the one Streamlit gives a page's thread."""
    import inspect

    from streamlit.runtime.scriptrunner import script_runner

    assert f'name="{background.SCRIPT_THREAD}"' in inspect.getsource(script_runner)


def _exit_during(script: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env
    )


def test_the_process_exits_cleanly_during_a_model_load():
    """The server stopped (or a script ended) while the model was loading: the load's daemon
    thread, inside a torch operation at the interpreter's finalization, aborted the process
    ("terminate called without an active exception", exit status 134)."""
    done = _exit_during(_EXIT_DURING_A_LOAD)
    assert done.returncode == 0 and "terminate called" not in done.stderr, done.stderr[-500:]
    assert "Traceback" not in done.stderr, done.stderr[-500:]  # stopped quietly


def test_the_process_exits_cleanly_while_node_captions_compute():
    """The node captions computed ahead of a Run (``prefetch``) in a daemon thread: the same abort."""
    done = _exit_during(_EXIT_DURING_CAPTIONS)
    assert done.returncode == 0 and "terminate called" not in done.stderr, done.stderr[-500:]
    assert "Traceback" not in done.stderr, done.stderr[-500:]


def test_the_process_exits_cleanly_while_a_page_computes():
    """A page's own forward passes (the next tokens, the proposals) run in Streamlit's page
    thread, a daemon: the server stopped while a page computed aborted the process (a browser
    opened on a fresh cache, the server stopped 4-5 s later). The page's thread gets Streamlit's
    own stop at exit."""
    done = _exit_during(_EXIT_DURING_A_PAGE)
    assert done.returncode == 0 and "terminate called" not in done.stderr, done.stderr[-500:]
    assert "Traceback" not in done.stderr and "Exception in thread" not in done.stderr, done.stderr[-500:]


def test_a_stop_taken_in_a_finalizer_is_not_printed():
    """The model's load runs many finalizers (weak references' callbacks); the stop taken in one
    was printed ("Exception ignored in: <function WeakValueDictionary...>", a traceback) on an exit
    that was otherwise clean, the load stopped by the stop raised again."""
    done = _exit_during(_EXIT_DURING_FINALIZERS)
    assert done.returncode == 0, done.stderr[-500:]
    assert "Exception ignored" not in done.stderr and "ProcessExiting" not in done.stderr, done.stderr[-500:]


def test_the_wait_at_exit_is_bounded():
    """A thread that cannot be stopped (here: blocked in a wait, where no Python step comes) is
    waited for ``wait`` s, never longer: the process exits rather than hangs."""
    release = threading.Event()
    thread = background.start(release.wait, name="blocked")
    try:
        start = time.perf_counter()
        alive = background.stop_at_exit(wait=0.3)
        assert time.perf_counter() - start < 2.0
        assert alive == [thread]
    finally:
        release.set()  # the thread gets its ProcessExiting now, and ends quietly
        thread.join(5)
    assert not thread.is_alive()


def test_a_thread_that_ends_leaves_the_list():
    """Only threads still working are stopped at exit: a finished one is forgotten."""
    thread = background.start(lambda: None, name="quick")
    thread.join(5)
    assert thread not in background._THREADS
    assert background.stop_at_exit(wait=0.1) == []


# a thread inside one torch operation longer than the wait at exit (shortened here)
_EXIT_DURING_A_LONG_OPERATION = """
import time, torch
from circuitviz.ui import background
background.STOP_AT_EXIT_S = 0.2
background.END_AT_EXIT = True  # as the app's server (serve.main) sets it
x = torch.randn(3000, 3000, device="cpu")

def busy():
    while True:
        x @ x

background.start(busy, name="long operation")
time.sleep(0.5)
"""


def test_a_thread_that_outlasts_the_wait_is_named_and_does_not_abort_the_exit():
    """A thread still inside a torch operation when the wait at exit ran out was left to the
    interpreter's finalization, which aborted the process (status 134, "terminate called without
    an active exception") with nothing said of the thread: it is named on stderr now, and the
    process ends before the finalization, cleanly (the thread's work is abandoned, as asked)."""
    done = _exit_during(_EXIT_DURING_A_LONG_OPERATION)
    assert done.returncode == background.LEFT_STATUS == 0, (done.returncode, done.stderr[-500:])
    assert "terminate called" not in done.stderr
    assert "the background thread 'long operation' did not stop within 0.2 s of the exit" in done.stderr


def test_a_watched_run_thread_still_going_at_exit_is_named(capsys):
    """A run's thread is stopped by its own exit handler (cancelled at its next report); one still
    going after that is named too, and the process ends at once; with nothing left, nothing is said."""
    release = threading.Event()
    thread = threading.Thread(target=release.wait, name="run eap-ig", daemon=True)
    thread.start()
    background.watch(thread)
    ended = []
    try:
        background.exit_after_stop(wait=0.1, end=ended.append)
    finally:
        release.set()
        thread.join(5)
    assert ended == [0]
    said = capsys.readouterr().err
    assert "the background thread 'run eap-ig' did not stop within 0.1 s" in said
    background.exit_after_stop(wait=0.1, end=ended.append)
    assert ended == [0] and capsys.readouterr().err == ""


def test_another_process_keeps_its_own_exit_and_is_told(monkeypatch, capsys):
    """Only the app's server ends at once: a test run's exit status is its result, so elsewhere
    the line is said and the process goes on to its own end."""
    release = threading.Event()
    thread = background.start(release.wait, name="caption pass")
    ended = []
    monkeypatch.setattr(background.os, "_exit", ended.append)
    monkeypatch.setattr(background, "END_AT_EXIT", False)
    try:
        background.exit_after_stop(wait=0.1)
    finally:
        release.set()
        thread.join(5)
    assert ended == []
    assert capsys.readouterr().err.startswith(
        "circuitviz: the background thread 'caption pass' did not stop within 0.1 s of the exit"
    )


def test_the_server_launcher_ends_at_exit():
    """``python -m circuitviz.ui.serve`` (``make app``) sets the server's way out."""
    import inspect

    from circuitviz.ui import serve

    assert "background.END_AT_EXIT = True" in inspect.getsource(serve.main)
