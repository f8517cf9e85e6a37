"""Shared subcircuits: what the candidate circuits of a prompt and its paraphrases have in common.

The Query Circuits paper finds that the Best-of-N candidates of an IOI prompt share a core of
edges with the capability circuit (66 common edges at N = 500, drawn as an UpSet plot). These
functions compute that from circuit masks alone, with no model pass: the edges common to all
candidates, the UpSet data (how many edges lie in exactly each subset of candidates), each
candidate's Jaccard overlap with the winner, and the overlap with a reference circuit.

Masks are membership tensors [n_forward, n_backward] bool of one graph; results are plain
JSON-ready values.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..core.graph import GraphSpec


def _stack(masks: Sequence[torch.Tensor]) -> torch.Tensor:
    """Candidates x flat positions.  # [n_sets, n_forward * n_backward] bool"""
    if not len(masks):
        raise ValueError("No circuits to compare; give at least one candidate circuit.")
    shapes = {tuple(mask.shape) for mask in masks}
    if len(shapes) != 1:
        raise ValueError(
            f"The circuits come from graphs of different shapes {sorted(shapes)}; compare circuits of one model."
        )
    return torch.stack([mask.bool().flatten() for mask in masks])


def common_edges(masks: Sequence[torch.Tensor]) -> torch.Tensor:
    """Edges in every circuit.  # [n_forward, n_backward] bool"""
    return _stack(masks).all(0).view(masks[0].shape)


def jaccard(first: torch.Tensor, second: torch.Tensor) -> float:
    """|A ∩ B| / |A ∪ B|; two empty circuits are identical (1.0)."""
    union = int((first.bool() | second.bool()).sum())
    if union == 0:
        return 1.0
    return int((first.bool() & second.bool()).sum()) / union


def upset_data(masks: Sequence[torch.Tensor]) -> list[dict]:
    """Intersection sizes by exact subset, for an UpSet plot.

    One entry per non-empty subset S of candidates that some edge belongs to exactly: ``members``
    (candidate indices in S, ascending) and ``size`` (edges in every circuit of S and in no
    other). Sizes sum to the number of edges in the union. Sorted by size, largest first.
    """
    membership = _stack(masks)  # [n_sets, positions]
    in_any = membership.any(0)
    patterns, counts = torch.unique(membership[:, in_any].T, dim=0, return_counts=True)
    entries = [
        {"members": [int(i) for i in pattern.nonzero().flatten().tolist()], "size": int(count)}
        for pattern, count in zip(patterns, counts)
    ]
    entries.sort(key=lambda e: (-e["size"], len(e["members"]), e["members"]))
    return entries


def intersection_size(masks: Sequence[torch.Tensor], members: Sequence[int]) -> int:
    """Edges in every circuit of ``members`` (inclusive: they may be in others too)."""
    membership = _stack(masks)
    return int(membership[list(members)].all(0).sum())


def reference_overlap(circuit: torch.Tensor, reference: torch.Tensor) -> dict:
    """How a circuit and a reference circuit (e.g. a capability circuit) overlap."""
    circuit, reference = circuit.bool(), reference.bool()
    shared = int((circuit & reference).sum())
    size, reference_size = int(circuit.sum()), int(reference.sum())
    return {
        "circuit_edges": size,
        "reference_edges": reference_size,
        "shared": shared,
        "jaccard": jaccard(circuit, reference),
        "precision": shared / size if size else 0.0,
        "recall": shared / reference_size if reference_size else 0.0,
    }


def shared_subcircuit(
    spec: GraphSpec,
    masks: Sequence[torch.Tensor],
    winner: int,
    reference: torch.Tensor | None = None,
) -> dict:
    """Everything the Paraphrases page draws for one budget's candidate circuits.

    ``winner`` indexes ``masks``. Returns set sizes, the edges common to all (count and names),
    UpSet data, each candidate's Jaccard overlap with the winner, and with a ``reference``
    circuit its overlap with the winner, with every candidate and with the common core.

    Computed on the CPU, meant: the masks are small boolean matrices and the answer is hundreds
    of small Python values (one per UpSet pattern); on a GPU each of them is a synchronising
    read, which made this 2.45 s of a 4.3 s Best-of-N run on an H200 (0.1 s here on the CPU).
    """
    masks = [mask.to("cpu") for mask in masks]
    reference = None if reference is None else reference.to("cpu")
    common = common_edges(masks)
    data = {
        "set_sizes": [int(mask.sum()) for mask in masks],
        "n_common": int(common.sum()),
        "common_edges": spec.edge_names_of(common),
        "upset": upset_data(masks),
        "winner": int(winner),
        "jaccard_with_winner": [jaccard(mask, masks[winner]) for mask in masks],
        "reference": None,
    }
    if reference is not None:
        reference = reference.bool() & spec.edge_mask
        core = common & reference
        data["reference"] = {
            "winner": reference_overlap(masks[winner], reference),
            "candidates": [reference_overlap(mask, reference) for mask in masks],
            "common": reference_overlap(common, reference),
            "common_in_reference": spec.edge_names_of(core),
        }
    return data


def summary_line(data: dict, names: Sequence[str] | None = None) -> str:
    """One line of text for a budget's shared-subcircuit data (the CLI prints it)."""
    scores = data["jaccard_with_winner"]
    others = [s for i, s in enumerate(scores) if i != data["winner"]]
    line = f"{data['n_common']} edges common to all {len(scores)} candidates"
    if others:
        line += f"; Jaccard with the winner: min {min(others):.2f}, mean {sum(others) / len(others):.2f}"
    if data.get("reference"):
        reference = data["reference"]
        line += (
            f"; reference circuit ({reference['winner']['reference_edges']} edges): "
            f"{reference['winner']['shared']} shared with the winner, "
            f"{reference['common']['shared']} with the common core"
        )
    return line
