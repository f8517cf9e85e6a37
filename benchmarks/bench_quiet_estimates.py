"""Estimates after runs beside other work: priced from the quiet runs, against from every run.

    .venv/bin/python benchmarks/bench_quiet_estimates.py [--busy 3]

On a fresh calibration (a new cache folder that reuses the converted models), EAP-IG on IOI (20
steps, the app's ten budgets, the embedded Gemma-3-270M) runs twice on the quiet machine, then
``--busy`` times beside one other busy process, then once more quiet; each run is priced first
(``limits.estimate_request``), run as the app runs it (``cpu_share.threads_for_run``) and recorded
with the others' load it began with. The last line compares the last estimate with the one the
median over every run would give (the rule before 2026-12-05). No assertions.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

import circuitviz  # noqa: F401  (before torch: OpenMP's wait policy)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--busy", type=int, default=3, help="runs beside one other busy process")
    args = parser.parse_args()
    from circuitviz.bench.harness import estimate_case

    model, task, budgets, settings = estimate_case("bench-quiet-estimates-")
    from circuitviz.entry import api, calibration, cpu_share, limits

    def one(tag: str):
        estimate = limits.estimate_request(model, task, "eap-ig", settings, n_budgets=len(budgets))
        with cpu_share.threads_for_run("cpu") as share:
            start = time.perf_counter()
            result, _ = api.discover(model, task, "eap-ig", settings, budgets=budgets)
            seconds = time.perf_counter() - start
        work = estimate.flops_done("eap-ig", result)
        calibration.record("cpu", "eap-ig", work, seconds, model=estimate.model, others=share.others)
        print(
            f"{tag:5s} others {share.others:.2f} cores, {share.threads} threads: estimate "
            f"{estimate.seconds:6.2f} s ({estimate.priced}), took {seconds:5.2f} s",
            flush=True,
        )
        return estimate, seconds

    one("quiet")
    one("quiet")
    burner = subprocess.Popen([sys.executable, "-c", "while True:\n    pass"])
    try:
        time.sleep(2)
        for _ in range(args.busy):
            one("busy")
    finally:
        burner.kill()
    time.sleep(2)
    runs = calibration.recorded_runs("cpu", "eap-ig")
    every = statistics.median(run["flops"] / run["seconds"] for run in runs)
    estimate, seconds = one("quiet")
    print(
        f"the last run: priced from every run {estimate.flops / every:.2f} s, from the quiet ones "
        f"{estimate.seconds:.2f} s; it took {seconds:.2f} s"
    )


if __name__ == "__main__":
    main()
