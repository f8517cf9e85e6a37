"""A node's card as plain data: what it is, its edges in and out by weight, its logit lens, and
for a head ACC++'s signals (which source token it attends to, which upstream parts wrote the
signal). Pure: the drawn edges, the labels and an ACC++ result's details in, a dict out; the
app's card (``ui.node_card``) shows it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

_HEAD = re.compile(r"^a(\d+)\.h(\d+)$")
_MLP = re.compile(r"^m(\d+)$")
SHOWN_ROWS = 8  # a side of a card lists this many edges, and a button shows the rest
SENT_ROWS = 300  # the most edges a side carries (the input's out-edges of a large model run to thousands)
_NUMBER = re.compile(r"^[+-]\d")  # a caption that is a figure ("+2"), not a token ("↑' Paris'")


def component_of(node_id: str) -> str:
    """The component a node id names: 'a9.h1@14' -> 'a9.h1'; 'a9.h1' -> 'a9.h1'."""
    return str(node_id).split("@")[0]


def describe(node_id: str) -> str:
    """What a node is, in words."""
    component = component_of(node_id)
    position = str(node_id).split("@")[1] if "@" in str(node_id) else None
    where = f" at position {position}" if position is not None else ""
    head = _HEAD.match(component)
    if head:
        return f"attention head {head.group(2)} of layer {head.group(1)}{where}"
    mlp = _MLP.match(component)
    if mlp:
        return f"the MLP of layer {mlp.group(1)}{where}"
    if component == "input":
        return f"the token and position embeddings{where}"
    if component == "logits":
        return f"the answer's logit (the metric){where}"
    return component + where


def node_card(
    node_id: str,
    edges: Sequence,
    labels: Mapping[str, Mapping] | None = None,
    limit: int = 8,
) -> dict:
    """{id, what, score, incoming, outgoing, promotes, suppresses}: ``edges`` are the drawing's
    ``GraphEdge``s (score: the estimated change of the metric when the edge is corrupted); in and
    out are sorted by |score|, strongest first, at most ``limit`` each (their totals beside)."""
    incoming = sorted((e for e in edges if e.target == node_id), key=lambda e: -abs(e.score))
    outgoing = sorted((e for e in edges if e.source == node_id), key=lambda e: -abs(e.score))
    label = (labels or {}).get(component_of(node_id)) or {}
    return {
        "id": str(node_id),
        "what": describe(node_id),
        "score": sum(e.score for e in outgoing) if outgoing else sum(e.score for e in incoming),
        "incoming": [_row(e, e.source) for e in incoming[:limit]],
        "outgoing": [_row(e, e.target) for e in outgoing[:limit]],
        "n_incoming": len(incoming),
        "n_outgoing": len(outgoing),
        "promotes": list(label.get("promotes") or []),
        "suppresses": list(label.get("suppresses") or []),
    }


def _row(edge, other: str) -> dict:
    return {"node": other, "edge": edge.name, "kind": edge.kind, "score": float(edge.score)}


def acc_signals(details, component: str, position: int | None = None) -> list[dict]:
    """ACC++'s decisions of head ``component`` (at ``position``, default: the answer's, the last)
    with the upstream parts that wrote each one's signal, strongest first: [{source_token, source,
    weight, destination_token, query: [(node, attribution)], key: [...]}]."""
    if details is None:
        return []
    tokens = list(getattr(details, "tokens", []) or [])
    position = len(tokens) - 1 if position is None else position
    node = f"{component}@{position}"
    found = []
    for decision in details.decisions:
        if decision.get("node") != node:
            continue
        writers: dict[str, list[tuple[str, float]]] = {"q": [], "k": []}
        for edge in details.edges:
            if edge.get("decision") == decision.get("index") and edge.get("side") in writers:
                writers[edge["side"]].append((str(edge["source"]), float(edge["attribution"])))
        for side in writers.values():
            side.sort(key=lambda item: -abs(item[1]))
        found.append(
            {
                "source": decision.get("source"),
                "source_token": decision.get("source_token"),
                "destination_token": decision.get("destination_token"),
                "weight": float(decision.get("weight", 0.0)),
                "query": writers["q"],
                "key": writers["k"],
            }
        )
    found.sort(key=lambda item: -item["weight"])
    return found


def card_data(
    vis_nodes: Sequence[Mapping],
    edges: Sequence,
    labels: Mapping[str, Mapping] | None = None,
    captions: Mapping[str, str] | None = None,
    estimates_metric: bool = True,
    partial: bool = False,
    noun: str = "edge",
) -> dict:
    """Every drawn node's and edge's card as plain text, sent with the drawing so a click shows
    its card at once in the browser (``ui.graph_view``): {"nodes": {id: {title, what, score,
    caption, in, out, lens, members}}, "edges": {id: {title, lines}}}. ``vis_nodes``: the
    drawing's nodes (a group carries its ``members``; a node without a circuit component, a token
    or layer label of a position drawing, has no card); ``edges``: its ``GraphEdge``s, groups
    already merged (``render.groups.group_edges``). ``captions``: what the drawing writes under a
    name, and ``estimates_metric`` whether the scores estimate the metric's change (the card says
    what its figure sums and what its sign means, and how the figure under the name differs).
    ``partial``: the drawing left weaker edges out (the card counts the drawn ones, and says so).
    Each side lists every edge (up to ``SENT_ROWS``), ``SHOWN_ROWS`` of them before a button.
    ``noun``: what the drawing's lines are, "edge" or, over token positions, "link" (a card there
    counted a head's 12 links to the heads and MLPs at later positions as "12 edges")."""
    incoming: dict[str, list] = {}
    outgoing: dict[str, list] = {}
    for edge in edges:
        incoming.setdefault(edge.target, []).append(edge)
        outgoing.setdefault(edge.source, []).append(edge)
    nodes = {}
    for node in vis_nodes:
        node_id = str(node["id"])
        if node.get("shape") == "text" or node_id.startswith(("token@", "layer@")):
            continue
        card = node_card(
            node_id, [*incoming.get(node_id, []), *outgoing.get(node_id, [])], labels, limit=SENT_ROWS
        )
        members = [str(m) for m in node.get("members") or []]
        nodes[node_id] = {
            "title": node_id,
            "group": f"group {node.get('group_name', node_id)}" if members else "",
            "members": ("members: " + ", ".join(members)) if members else "",
            "what": f"a group of {len(members)} nodes" if members else card["what"],
            "score": score_words(card, estimates_metric, partial, noun),
            "caption": caption_words((captions or {}).get(node_id), estimates_metric, noun),
            "in": _rows_text(card["incoming"], "←", card["n_incoming"], "In", partial, noun),
            "out": _rows_text(card["outgoing"], "→", card["n_outgoing"], "Out", partial, noun),
            "lens": _lens_text(card),
        }
    edge_cards = {
        str(edge.name): {
            "title": f"{noun} {edge.name}",
            "lines": [
                f"from {edge.source} to {edge.target} ({edge.kind} input)",
                f"score {score_text(edge.score)}",
            ],
        }
        for edge in edges
    }
    return {"nodes": nodes, "edges": edge_cards}


