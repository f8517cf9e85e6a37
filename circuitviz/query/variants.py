"""The Best-of-N variants' circuit algebra: iBoN and BoN-CSM circuits for any budget, no model pass.

- ``single``: top-N of the prompt's own score matrix S_0; ``average``: top-N of the mean of
  S_0..S_p; ``bon``: every candidate's top-N evaluated on the original prompt, the most faithful
  wins (the pipeline's job, it needs the model);
- ``ibon``: BoN circuits exist at the anchor budgets; another budget takes the anchor below it
  and adds the best-scoring edges of the anchor above it (by that anchor winner's scores);
- ``bon-csm``: walking the anchors' BoN circuits in order, each edge gets the score and the tier
  (anchor index) of the first circuit it appears in; a budget takes the first N edges sorted by
  tier, then |score|. One order serves every budget, so the circuits are nested.

Score matrices and masks are [n_forward, n_backward]; per-edge lists (``edge_vector``) are the
plain-data form results keep, in ``GraphSpec.edge_names`` order.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..core.graph import GraphSpec, prune
from ..core.text import parse_whole_numbers, shown_number

VARIANTS = ("single", "average", "bon", "ibon", "bon-csm")
# variants whose circuit exists at any budget without a model pass
ANY_BUDGET_VARIANTS = ("single", "average", "ibon", "bon-csm")


def parse_anchor_budgets(given, budgets: Sequence[int]) -> list[int]:
    """The anchors: the given ones (a config's tuple of budgets, or comma-separated text; each
    must be a budget), else every other budget from the smallest, and the largest."""
    budgets = sorted(budgets)

    def refuse(value: int) -> str | None:
        if value in budgets:
            return None
        return (
            f"Anchor budget {shown_number(value)} is not one of the budgets "
            f"({', '.join(map(str, budgets[:8]))}{', …' if len(budgets) > 8 else ''}); anchors must be among them."
        )

    if not (str(given).strip() if isinstance(given, str) else given):
        return sorted(set(budgets[::2]) | {budgets[-1]})
    if isinstance(given, str):
        return parse_whole_numbers(
            given, "Anchor budget {part} is not a whole number of edges.", refuse=refuse
        )
    for value in given:
        problem = refuse(int(value))
        if problem:
            raise ValueError(problem)
    return [int(value) for value in given]


# ----- per-edge vectors (plain data for results and the app) ------------------------------------
def edge_vector(spec: GraphSpec, matrix: torch.Tensor) -> list:
    """A [n_forward, n_backward] tensor as a list over the graph's edges, in ``edge_names`` order."""
    forward, backward = spec.edge_index
    return matrix[forward, backward].tolist()


def edge_matrix(spec: GraphSpec, values: Sequence, dtype=torch.float32, device="cpu") -> torch.Tensor:
    """The inverse of ``edge_vector``; zero off the edge mask.  # [n_forward, n_backward]"""
    matrix = torch.zeros(spec.n_forward, spec.n_backward, dtype=dtype, device=device)
    matrix[spec.tensors(device).edge_index] = torch.as_tensor(values, dtype=dtype, device=device)
    return matrix


