"""How many CPU threads a run should use when other work is using some of the cores.

Measured on the two-core machine (EAP-IG, IOI, 20 steps, ten budgets; ``benchmarks/bench_busy_threads.py``):
quiet, two threads take 2.3-2.5 s and one 3.6 s; with one other busy process, two threads take
6.8-7.3 s on the main thread (the command line's; OpenMP's threads wait on the one that shares
its core) and 4.3 s on a fresh worker thread (the app's), one thread 3.7 s either way; with two
other busy processes two threads take 5.1 s and one 5.9 s. So a run uses the cores the others
leave free, and as many as torch would when the others fill every core (its fair share is then
larger with more threads); never more threads than torch's own default (on a machine with
hyperthreads, its physical cores). The others' load is measured, not guessed: the CPU time of the
cores this process may run on, less this process's own, over a short window (``/proc/stat``,
Linux); elsewhere the run keeps torch's threads as they are.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field

WINDOW_S = 0.1  # how long the others' load is sampled before a run (ten ticks of a 100 Hz clock)
IDLE = 0.5  # others using less than this many cores leave the machine to the run
# the runs of this process under way (``threads_for_run``), so that a run overlapped by another
# knows it (``Share.own_figures``)
_UNDER_WAY: dict[int, Share] = {}
_UNDER_WAY_LOCK = threading.Lock()


def allowed_cores() -> list[int]:
    """The CPUs this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def _busy_ticks(cores: list[int]) -> int | None:
    """Ticks the ``cores`` spent busy (everything but idle and I/O wait) since boot."""
    try:
        with open("/proc/stat", encoding="ascii") as stream:
            lines = stream.read().splitlines()
    except OSError:
        return None
    wanted, busy = {f"cpu{core}" for core in cores}, 0
    for line in lines:
        fields = line.split()
        if fields and fields[0] in wanted:
            ticks = [int(value) for value in fields[1:]]
            busy += sum(ticks) - ticks[3] - (ticks[4] if len(ticks) > 4 else 0)  # idle, iowait
    return busy


def _own_seconds() -> float:
    """CPU seconds this process has used (every thread)."""
    return time.process_time()


def run_clock(threads: int | None) -> Callable[[], float]:
    """The CPU seconds a run with ``threads`` threads spends, as its clock: the calling thread's
    with one thread (torch then computes in it alone), so another thread of this process (a second
    session's run in the app, a page's pass) counts as other work; the whole process's otherwise
    (torch's other threads are the run's)."""
    return time.thread_time if threads == 1 else _own_seconds


def snapshot(cores: list[int], own: Callable[[], float] | None = None) -> tuple[int, float, float] | None:
    """(busy ticks of ``cores``, this process's CPU seconds, or the ``own`` clock's, the clock) now,
    None where /proc/stat cannot be read: two of them say how busy other work kept the cores in
    between (``others_between``) and how much CPU the work they bracket used."""
    busy = _busy_ticks(cores)
    return None if busy is None else (busy, (own or _own_seconds)(), time.perf_counter())


def others_between(before, after, cores: list[int]) -> float | None:
    """The cores other work kept busy on average between two ``snapshot``s (0 to the cores): other
    processes, and other threads of this one where the snapshots took a run's own clock."""
    if before is None or after is None or after[2] <= before[2]:
        return None
    ticks_per_second = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    busy = (after[0] - before[0]) / ticks_per_second - (after[1] - before[1])
    return min(max(busy / (after[2] - before[2]), 0.0), float(len(cores)))


def others_busy(window: float = WINDOW_S, cores: list[int] | None = None) -> float | None:
    """How many of this process's cores other processes kept busy over ``window`` seconds (0 to
    the number of cores), or None where it cannot be read."""
    cores = cores or allowed_cores()
    before = snapshot(cores)
    if before is None:
        return None
    time.sleep(window)
    return others_between(before, snapshot(cores), cores)


def threads_for(cores: int, others: float | None) -> int:
    """Threads for a run on ``cores`` cores while others keep ``others`` of them busy: every core
    when the others are idle or fill them all, else the cores they leave free (at least one)."""
    if others is None or others < IDLE or others >= cores - IDLE:
        return cores
    return max(1, cores - round(others))


READS = 10  # reads of the tasks running now, ``READ_GAP_S`` apart (``others_wanting``)
READ_GAP_S = 0.005


