"""Tables of a circuit: its edges (rows, CSV), overlaps between circuits, token strips, and the
marked text contexts that SAE features and signals are described by."""

from __future__ import annotations

import csv
import html
import io
from collections.abc import Mapping, Sequence

import torch

from ..core.graph import GraphSpec
from ..core.text import invisible_as_codes
from .graph_html import KIND_COLOURS, circuit_edges


def edge_rows(
    spec: GraphSpec,
    scores: torch.Tensor,
    mask: torch.Tensor,
    limit: int | None = None,
    found: torch.Tensor | None = None,
) -> list[dict]:
    """The circuit's edges, strongest |score| first: rank, edge, source, destination, kind, score;
    with ``found`` (the edges the method itself found, ``MethodDetails.found_edges``), a column
    saying of each edge whether it was found or added to measure the circuit (ACC++'s completion,
    whose ranking scores put it above what ACC++ found, unmarked until 2026-12-06)."""
    named = set(spec.edge_names_of(mask & found)) if found is not None else None
    rows = []
    for rank, edge in enumerate(circuit_edges(spec, scores, mask), start=1):
        if limit is not None and rank > limit:
            break
        rows.append(
            {
                "rank": rank,
                "edge": edge.name,
                "source": edge.source,
                "destination": edge.target,
                "kind": edge.kind,
                "score": edge.score,
                **({"found": "found" if edge.name in named else "completion"} if named is not None else {}),
            }
        )
    return rows


def edges_csv(
    spec: GraphSpec, scores: torch.Tensor, mask: torch.Tensor, found: torch.Tensor | None = None
) -> str:
    """Every edge of the circuit as CSV (the columns of ``edge_rows``)."""
    buffer = io.StringIO()
    fields = ["rank", "edge", "source", "destination", "kind", "score"] + (
        ["found"] if found is not None else []
    )
    writer = csv.DictWriter(buffer, fieldnames=fields)
    writer.writeheader()
    for row in edge_rows(spec, scores, mask, found=found):
        writer.writerow({**row, "score": f"{row['score']:.6g}"})
    return buffer.getvalue()


def overlap_rows(circuits: Mapping[str, set[str]]) -> list[dict]:
    """Pairwise overlap of named edge sets: sizes, shared edges and Jaccard index."""
    names = list(circuits)
    rows = []
    for i, first in enumerate(names):
        for second in names[i + 1 :]:
            a, b = circuits[first], circuits[second]
            union = a | b
            rows.append(
                {
                    "circuit A": first,
                    "circuit B": second,
                    "edges A": len(a),
                    "edges B": len(b),
                    "shared": len(a & b),
                    "only A": len(a - b),
                    "only B": len(b - a),
                    "Jaccard": len(a & b) / len(union) if union else 1.0,
                }
            )
    return rows


def unique_edges(circuits: Mapping[str, set[str]]) -> dict[str, set[str]]:
    """For each circuit, the edges no other circuit in the comparison has."""
    result = {}
    for name, edges in circuits.items():
        others = set().union(*(e for n, e in circuits.items() if n != name)) if len(circuits) > 1 else set()
        result[name] = edges - others
    return result


_CHIP_MARKS = str.maketrans({" ": "·", "\n": "↵", "\t": "⇥", "\r": "␍"})


def token_strip_html(tokens: Sequence[str], differs: Sequence[bool] | None = None) -> str:
    """Tokens as escaped chips (spaces shown as ·, line breaks ↵, tabs ⇥, an invisible character by its
    code: \\u200d), the ones that differ from the other prompt marked.

    Each chip is a bidi isolate with its own direction (``dir="auto"``): a right-to-left token
    reads right to left inside its chip, and the chips stay in the prompt's order, left to right,
    instead of the browser reordering them (and their quotes) around the Arabic or Hebrew text."""
    chips = []
    for index, token in enumerate(tokens):
        marked = bool(differs and index < len(differs) and differs[index])
        # a tab and an invisible character (a zero-width joiner a family emoji split into tokens, a
        # zero-width space) drew an empty chip: each is named, the tab as ⇥ and the others by code
        shown = html.escape(invisible_as_codes(token)).translate(_CHIP_MARKS) or "∅"
        style = (
            f"background:{'#fde2cf' if marked else '#eef1f5'};border:1px solid "
            f"{KIND_COLOURS['logits'] if marked else '#d0d5dd'};"
        )
        chips.append(
            f'<span dir="auto" style="{style}border-radius:4px;padding:1px 4px;margin:1px;display:inline-block;'
            f'unicode-bidi:isolate;font-family:monospace;font-size:13px">{shown}</span>'
        )
    return f'<span dir="ltr" style="unicode-bidi:isolate">{"".join(chips)}</span>'


# characters markdown reads as markup (emphasis, code, links, math, tables, headings, autolinks'
# "http:", "www." and "a@b"): written as numeric entities, which markdown shows as the characters
_MARKDOWN_MARKUP = set("\\`*_[]$~|#:.@!")


def _token_html(token: str) -> str:
    """A token as HTML that also stays text inside markdown: markup characters as entities."""
    return "".join(
        "&#8629;" if c == "\n" else f"&#{ord(c)};" if c in _MARKDOWN_MARKUP else html.escape(c) for c in token
    )


def context_html(context: dict) -> str:
    """A stored context (``tokens``, ``target`` index, optional ``source`` index) as safe HTML:
    every token escaped, the target in <mark>, the source underlined. Safe in markdown too (the
    Steer page writes it with ``st.markdown``): the corpus's "only *inappropriate* times" was drawn
    with "inappropriate" in italics, its asterisks gone; ``$``, ``[...](...)`` and "www." likewise."""
    parts = []
    for index, token in enumerate(context["tokens"]):
        text = _token_html(token)
        if index == context.get("source"):
            text = f"<u>{text}</u>"
        if index == context.get("target"):
            text = f"<mark>{text}</mark>"
        parts.append(text)
    return "".join(parts)


def differing_positions(first: Sequence[str], second: Sequence[str]) -> list[bool]:
    """Per position of ``first``: whether ``second`` has another token there (or none)."""
    return [index >= len(second) or token != second[index] for index, token in enumerate(first)]
