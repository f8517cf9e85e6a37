"""An edit to its new NDF and necessity on the embedded model: the first edit of a prompt (it
makes the clean and corrupted runs) and every later one (the patched pass alone).

    .venv/bin/python benchmarks/bench_edit.py [--device cpu|cuda] [--budget 200] [--edits 6] [--threads N]

The circuit is EAP's at ``--budget`` edges on the IOI prompt; each edit removes one more of its
nodes (strongest first), as a user clicking "remove this node" does, and is measured by
``edit.measure`` (the circuit and its complement in one batched call). Prints each edit's seconds
and the median of the edits after the first; no assertions (figures go into docs/app.md).
"""

from __future__ import annotations

import argparse
import statistics

from circuitviz.bench.harness import (
    add_threads_argument,
    apply_threads,
    ioi_task,
    load_timed,
    machine_line,
    timed,
)
from circuitviz.core.graph import GraphSpec
from circuitviz.measure.edit import CircuitEdit, edited_mask, measure
from circuitviz.measure.evaluate import circuits_at_budgets, forget_prompt_runs
from circuitviz.methods import RunContext, get_method
from circuitviz.models import EMBEDDED_MODEL
from circuitviz.render import circuit_edges, node_scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default=EMBEDDED_MODEL)
    parser.add_argument("--device", default=None)
    parser.add_argument("--budget", type=int, default=200)
    parser.add_argument("--edits", type=int, default=6)
    add_threads_argument(parser)
    args = parser.parse_args()
    apply_threads(args.threads)

    model, _ = load_timed(args.model, device=args.device)
    spec = GraphSpec.from_model(model)
    task = ioi_task()
    eap = get_method("eap")
    ((scores, _),) = eap.score_batch([RunContext(model, task)], eap.default_config())
    scores = scores.float().cpu()  # selection reads the scores on the CPU
    (circuit,) = circuits_at_budgets(spec, scores, [args.budget])
    totals = node_scores(circuit_edges(spec, scores, circuit))
    order = sorted((n for n in totals if n not in ("input", "logits")), key=lambda n: -abs(totals[n]))
    forget_prompt_runs(model)
    print(machine_line())
    print(f"model {args.model}: {spec.n_edges} edges; EAP circuit at {args.budget} edges, {len(order)} nodes")
    edit = CircuitEdit()
    seconds = []
    for index, node in enumerate(order[: args.edits]):
        edit = edit.with_node_removed(node)
        mask = edited_mask(spec, circuit, edit)
        (_, point), spent = timed(measure, model, task, mask, sync=next(model.parameters()).device)
        seconds.append(spent)
        kind = "first edit (makes the clean and corrupted runs)" if index == 0 else "edit"
        print(
            f"{kind:48s} remove {node:8s} -> {point.n_edges:4d} edges  NDF {point.ndf:.3f}  "
            f"necessity {point.necessity:.3f}  {spent:.3f} s"
        )
    if len(seconds) > 1:
        print(f"median of the edits after the first: {statistics.median(seconds[1:]):.3f} s")


if __name__ == "__main__":
    main()
