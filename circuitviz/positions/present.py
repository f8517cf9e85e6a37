"""A position-resolved result made ready to read: the budget the view opens at (and why), and its
attribution graph with captions.

The default budget is the smallest of the run's budgets whose circuit is both faithful (NDF >=
``READABLE_NDF``) and small enough to read (at most ``READABLE_NODES`` drawn nodes); when none is
both, the most faithful circuit that is small enough to read (readability first: the slider and
the curve show the larger ones); the reason is said in one sentence. When no circuit small enough
to read is faithful at all (NDF 0.00 at each), the view opens at the smallest of them and
says so, instead of calling one of them "the most faithful"; the smallest budget that reaches
``READABLE_NDF`` (else the most faithful of the run) is then offered one click away (``offer``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..core.text import joined, read_token, title_quoted
from ..labels.captions import node_caption
from .graph import node_counts
from .view import AttributionGraph, from_position_circuit

READABLE_NDF = 0.8
READABLE_NODES = 40
CARRIES_NONE = 0.005  # an NDF under this reads 0.00: the circuit deviates as the corruption does


@dataclass(frozen=True)
class ReadableBudget:
    """The budget a position view opens at, its size and faithfulness, and the sentence why."""

    budget: int
    n_nodes: int
    ndf: float
    reason: str
    offer: int | None = None  # a larger budget the view offers one click away (the faithful one)


def nodes_at_budgets(result) -> dict[int, int]:
    """Drawn nodes of the result's position circuit at each budget of its curve."""
    return {
        point.budget: int(node_counts(result.graph, result.position_circuit(point.budget)))
        for point in result.curve
    }


def readable_position_budget(
    result, max_nodes: int = READABLE_NODES, threshold: float = READABLE_NDF, larger_at: str = "on the slider"
) -> ReadableBudget:
    """The budget the view opens at, by the rule of this module; ``larger_at`` says where the larger
    budgets are shown (the app's slider; the command line's table)."""
    if not result.curve:
        raise ValueError("This result has no faithfulness curve; run it at one budget at least.")
    sizes = nodes_at_budgets(result)
    points = sorted(result.curve, key=lambda p: p.budget)
    for point in points:
        if point.ndf >= threshold and sizes[point.budget] <= max_nodes:
            return ReadableBudget(
                point.budget,
                sizes[point.budget],
                point.ndf,
                f"Opened at {point.budget:,} units: the smallest budget whose circuit reaches NDF "
                f"{threshold} ({point.ndf:.2f}) with at most {max_nodes} nodes ({sizes[point.budget]}).",
            )
    faithful = [p for p in points if p.ndf >= threshold]
    where = (
        f"the smallest that does has {sizes[faithful[0].budget]} nodes (at {faithful[0].budget:,} units, {larger_at})"
        if faithful
        else "no budget of this run reaches it; add larger budgets"
    )
    # an empty circuit (the top units hold no path to the answer) is not a view: the IOI prompt's EAP
    # over positions opened at budget 20, '0 nodes, NDF 0.00', and discover wrote its files empty
    readable = [p for p in points if 0 < sizes[p.budget] <= max_nodes]
    if readable and max(p.ndf for p in readable) < CARRIES_NONE:
        return _none_carries(readable, points, sizes, max_nodes, threshold, larger_at)
    if readable:
        point = max(readable, key=lambda p: (p.ndf, -p.budget))
        return ReadableBudget(
            point.budget,
            sizes[point.budget],
            point.ndf,
            f"Opened at {point.budget:,} units, the most faithful circuit of at most {max_nodes} nodes "
            f"({sizes[point.budget]} nodes, NDF {point.ndf:.2f}): none that small reaches NDF {threshold}; "
            f"{where}.",
            faithful[0].budget if faithful else None,
        )
    drawn = [p for p in points if sizes[p.budget] > 0]
    point = drawn[0] if drawn else points[0]
    empty = [p.budget for p in points if sizes[p.budget] == 0 and p.budget < point.budget]
    why = (
        f"the budgets up to {empty[-1]:,} keep no unit (their top units hold no path from a token to the answer) "
        f"and every other circuit of it has more than {max_nodes} nodes"
        if empty
        else f"every circuit of it has more than {max_nodes} nodes; add smaller budgets"
    )
    first = "the smallest budget of this run" if not empty else "the smallest budget whose circuit has units"
    return ReadableBudget(
        point.budget,
        sizes[point.budget],
        point.ndf,
        f"Opened at {point.budget:,} units, {first} ({sizes[point.budget]} nodes, NDF {point.ndf:.2f}): {why}.",
    )


