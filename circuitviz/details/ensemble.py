"""What an ensemble run keeps beside its scores (``EnsembleDetails``); the method is
``circuitviz.methods.ensemble``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from .base import MethodDetails, register_details

if TYPE_CHECKING:
    from ..core.results import CircuitResult


@register_details
@dataclass
class EnsembleDetails(MethodDetails):
    """What an ensemble run combined, as plain data.

    members, normalise: the methods averaged and how their scores were made comparable.
    agreement: {budget: Jaccard overlap of the members' top-N edge sets (their mean over pairs of members)}.
    prompts: the prompt and the paraphrases scored (bootstrap only).
    resamples: bootstrap resamples drawn (0: no bootstrap).
    stability: {budget: {"chosen_mean": mean stability of the circuit's edges, "stable": edges in
        at least 90 % of the resamples' top N}}.
    notes: what the run left out and why, in sentences.
    """

    kind: ClassVar[str] = "ensemble"

    def paraphrases_used(self) -> list[str]:
        """The paraphrases the bootstrap scored (its circuits are their most stable edges)."""
        return list(self.prompts[1:])

    version: ClassVar[int] = 1

    members: list = field(default_factory=list)
    normalise: str = "rank"
    agreement: dict = field(default_factory=dict)
    prompts: list = field(default_factory=list)
    resamples: int = 0
    stability: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)

    def report_lines(self, result: CircuitResult) -> list[str]:
        lines = [f"Ensemble of {', '.join(self.members)} ({self.normalise}-normalised)."]
        for budget, overlap in self.agreement.items():
            line = f"  budget {budget}: members' top-N overlap {overlap:.2f}"
            if budget in self.stability:
                entry = self.stability[budget]
                line += (
                    f"; over {self.resamples} resamples of {len(self.prompts)} prompts the circuit's edges "
                    f"are in {100 * entry['chosen_mean']:.0f} % of top-N sets, {entry['stable']} in 90 %+"
                )
            lines.append(line)
        return lines + list(self.notes)
