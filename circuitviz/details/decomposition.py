"""What a CD-T run keeps beside its scores (``circuitviz.methods.cdt``): every node's relevance."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from .base import MethodDetails, register_details

if TYPE_CHECKING:
    from ..core.results import CircuitResult


@register_details
@dataclass
class DecompositionDetails(MethodDetails):
    """A contextual decomposition of one prompt.

    baseline: what a source's relevant part was ("zero": its whole output; "corrupted": its
        clean-minus-corrupted output).
    clean_metric: the metric of the clean run, which the relevances decompose.
    relevance: {node name: R(node)}, the metric minus the metric of the irrelevant part with that
        node as the source (every position at once).
    scores_note: what an edge's score is.
    notes: what the faithfulness curve was measured against, in sentences.
    """

    kind: ClassVar[str] = "decomposition"
    version: ClassVar[int] = 1

    baseline: str = "zero"
    clean_metric: float = 0.0
    relevance: dict = field(default_factory=dict)
    scores_note: str = ""
    notes: list = field(default_factory=list)

    def report_lines(self, result: CircuitResult) -> list[str]:
        top = sorted(self.relevance.items(), key=lambda item: -abs(item[1]))[:6]
        shown = ", ".join(f"{name} {value:+.3g}" for name, value in top)
        lines = [
            f"CD-T ({self.baseline} baseline) of a clean metric of {self.clean_metric:+.4g}; "
            f"most relevant nodes: {shown}"
        ]
        if self.scores_note:
            lines.append(f"scores: {self.scores_note}")
        return lines + list(self.notes)
