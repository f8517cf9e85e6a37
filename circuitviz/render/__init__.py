"""Pure drawing: circuits, curves and overlaps in, HTML pages, plotly figures and CSV out.

Nothing here touches a model or imports streamlit, so every drawing can be tested and exported
without a browser (the app, the CLI's ``discover --html`` and the gallery builder share it).
"""

from ..core.text import joined, read_token, title_quoted
from ..labels.captions import CAPTION_KEY, LENS_CAPTION_KEY, node_caption
from .curves import (
    candidate_figure,
    curve_figure,
    curves_csv,
    figure_html,
    figure_image,
    log_ticks,
)
from .explain import explain_circuit, explain_title
from .graph_html import (
    GraphDrawing,
    GraphEdge,
    canvas_caption_of,
    circuit_edges,
    circuit_graph_html,
    drawn_layers,
    node_position,
    node_scores,
)
from .opening import (
    READABLE_EDGES,
    OpeningView,
    curve_dips,
    edges_at,
    growth_stop,
    growth_stop_sentence,
    opening_view,
    readable_budget,
)
from .tables import (
    context_html,
    differing_positions,
    edge_rows,
    edges_csv,
    overlap_rows,
    token_strip_html,
    unique_edges,
)
from .upset import (
    UPSET_BARS,
    Intersection,
    cut_sentence,
    exclusive_intersections,
    shared_by_all,
    upset_figure,
)

__all__ = [
    "GraphDrawing",
    "GraphEdge",
    "Intersection",
    "canvas_caption_of",
    "circuit_edges",
    "circuit_edges_nodes",
    "drawn_layers",
    "circuit_graph_html",
    "context_html",
    "candidate_figure",
    "curve_dips",
    "curve_figure",
    "explain_circuit",
    "explain_title",
    "growth_stop",
    "growth_stop_sentence",
    "curves_csv",
    "edges_at",
    "differing_positions",
    "edge_rows",
    "edges_csv",
    "exclusive_intersections",
    "figure_html",
    "figure_image",
    "log_ticks",
    "meaningful_captions",
    "node_position",
    "OpeningView",
    "READABLE_EDGES",
    "opening_view",
    "overlap_rows",
    "readable_budget",
    "graph_title",
    "result_graph_html",
    "shared_by_all",
    "token_strip_html",
    "unique_edges",
    "upset_figure",
    "cut_sentence",
    "UPSET_BARS",
]


def result_graph_html(
    result,
    budget: int,
    labels=None,
    max_edges: int = 1500,
    mask=None,
    ndf=None,
    estimates_metric: bool = True,
    edited=None,
    **options,
):
    """The standalone graph page of a ``CircuitResult`` at ``budget``: what the app shows and
    downloads, and what ``python -m circuitviz discover --html`` writes.

    ``mask``: the circuit to draw when it is not ``result.circuit(budget)`` (iBoN/BoN-CSM at a
    budget the run did not evaluate, or a circuit the user edited); ``ndf``: the method's
    circuit's faithfulness for the title, when known. ``edited``: ``mask`` is the user's edit of
    the method's circuit, ``{"ndf": its NDF or None}`` (see ``graph_title``).
    ``estimates_metric``: the method's trait ``scores_estimate_metric`` (when false, the legend
    and the captions under the names say nothing of the scores' effect on the answer).
    """
    circuit = result.circuit(budget) if mask is None else mask
    title = options.pop("title", None) or graph_title(result, budget, circuit, ndf, edited)
    if "neurons" not in options and getattr(result.details, "kind", "") == "neurons":
        options["neurons"] = result.details.neurons  # MLP neurons kept as nodes (a run with neurons on)
    if "captions" not in options and labels:
        options["captions"] = meaningful_captions(
            result.graph, result.scores, circuit, labels, result.task, estimates_metric
        )
        options["caption_key"] = CAPTION_KEY if estimates_metric else LENS_CAPTION_KEY
    options.setdefault("file_notes", [task_note(result.task)])  # the file names its task
    return circuit_graph_html(
        result.graph,
        result.scores,
        circuit,
        labels=labels,
        max_edges=max_edges,
        title=title,
        estimates_metric=estimates_metric,
        **options,
    )