def _none_carries(
    readable, points, sizes, max_nodes: int, threshold: float, larger_at: str
) -> ReadableBudget:
    """The opening when no circuit of at most ``max_nodes`` nodes is faithful at all (NDF 0.00): the
    IOI prompt's EAP-IG over positions (Gemma-3-270M) opened at 50 units as "the most faithful
    circuit of at most 40 nodes (18 nodes, NDF 0.00)", its NDF 0.0005 beside 0.0 at 20 and 100
    units. It opens at the smallest, says that none of them is faithful, and offers the
    smallest budget reaching ``threshold`` (else the run's most faithful), with its figures."""
    point = readable[0]
    top = max(p.ndf for p in readable)
    figure = "0.00" if min(p.ndf for p in readable) > -CARRIES_NONE else f"at most {top:.2f}"
    budgets = joined([f"{p.budget:,}" for p in readable])
    each = "at each of them" if len(readable) > 1 else "there"
    said = (
        f"No circuit of at most {max_nodes} nodes is faithful: NDF is {figure} {each} ({budgets} units), "
        f"{'each' if len(readable) > 1 else 'it'} deviating from the model about as much as the corruption "
        f"does, or more. Opened at {point.budget:,} units, the smallest ({sizes[point.budget]} nodes); "
    )
    faithful = [p for p in points if p.ndf >= threshold]
    best = max(points, key=lambda p: (p.ndf, -p.budget))
    if faithful:
        offer = faithful[0]
        said += f"the smallest budget whose circuit reaches NDF {threshold} is "
    elif best.ndf >= CARRIES_NONE:
        offer = best
        said += f"no budget of this run reaches NDF {threshold}; the most faithful is "
    else:
        return ReadableBudget(
            point.budget, sizes[point.budget], point.ndf, said + "no budget of this run is faithful either."
        )
    said += f"{offer.budget:,} units ({sizes[offer.budget]} nodes, NDF {offer.ndf:.2f}, {larger_at})."
    return ReadableBudget(point.budget, sizes[point.budget], point.ndf, said, offer.budget)


def caption_nodes(graph: AttributionGraph, labels: Mapping[str, Mapping[str, object]] | None, task) -> None:
    """Caption every head and MLP by ``labels.captions``'s rule (the full sentence for the hover
    and the explanation, the short form for the canvas); the lens labels read the last
    position, so a node elsewhere is captioned with its role."""
    last = len(graph.tokens) - 1
    for node in graph.nodes:
        if node.kind in ("embedding", "logit"):
            continue
        options = dict(at_last_position=node.position == last)
        lens = (labels or {}).get(node.component)
        foils = list(task.foils)
        node.caption = node_caption(lens, node.influence, task.answer, foils, task.metric, **options) or ""
        node.badge = (
            node_caption(lens, node.influence, task.answer, foils, task.metric, short=True, **options) or ""
        )


def result_attribution_graph(result, budget: int, labels=None) -> AttributionGraph:
    """The attribution graph of a position-resolved result at ``budget`` units, captioned. Why a
    view opened at ``budget`` is the page's to say (``attribution_graph_html``'s ``view_notes``),
    not the graph's: its files (the HTML, Neuronpedia's JSON) are read without the page."""
    point = result.point(budget)
    circuit = result.position_circuit(budget)
    # a budget the run did not evaluate has no NDF, and pruning may keep fewer units than it asks:
    # discover --html-budget 999 titled its page '999 units' over the units pruning kept
    faithfulness = f", NDF {point.ndf:.2f}" if point is not None else ", not evaluated: no NDF"
    kept = point.n_edges if point is not None else int(circuit.sum())
    units = f"{kept:,} units" if kept == budget else f"{kept:,} units kept (budget {budget:,})"
    title = (
        f"{result.model_id} · {result.method} over positions · {units}{faithfulness} · "
        f"prompt: {title_quoted(result.task.clean)} → {read_token(result.task.answer)}"  # the answer as a word
    )
    graph = from_position_circuit(
        result.graph,
        result.position_scores,
        circuit,
        result.tokens.get("clean", []),
        patterns=result.attention,
        title=title,
        prompt=result.task.clean,
        answer=result.task.answer,
        model_id=result.model_id,
    )
    caption_nodes(graph, labels, result.task)
    return graph
