"""Threads that end before the process does: the model's load, the node captions, the pages.

These threads are daemons (a server stopped mid-load does not wait for the load), and a daemon
thread still inside a torch operation when the interpreter finalizes aborts the whole process
("terminate called without an active exception", exit status 134): Python ends such a thread
by unwinding its C++ frames, which torch does not allow. So at the process's exit each thread
started here is told to stop (``ProcessExiting`` raised in it at its next Python step, which
follows the torch operation it is in: milliseconds) and waited for, ``STOP_AT_EXIT_S`` at most
in all. Streamlit's page threads (``SCRIPT_THREAD``, daemons too, which run the pages' own
forward passes: the next tokens, the proposals) are stopped alike, with Streamlit's own stop
(``StopException``, which ends a page's run quietly): a server stopped while a page computed
aborted the same way. The runs have their own stop at exit (``run.stop_runs_at_exit``: cancelled
at their next progress report).
"""

from __future__ import annotations

import atexit
import ctypes
import sys
import threading
import time
from collections.abc import Callable

# how long the process waits at its exit for its background threads to stop, in all
STOP_AT_EXIT_S = 10.0
RETRY_S = 0.5  # the stop raised again in a thread still going after this long

SCRIPT_THREAD = "ScriptRunner.scriptThread"  # Streamlit's name for the thread a page runs in

_THREADS: set[threading.Thread] = set()
_GUARD = threading.Lock()


class ProcessExiting(BaseException):
    """Raised in a background thread when the process exits: the thread's work is abandoned.
    A BaseException, so the ``except Exception`` that keeps a failed caption quiet lets it pass."""


def start(target: Callable[..., object], *args, name: str) -> threading.Thread:
    """Run ``target(*args)`` in a daemon thread that is stopped at the process's exit."""

    def work() -> None:
        try:
            target(*args)
        except ProcessExiting:  # the process is exiting: nothing is waiting for this work
            pass
        finally:
            with _GUARD:
                _THREADS.discard(thread)

    thread = threading.Thread(target=work, name=name, daemon=True)
    with _GUARD:
        _THREADS.add(thread)
    thread.start()
    return thread


def _raise_in(thread: threading.Thread, stop: type[BaseException]) -> None:
    """Raise ``stop`` in ``thread`` at its next Python step (a thread inside a torch operation
    gets it when the operation returns)."""
    if thread.ident is not None:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(stop))


def _page_stop() -> type[BaseException]:
    """Streamlit's stop of a page's run (its script runner ends the run quietly on it)."""
    try:
        from streamlit.runtime.scriptrunner_utils.exceptions import StopException
    except ImportError:  # another streamlit: the page's run ends on ours, said in the log
        return ProcessExiting
    return StopException


def _stopped() -> list[tuple[threading.Thread, type[BaseException]]]:
    """The threads to stop now, each with the exception that stops it."""
    with _GUARD:
        ours = [(thread, ProcessExiting) for thread in _THREADS if thread.is_alive()]
    pages = [thread for thread in threading.enumerate() if thread.name == SCRIPT_THREAD and thread.is_alive()]
    return ours + [(thread, _page_stop()) for thread in pages]


def _unheard() -> None:
    """Keep the stop out of stderr where Python prints it instead of raising it: in a finalizer
    (a ``__del__``, a weak reference's callback; the model's load runs many, and a stop taken in
    one printed "Exception ignored in: <function WeakValueDictionary...>" and a traceback on a
    clean exit) or past a thread's own end. Anything else is printed as before."""
    unraisable, uncaught = sys.unraisablehook, threading.excepthook
    stops = (ProcessExiting, _page_stop())

    def quiet_unraisable(what) -> None:
        if not isinstance(what.exc_value, stops):
            unraisable(what)

    def quiet_uncaught(what) -> None:
        if not isinstance(what.exc_value, stops):
            uncaught(what)

    sys.unraisablehook, threading.excepthook = quiet_unraisable, quiet_uncaught


def stop_at_exit(wait: float = STOP_AT_EXIT_S) -> list[threading.Thread]:
    """At the process's exit: stop every background thread started here and every page's thread,
    and wait, ``wait`` s at most in all, for them to end. Returns the threads still alive after
    the wait (none, unless one sat in a single operation, or a wait, longer than that).

    The stop is raised again every ``RETRY_S`` in a thread that goes on: library code on the
    load's way (an import's fallback) may catch it and carry on."""
    deadline = time.perf_counter() + wait
    if _stopped():
        _unheard()
    while True:
        stopped = _stopped()
        left = deadline - time.perf_counter()
        if not stopped or left <= 0:
            return [thread for thread, _ in stopped]
        for thread, stop in stopped:
            _raise_in(thread, stop)
        until = time.perf_counter() + min(RETRY_S, left)
        for thread, _ in stopped:
            thread.join(max(until - time.perf_counter(), 0.0))


atexit.register(stop_at_exit)
