"""Pure drawing: circuits, curves and overlaps in, HTML pages, plotly figures and CSV out.

Nothing here touches a model or imports streamlit, so every drawing can be tested and exported
without a browser (the app, the CLI's ``discover --html`` and the gallery builder share it).
"""

from .curves import (
    candidate_figure,
    curve_dips,
    curve_figure,
    curves_csv,
    figure_html,
    figure_image,
    log_ticks,
    opening_view,
    readable_budget,
)
from .explain import explain_circuit
from .graph_html import (
    GraphDrawing,
    GraphEdge,
    circuit_edges,
    circuit_graph_html,
    drawn_layers,
    node_position,
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
from .upset import Intersection, exclusive_intersections, shared_by_all, upset_figure

__all__ = [
    "GraphDrawing",
    "GraphEdge",
    "Intersection",
    "circuit_edges",
    "circuit_edges_nodes",
    "drawn_layers",
    "circuit_graph_html",
    "context_html",
    "candidate_figure",
    "curve_dips",
    "curve_figure",
    "explain_circuit",
    "curves_csv",
    "differing_positions",
    "edge_rows",
    "edges_csv",
    "exclusive_intersections",
    "figure_html",
    "figure_image",
    "logit_lens_captions",
    "log_ticks",
    "node_position",
    "opening_view",
    "overlap_rows",
    "readable_budget",
    "result_graph_html",
    "shared_by_all",
    "token_strip_html",
    "unique_edges",
    "upset_figure",
]


def result_graph_html(
    result, budget: int, labels=None, max_edges: int = 1500, mask=None, ndf=None, **options
):
    """The standalone graph page of a ``CircuitResult`` at ``budget``: what the app shows and
    downloads, and what ``python -m circuitviz discover --html`` writes.

    ``mask``: the circuit to draw when it is not ``result.circuit(budget)`` (iBoN/BoN-CSM at a
    budget the run did not evaluate); ``ndf``: its faithfulness for the title, when known.
    """
    point = result.point(budget)
    if ndf is None and point is not None:
        ndf = point.ndf
    faithfulness = f", NDF {ndf:.2f}" if ndf is not None else ""
    title = options.pop("title", None) or (
        f"{result.model_id} · {result.method} · budget {budget:,} edges{faithfulness} · "
        f"prompt: {result.task.clean!r} → {result.task.answer!r}"
    )
    circuit = result.circuit(budget) if mask is None else mask
    if "captions" not in options and labels:
        options["captions"] = logit_lens_captions(labels)
        options["caption_key"] = LOGIT_LENS_KEY
    return circuit_graph_html(
        result.graph, result.scores, circuit, labels=labels, max_edges=max_edges, title=title, **options
    )


LOGIT_LENS_KEY = "under each name: the token its output promotes most at the last position (logit lens)"


def logit_lens_captions(labels) -> dict[str, str]:
    """{node: repr of its top promoted token} from logit-lens labels (logits: its top next token)."""
    captions = {}
    for node, values in (labels or {}).items():
        tokens = (values or {}).get("promotes") or (values or {}).get("top next tokens")
        if isinstance(tokens, (list, tuple)) and tokens and node != "input":
            captions[node] = repr(str(tokens[0]))
    return captions


def circuit_edges_nodes(result, budget: int) -> set[str]:
    """The nodes a result's circuit at ``budget`` touches (for a shared layout of several)."""
    nodes = set()
    for edge in circuit_edges(result.graph, result.scores, result.circuit(budget)):
        nodes.update((edge.source, edge.target))
    return nodes
