"""What the methods that choose one circuit by their own rule keep beside their scores: ACDC's
greedy pruning and the information flow routes (``OwnCircuitDetails``); the methods are
``circuitviz.methods.acdc`` and ``circuitviz.methods.flow_routes``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from .base import MethodDetails, register_details

if TYPE_CHECKING:
    from ..core.results import CircuitResult


@register_details
@dataclass
class OwnCircuitDetails(MethodDetails):
    """The circuit a method's own rule chose (one per threshold), and how it got there.

    method: the method's name; threshold: the value its rule cut at.
    circuit_edges: its own circuit as edge names (what the planted benchmark judges).
    counts: plain counts of the run (ACDC: patched rows, batched passes, edges tested, kept).
    scores_note: what a score is and how top-N relates to the own circuit.
    notes: anything else the run should say, in sentences.
    """

    kind: ClassVar[str] = "own-circuit"
    version: ClassVar[int] = 1

    method: str = ""
    threshold: float = 0.0
    circuit_edges: list = field(default_factory=list)
    counts: dict = field(default_factory=dict)
    scores_note: str = ""
    notes: list = field(default_factory=list)

    def report_lines(self, result: CircuitResult) -> list[str]:
        counts = ", ".join(f"{name.replace('_', ' ')} {value}" for name, value in self.counts.items())
        lines = [
            f"{self.method} at threshold {self.threshold:g}: its own circuit has "
            f"{len(self.circuit_edges)} edges" + (f" ({counts})" if counts else "")
        ]
        kept = self.counts.get("edges_kept")
        if isinstance(kept, int) and kept > len(
            self.circuit_edges
        ):  # "has 132 edges (... edges kept 137)", unsaid
            lines.append(
                f"of the {kept} edges the walk kept, {kept - len(self.circuit_edges)} lie on no path from the "
                f"input to the logits, so its own circuit (pruned) has {len(self.circuit_edges)}"
            )
        if self.scores_note:
            lines.append(f"scores: {self.scores_note}")
        beyond = self._beyond_own(result)
        if beyond:
            lines.append(beyond)
        return lines + list(self.notes)

    def _beyond_own(self, result: CircuitResult) -> str:
        """The budgets of the curve above its own circuit's size (and below the whole graph's),
        where top-N of the scores takes edges the rule left out, and how many of those score 0
        (taken in graph order: the flow routes' circuit at 1,000 edges held 247 edges off every
        route, under a line saying 'the top N edges are whole routes')."""
        own, graph = len(self.circuit_edges), getattr(result, "graph", None)
        if graph is None or not result.curve:
            return ""
        points = [p for p in result.curve if own < p.budget and p.n_edges < graph.n_edges]
        if not points:
            return ""
        zeros = {
            p.budget: int(((result.scores == 0) & result.circuit(p.budget) & graph.edge_mask).sum())
            for p in points
        }
        shown = ", ".join(f"{b:,}" + (f" ({z:,} of score 0)" if z else "") for b, z in zeros.items())
        return (
            f"budgets above its own circuit's {own:,} edges: {shown}; there the circuit is the top N of the "
            "scores, which adds edges its rule left out"
            + (", those of score 0 in the graph's order, not by any measure" if any(zeros.values()) else "")
        )
