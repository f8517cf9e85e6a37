"""What demo mode shows of a circuit: the prompt as a sentence and its strongest paths.

A path here starts at one of the circuit's strongest edges into the answer's logit and walks
back, at each node, along its strongest incoming edge (by |score|) until the embeddings: the
route most of that edge's effect comes along. Pure: the drawing's ``GraphEdge``s in, edge names
out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..core.text import possessive, read_token, shown_token


def strongest_paths(edges: Sequence, n_paths: int = 3) -> list[list]:
    """Up to ``n_paths`` paths (lists of edges, embeddings first, the logit last), one from each
    of the strongest edges into the logit, walked back along the strongest incoming edges."""
    into: dict[str, list] = {}
    for edge in edges:
        into.setdefault(edge.target, []).append(edge)
    for members in into.values():
        members.sort(key=lambda edge: -abs(edge.score))
    paths = []
    for last in into.get("logits", [])[: max(0, int(n_paths))]:
        path, seen, node = [last], {last.target, last.source}, last.source
        while node != "input" and into.get(node):
            step = next((edge for edge in into[node] if edge.source not in seen), None)
            if step is None:
                break
            path.append(step)
            seen.add(step.source)
            node = step.source
        paths.append(path[::-1])
    return paths


def path_edge_names(paths: Sequence[Sequence]) -> set[str]:
    return {edge.name for path in paths for edge in path}


def path_sentence(path: Sequence) -> str:
    """A path in words: 'input → a3.h1 → m5 → logits'."""
    if not path:
        return ""
    return " → ".join([path[0].source, *[edge.target for edge in path]])


def one_line(text: str) -> str:
    """``text`` on one line, each line break drawn '↵' as the token chips draw it: the headline is
    a heading, and markdown ends a heading at a line break, so an MMLU prompt's options and cue
    (or a typed prompt's blank line and indented line, a code block) were drawn below it."""
    return re.sub(r"\r\n|\r|\n", " ↵ ", str(text))


def prompt_sentence(task, clean: float | None = None) -> str:
    """The prompt and what the circuit explains, as one sentence (plain text, one line: the
    prompt's line breaks drawn '↵'). ``clean``: the metric on the clean prompt (the logit
    difference where there is a foil).

    It said "answers ' she' rather than ' he'" of the Gallery's "The nurse said that", whose top
    next token is ' the' (27.6 %, ' she' 17.9 %): a logit difference says which of the two the
    model prefers, not what it answers. The answer and foils read as words ("Mary", ``read_token``):
    the heading read "prefers ' Mary' to ' John'", each token's leading space inside its quotes."""
    read = f'The model reads "{one_line(task.clean)}"'
    tokens = (task.answer, *task.foils)
    # ' Paris' over 'Paris' would read "prefers "Paris" to "Paris"": such tokens quoted as they are
    quote = read_token if len({read_token(token) for token in tokens}) == len(tokens) else shown_token
    answer = quote(task.answer, 30)
    if not task.foils:
        return f"{read}; the circuit is of its next token {answer}."
    foils = " or ".join(quote(foil, 30) for foil in task.foils)
    if clean is not None and clean < 0:
        return f"{read} and prefers {foils} to {answer}; the circuit is of what raises {answer}."
    return f"{read} and prefers {answer} to {foils}."


def legend_sentence(
    n_paths: int, effects: bool, method: str, groups: str | None, writers: bool = True
) -> str:
    """What the demo's drawing shows, true of it: the ``n_paths`` paths in full colour (the other
    edges are drawn too, faded), ranked by an effect only where the method's scores estimate one
    (``effects``; else by ``method``'s own score), and purple boxes only where there are groups:
    ``groups`` "user" (named on the page), "proposed" (by layer band and role) or None (none drawn);
    ``writers``: whether a proposed group of writers is drawn (ACC++ on IOI drew early movers and
    early MLPs only, beside "'writers' write to the answer").

    It said "The coloured paths carry the most; purple boxes are groups of parts that work
    together" for every circuit: on the Gallery's Edge Pruning circuits, whose scores are mask
    values of 0.99-1.0, beside a box of late heads grouped by their depth alone, and with no box;
    and on EAP's, of a path through a head that promotes the foil (an edge against the answer)."""
    parts = []
    if n_paths:
        one = n_paths == 1  # "The path drawn in full colour have the highest scores" (ACC++ on IOI)
        ranked = (
            f"{'has the largest estimated effect' if one else 'have the largest estimated effects'} on the "
            "answer (for it or against it: see the key)"
            if effects
            else f"{'has the highest score' if one else 'have the highest scores'} ({possessive(method)} own "
            "score, not a measured effect)"
        )
        these = (
            "The path drawn in full colour" if n_paths == 1 else f"The {n_paths} paths drawn in full colour"
        )
        parts.append(f"{these} {ranked}; the other connections are faded.")
    if groups == "user":
        parts.append("Purple boxes are the groups named on this page.")
    elif groups == "proposed":
        said = "; 'writers' write to the answer" if writers else ""  # named only where one is drawn
        parts.append(
            f"Purple boxes gather parts of the same depth and role (their name says which{said}), a "
            "grouping by position, not a measured one."
        )
    return " ".join(parts)


def empty_sentence(budget: int) -> str:
    """Demo mode's one sentence for a circuit that keeps no edge at its budget. It said "0
    connections; its faithfulness (NDF) is 0.00 (below 0.8: it carries only part of it)" over an
    empty frame noted "raise the budget", a control demo mode hides (EAP-IG at budget 1, whose one
    edge is on no path from the input to the logits and is pruned)."""
    return (
        f"At budget {budget:,} the method's circuit keeps no connection from the input to the answer, "
        "so there is nothing to draw; turn demo mode off and choose a larger budget."
    )


# what NDF's 0 is, by what it was measured on (``details.base.reference_name``): a run with no
# corrupted prompt (flow routes, ACC++) said "no better than the corrupted prompt" of none given
ZERO_IS = {
    "corrupted": "the corrupted prompt",
    "neutral prompt": "a neutral prompt (the prompt's words replaced by padding)",
    "signals knocked out": "the model with every signal the method found knocked out",
}


def lead_sentence(
    n_edges: int, ndf: float | None, good_ndf: float, noun: str = "answer", reference: str = "corrupted"
) -> str:
    """The demo's first words on the circuit: "the part of the model that carries this answer" only
    where its NDF says so (``good_ndf`` or more); it said so of an EAP circuit of NDF 0.43.
    ``noun``: what the metric measures, "preference" where there is a foil (the logit difference
    of answer over foil: ' she' over ' he' is not the model's answer, ' the' is), else "answer".
    ``reference``: what NDF's 0 was measured on (``details.base.reference_name``)."""
    if ndf is None:
        return f"The circuit below is what the method found for this {noun}: {n_edges:,} connections"
    if ndf >= good_ndf:
        head, short = f"the part of the model that carries this {noun}", ""
    else:
        head, short = (
            f"what the method found for this {noun}",
            f" (below {good_ndf}: it carries only part of it)",
        )
    return (
        f"The circuit below is {head}: {n_edges:,} connections; its faithfulness (NDF) is {ndf:.2f}{short}, "
        f"where 1 means it alone reproduces the model's {noun} and 0 that it does no better than "
        f"{ZERO_IS.get(reference, ZERO_IS['corrupted'])}"
    )
