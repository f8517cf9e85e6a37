"""A run's threads on a busy CPU: torch's default against the threads ``cpu_share`` picks.

    .venv/bin/python benchmarks/bench_busy_threads.py [--others 0,1,2] [--repeats 2]

For each count of other busy processes (each one a Python loop, started a few seconds before),
EAP-IG on IOI (20 steps, the app's ten budgets, the embedded Gemma-3-270M) runs in a fresh worker
thread as the app runs it, and on the main thread as the command line runs it: with torch's
default threads (every core), then inside ``cpu_share.threads_for_run``. Prints the others' load
it measured, the threads it chose and the seconds of each. No assertions.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time

import circuitviz  # noqa: F401  (before torch: OpenMP's wait policy)
from circuitviz.bench.harness import ioi_task, load_average, machine_line
from circuitviz.entry import api, cpu_share
from circuitviz.models.loading import load_model

BUDGETS = [20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 10342]


def in_worker(model, task, adaptive: bool, worker: bool = True) -> tuple[float, int | None]:
    """One run in a fresh thread (the app's runs are; ``worker`` False: on this thread, as the
    command line's); (seconds, threads chosen or None)."""
    out = {}

    def work():
        start = time.perf_counter()
        if adaptive:
            with cpu_share.threads_for_run("cpu") as share:
                api.discover(model, task, "eap-ig", {"ig_steps": 20}, budgets=BUDGETS)
            chosen = share.threads
        else:
            import torch

            chosen = torch.get_num_threads()
            api.discover(model, task, "eap-ig", {"ig_steps": 20}, budgets=BUDGETS)
        out["seconds"], out["threads"] = time.perf_counter() - start, chosen

    if not worker:  # the command line's way
        work()
        return out["seconds"], out["threads"]
    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    return out["seconds"], out["threads"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--others", default="0,1,2", help="counts of other busy processes")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    print(machine_line(), flush=True)
    model = load_model("gemma-3-270m")
    task = ioi_task()
    in_worker(model, task, False)  # warm
    burner = "while True:\n    pass"
    processes: list[subprocess.Popen] = []
    try:
        for count in [int(c) for c in args.others.split(",")]:
            while len(processes) < count:
                processes.append(subprocess.Popen([sys.executable, "-c", burner]))
            while len(processes) > count:
                processes.pop().kill()
            time.sleep(3)
            others = cpu_share.others_busy()
            for worker, adaptive in ((True, False), (True, True), (False, False), (False, True)):
                runs = [in_worker(model, task, adaptive, worker) for _ in range(args.repeats)]
                seconds = [s for s, _ in runs]
                print(
                    f"others {count} (measured {others:.2f} cores)  {'worker' if worker else 'main  '}  "
                    f"{'threads_for_run' if adaptive else 'default':16s} threads {runs[0][1]}  "
                    f"seconds {' '.join(f'{s:.2f}' for s in seconds)} (median {statistics.median(seconds):.2f})  "
                    f"{load_average()}",
                    flush=True,
                )
    finally:
        for process in processes:
            process.kill()
    print(f"cores {len(cpu_share.allowed_cores())}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}")


if __name__ == "__main__":
    main()
