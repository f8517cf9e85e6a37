"""Scores that are not numbers stop a run, said in one sentence.

A pass that overflows (a model loaded in float16, a checkpoint with extreme weights) gives edge
scores of NaN or infinity. ``ScoringMethod.run_batch`` turned them into 0 and the largest float
(``nan_to_num``), so the circuit was chosen among the other edges as if nothing had happened: a
silent guess. Off the graph's edge mask a product with 0 may be NaN by arithmetic alone, and that
is not a score, so only the edges the graph has are checked.
"""

from __future__ import annotations

import torch

from ..core.graph import GraphSpec
from ..models.adapter import model_dtype


class NonFiniteScoresError(ValueError):
    """A run's edge scores hold NaN or infinity; the message says how many and what to do."""

    said_as = "The run stopped"  # the page's words before the message: it ran, and could not finish


def require_finite_scores(
    scores: torch.Tensor, spec: GraphSpec, method: str, model, units: torch.Tensor | None = None
) -> None:
    """Raise NonFiniteScoresError when an edge of ``spec`` has a score that is not finite
    (``scores``: [n_forward, n_backward], or a leading task axis; with ``units``, the
    [n_forward, n_backward, pos] mask of a circuit over positions, the scores of those units)."""
    mask = spec.tensors(scores.device).edge_mask if units is None else units
    bad = int((~torch.isfinite(scores) & mask).sum())
    if not bad:
        return
    total = int(mask.sum()) * (scores.numel() // mask.numel())
    what = "edge scores" if units is None else "(edge, position) unit scores"
    dtype = str(model_dtype(model)).removeprefix("torch.")
    way_out = (
        "load the model in float32 (--dtype float32) and run again"
        if dtype != "float32"
        else "the model's own numbers overflow on this prompt, so try another prompt or model"
    )
    raise NonFiniteScoresError(
        f"{method} gave {bad:,} of {total:,} {what} that are not numbers (NaN or infinity): a pass "
        f"of the model overflowed in {dtype}; {way_out}."
    )
