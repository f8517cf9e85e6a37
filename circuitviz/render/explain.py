"""A circuit in words: the few edges that matter most, each said as one plain sentence.

The sentences come from what is already computed for the drawing: the edges by |score|
(``circuit_edges``) and the node labels. A node is named with its logit-lens token only where
that token bears on the task (the answer or a foil among its top promoted tokens:
``labels.captions``); otherwise each sentence says what the edge does to the answer in the
metric's units ("raises ' Mary' over ' John' by 1.2"). They are plain text (tokens quoted with
``repr``); whoever renders them escapes them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from ..core.text import shown_token
from ..labels.captions import lens_caption, role_caption
from ..positions.view import path_strength, strongest_paths
from .graph_html import GraphEdge

_HEAD = re.compile(r"^a(\d+)\.h(\d+)$")
# what each input of the reader is, by construction of attention and MLPs: not a finding about this
# circuit ("so a15.h1 copies it onward" read as a mechanism nothing on the page had measured)
ROLE = {
    "q": "the query input of {target} (with the keys, it sets where {target} attends)",
    "k": "the key input of {target} (with the query, it sets where {target} attends)",
    "v": "the value input of {target} (what {target} moves from the tokens it attends to)",
    "mlp": "the MLP {target}",
}


def node_phrase(node: str, labels: Mapping[str, Mapping[str, object]] | None, task=None) -> str:
    """A node named with what it does: 'a12.h2 (promotes ' Mary')', 'the token embeddings'.

    With ``task`` (answer and foils) the lens token is named only when it is the answer or a
    foil (``labels.captions.lens_caption``); without, the top promoted token as before."""
    if node == "input":
        return "the token embeddings"
    if task is not None:
        lens = lens_caption((labels or {}).get(node), task.answer, list(task.foils))
        return f"{node} ({lens})" if lens is not None else node
    top = top_token(node, labels)
    return f"{node} (promotes {shown_token(top, 60)})" if top is not None else node


def top_token(node: str, labels: Mapping[str, Mapping[str, object]] | None) -> str | None:
    """The token a node's output promotes most, from its logit-lens labels (None without them)."""
    promoted = ((labels or {}).get(node) or {}).get("promotes")
    if isinstance(promoted, (list, tuple)) and promoted:
        return str(promoted[0])
    return None


def edge_sentence(
    edge: GraphEdge,
    labels: Mapping[str, Mapping[str, object]] | None,
    task=None,
    estimates_metric: bool = True,
) -> str:
    """One edge as a sentence, e.g. "a12.h2 writes straight to the output (score -1.23: estimated
    to raise ' Mary' over ' John' by 1.23).". A score is the estimated change of the metric when
    the edge is corrupted, so a negative score marks an edge the answer relies on. With
    ``task`` the effect is said in the task's terms, and a node's lens token only where it is
    the answer or a foil. ``estimates_metric`` false (a method whose scores are its own, not an
    estimate of the metric): the score is given as the method's, with no effect said."""
    if not estimates_metric:
        # '+1.00', never '+1' beside '+0.999' (as if it were exactly 1)
        return _sentence(edge, labels, f" (the method's score {edge.score:+#.3g})", task)
    if task is not None:
        # the effect's amount to the score's digits: "score -13.5: ... by 14" read as two numbers
        effect = role_caption(-edge.score, task.answer, list(task.foils), task.metric, digits=3)
        # the score is the method's linear estimate, not a measured patch: said as one
        said = f"estimated to {_infinitive(effect)}" if effect else "estimated to change nothing"
        score = f" (score {edge.score:+.3g}: {said})"
        return _sentence(edge, labels, score, task)
    role_of_sign = "it carries the answer" if edge.score < 0 else "it works against the answer"
    score = f" (score {edge.score:+.3g}: {role_of_sign})"
    return _sentence(edge, labels, score, None)