def _running_tasks() -> int | None:
    """Tasks running or ready to run on the machine now (``/proc/stat``'s procs_running), the one
    reading included; None where it cannot be read."""
    try:
        with open("/proc/stat", encoding="ascii") as stream:
            for line in stream:
                if line.startswith("procs_running"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def others_wanting(reads: int = READS, gap: float = READ_GAP_S) -> float | None:
    """How many tasks besides this one were running or ready to run: the median of ``reads`` reads
    ``gap`` s apart (0.05 s in all; a mean took in a burst, 5.7 between reads of 3.0-3.2), None
    where it cannot be read. What a run about to start competes with: the one-minute load average
    lags a minute, and holds this process's own work of the last minute (the command line's model
    load, the runs before), where this counts the moment's others only."""
    counts = []
    for index in range(reads):
        if index:
            time.sleep(gap)
        count = _running_tasks()
        if count is None:
            return None
        counts.append(max(count - 1, 0))
    return float(statistics.median(counts))


def load_average() -> float | None:
    """The one-minute load average (the work waiting for or using the CPU), None where there is none."""
    try:
        return float(os.getloadavg()[0])
    except (OSError, AttributeError):
        return None


@dataclass
class Share:
    """What a run found when it began: the cores other work kept busy (None: not measured), the
    threads it ran with (None: not on the CPU; the user's where ``OMP_NUM_THREADS`` fixed them),
    torch's threads before (None: not read) and the one-minute load average (None: not read;
    ``others`` stops at the cores, the load does not); once the run is over, ``during``: the
    cores other work kept busy on average over the whole run (None: not measured). The first
    figure is a 0.1 s sample: on a shared machine one read 0.09 cores at a run's start and 1.99
    a minute later, and that run, counted as quiet, took twice a quiet run's time."""

    cores: int
    others: float | None = None
    threads: int | None = None
    default: int | None = None
    load: float | None = None
    during: float | None = None
    cpu: float | None = None  # once the run is over: the CPU seconds it used (``run_clock``)
    overlapped: bool = False  # another run of this process was under way at some time during it
    _start: tuple | None = field(default=None, compare=False, repr=False)

    @property
    def own_figures(self) -> bool:
        """Whether ``cpu`` and ``during`` are this run's alone. A one-thread run's are (its clock
        is its thread's; another run's threads count as other work). A run with more threads
        counts the whole process's CPU, and torch's workers cannot be told apart by run (GNU
        OpenMP's pool names none, and has no tool interface), so a run that another of this
        process overlapped counts the other's CPU as its own and the other's work as none: its
        figures would make a rate too slow, and it is not recorded (``ui.run.record_run``)."""
        return self.threads == 1 or not self.overlapped

    @property
    def reduced(self) -> bool:
        """Whether the run used fewer threads than torch would have, for the others' sake."""
        return self.threads is not None and self.default is not None and self.threads < self.default

    @property
    def quiet(self) -> bool | None:
        """Whether the others left the cores idle (None: not measured): at the start, and over the
        whole run once it is over."""
        if self.others is None:
            return None
        return self.others < IDLE and (self.during is None or self.during < IDLE)

    def _begin(self, cores: list[int]) -> Share:
        """Take the run's first snapshot, on its own clock (``run_clock``); mark it and the runs
        of this process under way as overlapped when there are any."""
        with _UNDER_WAY_LOCK:
            for other in _UNDER_WAY.values():
                other.overlapped = self.overlapped = True
            _UNDER_WAY[id(self)] = self
        self._start = snapshot(cores, run_clock(self.threads))
        return self

    def _end(self, cores: list[int]) -> None:
        """Measure ``during``, the others' cores from the run's start to now, and ``cpu``."""
        with _UNDER_WAY_LOCK:
            _UNDER_WAY.pop(id(self), None)
        end = snapshot(cores, run_clock(self.threads))
        self.during = others_between(self._start, end, cores)
        if self._start is not None and end is not None:
            self.cpu = max(end[1] - self._start[1], 0.0)


@contextmanager
def threads_for_run(device_kind: str = "cpu"):
    """Run the block with the threads ``threads_for`` picks for this moment's load, in the calling
    thread (torch's thread count is each thread's own under OpenMP); yields the ``Share``, whose
    ``during`` is filled in as the block ends. Not on the CPU nothing is measured or changed; where
    the user fixed the threads (``OMP_NUM_THREADS``) the others' load is measured (the run's
    calibration records it) and the threads are kept."""
    cores = allowed_cores()
    if device_kind != "cpu":
        yield Share(len(cores))
        return
    others, load = others_busy(cores=cores), load_average()
    import torch

    if "OMP_NUM_THREADS" in os.environ:
        threads = torch.get_num_threads()  # the user's, on a quiet machine as on a busy one
        share = Share(len(cores), others, threads, threads, load)._begin(cores)
        try:
            yield share
        finally:
            share._end(cores)
        return

    before = torch.get_num_threads()
    chosen = min(before, threads_for(len(cores), others))
    torch.set_num_threads(chosen)
    share = Share(len(cores), others, chosen, before, load)._begin(cores)
    try:
        yield share
    finally:
        share._end(cores)
        torch.set_num_threads(before)
