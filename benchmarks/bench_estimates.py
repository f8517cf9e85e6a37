"""Estimate before a run against the time it took, per method, in the order a user meets them.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_estimates.py [--threads 1] [--methods eap-ig,acc++]

A method may carry settings after a colon, joined by '+': ``eap-ig:positions=true`` (a run over
positions), ``edge-pruning:steps=10+warm_start=eap``.

Replays what the app does on a fresh calibration (a new cache folder that reuses the converted
models): the forward-pass probe timed after the load, then each method priced by
``limits.estimate_request`` (the line above Run), run through ``api.discover`` with the app's
budgets and settings, and recorded into the calibration as the app records it. The default
order is the browser test's: EAP-IG on Explore, EAP and the other methods on Compare, then the
Paraphrases page's Best-of-N and iBoN (whose paraphrase scores BoN has stored). Prints one line
per run: estimate, measured, their ratio, and how the estimate was priced. No assertions.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from circuitviz.bench.harness import (
    add_threads_argument,
    apply_threads,
    history_free_cache,
    ioi_task,
    machine_line,
)

ORDER = ("eap-ig", "eap", "acc++", "circuit-lasso", "edge-pruning", "bon", "ibon", "eap-ig")


def _setting(text: str):
    """A setting's value as typed: true/false, a number, else the text."""
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _request(item: str) -> tuple[str, dict]:
    """``name`` or ``name:key=value+key=value`` -> (name, settings)."""
    name, _, rest = item.partition(":")
    pairs = (pair.split("=", 1) for pair in rest.split("+") if pair)
    return name, {key: _setting(value) for key, value in pairs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--methods", default=",".join(ORDER))
    parser.add_argument("--timings", action="store_true", help="also print each run's own phase timings")
    add_threads_argument(parser)
    args = parser.parse_args()
    apply_threads(args.threads)
    history_free_cache("bench-estimates-")

    from circuitviz.entry.api import discover
    from circuitviz.entry.limits import estimate_request
    from circuitviz.entry.probe import probe_rate
    from circuitviz.methods import method_traits
    from circuitviz.models import EMBEDDED_MODEL, load_model
    from circuitviz.services.store import ResultStore
    from circuitviz.ui import bon, budget_box
    from circuitviz.ui.run import record_run

    model = load_model(EMBEDDED_MODEL)
    probe_rate(model)
    store = ResultStore(Path(os.environ["CIRCUITVIZ_CACHE"]) / "results")
    task = ioi_task()
    n_edges = budget_box.graph_edge_total(model)
    print(machine_line())
    print(f"{'method':<14} {'estimate':>9} {'measured':>9} {'ratio':>6} {'CPU':>7}  priced")
    for item in args.methods.split(","):
        method, chosen = _request(item)
        on_paraphrases = method_traits(method).has_paraphrases_view
        settings = {**(dict(bon.PAGE_DEFAULTS) if on_paraphrases else {}), **chosen}
        budgets = bon.page_budgets(n_edges) if on_paraphrases else budget_box.default_budgets(n_edges)
        estimate = estimate_request(
            model, task, method, settings, n_budgets=len(budgets), store=store, model_id=EMBEDDED_MODEL
        )
        start, cpu = time.perf_counter(), time.process_time()
        result, cached = discover(
            model, task, method, settings, budgets=budgets, model_id=EMBEDDED_MODEL, store=store
        )
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        if not cached:
            record_run(estimate, method, result, seconds, {})
        ratio = max(estimate.seconds, seconds) / max(min(estimate.seconds, seconds), 1e-9)
        if cached:
            print(f"{item:<14} {estimate.seconds:>8.1f}s  from the result store (not a run)")
            continue
        print(
            f"{item:<14} {estimate.seconds:>8.1f}s {seconds:>8.1f}s {ratio:>5.2f}x {cpu:>6.1f}s  {estimate.priced}"
        )
        if args.timings:
            print("    " + ", ".join(f"{name} {value:.2f}s" for name, value in result.timings.items()))


if __name__ == "__main__":
    main()
