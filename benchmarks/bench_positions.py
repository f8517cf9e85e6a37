"""Circuits over token positions against position-agnostic ones, on the nine example prompts.

    .venv/bin/python benchmarks/bench_positions.py [--prompts 9] [--ig-steps 20] [--threads 1]

For each prompt (``bench_bon.PROMPTS``: the gallery's IOI, factual, arithmetic and inline
multiple-choice prompts, one more of each, and the gender-bias prompt), EAP-IG on the embedded
Gemma-3-270M, scored once, then:

- position-resolved: the faithfulness curve over a ladder of unit budgets; the smallest budget
  reaching NDF 0.8, its units, nodes drawn (component, position) and links; and the readable
  default view (``positions.present.readable_position_budget``: NDF >= 0.8 with <= 40 nodes);
- position-agnostic: the same for the edge ladder, with its edges and nodes (components).

On the IOI prompt it also says whether the strongest paths of the default view include one from
the indirect object's position (' Mary') to the last position. Prints one line a prompt and the
counts the targets ask about. No assertions: the figures go into docs/positions.md.
"""

from __future__ import annotations

import argparse

from bench_bon import PROMPTS  # the same nine prompts as the Best-of-N and faithfulness benchmarks

from circuitviz.bench.harness import add_threads_argument, apply_threads, load_timed, machine_line
from circuitviz.measure.evaluate import circuits_at_budgets, curves_of_tasks
from circuitviz.methods import RunContext, get_method
from circuitviz.models import EMBEDDED_MODEL
from circuitviz.positions.graph import node_counts, prune_units, unit_mask
from circuitviz.positions.present import nodes_at_budgets, readable_position_budget, result_attribution_graph
from circuitviz.positions.view import strongest_paths

UNIT_LADDER = [
    20,
    30,
    50,
    75,
    100,
    150,
    200,
    300,
    500,
    750,
    1000,
    1500,
    2000,
    3000,
    5000,
    7500,
    10000,
    15000,
    20000,
]
EDGE_LADDER = [20, 30, 50, 75, 100, 150, 200, 300, 500, 750, 1000, 1500, 2000, 3000, 5000, 7500, 10000]
TARGET_NDF = 0.8


def agnostic_nodes(spec, mask) -> int:
    """Components a position-agnostic circuit draws (writers with a kept edge out, and logits)."""
    writers = mask.any(1)  # [n_forward]
    readers = spec.tensors().reader_node[mask.any(0)]
    touched = set(writers.nonzero()[:, 0].tolist()) | set(readers.tolist())
    return len(touched)


def agnostic_as_units(spec, mask, n_positions: int) -> tuple[int, int]:
    """(units, (component, position) nodes) of a position-agnostic circuit on the position graph:
    each kept edge at every position, pruned as a position circuit (what it patches, unit by unit)."""
    expanded = mask[:, :, None].expand(-1, -1, n_positions) & unit_mask(spec, n_positions)
    pruned = prune_units(spec, expanded)
    return int(pruned.sum()), int(node_counts(spec, pruned))


def first_reaching(curve, sizes, threshold: float = TARGET_NDF):
    """(budget, kept size, NDF, nodes) of the smallest budget reaching ``threshold``, else None."""
    for point, nodes in zip(curve, sizes):
        if point.ndf >= threshold:
            return point.budget, point.n_edges, point.ndf, nodes
    return None


def describe(found) -> str:
    if found is None:
        return "not reached"
    budget, size, ndf, nodes = found
    return f"{size:>6} kept, {nodes:>4} nodes (NDF {ndf:.2f}, budget {budget})"


def run_prompt(model, task, ig_steps: int) -> dict:
    """One position-resolved run (scored once), the agnostic curve of its summed scores, and the
    default view of one prompt."""
    method = get_method("eap-ig")
    ctx = RunContext(model, task)
    spec, evaluator = ctx.spec, ctx.evaluator
    n_positions = ctx.prepared().n_positions
    unit_budgets = [b for b in UNIT_LADDER if b <= spec.n_edges * n_positions]
    result = method.run(ctx, method.make_config({"ig_steps": ig_steps, "positions": True}), unit_budgets)
    position_sizes = [sizes for _, sizes in sorted(nodes_at_budgets(result).items())]
    edge_budgets = [b for b in EDGE_LADDER if b <= spec.n_edges]
    edge_circuits = circuits_at_budgets(spec, result.scores, edge_budgets)  # the summed scores
    (edge_points,) = curves_of_tasks([evaluator], edge_circuits[None], edge_budgets)
    edge_sizes = [agnostic_nodes(spec, c) for c in edge_circuits]
    agnostic = first_reaching(edge_points, edge_sizes)
    as_units = None
    if agnostic is not None:
        as_units = agnostic_as_units(spec, edge_circuits[edge_budgets.index(agnostic[0])], n_positions)
    view = readable_position_budget(result)
    graph = result_attribution_graph(result, view.budget)
    return {
        "timings": result.timings,
        "positions": first_reaching(result.curve, position_sizes),
        "agnostic": agnostic,
        "agnostic_units": as_units,
        "view": view,
        "graph": graph,
        "links": len(graph.links),
    }


def io_path_highlighted(graph, task) -> bool:
    """Whether a strongest path starts at the answer's token (the indirect object) and ends at the
    last position's logit."""
    tokens = graph.tokens
    positions = [i for i, token in enumerate(tokens) if token == task.answer]
    paths = strongest_paths(graph)
    return any(int(path[0].split("@")[1]) in positions and path[-1].startswith("logits@") for path in paths)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--prompts", type=int, default=len(PROMPTS))
    parser.add_argument("--ig-steps", type=int, default=20)
    add_threads_argument(parser)
    args = parser.parse_args()
    apply_threads(args.threads)
    model, _ = load_timed(EMBEDDED_MODEL, device="cpu")
    print(machine_line())
    reached_small = 0
    for number, (kind, task) in enumerate(PROMPTS[: args.prompts], start=1):
        found = run_prompt(model, task, args.ig_steps)
        view = found["view"]
        positions = found["positions"]
        print(f"\n{number}. {kind}: {task.clean[:60]!r} -> {task.answer!r}")
        print(f"   position-resolved, NDF {TARGET_NDF}: {describe(positions)}")
        print(f"   position-agnostic, NDF {TARGET_NDF}: {describe(found['agnostic'])} [edges, components]")
        if found["agnostic_units"] is not None:
            units, nodes = found["agnostic_units"]
            print(
                f"     the same circuit over positions: {units:>6} units, {nodes:>4} (component, position) nodes"
            )
        print(
            f"   default view: {view.budget} units, {view.n_nodes} nodes, {found['links']} links, "
            f"NDF {view.ndf:.2f}; {view.reason}"
        )
        if number == 1:
            print(
                f"   strongest paths include ' Mary' -> last position: {io_path_highlighted(found['graph'], task)}"
            )
        if positions is not None and positions[3] <= 50:
            reached_small += 1
    print(
        f"\nprompts where position-resolved EAP-IG reaches NDF {TARGET_NDF} with <= 50 drawn nodes: {reached_small}"
    )


if __name__ == "__main__":
    main()
