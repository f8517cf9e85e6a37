"""What a gradient method's run with ``neurons`` on keeps beside its edge scores: MLP neurons as
nodes (``circuitviz.engine.neurons``), the top ones per layer and their circuit's faithfulness."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from .base import MethodDetails, register_details

if TYPE_CHECKING:
    from ..core.results import CircuitResult


@register_details
@dataclass
class NeuronDetails(MethodDetails):
    """Neuron-level scores of one run.

    top_k: the neurons kept per MLP (the ``neuron_top_k`` setting).
    neurons: the kept neurons at top_k, [{"layer", "neuron", "score"}], by layer then |score|.
    layer_mass: per layer, the sum of |score| over all its neurons (what the top k leave out shows
        against it).
    curve: the neuron circuit keeping the top k of every MLP at a few k, measured by exact patching
        of every other neuron: [{"k", "n_neurons", "metric", "ndf", "necessity"}].
    scores_note: what a neuron's score is.
    """

    kind: ClassVar[str] = "neurons"
    version: ClassVar[int] = 1

    top_k: int = 0
    neurons: list = field(default_factory=list)
    layer_mass: list = field(default_factory=list)
    curve: list = field(default_factory=list)
    scores_note: str = ""

    def report_lines(self, result: CircuitResult) -> list[str]:
        points = ", ".join(
            f"top {p['k']} a layer ({p['n_neurons']} neurons): NDF {p['ndf']:.3f}, necessity {p['necessity']:.3f}"
            for p in self.curve
        )
        strongest = sorted(self.neurons, key=lambda n: -abs(n["score"]))[:5]
        named = ", ".join(f"m{n['layer']}.n{n['neuron']} {n['score']:+.3g}" for n in strongest)
        lines = [f"neuron circuits (every other neuron patched): {points}", f"strongest neurons: {named}"]
        flat = self.flat_note()
        if flat:
            lines.insert(1, flat)
        asked = (result.config or {}).get("neuron_top_k")
        if isinstance(asked, int) and not isinstance(asked, bool) and asked > self.top_k:
            lines.append(  # the setting said 4096 where a label read 'top 2048', unexplained
                f"neuron_top_k {asked:,} is more than the {self.top_k:,} neurons of each MLP: every neuron is kept."
            )
        return lines

    def flat_note(self) -> str:
        """The sentence for a neuron curve whose NDF reads 0.000 at every k ('' otherwise): a line of
        zeros beside the edge curve's figures said nothing of why."""
        points = [
            p for p in self.curve if isinstance(p.get("ndf"), (int, float)) and not math.isnan(p["ndf"])
        ]
        if not points or any(round(p["ndf"], 3) != 0 for p in points):
            return ""
        last = max(points, key=lambda p: p["k"])
        return (
            f"The neuron circuit's NDF is 0 at every k: even with the top {last['k']:,} neurons of each MLP "
            f"kept, patching every other neuron to its corrupted activation moves the metric (to "
            f"{last['metric']:.3g}) at least as far from the clean run as the whole corruption does, so "
            "the MLPs' effect lies in neurons outside their top k by score (spread over many, or "
            "ranked low by the scores)."
        )

    def page_notes(self) -> list[str]:
        """The neuron circuits' curve beside the result's figures in the app, as the command line
        prints it, with its sentence when it is 0 at every k."""
        if not self.curve:
            return []
        points = ", ".join(f"top {p['k']} a layer: NDF {p['ndf']:.3f}" for p in self.curve)
        return [f"Neuron circuits (every other neuron patched): {points}.", *filter(None, [self.flat_note()])]
