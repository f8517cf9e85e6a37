"""Everything one Best-of-N family run computed, and each variant's view of it as a result.

``QueryCircuits`` holds tensors on the run's device; ``to_result(variant)`` gives the
``CircuitResult`` of one variant (single, average, bon, ibon or bon-csm), its tensors on the
CPU, with the whole comparison in its ``QueryCircuitDetails``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import torch

from ..core.curves import Baseline, CurvePoint
from ..core.graph import GraphSpec
from ..core.results import CircuitResult
from ..core.tasks import PreparedTask, PromptTask
from ..details.query import QueryCircuitDetails
from .pairs import ParaphrasePair
from .pool import point_dict
from .variants import edge_vector


@dataclass
class QueryCircuits:
    """Everything one run of the family computed; ``to_result`` picks one variant's view.

    config: the family's settings (``methods.bon.QueryCircuitConfig``).
    """

    model_id: str
    spec: GraphSpec
    task: PromptTask
    config: object
    prepared: PreparedTask
    baseline: Baseline
    pairs: list[ParaphrasePair]
    candidates: list[int]  # pair index of each candidate; candidate 0 is the prompt itself
    candidate_scores: torch.Tensor  # [n_candidates, n_forward, n_backward]
    budgets: list[int]
    anchors: list[int]
    circuits: dict[str, dict[int, torch.Tensor]]  # variant -> budget -> mask
    curves: dict[str, list[CurvePoint]]
    candidate_points: dict[int, list[CurvePoint]]  # budget -> per candidate
    winners: dict[int, int]  # budget -> candidate index
    csm: tuple[torch.Tensor, torch.Tensor] | None
    shared: dict[int, dict]
    reference_edges: int | None
    timings: dict[str, float]
    counts: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    device: str = "cpu"
    backend: str = "hooked"  # models.adapter.backend_of

    def to_result(self, variant: str) -> CircuitResult:
        """One variant's result, its tensors on the CPU (results are stored and drawn there)."""
        candidate_scores = self.candidate_scores.cpu()  # [n_candidates, n_forward, n_backward]
        csm = None if self.csm is None else (self.csm[0].cpu(), self.csm[1].cpu())
        return CircuitResult(
            model_id=self.model_id,
            graph=self.spec,
            task=self.task,
            method=variant,
            config=dataclasses.asdict(self.config),
            scores=self._variant_scores(variant, candidate_scores, csm).float(),
            baseline=self.baseline,
            curve=list(self.curves[variant]),
            timings=dict(self.timings),
            circuits={b: m.cpu() for b, m in self.circuits[variant].items()},
            tokens={"clean": self.prepared.clean_str_tokens, "corrupted": self.prepared.corrupted_str_tokens},
            device=self.device,
            backend=self.backend,
            details=self._details(variant, candidate_scores, csm),
        )

    def _variant_scores(self, variant: str, candidate_scores: torch.Tensor, csm) -> torch.Tensor:
        """The score matrix a variant's result shows.  # [n_forward, n_backward]"""
        if variant == "single":
            return candidate_scores[0]
        if variant == "average":
            return candidate_scores.mean(0)
        if variant == "bon-csm" and csm is not None:
            return csm[0]
        if variant == "ibon" and self.anchors:
            return candidate_scores[self.winners[max(self.anchors)]]
        largest = max(self.winners) if self.winners else None
        return candidate_scores[self.winners[largest]] if largest is not None else candidate_scores[0]

    def _details(self, variant: str, candidate_scores: torch.Tensor, csm) -> QueryCircuitDetails:
        """The whole comparison as plain data, seen as ``variant``."""
        spec = self.spec
        anchor_winners = {str(a): self.winners[a] for a in self.anchors if a in self.winners}
        return QueryCircuitDetails(
            variant=variant,
            base_method=self.config.base_method,
            ig_steps=int(self.config.ig_steps),
            pairs=[dict(pair.to_dict(), index=i) for i, pair in enumerate(self.pairs)],
            candidates=list(self.candidates),
            budgets=list(self.budgets),
            anchor_budgets=list(self.anchors),
            per_budget=[
                {
                    "budget": budget,
                    "winner": self.winners[budget],
                    "candidates": [point_dict(p) for p in self.candidate_points[budget]],
                }
                for budget in sorted(self.candidate_points)
            ],
            curves={name: [point_dict(p) for p in curve] for name, curve in self.curves.items()},
            bon_circuits={
                str(budget): spec.edge_names_of(mask.cpu())
                for budget, mask in sorted(self.circuits.get("bon", {}).items())
            },
            anchor_winners=anchor_winners,
            edge_scores={
                "single": edge_vector(spec, candidate_scores[0]),
                "average": edge_vector(spec, candidate_scores.mean(0)),
                "candidates": {
                    str(k): edge_vector(spec, candidate_scores[k])
                    for k in sorted(set(anchor_winners.values()))
                },
            },
            csm=None
            if csm is None
            else {"scores": edge_vector(spec, csm[0]), "tiers": edge_vector(spec, csm[1])},
            shared=[dict(data, budget=budget) for budget, data in sorted(self.shared.items())],
            reference_edges=self.reference_edges,
            counts=dict(self.counts),
            notes=list(self.notes),
        )
