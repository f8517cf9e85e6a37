"""What an Edge Pruning run keeps beside its circuits (``EdgePruningDetails``); the method is
``circuitviz.methods.edge_pruning``."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from .base import MethodDetails, budget_kept, register_details

if TYPE_CHECKING:
    from ..core.results import CircuitResult


@register_details
@dataclass
class EdgePruningDetails(MethodDetails):
    """What an Edge Pruning run learned, as plain data.

    warm_start: the scoring method that started the logits; steps_run: steps taken (the longest
        budget's).
    budgets: per trained budget {budget, edges, warm_ndf (the first circuit of the budget's size:
        with a warm start, its top-N at step 0), ndf (the circuit kept), best_step, steps};
        untrained budgets (0 edges, the whole graph) are absent.
    history: {budget: NDF of the circuit each step ran (without a warm start, larger ones first)}.
    paraphrases: the paraphrases each circuit was also measured on (their clean prompts).
    paraphrase_ndf: {budget: [NDF on each paraphrase]}.
    circuit_edges: the circuit at the largest budget, as edge names (the method's own edge set).
    notes: what the run left out and why, in sentences.
    """

    kind: ClassVar[str] = "edge-pruning"
    version: ClassVar[int] = 1

    warm_start: str = "eap-ig"
    steps_run: int = 0
    budgets: list = field(default_factory=list)
    history: dict = field(default_factory=dict)
    paraphrases: list = field(default_factory=list)
    paraphrase_ndf: dict = field(default_factory=dict)
    circuit_edges: list | None = None
    notes: list = field(default_factory=list)

    def report_lines(self, result: CircuitResult) -> list[str]:
        # steps_run counts the circuits measured: the warm start's, then one after each step
        lines = [f"Edge Pruning from {self.warm_start}, {max(0, self.steps_run - 1)} learning steps:"]
        for row in self.budgets:
            line = (
                f"  {budget_kept(row)}: NDF {row['warm_ndf']:.3f} (warm start) -> {row['ndf']:.3f} "
                f"at step {row['best_step']}"
            )
            values = self.paraphrase_ndf.get(str(row["budget"]))
            if values:
                line += f"; on {len(values)} paraphrases mean NDF {statistics.fmean(values):.3f}"
            lines.append(line)
        return lines + list(self.notes)
