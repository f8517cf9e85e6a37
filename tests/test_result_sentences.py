"""Sentences beside a result, checked against what the result holds (an audit found each of these
untrue, misleading or unreadable on the factual prompt): the slider's label of the Best-of-N
baselines, the cause given for a dip in a curve, a circuit that stops growing, a link's budget
the slider lacks, a token of spaces quoted in a message, and an answer that is not the model's
own top token."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("streamlit")

from circuitviz import render  # noqa: E402
from circuitviz.core.curves import Baseline, CurvePoint  # noqa: E402
from circuitviz.core.tasks import PromptTask  # noqa: E402
from circuitviz.details.query import QueryCircuitDetails  # noqa: E402

TASK = PromptTask("The capital of France is", "The capital of Italy is", " Paris", (" the",))
PAIRS = [
    {"index": 0, "clean": "The capital of France is"},
    {"index": 7, "clean": "The capital of France is the city of"},
    {"index": 11, "clean": "France has its capital in"},
]


def _points(*rows):
    return [CurvePoint(budget, kept, 0.0, ndf, ndf) for budget, kept, ndf in rows]


def _mask(*on):
    mask = torch.zeros(8, dtype=torch.bool, device="cpu")
    mask[list(on)] = True
    return mask


class Result:
    """A stand-in result: what the page's sentences read."""

    def __init__(self, method, curve, details=None, circuits=None, scores=None):
        self.method, self.curve, self.details = method, curve, details
        self.circuits = circuits or {}
        self.scores = torch.zeros(8, device="cpu") if scores is None else scores
        self.baseline = Baseline(clean=-0.823, corrupted=-5.673)
        self.task = TASK


def _details(variant: str) -> QueryCircuitDetails:
    # candidates 0, 1, 2 are the pairs 0 (the prompt), 7 and 11; BoN's winner is candidate 2 at
    # budget 100 and candidate 1 at budget 500 (the audit's p11 and p7)
    return QueryCircuitDetails(
        variant=variant,
        pairs=PAIRS,
        candidates=[0, 7, 11],
        budgets=[20, 100, 500],
        anchor_budgets=[20, 100, 500],
        per_budget=[
            {"budget": 20, "winner": 2, "candidates": [{"ndf": 0.5}, {"ndf": 0.6}, {"ndf": 0.69}]},
            {"budget": 100, "winner": 2, "candidates": [{"ndf": 0.8}, {"ndf": 0.9}, {"ndf": 0.999}]},
            {"budget": 500, "winner": 1, "candidates": [{"ndf": 0.66}, {"ndf": 0.784}, {"ndf": 0.7}]},
        ],
        anchor_winners={"20": 2, "100": 2, "500": 1},
    )


DIPPED = _points((20, 10, 0.69), (100, 86, 0.999), (500, 491, 0.784))


# ----- 3. a circuit that stops growing -----------------------------------------------------------------
ACC_CURVE = _points(
    (20, 20, 0.017), (50, 50, 0.014), (100, 100, 0.006), (196, 196, 0.199), (200, 196, 0.199),
    (500, 196, 0.199), (1000, 196, 0.199), (10342, 196, 0.199),
)  # fmt: skip


def test_a_circuit_that_stops_growing_is_said_so_not_offered_as_larger():
    """ACC++ kept 196 edges at every budget from 196 to 10,342, and the opening sentence said
    "Larger budgets are on the slider and the curve"."""
    from circuitviz.ui.result_view import curve_notes

    view = render.opening_view(ACC_CURVE)
    assert "Larger budgets are on the slider" not in view.reason
    assert view.reason.endswith(
        "Larger budgets add nothing: the circuit stops growing at 196 edges (every budget from 196 to 10,342 "
        "keeps 196)."
    )
    notes = curve_notes(Result("acc++", ACC_CURVE))
    assert (
        "ACC++'s circuit stops growing at 196 edges: every budget from 196 to 10,342 keeps 196 edges (NDF 0.20 "
        "at each), so larger budgets add nothing."
    ) in notes
    growing = _points((20, 20, 0.1), (50, 48, 0.2), (100, 97, 0.3), (500, 480, 0.4))
    assert render.opening_view(growing).reason.endswith("Larger budgets are on the slider and the curve.")
    assert render.growth_stop(growing) is None
    # a circuit of every edge of the graph is whole, not stopped
    assert render.growth_stop(_points((40, 32, 1.0), (50, 32, 1.0)), total=32) is None
