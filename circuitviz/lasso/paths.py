"""CircuitLasso's circuit: the fitted SEM's paths into the metric, each edge scored by its share.

The fit gives, for every selected edge u -> v, a standardised strength a(u, v) (the aggregated
|coefficient| of v's columns on u's: one standard deviation of u moves v by about a(u, v) of its
standard deviations). Path tracing reads the SEM's linear explanation of the metric y off those
strengths: the share of y that flows through u -> v is

    share(u -> v) = a(u, v) * J(v),    J(logits) = 1,    J(v) = I(node of v),
    I(w) = sum over readers r of a(w, r) * J(r)

so J(v) sums, over every selected path from v's node to y, the product of its strengths (each node
passes what its inputs explain on to its output at strength 1 in standard deviations: the SEM has
no equation inside a node). Standardised strengths already carry the source's scale: a
coefficient times the source's standard deviation over the target's. An edge on no selected path
into y has share 0 and is not part of the circuit; the circuit keeps the edges whose share is at
least ``min_share`` of the largest share into the same reader (a weak parallel route that the
Lasso let in beside a strong one carries almost none of the explanation).
"""

from __future__ import annotations

import torch

from ..core.graph import GraphSpec, prune

DEFAULT_MIN_SHARE = 0.03


def path_shares(spec: GraphSpec, strengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(share of every edge [n_forward, n_backward], I of every writer [n_forward]), float64, CPU.

    ``strengths`` [n_forward, n_backward]: the fitted standardised |coefficients| (0 = not
    selected). Writers are in graph order (a reader's node comes after every writer it reads),
    so one sweep from the last writer back to the input computes every I.
    """
    strengths = (strengths.detach().double().cpu() * spec.edge_mask).clamp_min(0)  # [F, B]
    owner = spec.backward_to_forward  # [B] writer of each reader's node, -1 for logits
    importance = torch.zeros(spec.n_forward, dtype=torch.float64, device="cpu")  # [F]
    reach = torch.zeros(spec.n_backward, dtype=torch.float64, device="cpu")  # [B] J of each reader
    reach[owner < 0] = 1.0
    readers_of = [torch.nonzero(owner == writer)[:, 0] for writer in range(spec.n_forward)]
    for writer in range(spec.n_forward - 1, -1, -1):
        importance[writer] = (strengths[writer] * reach).sum()
        reach[readers_of[writer]] = importance[writer]
    return strengths * reach[None, :], importance


def path_circuit(
    spec: GraphSpec, shares: torch.Tensor, min_share: float = DEFAULT_MIN_SHARE, min_total: float = 0.0
) -> torch.Tensor:
    """The edges whose share is positive, at least ``min_share`` of the largest share into the
    same reader and at least ``min_total`` of the largest share of all, kept only where they
    still connect the input to the logits.  # [F, B] bool"""
    largest = shares.max(dim=0, keepdim=True).values  # [1, B]
    overall = float(shares.max()) if shares.numel() else 0.0
    kept = (shares > 0) & (shares >= min_share * largest) & (shares >= min_total * overall) & spec.edge_mask
    return prune(spec, kept)


def difference_scale(problem, prompt_rows: torch.Tensor, corrupted_rows: torch.Tensor) -> torch.Tensor:
    """Each source unit's clean-to-corrupted change, in its own standard deviations: the root mean
    square over the prompt's positions of its standardised columns' differences between the prompt
    and its corruption (aligned position by position: the two have the same tokens count).
    # [n_sources] float64, CPU"""
    predictors = problem.predictors.double().cpu()
    clean, corrupted = predictors[prompt_rows.cpu()], predictors[corrupted_rows.cpu()]  # [n, P] each
    if clean.shape != corrupted.shape or not clean.shape[0]:
        return torch.ones(problem.n_sources, dtype=torch.float64, device="cpu")
    per_column = (clean - corrupted).pow(2).mean(0)  # [P]
    scale = torch.zeros(problem.n_sources, dtype=torch.float64, device="cpu")
    scale.index_add_(0, problem.source_of.cpu(), per_column)
    return scale.sqrt()
