"""Integrated gradients through the softmax, and the greedy counterfactual removal.

The attention weight of source s is ``g(z) = softmax(phi(z))_s`` over the sources the
destination can attend (phi the score soft-cap, or the identity). Along the path ``z(t) = t z``
from all-zero scores (uniform attention) to the real row, a candidate with contribution vector
``c_i`` gets ``IG_i = int_0^1 sum_j c_ij dg/dz_j(t z) dt = c_i . G`` with

    G_j = int_0^1 p_s(t) (delta_js - p_j(t)) phi'(t z_j) dt,

the second term being the competition between sources. Completeness holds by construction:
``sum_i IG_i = z . G = p_s(1) - p_s(0)``. The integral uses Gauss-Legendre quadrature, exact
to rounding for the smooth integrands here at 64 nodes.

Greedy removal: take the candidates in decreasing IG, subtract each one's contribution from
the row and recompute the softmax, until the weight falls below tau(d) = k / n_sources.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch


def attention_threshold(k: float, n_sources: int) -> float:
    """tau(d) = k / (number of sources d attends over), at most 1."""
    return min(1.0, float(k) / max(int(n_sources), 1))


def _capped(row: torch.Tensor, cap: float | None) -> torch.Tensor:
    return row if cap is None else cap * torch.tanh(row / cap)


def softmax_weight(row: torch.Tensor, source: int, cap: float | None = None) -> float:
    """softmax(phi(row))[source]."""
    return float(torch.softmax(_capped(row, cap), dim=-1)[source])


def path_gradient(row: torch.Tensor, source: int, steps: int = 64, cap: float | None = None) -> torch.Tensor:
    """G: the softmax gradient of weight ``source`` averaged along t * row, t in [0, 1].  # [n_src]"""
    nodes, weights = np.polynomial.legendre.leggauss(int(steps))
    t = torch.tensor((nodes + 1) / 2, dtype=row.dtype, device=row.device)  # [T]
    w = torch.tensor(weights / 2, dtype=row.dtype, device=row.device)
    scaled = t[:, None] * row[None, :]  # [T, n_src]
    probabilities = torch.softmax(_capped(scaled, cap), dim=-1)  # [T, n_src]
    target = probabilities[:, source : source + 1]  # [T, 1]
    gradient = -target * probabilities
    gradient[:, source] += target[:, 0]
    if cap is not None:
        gradient = gradient / torch.cosh(scaled / cap) ** 2
    return (w[:, None] * gradient).sum(0)


@dataclass
class Removal:
    """One greedy step: the candidate removed, its IG, and the weight after removing it."""

    component: int
    direction: int
    attribution: float
    weight_after: float


@dataclass
class GreedyResult:
    """The removals of one side of one decision, in order, and whether the threshold was reached."""

    removals: list[Removal] = field(default_factory=list)
    reached: bool = False
    weight: float = 0.0  # the weight before any removal
    final_row: torch.Tensor | None = None  # the row after the removals  # [n_src]


def greedy_removal(
    row: torch.Tensor,
    source: int,
    attributions: torch.Tensor,
    vectors: Callable[[int], torch.Tensor],
    threshold: float,
    max_signals: int,
    cap: float | None = None,
) -> GreedyResult:
    """Remove candidates in decreasing IG until softmax(row)[source] < threshold.

    attributions: [n_comp, R]; ``vectors(component)`` gives that component's contributions for
    every direction [R, n_src]. Stops early (``reached`` False) when only candidates with IG <= 0
    are left or ``max_signals`` were removed.
    """
    result = GreedyResult(weight=softmax_weight(row, source, cap))
    current = row.clone()
    weight = result.weight
    if weight < threshold:
        result.reached, result.final_row = True, current
        return result
    flat = attributions.reshape(-1)
    n_directions = attributions.shape[1]
    count = min(int(max_signals), flat.numel())
    values, order = torch.topk(flat, count)
    cache: dict[int, torch.Tensor] = {}
    for value, index in zip(values.tolist(), order.tolist()):
        if value <= 0:
            break
        component, direction = divmod(index, n_directions)
        if component not in cache:
            cache[component] = vectors(component)
        current = current - cache[component][direction]
        weight = softmax_weight(current, source, cap)
        result.removals.append(Removal(component, direction, float(value), weight))
        if weight < threshold:
            result.reached = True
            break
    result.final_row = current
    return result