def spec_of(matrix: torch.Tensor, spec: GraphSpec | None) -> GraphSpec:
    """The given spec, else the sequential graph whose tensors have this shape.

    Models with parallel attention and MLP (GPT-J, Pythia) have the same shapes and other
    edges: pass their spec.
    """
    if spec is not None:
        return spec
    n_forward, n_backward = (int(size) for size in matrix.shape[-2:])
    writers, readers = n_forward - 1, n_backward - 1  # L(H+1), L(3H+1)
    layers = (3 * writers - readers) // 2
    if layers <= 0 or writers % layers or (3 * writers - readers) % 2 or writers // layers < 2:
        raise ValueError(f"A [{n_forward}, {n_backward}] tensor is no model graph's shape; pass spec=.")
    return GraphSpec(n_layers=layers, n_heads=writers // layers - 1)


# ----- iBoN and BoN-CSM: circuits for any budget with no model pass --------------------------
def _ranked(spec: GraphSpec, scores: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """Flat positions of the allowed edges, largest |score| first, ties in graph order."""
    values = scores.abs().float().flatten()
    positions = allowed.flatten().nonzero().flatten()
    order = torch.sort(values[positions], descending=True, stable=True).indices
    return positions[order]


def _scores_at(candidate_scores, budget: int) -> torch.Tensor:
    return candidate_scores[budget] if isinstance(candidate_scores, dict) else candidate_scores


def ibon_circuit(
    bon_circuits: dict[int, torch.Tensor],
    candidate_scores: dict[int, torch.Tensor] | torch.Tensor,
    budget: int,
    spec: GraphSpec | None = None,
    prune_dead: bool = True,
) -> torch.Tensor:
    """Interpolated Best-of-N: a circuit of ``budget`` edges from BoN circuits, no model pass.

    bon_circuits: {anchor budget: BoN circuit mask}. candidate_scores: {anchor budget: the score
    matrix of the candidate that won there}, or one matrix for all. At an anchor budget the
    anchor's circuit is returned as it is. Otherwise: the circuit of the largest anchor below
    the budget (none: empty), plus the edges of the next anchor's circuit it lacks, best score of
    that anchor's winner first, until ``budget`` edges; past the largest anchor (or when the
    next circuit runs out), the rest of that winner's ranking fills in. Then pruned, as every
    other circuit is.  # [n_forward, n_backward] bool
    """
    budget = int(budget)
    if not bon_circuits:
        raise ValueError("iBoN needs at least one BoN circuit.")
    if budget in bon_circuits:
        return bon_circuits[budget].bool().clone()
    any_mask = next(iter(bon_circuits.values()))
    spec = spec_of(any_mask, spec)
    edge_mask = spec.tensors(any_mask.device).edge_mask
    anchors = sorted(bon_circuits)
    lower = max((a for a in anchors if a < budget), default=None)
    upper = min((a for a in anchors if a > budget), default=None)
    circuit = bon_circuits[lower].bool() & edge_mask if lower is not None else torch.zeros_like(edge_mask)
    source = upper if upper is not None else lower
    scores = _scores_at(candidate_scores, source)
    need = min(budget, spec.n_edges) - int(circuit.sum())
    if need > 0:
        flat = circuit.flatten().clone()
        pools = [edge_mask & ~circuit]
        if upper is not None:
            pools.insert(0, bon_circuits[upper].bool() & edge_mask & ~circuit)
        for pool in pools:
            chosen = _ranked(spec, scores, pool & ~flat.view_as(pool))[:need]
            flat[chosen] = True
            need -= len(chosen)
            if need <= 0:
                break
        circuit = flat.view_as(edge_mask)
    return prune(spec, circuit) if prune_dead else circuit


def csm_matrices(
    bon_circuits: dict[int, torch.Tensor],
    candidate_scores: dict[int, torch.Tensor] | torch.Tensor,
    spec: GraphSpec | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BoN-CSM's score and tier matrices from the BoN circuits at increasing budgets.

    Walking the circuits by budget, an edge takes the score (from that budget's winner) and the
    tier (0, 1, ...) of the first circuit it appears in; edges in none take the largest
    anchor's winner's score and tier k. Returns (scores float32, tiers int64), both
    [n_forward, n_backward], zero score and tier k off the edge mask.
    """
    if not bon_circuits:
        raise ValueError("BoN-CSM needs at least one BoN circuit.")
    anchors = sorted(bon_circuits)
    device = bon_circuits[anchors[0]].device
    spec = spec_of(bon_circuits[anchors[0]], spec)
    edge_mask = spec.tensors(device).edge_mask
    scores = torch.zeros(spec.n_forward, spec.n_backward, dtype=torch.float32, device=device)
    tiers = torch.full((spec.n_forward, spec.n_backward), len(anchors), dtype=torch.long, device=device)
    placed = torch.zeros_like(edge_mask)
    for tier, anchor in enumerate(anchors):
        new = bon_circuits[anchor].bool() & edge_mask & ~placed
        scores[new] = _scores_at(candidate_scores, anchor).float()[new]
        tiers[new] = tier
        placed |= new
    rest = edge_mask & ~placed
    scores[rest] = _scores_at(candidate_scores, anchors[-1]).float()[rest]
    return scores, tiers


def csm_order(
    csm_scores: torch.Tensor, csm_tiers: torch.Tensor, spec: GraphSpec | None = None
) -> torch.Tensor:
    """Flat positions of every edge: tier ascending, then |score| descending, then graph order."""
    spec = spec_of(csm_scores, spec)
    positions = spec.tensors(csm_scores.device).flat_edge_index
    by_score = torch.sort(csm_scores.abs().float().flatten()[positions], descending=True, stable=True).indices
    positions = positions[by_score]
    by_tier = torch.sort(csm_tiers.flatten()[positions], stable=True).indices
    return positions[by_tier]


def csm_circuit(
    csm_scores: torch.Tensor,
    csm_tiers: torch.Tensor,
    budget: int,
    spec: GraphSpec | None = None,
    prune_dead: bool = True,
    order: torch.Tensor | None = None,
) -> torch.Tensor:
    """BoN-CSM circuit: the first ``budget`` edges of ``csm_order``, then pruned (nested in the
    budget: pruning is monotone). Pass a precomputed ``order`` to skip the sort.  # bool"""
    spec = spec_of(csm_scores, spec)
    if order is None:
        order = csm_order(csm_scores, csm_tiers, spec)
    flat = torch.zeros(spec.n_forward * spec.n_backward, dtype=torch.bool, device=csm_scores.device)
    flat[order[: max(0, int(budget))]] = True
    circuit = flat.view(spec.n_forward, spec.n_backward)
    return prune(spec, circuit) if prune_dead else circuit


def names_mask(spec: GraphSpec, names: Sequence[str]) -> torch.Tensor:
    """Membership tensor from edge names in one indexing step (GraphError for a bad name).

    On the CPU, where names are read.  # [n_forward, n_backward] bool"""
    mask = torch.zeros(spec.n_forward, spec.n_backward, dtype=torch.bool, device="cpu")
    if names:
        forward, backward = zip(*(spec.edge_position(name) for name in names))
        mask[list(forward), list(backward)] = True
    return mask
