"""What demo mode shows of a circuit: the prompt as a sentence and its strongest paths.

A path here starts at one of the circuit's strongest edges into the answer's logit and walks
back, at each node, along its strongest incoming edge (by |score|) until the embeddings: the
route most of that edge's effect comes along. Pure: the drawing's ``GraphEdge``s in, edge names
out.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..core.text import shown_token


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


def prompt_sentence(task) -> str:
    """The prompt and its answer as one sentence (plain text)."""
    foils = " or ".join(shown_token(foil, 30) for foil in task.foils)
    rather = f" rather than {foils}" if foils else ""
    return f'The model reads "{task.clean}" and answers {shown_token(task.answer, 30)}{rather}.'