def _infinitive(effect: str) -> str:
    """'raises x over y by 1.2' -> 'raise x over y by 1.2' (role_caption's verbs)."""
    verb, _, rest = effect.partition(" ")
    return f"{verb.removesuffix('s')} {rest}"


def _sentence(edge: GraphEdge, labels, score: str, task) -> str:
    """The sentence of ``edge_sentence`` around its score clause."""
    if edge.target == "logits":
        if edge.source == "input":
            return f"The token embeddings write straight to the output{score}."
        if task is not None:
            return f"{node_phrase(edge.source, labels, task)} writes straight to the output{score}."
        top = top_token(edge.source, labels)
        moved = (
            f"moves {shown_token(top, 60)} to the output"
            if top is not None
            else "writes straight to the output"
        )
        return f"{edge.source} {moved}{score}."
    role = ROLE.get(edge.kind, "{target}").format(target=edge.target)
    source = "The token embeddings" if edge.source == "input" else node_phrase(edge.source, labels, task)
    return f"{source} feed{'' if edge.source == 'input' else 's'} {role}{score}."


def explain_title(count: int, ranked: str, n: int = 5) -> str:
    """'Explain this circuit''s title: the edges ``explain_circuit`` says (``n`` of the circuit's
    ``count``, fewer where it has fewer; ``ranked``: what orders them, "that matter most"). It read
    "the 5 edges that matter most" over a circuit of none (SmolLM2's at budget 20), or of 2."""
    said = min(count, n)
    if said == 0:
        return "Explain this circuit: it has no edges at this budget"
    if said == 1:
        return f"Explain this circuit: the one edge {ranked.replace('matter most', 'matters most')}, in words"
    return f"Explain this circuit: the {said} edges {ranked}, in words"


def explain_circuit(
    edges: Sequence[GraphEdge],
    labels: Mapping[str, Mapping[str, object]] | None = None,
    n: int = 5,
    task=None,
    estimates_metric: bool = True,
) -> list[str]:
    """The ``n`` edges with the largest |score| of a circuit (``edges`` strongest first, as
    ``circuit_edges`` gives them), one sentence each; ``task`` (a ``PromptTask``) says each
    edge's effect in the answer's terms (when the scores estimate the metric: the method's trait)."""
    strongest = sorted(edges, key=lambda edge: -abs(edge.score))[: max(0, int(n))]
    return [edge_sentence(edge, labels, task, estimates_metric) for edge in strongest]


# ----- a circuit over token positions ---------------------------------------------------------------
def _place(graph, node_id: str) -> str:
    """A node with its token: "a9.h1 at ' to' (position 14)", "the embedding of ' Mary' (position 2)"."""
    node = graph.node_map[node_id]
    token = graph.tokens[node.position] if 0 <= node.position < len(graph.tokens) else ""
    where = f"{shown_token(token, 60)} (position {node.position})"
    if node.kind == "embedding":
        return f"the embedding of {where}"
    if node.kind == "logit":
        return "the answer"
    return f"{node.component} at {where}"


def path_sentence(graph, path: Sequence[str]) -> str:
    """One strongest path as a sentence: its steps, the share of the answer's input it carries,
    and what its heads and MLPs do (their captions)."""
    steps = " → ".join(_place(graph, node_id) for node_id in path)
    share = path_strength(graph, path)
    roles = [
        f"{graph.node_map[n].component} {graph.node_map[n].caption}"
        for n in path
        if graph.node_map[n].caption and graph.node_map[n].kind in ("head", "mlp")
    ]
    said = f"; {'; '.join(roles)}" if roles else ""
    return f"{steps}: {100 * share:.1f} % of the answer's input flows along it{said}."


def explain_position_circuit(graph, n_paths: int = 3) -> list[str]:
    """'Explain this circuit' for a position circuit: its strongest paths to the answer, in words."""
    return [path_sentence(graph, path) for path in strongest_paths(graph, n_paths)]
