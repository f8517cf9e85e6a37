"""What a paraphrase-pruning run keeps beside its circuits (``ParaphrasePruningDetails``); the
method is ``circuitviz.methods.paraphrase_pruning``."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from ..core.text import counted
from .base import MethodDetails, budget_kept, register_details

if TYPE_CHECKING:
    from ..core.results import CircuitResult


# what each warm start is, in the report's words
WARM_START_WORDS = {
    "eap-ig": "the prompt's EAP-IG scores",
    "average": "the mean of the fit set's EAP-IG scores",
    "balanced": "the fit set's EAP-IG scores with the prompt weighing half",
    "consensus": "the geometric mean of the fit set's EAP-IG scores",
    "bon": "Best-of-N's most faithful top-N of the fit set",
}


@register_details
@dataclass
class ParaphrasePruningDetails(MethodDetails):
    """One mask per budget learned on the prompt and a fit share of its paraphrases, measured on
    a held-out share it never saw, as plain data.

    warm_start: what started the logits; fit_paraphrases: whether the fit share was fitted (else
        the prompt alone); steps_run: steps taken (the longest budget's).
    fit / held_out: the clean prompts of the paraphrases in each share (held out: never used to
        fit, to pick a step or to start the logits).
    budgets: per trained budget {budget, edges, nodes, ndf (on the prompt), fit_ndf (mean over the
        fit share, NaN without one), held_out_ndf (mean over the held-out share, NaN without one),
        warm_ndf (the warm start's top-N on the prompt), best_step, steps}.
    held_out_ndf: {budget: [NDF on each held-out paraphrase]}.
    notes: what the run left out and why, in sentences.
    left_out: [{paraphrase, reason}] of every paraphrase left out (the sentence names the first few).
    circuit_edges: the circuit at the largest budget, as edge names (the method's own edge set, as
        Edge Pruning's; its mask scores are nonzero on nearly every edge).
    """

    kind: ClassVar[str] = "paraphrase-pruning"

    def paraphrases_used(self) -> list[str]:
        """The fit share (the held-out share was never fitted to nor selected on)."""
        return list(self.fit)

    def held_out_figures(self, budget: int) -> list[tuple[str, float]]:
        return list(zip(self.held_out, self.held_out_ndf.get(str(int(budget)), [])))

    def page_notes(self) -> list[str]:
        """The run's own sentences, said as the method's (a measured transfer's stand beside them)."""
        return [f"The method's own paraphrases: {note}" for note in self.notes]

    version: ClassVar[int] = 1

    warm_start: str = "eap-ig"
    fit_paraphrases: bool = True
    steps_run: int = 0
    fit: list = field(default_factory=list)
    held_out: list = field(default_factory=list)
    budgets: list = field(default_factory=list)
    held_out_ndf: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)
    left_out: list = field(default_factory=list)
    circuit_edges: list | None = None

    def report_lines(self, result: CircuitResult) -> list[str]:
        fitted = (
            f"the prompt and {counted(len(self.fit), 'paraphrase')}"
            if self.fit_paraphrases and self.fit
            else "the prompt alone"
        )
        start = WARM_START_WORDS.get(self.warm_start, self.warm_start)
        if not self.fit and self.warm_start != "eap-ig":  # a fit set of the prompt alone
            start = f"{WARM_START_WORDS['eap-ig']} (no fit paraphrase to combine them with)"
        # steps_run counts the circuits measured: the warm start's, then one after each step
        lines = [
            f"One mask per budget fitted on {fitted}, warm-started from {start}, "
            f"{counted(max(0, self.steps_run - 1), 'learning step')}; {counted(len(self.held_out), 'paraphrase')} held out:"
        ]
        for row in self.budgets:
            line = f"  {budget_kept(row)}, {row['nodes']} nodes: NDF {row['ndf']:.3f} on the prompt"
            values = self.held_out_ndf.get(str(row["budget"]))
            if values:
                line += (
                    f", mean {statistics.fmean(values):.3f} on {counted(len(values), 'held-out paraphrase')}"
                )
            lines.append(line)
        return lines + list(self.notes)
