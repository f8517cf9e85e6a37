"""Estimates after a first run on a busy machine: scaled to a quiet machine, against as measured.

    .venv/bin/python benchmarks/bench_busy_estimates.py [--runs 4] [--burners 0] [--late 0]

On a fresh calibration (a new cache folder that reuses the converted models), EAP-IG on IOI (20
steps, the app's ten budgets, the embedded Gemma-3-270M) runs ``--runs`` times in a row, the
first beside ``--burners`` busy processes (none: whatever the machine runs already). Each run
is priced first (``limits.estimate_request``), run as the app runs it
(``cpu_share.threads_for_run``) and recorded with how busy the machine was when it began (the
others' cores, the cores, the load average) and over the run (``Share.during``). ``--late``
busy processes start about 0.5 s into the first run instead (after the 0.1 s sample at its start, as
the others' work comes and goes on a shared machine). Each line shows the estimate as priced now,
the one the rule before 2026-12-07 gave (the median of every run as measured), the one the
start's sample alone gave (a run counted quiet on it alone), the run's time and that time scaled
to a quiet machine (``calibration._at_quiet``: by the CPU seconds it used), and the estimate
times what its sentence says a run takes at this load ("about 3.6 times as long"), against the
time taken. No assertions.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import time

import circuitviz  # noqa: F401  (before torch: OpenMP's wait policy)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=4, help="runs in a row")
    parser.add_argument("--burners", type=int, default=0, help="busy processes beside the first run")
    parser.add_argument(
        "--late", type=int, default=0, help="busy processes started about 0.5 s into the first run"
    )
    args = parser.parse_args()
    from circuitviz.bench.harness import estimate_case

    model, task, budgets, settings = estimate_case("bench-busy-estimates-")
    from circuitviz.entry import api, calibration, cpu_share, limits

    burn = [sys.executable, "-c", "while True:\n    pass"]
    sleep_then_burn = [sys.executable, "-c", "import time\ntime.sleep(1.0)\nwhile True:\n    pass"]
    for index in range(args.runs):
        burners = [subprocess.Popen(burn) for _ in range(args.burners if index == 0 else 0)]
        late = [subprocess.Popen(sleep_then_burn) for _ in range(args.late if index == 0 else 0)]
        try:
            if burners:
                time.sleep(2)
            if late:
                time.sleep(0.4)  # their interpreters started (not in the sample), asleep until the run runs
            estimate = limits.estimate_request(model, task, "eap-ig", settings, n_budgets=len(budgets))
            runs = calibration.recorded_runs("cpu", "eap-ig")
            before = (
                f"{estimate.flops / statistics.median(r['flops'] / r['seconds'] for r in runs):6.2f} s"
                if runs
                else "   -    "
            )
            sampled = [{key: value for key, value in run.items() if key != "during"} for run in runs]
            alone = calibration._median_rate(calibration._pick(sampled)[0]) if runs else None
            start_only = f"{estimate.flops / alone:6.2f} s" if alone else "   -    "
            with cpu_share.threads_for_run("cpu") as share:
                start, cpu = time.perf_counter(), time.process_time()
                result, _ = api.discover(model, task, "eap-ig", settings, budgets=budgets)
                seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        finally:
            for burner in burners + late:
                burner.kill()
                burner.wait()
        work = estimate.flops_done("eap-ig", result)
        calibration.record(
            "cpu",
            "eap-ig",
            work,
            seconds,
            model=estimate.model,
            **calibration.share_figures(share),
        )
        quiet = calibration._at_quiet(calibration.recorded_runs("cpu", "eap-ig")[-1])["seconds"]
        times = re.search(r"about ([0-9.]+) times as long", estimate.busy)
        said = estimate.seconds * float(times.group(1)) if times else estimate.seconds
        print(
            f"run {index + 1}: others {share.others:.2f} of {share.cores} cores at the start, "
            f"{share.during:.2f} over the run, load {share.load:.1f}, {share.threads} threads: "
            f"estimate {estimate.seconds:6.2f} s (before: {before}; start's sample alone: {start_only}), took "
            f"{seconds:6.2f} s, {cpu:.2f} CPU s ({quiet:5.2f} s scaled to a quiet machine); said for this load "
            f"{said:6.2f} s, {seconds / said:.2f}x; {estimate.priced}{estimate.busy}",
            flush=True,
        )


if __name__ == "__main__":
    main()
