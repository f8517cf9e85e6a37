"""How long the app's Cancel waits: from Cancel to the run's thread ending, per method.

    .venv/bin/python benchmarks/bench_cancel_wait.py [--methods acc++,edge-pruning] [--cancel] [--steps]

A run stops at its method's next progress report once Cancel is pressed (``ui/run.py``), so the
wait is the stretch between two reports that the Cancel falls in. Each method runs on IOI on the
embedded Gemma-3-270M on the CPU (its default settings, the app's budgets, no result store) with
a progress callback that times every report, in a worker thread as the app runs it. Prints the
run's seconds, its reports, the longest stretch without one (the longest wait: a Cancel pressed
at its start), the mean wait of a Cancel pressed at a random moment (sum of squared stretches
over twice the run), the step that stretch was in, and the load average. ``--cancel`` then runs
each method again and cancels it halfway through that longest stretch, as the app does (the
callback raises at its next report), and prints the seconds from that Cancel to the thread's
end. A first ACC++ run factors the heads (its SVD): ``CIRCUITVIZ_CACHE`` pointing at a folder
without ``acc/`` times that. ``--checks-cost N``: instead, each method N times without a progress
callback (no checks inside its passes) alternating with N times with one, and the seconds of
each. ``--steps``: instead, the longest wait inside the steps that came before a method's first
report or between two far-apart ones (the clean and corrupted runs, Best-of-N's runs of a group
of pairs, CircuitLasso's solver, AtP*'s products with the differences): each step timed by
wrapping the function that does it, its wait the longest stretch between its start, the reports
inside it and its end. No assertions.
"""

from __future__ import annotations

import argparse
import importlib
import threading
import time

import circuitviz  # noqa: F401  (before torch: OpenMP's wait policy)
from circuitviz.bench.harness import ioi_task, load_average, machine_line
from circuitviz.entry import api
from circuitviz.methods.registry import available_methods
from circuitviz.models.loading import load_model


class Cancelled(BaseException):
    """What the app's ``RunCancelled`` is: raised by the progress callback after Cancel."""


def timed_run(model, task, method: str, cancel_at: float | None = None) -> dict:
    """One run in a worker thread; its reports' times (seconds from the start), its end, and
    with ``cancel_at`` the seconds from that Cancel to the thread's end."""
    reports: list[tuple[str, float]] = []
    out: dict = {}
    cancelled = threading.Event()

    def progress(phase, fraction) -> None:
        if cancelled.is_set():
            raise Cancelled
        reports.append((str(getattr(phase, "value", phase)), time.perf_counter()))

    def work() -> None:
        try:
            api.discover(model, task, method, progress=progress)
        except Cancelled:
            out["cancelled"] = True
        except Exception as error:  # a method this task does not suit: said, not fatal
            out["error"] = f"{type(error).__name__}: {error}"[:120]
        out["end"] = time.perf_counter()

    start = time.perf_counter()
    thread = threading.Thread(target=work)
    thread.start()
    if cancel_at is not None:
        thread.join(cancel_at)
        pressed = time.perf_counter()
        cancelled.set()
        thread.join()
        out["wait"] = out["end"] - pressed
    thread.join()
    out["reports"] = [(name, at - start) for name, at in reports]
    out["seconds"] = out["end"] - start
    return out


def stretches(run: dict) -> list[tuple[float, float, str]]:
    """(seconds, start, the step it was in) of every stretch between two reports (and from the
    start to the first, and from the last to the end)."""
    marks = [(0.0, "start")] + [(at, name) for name, at in run["reports"]] + [(run["seconds"], "end")]
    return [(b - a, a, f"{na}->{nb}") for (a, na), (b, nb) in zip(marks, marks[1:])]


def checks_cost(model, task, method: str, n: int) -> None:
    """Seconds of ``n`` runs without a callback and ``n`` with one, alternating (after one to warm)."""
    api.discover(model, task, method)
    seconds: dict[bool, list[float]] = {False: [], True: []}
    for index in range(n):
        for watched in (False, True) if index % 2 == 0 else (True, False):
            start = time.perf_counter()
            api.discover(model, task, method, progress=(lambda *report: None) if watched else None)
            seconds[watched].append(time.perf_counter() - start)
    without, with_checks = ([f"{s:.1f}" for s in seconds[w]] for w in (False, True))
    print(
        f"{method:20s} without {', '.join(without)} s; with checks {', '.join(with_checks)} s  ({load_average()})"
    )


# method: (module, function) of the step ``--steps`` times in it
STEPS = {
    "eap-ig": ("circuitviz.measure.evaluate", "_runs_of_tasks"),  # the clean and corrupted runs
    "bon": ("circuitviz.methods.scoring", "evaluators_of_tasks"),  # a group of pairs' runs
    "circuit-lasso": ("circuitviz.methods.lasso", "fit_adaptive"),  # the solver
    "atp-star": ("circuitviz.engine.atp_star", "accumulate_scores"),  # the products
}


def step_waits(model, task, method: str) -> None:
    """The longest wait for a Cancel pressed inside the method's step (``STEPS``), in one run."""
    from circuitviz.measure.evaluate import forget_prompt_runs

    module, name = STEPS[method]
    where = importlib.import_module(module)
    original, windows, reports = getattr(where, name), [], []

    def timed(*args, **kwargs):
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            windows.append((start, time.perf_counter()))

    setattr(where, name, timed)
    try:
        forget_prompt_runs(model)  # the prompt's clean and corrupted runs are made, not read
        api.discover(model, task, method, progress=lambda *report: reports.append(time.perf_counter()))
    finally:
        setattr(where, name, original)
    waits = []
    for start, end in windows:
        marks = [start, *(at for at in reports if start <= at <= end), end]
        waits.append((max(b - a for a, b in zip(marks, marks[1:])), end - start))
    print(
        f"{method:20s} {name}: {len(windows)} calls, the longest {max(s for _, s in waits):.2f} s; "
        f"longest wait inside one {max(w for w, _ in waits):.2f} s  ({load_average()})",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", default="", help="comma-separated (default: every method)")
    parser.add_argument("--cancel", action="store_true", help="also cancel each run in its longest stretch")
    parser.add_argument("--checks-cost", type=int, default=0, help="runs without and with a callback")
    parser.add_argument("--steps", action="store_true", help="the longest wait inside each step of STEPS")
    args = parser.parse_args()
    print(machine_line(), flush=True)
    model = load_model("gemma-3-270m", "cpu")
    task = ioi_task()
    methods = [m for m in args.methods.split(",") if m] or list(available_methods())
    if args.steps:
        for method in methods if args.methods else list(STEPS):
            step_waits(model, task, method)
        return
    if args.checks_cost:
        for method in methods:
            checks_cost(model, task, method, args.checks_cost)
        return
    for method in methods:
        run = timed_run(model, task, method)
        if "error" in run:
            print(f"{method:20s} {run['error']}", flush=True)
            continue
        gaps = stretches(run)
        longest, at, where = max(gaps)
        mean = sum(g * g for g, _, _ in gaps) / (2 * run["seconds"])
        line = (
            f"{method:20s} {run['seconds']:6.1f} s  {len(run['reports']):4d} reports  "
            f"longest wait {longest:5.1f} s ({where}, from {at:.1f} s)  mean wait {mean:4.2f} s"
        )
        if args.cancel:
            again = timed_run(model, task, method, cancel_at=at + longest / 2)
            line += f"  cancelled at {at + longest / 2:.1f} s: ended {again['wait']:.2f} s later"
        print(f"{line}  ({load_average()})", flush=True)


if __name__ == "__main__":
    main()
