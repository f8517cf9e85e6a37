"""What a CircuitLasso run keeps beside its scores (``LassoDetails``), as plain data; the method
is ``circuitviz.methods.lasso``, its machinery ``circuitviz.lasso``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from .base import MethodDetails, register_details

if TYPE_CHECKING:
    from ..core.results import CircuitResult


SKELETON_NOTE = (
    "CircuitLasso's coefficients are a dependency skeleton: which components' outputs linearly "
    "predict which readers' inputs across the observed token positions. They are not causal effect "
    "sizes; the faithfulness curve (patching) is what measures effects."
)


@register_details
@dataclass
class LassoDetails(MethodDetails):
    """What a CircuitLasso run fitted, as plain data.

    note: what the coefficients mean (a dependency skeleton, not effect sizes).
    units: "components" or "sae".
    observations: counts of the observed token positions and texts by kind, and notes.
    regression: the fitted problem's sizes, lambda selection, solver rounds, KKT violation.
    lambda_path: the lambdas tried.
    selected_edges: edges with a nonzero coefficient; circuit_edges: those on a path to logits.
    coefficients: {edge name: aggregated |coefficient|} of the selected edges, largest first.
    scores_note: how edges beyond the selection are ranked.
    feature_circuit: with SAE units, the feature-level circuit ({layers, nodes, edges, ...}).
    report: the lines the command line prints.
    paraphrases: the template paraphrases it observed (their positions are rows of the regression
    it fitted), which a measure of transfer holds out; a result stored without them reads none.
    """

    kind: ClassVar[str] = "circuit-lasso"
    version: ClassVar[int] = 1

    note: str = SKELETON_NOTE
    units: str = "components"
    observations: dict = field(default_factory=dict)
    regression: dict = field(default_factory=dict)
    lambda_path: list = field(default_factory=list)
    selected_edges: int = 0
    circuit_edges: list = field(default_factory=list)
    coefficients: dict = field(default_factory=dict)
    scores_note: str = ""
    feature_circuit: dict | None = None
    report: list = field(default_factory=list)
    paraphrases: list = field(default_factory=list)

    def paraphrases_used(self) -> list[str]:
        """The paraphrases it observed: fitted to, so never held out (its "held-out" NDF was
        measured on 5 of the 8 it had regressed on, as "never fitted to")."""
        return [str(text) for text in self.paraphrases]

    def report_lines(self, result: CircuitResult) -> list[str]:
        return list(self.report)
