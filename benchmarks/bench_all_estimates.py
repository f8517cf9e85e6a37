"""Every registered method's first estimate against what its run took, on one model.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_all_estimates.py [--model smollm2-135m]
        [--methods eap,bon] [--out runs.json]
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_all_estimates.py --reprice runs.json

In a fresh cache (``history_free_cache``: the converted models, no recorded run), after the
forward-pass probe and a warm-up run that is not recorded, EAP-IG runs and is recorded as the
command line records a run: the one run every other method is priced from. Then each method (every
one of ``circuitviz methods`` unless ``--methods`` names some), with its default settings, the IOI
prompt and budgets 20, 100, 200, 500, is priced on that record alone (the calibration file put
back to it before each, so no method prices another), then run on a prompt whose clean and
corrupted runs this process does not keep (as a new prompt's run) and not recorded; a run of
under 15 CPU s runs twice and the shorter is kept (the seed runs three times, its rate their
median), since a busy machine lengthens a run's CPU seconds too; where the kept run is the
second, the work the first did once per model (ACC++'s SVD) is left out of its estimate, as a
model's later runs are priced. Each line: the estimate (a range where the method's work depends on what it finds), the run's CPU seconds
(what the estimate prices: a quiet machine's run on one thread) and wall seconds, their ratio,
and the passes counted. A method whose count is the same as EAP-IG's per second of work lands at
1.0x; the ratio is the count's error against EAP-IG's.

``--out`` keeps the runs (the seed's record, each method's CPU and wall seconds and count);
``--reprice`` prices every method of such a file again with the code as it stands, from the same
seed record, without running anything (the seed's FLOPs follow EAP-IG's count if it changed),
so a change of a count is checked against the runs already measured. No assertions;
docs/benchmarks.md has the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from circuitviz.bench.harness import (
    add_threads_argument,
    apply_threads,
    history_free_cache,
    ioi_task,
    load_average,
)

BUDGETS = [20, 100, 200, 500]
SEED = "eap-ig"
SEED_RUNS = 3
AGAIN_BELOW = 15.0  # CPU seconds: a run shorter than this runs twice


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="gemma-3-270m")
    parser.add_argument("--methods", default="", help="comma-separated (default: every registered method)")
    parser.add_argument("--out", default="", help="keep the runs in this JSON file")
    parser.add_argument("--reprice", default="", help="price the runs of this file again; run nothing")
    parser.add_argument("--seed", default="", help="price from this file's seed record (no seed run)")
    add_threads_argument(parser, default=1)
    args = parser.parse_args()
    apply_threads(args.threads)
    kept = json.loads(Path(args.reprice or args.seed).read_text()) if args.reprice or args.seed else None
    if args.seed:
        kept["runs"] = {}
    model_id = kept["model"] if kept else args.model
    history_free_cache("circuitviz-all-estimates-")

    from circuitviz.core.pass_weights import WEIGHTS_VERSION
    from circuitviz.entry import calibration
    from circuitviz.entry.api import run_request
    from circuitviz.entry.cpu_share import threads_for_run
    from circuitviz.entry.probe import probe_unmeasured
    from circuitviz.entry.request import Request
    from circuitviz.measure.evaluate import forget_prompt_runs
    from circuitviz.methods import available_methods
    from circuitviz.models import load_model

    model, task = load_model(model_id), ioi_task()
    path = calibration.calibration_path()
    path.parent.mkdir(parents=True, exist_ok=True)

    def priced(item: str):
        forget_prompt_runs(model)  # its own clean and corrupted runs, as a new prompt's
        method, _, rest = item.partition(":")  # settings after a colon: bon:n_paraphrases=3+ig_steps=5
        settings = {
            key: int(value) for key, value in (pair.split("=", 1) for pair in rest.split("+") if pair)
        }
        return Request.for_model(model, task, method, settings, BUDGETS, model_id, 256).priced(model)

    def run(request) -> tuple[float, float, object]:
        forget_prompt_runs(model)
        wall, cpu = time.perf_counter(), time.process_time()
        with threads_for_run("cpu") as share:
            result, _ = run_request(model, request, store=None)
        return time.process_time() - cpu, time.perf_counter() - wall, (result, share)

    print(f"{model_id}, IOI prompt, budgets {BUDGETS}; {load_average()}", flush=True)
    if kept is None:
        probe_unmeasured(model)
        run(priced("eap"))  # warm-up: a process's first run pays one-off set-ups
        seed = priced(SEED)
        for _ in range(SEED_RUNS):  # the rate is their median
            cpu, wall, (result, share) = run(seed)
            calibration.record(
                seed.estimate.device,
                SEED,
                seed.estimate.flops_done(SEED, result),
                wall,
                timings=result.timings,
                model=seed.estimate.model,
                **calibration.share_figures(share),
            )
        kept = {
            "model": model_id,
            "calibration": json.loads(path.read_text()),
            "seed_passes": seed.estimate.sequences,
            "runs": {},
        }
        print(
            f"{SEED} (the seed): {cpu:.2f} CPU s ({wall:.1f} wall), {seed.estimate.sequences:.1f} passes",
            flush=True,
        )
    else:  # the seed's record as the code counts EAP-IG now, at today's weights (--seed, --reprice)
        probe_unmeasured(model)
        passes = priced(SEED).estimate.sequences
        for run_record in kept["calibration"]["cpu"][SEED]:
            run_record["flops"] *= passes / kept["seed_passes"]
            run_record["weights"] = WEIGHTS_VERSION
    names = args.methods.split(",") if args.methods else list(kept["runs"]) or list(available_methods())
    print(
        f"{'method':<19} {'estimate':>15} {'CPU s':>7} {'wall s':>7} {'est/CPU':>11} {'passes':>7}",
        flush=True,
    )
    for name in names:
        path.write_text(json.dumps(kept["calibration"]), encoding="utf-8")  # priced from the seed alone
        try:
            request = priced(name)
            if request.refusal:
                print(f"{name:<19} refused: {request.refusal}", flush=True)
                continue
            if args.reprice:
                cpu, wall = kept["runs"][name]["cpu"], kept["runs"][name]["wall"]
                first = kept["runs"][name].get("first_kept", cpu >= AGAIN_BELOW)
            else:
                cpu, wall, _ = run(request)
                first = True
                if cpu < AGAIN_BELOW:  # a short run again, the less disturbed of the two kept
                    again = run(request)[:2]
                    if again[0] < cpu:
                        (cpu, wall), first = again, False
        except Exception as error:  # noqa: BLE001 - a method that cannot run here is a line, not the end
            print(f"{name:<19} failed: {type(error).__name__}: {str(error)[:200]}", flush=True)
            continue
        estimate = request.estimate
        # work once per model (ACC++'s SVD) that the first run did and the second, kept, read back:
        # the kept run is priced without it, as the estimate prices a model's later runs
        once = 0.0 if first else estimate.one_off
        low, high = (value - once for value in (estimate.seconds_range or (estimate.seconds,) * 2))
        said = f"{estimate.seconds - once:.1f}" if low == high else f"{low:.1f}-{high:.1f}"
        ratio = f"{low / cpu:.2f}x" if low == high else f"{low / cpu:.2f}-{high / cpu:.2f}x"
        kept["runs"].setdefault(name, {"cpu": cpu, "wall": wall, "load": os.getloadavg()[0]})
        kept["runs"][name].update(
            estimate=estimate.seconds - once,
            low=low,
            high=high,
            passes=estimate.sequences,
            first_kept=first,
            one_off_left_out=once,
        )
        print(
            f"{name:<19} {said + ' s':>15} {cpu:>7.2f} {wall:>7.1f} {ratio:>11} {estimate.sequences:>7.1f}",
            flush=True,
        )
        if once:
            print(f"{'':<19} (less {once:.1f} s for {estimate.one_off_what}: the kept run read it back)")
        if args.out:
            Path(args.out).write_text(json.dumps(kept, indent=1), encoding="utf-8")
    print(load_average(), flush=True)


if __name__ == "__main__":
    main()
