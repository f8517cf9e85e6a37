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

A thread still going after the wait (one torch operation longer than that, a wait no stop
reaches) aborted the process as it finalized (a thread inside torch) or was dropped, with nothing
said of which thread or why; such a thread now gets one line on stderr naming it, and the app's
server (``serve.main`` sets ``END_AT_EXIT``) ends at once (``os._exit``, status 0), before the
finalization where it aborted (``exit_after_stop``). Any other process (a test run, a script)
keeps its own exit and status: there the line is all. The runs' threads are watched
alike (``watch``) once their own stop has waited for them.
"""

from __future__ import annotations

import atexit
import ctypes
import logging
import os
import sys
import threading
import time
import weakref
from collections.abc import Callable

# how long the process waits at its exit for its background threads to stop, in all
STOP_AT_EXIT_S = 10.0
RETRY_S = 0.5  # the stop raised again in a thread still going after this long

SCRIPT_THREAD = "ScriptRunner.scriptThread"  # Streamlit's name for the thread a page runs in

_THREADS: set[threading.Thread] = set()
_WATCHED: weakref.WeakSet[threading.Thread] = weakref.WeakSet()  # stopped elsewhere, checked at exit
_GUARD = threading.Lock()
# the exit status of a process that ends with a thread it could not stop: a clean exit's, as
# the server was asked to stop and the thread's work (a load, captions, a run) is abandoned
LEFT_STATUS = 0
END_AT_EXIT = False  # the app's server: a thread left after the wait ends the process at once


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


def watch(thread: threading.Thread) -> None:
    """Check ``thread`` at the process's exit as the threads started here are (``exit_after_stop``),
    though something else stops it: a run's thread, cancelled at its next progress report."""
    with _GUARD:
        _WATCHED.add(thread)


def left_words(threads: list[threading.Thread], wait: float, ending: bool = True) -> str:
    """The line a process exiting with threads it could not stop writes on stderr; ``ending``: it
    ends at once (the app's server), else it goes on to its own end."""
    names = ", ".join(f"'{thread.name}'" for thread in threads)
    noun, them = ("thread", "it") if len(threads) == 1 else ("threads", "them")
    said = f"circuitviz: the background {noun} {names} did not stop within {wait:g} s of the exit (inside one long operation)"
    if ending:
        return f"{said}; the process ends now without waiting for {them} (exit status {LEFT_STATUS})."
    return f"{said}; the process exits without {them}, and one still inside torch may abort it."


def exit_after_stop(wait: float | None = None, end: Callable[[int], None] | None = None) -> None:
    """At the process's exit: ``stop_at_exit`` (``STOP_AT_EXIT_S`` as the module holds it when
    ``wait`` is None); a thread still alive after it, or a watched one (``watch``), is named on
    stderr, and the app's server (``END_AT_EXIT``; or with ``end``, called with the status) ends at
    once, before the interpreter's finalization, where a daemon thread coming back from a torch
    operation aborted it ("terminate called without an active exception", status 134) and where
    a thread sitting in a wait was left with nothing said. Another process keeps its own exit (a
    test run's status is its result)."""
    wait = STOP_AT_EXIT_S if wait is None else wait
    left = stop_at_exit(wait)
    with _GUARD:
        left += [thread for thread in _WATCHED if thread.is_alive() and thread not in left]
    if not left:
        return
    end = end or (os._exit if END_AT_EXIT else None)
    print(left_words(left, wait, ending=end is not None), file=sys.stderr)
    if end is None:
        return
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed stream: nothing more to keep
            pass
    end(LEFT_STATUS)


atexit.register(exit_after_stop)