def score_words(card: dict, estimates_metric: bool = True, partial: bool = False, noun: str = "edge") -> str:
    """What a node's figure on its card is: the summed score of its edges out in the circuit (the
    logit's: of its edges in), and what its sign means. It read "score in this circuit: -1.728"
    beside a "+2" under the node's name, the two of opposite sign with nothing to say why."""
    out = card["n_outgoing"] > 0
    n = card["n_outgoing"] if out else card["n_incoming"]
    if n == 0:
        return f"no {noun} in this circuit"
    where = "drawn" if partial else "in this circuit"
    counted = f"{n:,} {noun if n == 1 else noun + 's'}"
    edges = f"its {counted} out {where}" if out else f"the {counted} into it {where}"
    total = card["score"]
    rows = card.get("outgoing" if out else "incoming") or [{"score": card.get("strongest")}]
    summed = sum_text(total, rows[0]["score"])
    if not estimates_metric:
        return f"{edges}: scores summing to {summed} (the method's own scores, not an effect on the metric)"
    sign = "negative: they carry the answer" if total < 0 else "positive: they work against the answer"
    return (
        f"{edges}: scores summing to {summed}, the metric's estimated change if they are corrupted ({sign})"
    )


def score_text(score: float) -> str:
    """An edge's score as a card, its hover and the edge table write it: four significant digits."""
    return f"{score:+.4g}"


