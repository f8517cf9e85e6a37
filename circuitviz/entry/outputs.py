"""The pages and files ``discover`` writes beside its JSON: the app's standalone graph page
(``--html``), and for a circuit over token positions its attribution-graph page and Neuronpedia's
graph JSON (``--neuronpedia``); and ``evaluate``'s figures as JSON (``--json``). And the sentences
the app writes under a curve (``render.curve_notes``: printed, never stored), printed by discover."""

from __future__ import annotations

import json
from pathlib import Path

from ..core.tasks import prepare_task
from ..details.base import reference_name
from ..export.neuronpedia import task_ids, to_neuronpedia
from ..labels.logit_lens import logit_lens_labels
from ..methods import method_traits
from ..positions.present import readable_position_budget, result_attribution_graph
from ..render.curve_notes import curve_notes  # noqa: F401  (discover prints them)

EVALUATION_JSON_HELP = (
    "write the figures printed (the task, the baseline, each circuit's budget, edges, NDF, necessity "
    "and, with --completeness, completeness) to this JSON file"
)
LARGER_AT = "in discover's table"  # where a command line user finds the budgets the drawing passed over


def json_budget(budgets, total: int, keeps: str | None = None) -> int | None:
    """The budget whose circuit ``discover --out`` marks ``in_graph``: the largest under the graph's
    ``total`` (edges, or units over token positions), as the whole graph is the model, not a circuit
    (discover's default budgets end there, as Explore's do); the largest when none is under it, or
    when the method keeps less than the whole graph there (``keeps``: ACC++'s traced circuit)."""
    budgets = sorted(int(budget) for budget in budgets)
    if not budgets:
        return None
    under = [budget for budget in budgets if budget < total]
    return budgets[-1] if keeps or not under else under[-1]


def write_position_outputs(
    model, result, html: Path | None, neuronpedia: Path | None, budget: int | None
) -> None:
    """The attribution-graph page and/or Neuronpedia's graph JSON of a position-resolved result,
    at ``budget`` units (default: the readable budget, whose reason is printed)."""
    from ..render import task_note
    from ..render.attribution_graph import attribution_graph_html  # plotly loads only to draw a page

    if budget is None:
        chosen = readable_position_budget(result, larger_at=LARGER_AT)
        budget = chosen.budget
        print(chosen.reason)
    prepared = prepare_task(model, result.task, need_corrupted=False)  # the lens reads the clean run
    labels = logit_lens_labels(model, result.graph, prepared)
    # the reason is printed, not written into the files: "in discover's table" is not in them
    graph = result_attribution_graph(result, budget, labels)
    if html is not None:
        drawing = attribution_graph_html(graph, file_notes=[task_note(result.task)])
        html.write_text(drawing.html, encoding="utf-8")
        point = result.point(budget)  # the budget asks for units; pruning keeps these
        kept = point.n_edges if point is not None else int(result.position_circuit(budget).sum())
        unmeasured = "" if point is not None else "; not among the evaluated budgets, so no NDF"
        shown = f"budget {budget:,}: {kept:,} units kept, {len(graph.nodes)} nodes, {len(graph.links)} links"
        print(f"wrote {html} ({shown}{unmeasured})")
    if neuronpedia is not None:
        data = to_neuronpedia(graph, **task_ids(model, result.task))
        neuronpedia.write_text(json.dumps(data), encoding="utf-8")
        print(
            f"wrote {neuronpedia} ({len(data['nodes'])} nodes, {len(data['links'])} links, Neuronpedia graph JSON)"
        )


def completeness_note(result) -> str | None:
    """Why ``--completeness`` measured nothing for ``result``, or None when it measured."""
    if result.positions:
        return "completeness: not measured: its random halves are of edges, and this circuit's units are (edge, position)"
    if not result.task.corrupted:
        return "completeness: not measured: this task has no corrupted prompt for the circuit's halves to be patched to"
    return None


def write_graph_html(model, result, path: Path, budget: int | None) -> None:
    """The app's standalone graph page of ``result`` (with logit-lens labels) at ``budget``
    (default: the budget the app's first view opens at, whose reason is printed)."""
    from ..render import opening_view, result_graph_html  # plotly loads only to draw a page

    if budget is None:
        chosen = opening_view(result.curve, larger_at=LARGER_AT, reference=reference_name(result))
        budget = chosen.budget
        print(chosen.reason)
    # the lens reads the clean run: a task of ACC++, Flow routes or CD-T has no corrupted prompt
    labels = logit_lens_labels(model, result.graph, prepare_task(model, result.task, need_corrupted=False))
    estimates = method_traits(result.method).scores_estimate_metric  # what the legend may say of scores
    drawing = result_graph_html(result, budget, labels=labels, estimates_metric=estimates)
    path.write_text(drawing.html, encoding="utf-8")
    left_out = f"; {drawing.n_left_out:,} weaker edges left out" if drawing.n_left_out else ""
    # a budget the run did not evaluate is drawn (the top edges by score) but has no NDF in the table
    unmeasured = "" if result.point(budget) is not None else "; not among the evaluated budgets, so no NDF"
    print(f"wrote {path} (budget {budget:,}: {len(drawing.edges):,} edges drawn{left_out}{unmeasured})")


def write_evaluation_json(
    args, model_id: str, task, spec, baseline, curve, notes, kinds=None, transfer=None, neutral=False
) -> None:
    """``evaluate``'s figures as JSON at ``args.json`` (nothing when it is None): what it printed,
    with the names ``discover``'s JSON gives the same figures (its ``curve`` points; NaN, a figure
    not measured, as null), and ``point_circuits``: which circuit each point measured (the first,
    the file's in_graph circuit, has its edge count as its 'budget', which the JSON said nowhere).
    ``neutral``: the task has no corrupted prompt and was measured against the neutral prompt, which
    ``baseline_note`` says (the baseline's 'corrupted' beside an empty corrupted prompt said nowhere
    what it was the metric of; the printed table reads "neutral prompt metric")."""
    from ..core.results import json_safe
    from ..details.base import NEUTRAL_PROMPT_WORDS

    if args.json is None:
        return
    data = {
        "kind": "circuitviz evaluation",
        "model_id": model_id,
        "circuit_file": str(args.circuit),
        "task": task.to_dict(),
        "total_edges": int(spec.n_edges),
        "baseline": {"clean": baseline.clean, "corrupted": baseline.corrupted},
        **(
            {
                "baseline_note": f"no corrupted prompt: 'corrupted' is the metric of {NEUTRAL_PROMPT_WORDS}, "
                "against which NFS, NDF and necessity were measured"
            }
            if neutral and not task.corrupted
            else {}
        ),
        "curve": [json_safe(point.to_dict()) for point in curve],
        "point_circuits": list(kinds or []),
        "notes": list(notes),
        **({"transfer": transfer} if transfer is not None else {}),  # --transfer-file: discover's names
    }
    args.json.write_text(json.dumps(data, indent=1), encoding="utf-8")
    print(f"wrote {args.json} ({len(curve)} circuit{'' if len(curve) == 1 else 's'} evaluated)")
