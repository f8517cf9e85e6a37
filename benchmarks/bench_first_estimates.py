"""First estimates against what the runs took: each method priced from another method's run alone.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_first_estimates.py [--model smollm2-135m] [--steps 40]

In a fresh cache (``history_free_cache``: the converted models, no recorded run), after a warm-up
run that is not recorded: EAP-IG runs and is recorded; EAP, RelP, flow routes and AtP* are each
priced from that one run before any of them runs, then run and recorded; EAP and RelP are priced
again from their own run and run again; RelP is priced and run once more on the clean and
corrupted runs EAP's last run left (a second method on the prompt, as Compare runs it); in a second
fresh cache holding only EAP's first run, EAP-IG is priced from it. The IOI prompt, budgets 20,
100, 200, 500, EAP-IG with ``--steps`` IG steps (20); every other run makes its own clean and
corrupted runs, as a new prompt's does. Prints one line a run: the estimate, the run's CPU seconds
(what the estimate prices: a quiet machine's run) and wall seconds, how it was priced, and what
the count before session 46 would have said from the same runs ("before": the estimate times the
old count's ratio of this run's passes to its source's; the old count had no gradient chunks,
priced kept runs again and, until session 47, counted flow routes' observed pass 3). No
assertions. docs/benchmarks.md, "The estimates' pass weights", has the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import time

from circuitviz.bench.harness import (
    add_threads_argument,
    apply_threads,
    history_free_cache,
    ioi_task,
    load_average,
)

BUDGETS = [20, 100, 200, 500]
PRICED_FROM_EAP_IG = ("eap", "relp", "flow-routes", "atp-star")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="gemma-3-270m")
    parser.add_argument("--steps", type=int, default=20, help="EAP-IG's IG steps")
    add_threads_argument(parser, default=1)
    args = parser.parse_args()
    apply_threads(args.threads)
    base = os.environ.get("CIRCUITVIZ_CACHE")
    history_free_cache("circuitviz-first-estimates-")

    from circuitviz.entry import calibration
    from circuitviz.entry.api import run_request
    from circuitviz.entry.cpu_share import threads_for_run
    from circuitviz.entry.probe import probe_unmeasured
    from circuitviz.entry.request import Request
    from circuitviz.measure.evaluate import forget_prompt_runs
    from circuitviz.methods import flow_routes
    from circuitviz.models import load_model
    from circuitviz.models.adapter import adapter_of

    model, task = load_model(args.model), ioi_task()
    model_spec = adapter_of(model).spec

    settings = {"eap-ig": {"ig_steps": args.steps}}
    source = {}  # the recorded run's (new count, old count): the rate's FLOPs

    def priced(method: str, fresh: bool = True):
        """Priced as its run will go: with ``fresh``, on a prompt whose clean and corrupted runs
        this process does not keep (each such run makes its own)."""
        if fresh:
            forget_prompt_runs(model)
        probe_unmeasured(model)
        request = Request.for_model(model, task, method, settings.get(method, {}), BUDGETS, args.model, 256)
        return request.priced(model)

    def old_count(request) -> float:
        """The passes the count before session 46 gave: the method's cost as it stands, flow routes'
        observed pass counted 3 (as until session 47)."""
        method = request.method_object
        passes = method.estimate(request.config, model_spec, request.estimate.n_tokens, len(BUDGETS)).passes
        return passes - (
            flow_routes.observed_passes(model_spec) - 3.0 if method.name == "flow-routes" else 0.0
        )

    def run(method: str, request, record: bool = True, fresh: bool = True) -> tuple[float, float]:
        if fresh:
            forget_prompt_runs(model)  # its own clean and corrupted runs, as a new prompt's
        wall, cpu = time.perf_counter(), time.process_time()
        with threads_for_run("cpu") as share:
            result, _ = run_request(model, request, store=None)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        if record:  # as the command line records a run
            estimate = request.estimate
            source[method] = (estimate.sequences, old_count(request))
            calibration.record(
                estimate.device,
                method,
                estimate.flops_done(method, result),
                wall,
                timings=result.timings,
                model=estimate.model,
                **calibration.share_figures(share),
            )
        return cpu, wall

    def line(
        what: str, request, took: tuple[float, float], counts: tuple[float, float] | None = None
    ) -> None:
        """``counts``: the (new, old) passes of the run the estimate was priced from."""
        seconds = request.estimate.seconds
        before = ""
        if counts is not None:
            new, old = counts
            was = seconds * old_count(request) / request.estimate.sequences * new / old
            before = f" (before: {was:.2f} s, {was / took[0]:.2f}x)"
        print(
            f"{what}: estimate {seconds:.2f} s, took {took[0]:.2f} CPU s ({took[1]:.1f} wall), "
            f"{seconds / took[0]:.2f}x{before}; {request.estimate.priced}",
            flush=True,
        )

    print(f"{args.model}, IOI prompt, budgets {BUDGETS}, {args.steps} IG steps; {load_average()}", flush=True)
    run("eap", priced("eap"), record=False)  # warm-up: a process's first run pays one-off set-ups
    seed = priced("eap-ig")
    seed_took = run("eap-ig", seed)
    line("eap-ig (the first run, priced from the probe)", seed, seed_took)
    firsts = {method: priced(method) for method in PRICED_FROM_EAP_IG}
    for method, request in firsts.items():
        line(f"{method} (first)", request, run(method, request), source["eap-ig"])
    eap_first = source["eap"]
    for method in ("eap", "relp"):
        again, counts = priced(method), source[method]
        line(f"{method} (after its own run)", again, run(method, again), counts)
    second, counts = priced("relp", fresh=False), source["relp"]  # EAP's last run left the prompt's runs
    line("relp (after its own run, the prompt's runs kept)", second, run("relp", second, fresh=False), counts)
    eap_run = calibration.recorded_runs("cpu", "eap")[0]
    probes = calibration.recorded_runs("cpu", calibration.PROBE)
    if base is None:
        os.environ.pop("CIRCUITVIZ_CACHE")
    else:
        os.environ["CIRCUITVIZ_CACHE"] = base
    history_free_cache("circuitviz-first-estimates-")
    path = calibration.calibration_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    kept = {calibration.PROBE: probes, "eap": [eap_run]}
    path.write_text(json.dumps({"cpu": kept}), encoding="utf-8")
    line("eap-ig (first, from eap's first run alone)", priced("eap-ig"), seed_took, eap_first)
    print(load_average())


if __name__ == "__main__":
    main()