def strongest_scores(edges: Sequence) -> dict[str, float]:
    """{node: the score of its strongest edge out (the logit's: in)}: what ``sum_text`` writes a
    node's sum to, in its hover as on its card."""
    strongest: dict[str, float] = {}
    for edge in edges:
        for node in (edge.source, "logits") if edge.target == "logits" else (edge.source,):
            if abs(edge.score) > abs(strongest.get(node, 0.0)) or node not in strongest:
                strongest[node] = float(edge.score)
    return strongest


def sum_text(total: float, strongest: float | None) -> str:
    """A card's sum to the decimals of its strongest edge as ``score_text`` writes it, so the rows
    beside it add up to it as shown: "+0.9537" read "summing to +0.9537" over one edge of "+0.954",
    and "+5.123" and "-5" summed to "+0.1233". Trailing zeros are dropped, as the rows drop them."""
    if strongest is None:
        return score_text(total)
    size = abs(float(strongest))
    if not math.isfinite(size) or not math.isfinite(total) or size < 1e-4 or size >= 1e4:
        return score_text(total)  # written with an exponent, as the rows then are
    decimals = max(0, 3 - math.floor(math.log10(float(f"{size:.4g}"))))
    text = f"{total:+.{decimals}f}"
    text = text.rstrip("0").rstrip(".") if "." in text else text
    return "0" if float(text) == 0 else text


def caption_words(caption: str | None, estimates_metric: bool = True, noun: str = "edge") -> str:
    """The figure under a node's name ("+2") on its card, said apart from the card's sum: how much
    the node raises the metric, from all its edges out, in the circuit or not."""
    if not caption or not estimates_metric or not _NUMBER.match(caption):
        return ""
    return (
        f"{caption} under its name: how much it raises the metric, estimated from all its {noun}s out, "
        "in this circuit or not (minus their summed score)"
    )


def _rows_text(
    rows: list[dict], arrow: str, total: int, side: str, partial: bool = False, noun: str = "edge"
) -> dict:
    """A side of a card: its heading, one (node to go to, text) per edge, strongest first, how many
    it shows before its button ("show the 4 weaker edges") and a line for any it does not carry."""
    if not rows:
        return {"head": "", "rows": []}
    hidden = len(rows) - SHOWN_ROWS
    unlisted = total - len(rows)
    return {
        "head": f"{side} ({total:,} {noun if total == 1 else noun + 's'}{' drawn' if partial else ''}, strongest first)",
        "rows": [
            [row["node"], f"{arrow} {row['node']} ({row['kind']})  {score_text(row['score'])}"]
            for row in rows
        ],
        "shown": SHOWN_ROWS,
        "more": f"show the {hidden:,} weaker {noun if hidden == 1 else noun + 's'}" if hidden > 0 else "",
        "unlisted": f"… and {unlisted:,} weaker {noun}s not listed here" if unlisted > 0 else "",
    }


def _lens_text(card: dict) -> str:
    if not (card["promotes"] or card["suppresses"]):
        return ""
    return (
        "promotes:   " + ", ".join(repr(t) for t in card["promotes"][:6])
        + "\nsuppresses: " + ", ".join(repr(t) for t in card["suppresses"][:6])
    )  # fmt: skip


def absent_card(node_id: str, why: str) -> dict:
    """The card of a node the drawing does not hold (removed by an edit), saying ``why``."""
    empty = {"head": "", "rows": []}
    what = f"{describe(node_id)}; {why}"
    return {
        "title": node_id,
        "group": "",
        "members": "",
        "what": what,
        "score": "",
        "caption": "",
        "in": empty,
        "out": empty,
        "lens": "",
    }
