"""A run's threads on a busy CPU (``entry/cpu_share.py``): the others' load measured from
``/proc/stat``, the cores they leave free, torch's threads set for the run and given back."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from circuitviz.entry import cpu_share


def test_the_cores_the_others_leave_free():
    # quiet, or the others fill every core: every core (the run's fair share is larger with more)
    assert cpu_share.threads_for(2, 0.0) == 2
    assert cpu_share.threads_for(2, 0.3) == 2
    assert cpu_share.threads_for(2, 1.6) == 2
    assert cpu_share.threads_for(2, 2.0) == 2
    # one of two cores busy: one thread (measured: 3.8 s against 7.1 s with two on the main thread)
    assert cpu_share.threads_for(2, 1.0) == 1
    assert cpu_share.threads_for(16, 3.2) == 13
    assert cpu_share.threads_for(16, 15.2) == 1
    assert cpu_share.threads_for(1, 0.9) == 1
    assert cpu_share.threads_for(4, None) == 4  # not measurable: nothing changes


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="reads Linux's /proc/stat")
def test_another_busy_process_is_measured_and_this_ones_own_work_is_not():
    core = cpu_share.allowed_cores()[:1]
    # this process busy on its own: not the others' load. Each spinning window is held against a
    # quiet window just before it, so whatever else the machine runs counts in both; the other
    # tests of `make test` start and stop work between windows (CI once saw 0.46 of a core before
    # and 1.29 during all three spinning windows), so the pair that differs least is kept: this
    # process's own spinning, were it counted, would add nearly a core to every pair.
    done, spinning = threading.Event(), threading.Event()

    def spin():
        while not done.is_set():
            if spinning.is_set():
                sum(range(1000))
            else:
                spinning.wait(0.01)

    spinner = threading.Thread(target=spin)
    spinner.start()
    pairs = []
    try:
        for _ in range(6):
            spinning.clear()
            baseline = cpu_share.others_busy(0.3, cores=cpu_share.allowed_cores())
            spinning.set()
            own = cpu_share.others_busy(0.3, cores=cpu_share.allowed_cores())
            if baseline is not None and own is not None:
                pairs.append((own - baseline, own, baseline))
                if own - baseline < 0.5:
                    break
    finally:
        done.set()
        spinning.set()
        spinner.join()
    burner = subprocess.Popen(
        [sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{core[0]}}})\nwhile True: pass"]
    )
    try:
        threading.Event().wait(0.3)  # the burner started
        other = cpu_share.others_busy(0.3, cores=core)
    finally:
        burner.kill()
        burner.wait()
    assert other is not None and other >= 0.6, other  # the core the burner holds, nearly whole
    assert pairs and min(pairs)[0] < 0.5, pairs


def test_threads_are_set_for_the_run_and_given_back(monkeypatch):
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(cpu_share, "others_busy", lambda **_: 1.0)
    monkeypatch.setattr(cpu_share, "allowed_cores", lambda: [0, 1])
    monkeypatch.setattr(cpu_share, "load_average", lambda: 3.5)  # kept with the run (calibration)
    torch.set_num_threads(2)
    try:
        with cpu_share.threads_for_run("cpu") as share:
            assert share == cpu_share.Share(2, 1.0, 1, 2, 3.5) and torch.get_num_threads() == 1
            assert share.reduced and share.quiet is False
        assert torch.get_num_threads() == 2
        # never more threads than torch's own default (a machine whose logical CPUs are hyperthreads)
        monkeypatch.setattr(cpu_share, "others_busy", lambda **_: 0.0)
        monkeypatch.setattr(cpu_share, "allowed_cores", lambda: list(range(16)))
        with cpu_share.threads_for_run("cpu") as share:
            assert share == cpu_share.Share(16, 0.0, 2, 2, 3.5) and torch.get_num_threads() == 2
            assert not share.reduced and share.quiet is True
    finally:
        torch.set_num_threads(before)
    monkeypatch.setattr(cpu_share, "others_busy", lambda **_: 1.0)
    monkeypatch.setattr(cpu_share, "allowed_cores", lambda: [0, 1])
    # not on the CPU nothing is measured or changed; the user fixed the threads: measured, kept
    with cpu_share.threads_for_run("cuda") as share:
        assert share == cpu_share.Share(2) and torch.get_num_threads() == before
        assert not share.reduced and share.quiet is None
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    with cpu_share.threads_for_run("cpu") as share:
        assert share == cpu_share.Share(2, 1.0, before, before, 3.5) and torch.get_num_threads() == before
        assert not share.reduced
    assert os.environ["OMP_NUM_THREADS"] == "2"


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="reads Linux's /proc/stat")
def test_other_work_during_the_run_is_measured_when_it_ends(monkeypatch):
    """The sample at a run's start saw no other work (a shared machine's others come and go); a
    process that keeps the run's core busy through the run is measured when the run ends
    (``Share.during``), and the run is not quiet."""
    pytest.importorskip("torch")
    core = cpu_share.allowed_cores()[:1]
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setattr(cpu_share, "others_busy", lambda **_: 0.0)
    monkeypatch.setattr(cpu_share, "allowed_cores", lambda: core)
    burner = None
    try:
        with cpu_share.threads_for_run("cpu") as share:
            assert share.quiet is True and share.during is None
            burner = subprocess.Popen(
                [sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{core[0]}}})\nwhile True: pass"]
            )
            threading.Event().wait(0.8)
    finally:
        if burner is not None:
            burner.kill()
            burner.wait()
    assert share.during is not None and share.during >= 0.5, share.during
    assert share.others == 0.0 and share.quiet is False


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="reads Linux's /proc/stat")
def test_another_thread_of_this_process_counts_as_other_work_beside_a_one_thread_run(monkeypatch):
    """Two runs in one process (two sessions of the app) each took the other's CPU for its own:
    the process's CPU time was the run's, so the other run was not other work, and the run's CPU
    seconds held both. A one-thread run now keeps its own thread's (``Share.cpu``), and the rest
    of the process's counts as others' (``Share.during``)."""
    pytest.importorskip("torch")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setattr(cpu_share, "others_busy", lambda **_: 0.0)
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            sum(range(1000))

    with cpu_share.threads_for_run("cpu") as share:
        assert share.threads == 1
        other = threading.Thread(target=spin, daemon=True)
        other.start()
        stop.wait(0.6)  # this thread waits: the spinning one is the process's only work
        stop.set()
        other.join(5)
    assert share.cpu is not None and share.cpu < 0.1, share.cpu
    assert share.during is not None and share.during >= 0.3, share.during


def test_a_run_with_threads_that_another_run_overlapped_prices_nothing(tmp_path, monkeypatch):
    """Two runs with two threads each at once in one process (two sessions of the app) each
    counted the other's CPU as its own and the other's work as no other work, so each passed for
    a quiet run at up to twice its time and priced the next runs long. Such a run is not recorded
    now; a one-thread run beside it (its own thread's clock) and a run alone are."""
    from types import SimpleNamespace

    from circuitviz.entry import calibration
    from circuitviz.entry.limits import Estimate
    from circuitviz.ui.run import record_run

    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    cores = cpu_share.allowed_cores()
    first = cpu_share.Share(len(cores), 0.0, 2, 2)._begin(cores)
    beside = cpu_share.Share(len(cores), 0.0, 1, 2)._begin(cores)
    beside._end(cores)
    first._end(cores)
    alone = cpu_share.Share(len(cores), 0.0, 2, 2)._begin(cores)
    alone._end(cores)
    assert first.overlapped and beside.overlapped and not alone.overlapped
    assert [share.own_figures for share in (first, beside, alone)] == [False, True, True]
    estimate = Estimate(1.0, 0.0, 15, 0, 0, 10.0, "cpu", flops=1e9, model="m")
    result = SimpleNamespace(timings={}, details=None)
    for share in (first, beside, alone):
        record_run(estimate, "eap", result, 2.0, {}, share)
    assert [run.get("threads") for run in calibration.recorded_runs("cpu", "eap")] == [1, 2]