def graph_title(result, budget: int, circuit, ndf=None, edited=None) -> str:
    """The drawing's title: the model, the method, the circuit's edges and NDF, the prompt. With
    ``edited`` (``{"ndf": ...}``: the circuit is the user's edit of the method's), the edited
    circuit's own edges and NDF, the method's named as such: a 5-edge edit was drawn under the
    method's "82 edges (budget 100), NDF 0.80"."""
    point = result.point(budget)
    if ndf is None and point is not None:
        ndf = point.ndf
    faithfulness = f", NDF {ndf:.2f}" if ndf is not None else ""
    method = f"{edges_at(point) if point else f'budget {budget:,}'}{faithfulness}"
    if edited is not None:
        n_edges = int((circuit.bool() & result.graph.tensors(circuit.device).edge_mask).sum())
        measured = edited.get("ndf")
        figures = f"NDF {measured:.2f}" if measured is not None else "NDF not measured (load the model)"
        method = (
            f"edited circuit: {n_edges:,} {'edge' if n_edges == 1 else 'edges'}, {figures} "
            f"(the method's: {method})"
        )
    # the answer as a word ("Mary"): the title read "→ ' Mary'", the token's leading space in its quotes
    prompt = f"{title_quoted(result.task.clean)} → {read_token(result.task.answer)}"
    return f"{result.model_id} · {result.method} · {method} · prompt: {prompt}"


def task_note(task) -> str:
    """What a drawing's NDF was measured on, for a file read without the page (which shows the
    task above its figures): the metric and the corrupted prompt; the graph files of both views
    (edges, and over positions) carry it. Prompts as ``repr`` writes
    them (user text: escaped where it is drawn)."""
    if task.metric == "logit_diff":
        metric = f"the logit difference of {task.answer!r} over {joined([repr(f) for f in task.foils])}"
    else:
        metric = f"{'log p' if task.metric == 'logprob' else 'p'}({task.answer!r})"
    corrupted = f"; the corrupted prompt: {task.corrupted!r}" if task.corrupted else ""
    return f"The metric: {metric}{corrupted}."


def meaningful_captions(spec, scores, mask, labels, task, estimates_metric: bool = True) -> dict[str, str]:
    """{node: caption} for the nodes of the circuit ``mask`` by ``labels.captions``'s rule: the
    logit-lens token where the answer or a foil is among the node's top promoted (or suppressed)
    tokens, else its effect in words, which only scores that estimate the metric give
    (``estimates_metric``; else the lens alone). The effect is minus the summed scores of **all**
    the node's edges out, in or out of the circuit ("raises ' Mary' over ' John' by 1.2"): what
    corrupting the node is estimated to take from the metric, the same at every budget (summed
    over the circuit's edges only it read +1.3 at one budget and +2.3 at another for one node)."""
    in_circuit = node_scores(circuit_edges(spec, scores, mask))
    out_sums = (scores.float() * spec.tensors(scores.device).edge_mask).sum(dim=1).tolist()
    whole = dict(zip(spec.forward_names, out_sums))
    captions = {}
    for node in in_circuit:
        if node in ("input", "logits") or node not in whole:
            continue
        text = node_caption(
            (labels or {}).get(node),
            -whole[node] if estimates_metric else None,
            task.answer,
            list(task.foils),
            task.metric,
            short=True,
        )
        if text:
            captions[node] = text
    return captions


def circuit_edges_nodes(result, budget: int) -> set[str]:
    """The nodes a result's circuit at ``budget`` touches (for a shared layout of several)."""
    nodes = set()
    for edge in circuit_edges(result.graph, result.scores, result.circuit(budget)):
        nodes.update((edge.source, edge.target))
    return nodes
