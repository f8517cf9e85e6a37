"""What a Best-of-N family run keeps (``QueryCircuitDetails``), and its circuits at any budget.

Every method of the family keeps the comparison of all five variants as plain data, so one run
gives the whole comparison and a stored result builds single, average, iBoN and BoN-CSM
circuits for any budget with no model pass (``variant_circuit``, reached through
``result.circuit(budget)``); BoN itself exists only at the budgets its candidates were
evaluated at.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

import torch

from ..core.graph import prune, top_n
from ..core.text import shown
from ..query.report import report_lines
from ..query.variants import (
    ANY_BUDGET_VARIANTS,
    VARIANTS,
    csm_circuit,
    csm_order,
    edge_matrix,
    ibon_circuit,
    names_mask,
)
from .base import MethodDetails, register_details

if TYPE_CHECKING:
    from ..core.results import CircuitResult

FORMAT_VERSION = 1


@register_details
@dataclass
class QueryCircuitDetails(MethodDetails):
    """What one run of the Best-of-N family computed, as plain data (every variant's view).

    variant: the method whose view the result is (single, average, bon, ibon or bon-csm).
    base_method, ig_steps: the scorer of every (paraphrase, corruption) pair.
    pairs: the prompt (index 0) and its paraphrases, each {index, clean, corrupted, source,
        model_answer, answer_matches, reason, ...}.
    candidates: the pair index of each candidate; candidate 0 is the prompt itself.
    budgets: the budgets evaluated; anchor_budgets: those iBoN and BoN-CSM build from.
    per_budget: at each BoN budget {budget, winner (candidate index), candidates: [curve points]}.
    curves: {variant: [curve points]} for every variant computed.
    bon_circuits: {budget: edge names of the BoN winner's circuit}.
    anchor_winners: {anchor budget: winning candidate}.
    edge_scores: {"single": [...], "average": [...], "candidates": {candidate: [...]}}, one value
        per edge in ``GraphSpec.edge_names`` order (the anchors' winners only).
    csm: BoN-CSM's {"scores": [...], "tiers": [...]} per edge, or None.
    shared: at each BoN budget the subcircuit the candidates share ({budget, common, upset, ...}).
    reference_edges: edges of the reference circuit given, or None.
    counts: pairs scored, score matrices from the store, circuits evaluated.
    notes: what the run left out and why, in sentences.
    """

    kind: ClassVar[str] = "query-circuits"

    def paraphrases_used(self) -> list[str]:
        """Every paraphrase the run generated (its candidates are their top-N circuits)."""
        return [pair["clean"] for pair in self.pairs[1:] if isinstance(pair, dict) and "clean" in pair]

    version: ClassVar[int] = FORMAT_VERSION

    variant: str = "bon"
    base_method: str = "eap-ig"
    ig_steps: int = 20
    pairs: list = field(default_factory=list)
    candidates: list = field(default_factory=list)
    budgets: list = field(default_factory=list)
    anchor_budgets: list = field(default_factory=list)
    per_budget: list = field(default_factory=list)
    curves: dict = field(default_factory=dict)
    bon_circuits: dict = field(default_factory=dict)
    anchor_winners: dict = field(default_factory=dict)
    edge_scores: dict = field(default_factory=dict)
    csm: dict | None = None
    shared: list = field(default_factory=list)
    reference_edges: int | None = None
    counts: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)

    def to_dict(self) -> dict:
        # the marker exported circuits have always carried, so readers of the JSON keep working
        return {"query_circuits_version": self.version, **super().to_dict()}

    def circuit(self, result: CircuitResult, budget: int) -> torch.Tensor | None:
        """iBoN, BoN-CSM and the baselines build a circuit at any budget (no model pass); BoN
        itself only at a budget its candidates were evaluated at."""
        if self.any_budget(result):
            return variant_circuit(result, budget)
        return None

    def any_budget(self, result: CircuitResult) -> bool:
        return result.method in ANY_BUDGET_VARIANTS

    def report_lines(self, result: CircuitResult) -> list[str]:
        return report_lines(self)

    def any_budget_rule(self, result: CircuitResult) -> str:
        """What ``variant_circuit`` builds a budget's circuit from, per variant (the slider's words)."""
        if result.method == "single":
            return "builds a circuit at any budget from the prompt's own scores (its top edges by |score|, then pruned)"
        if result.method == "average":
            return (
                "builds a circuit at any budget from the scores averaged over the prompt and its "
                "paraphrases (the top edges by |score|, then pruned)"
            )
        return "builds a circuit at any budget from the Best-of-N circuits at its anchor budgets"

    def dip_reason(self, result: CircuitResult, low: int, high: int, nested: bool | None) -> str | None:
        """Best-of-N's circuit at a budget is the most faithful candidate's there, iBoN builds on
        the anchors' winners and BoN-CSM adds the anchors' edges in one order: a larger circuit is
        another candidate's, or holds edges ranked on a paraphrase. Single and average are top
        edges by their own scores (None: the page's sentence holds)."""
        if result.method == "bon":
            return self._bon_dip(low, high)
        if result.method == "ibon":
            return self._ibon_dip(low, high, nested)
        if result.method == "bon-csm" and nested is not False and self.anchor_winners:
            anchors = sorted(int(a) for a in self.anchor_winners)
            first = anchors[0]
            rest = ", ".join(f"{a:,}" for a in anchors[1:4]) + (", …" if len(anchors) > 4 else "")
            return (
                "BoN-CSM adds edges in one order: first the edges of Best-of-N's circuit at its smallest "
                f"anchor, budget {first:,}, won by {self._candidate(self.anchor_winners[str(first)])}; "
                f"then those each next anchor's circuit adds{f' (budgets {rest})' if rest else ''}, each "
                "group by |score| of the candidate that won there, scored on its own wording, so a larger "
                "circuit can take in edges that cancel others on this prompt"
            )
        return None

    def _candidate(self, k) -> str:
        """Candidate ``k`` by its pair: 'the prompt itself' or "p11 ('France has its capital in')"."""
        k = int(k)
        if not 0 <= k < len(self.candidates):
            return f"candidate {k}"
        pair = int(self.candidates[k])
        if pair == 0:
            return "the prompt itself"
        text = next(
            (p.get("clean") for p in self.pairs if isinstance(p, dict) and p.get("index") == pair), None
        )
        return f"p{pair} ({shown(str(text), 50)})" if text is not None else f"p{pair}"

    def _winner(self, budget: int):
        entry = next((e for e in self.per_budget if int(e.get("budget", -1)) == int(budget)), None)
        return None if entry is None else (int(entry["winner"]), len(entry.get("candidates") or []))

    def _bon_dip(self, low: int, high: int) -> str | None:
        found_low, found_high = self._winner(low), self._winner(high)
        if found_low is None or found_high is None:
            return None
        (winner_low, count), (winner_high, _) = found_low, found_high
        if count == 1:  # "the most faithful of its 1 candidates' circuits" (an audit)
            return (
                "Best-of-N had one candidate, the prompt itself (no paraphrase was usable), so its "
                "circuit at each budget is the top edges of the prompt's own scores: the larger one "
                "takes in more of them, which can cancel others on this prompt"
            )
        rule = (
            f"Best-of-N keeps, at each budget, the most faithful of its {count} candidates' circuits (each "
            "the top edges of one wording's own scores, the prompt's or a paraphrase's), so a larger "
            "circuit is not the smaller one with edges added"
        )
        if winner_low != winner_high:
            return (
                f"{rule}: the winner at budget {low:,} is {self._candidate(winner_low)}, at budget "
                f"{high:,} {self._candidate(winner_high)}, and the best candidate at budget {high:,} is "
                f"less faithful than the best at budget {low:,}"
            )
        return (
            f"{rule}: at both budgets the winner is {self._candidate(winner_low)}, and its larger circuit "
            "takes in more of its top edges, ranked on its own wording, which can cancel others on this prompt"
        )

    def _ibon_dip(self, low: int, high: int, nested: bool | None) -> str | None:
        anchors = sorted(int(a) for a in self.anchor_winners)
        below = [max((a for a in anchors if a <= b), default=None) for b in (low, high)]
        if None in below:
            return None

        def at(budget: int, anchor: int) -> str:
            winner = self._candidate(self.anchor_winners[str(anchor)])
            if anchor == budget:
                return f"budget {budget:,} is an anchor, won by {winner}"
            return f"budget {budget:,} grows from anchor {anchor:,}, won by {winner}"

        said = (
            "iBoN builds each circuit on Best-of-N's at the anchor budget at or below it: "
            f"{at(low, below[0])}; {at(high, below[1])}"
        )
        if nested is False or below[0] != below[1]:
            both = below == [low, high]  # two winners' own circuits: the larger one is less faithful
            return (
                f"{said}. So the circuit at budget {high:,} is not the one at budget {low:,} with edges added"
                + (
                    f", and the best candidate at budget {high:,} is less faithful than the best at budget {low:,}"
                    if both
                    else ""
                )
            )
        return (
            f"{said}. The larger circuit adds the next anchor's edges, ranked by the scores of the candidate "
            "that won there on its own wording, which can cancel others on this prompt"
        )

    def bon_with_first(self, k: int) -> dict[int, float]:
        """{budget: NDF} of Best-of-N had it seen only candidates 0..k (k = 0: the prompt alone,
        the single query; k = the last candidate: BoN itself), read from every candidate's stored
        point: the paper's "more paraphrases help, with diminishing returns" on one run."""
        if k < 0:
            raise ValueError(f"k = {k}: Best-of-N needs at least the prompt itself (k = 0).")
        return {
            int(entry["budget"]): max(
                math.nan if point["ndf"] is None else float(point["ndf"])
                for point in entry["candidates"][: k + 1]
            )
            for entry in self.per_budget
            if entry["candidates"]
        }


# a stored result's tensors, rebuilt once per result object (the slider calls many times)
_PREPARED: dict[int, tuple[weakref.ref, dict]] = {}


def _prepared(result: CircuitResult, variant: str):
    """The tensors ``variant_circuit`` needs for ``variant``, built once per result object."""
    entry = _PREPARED.get(id(result))
    if entry is None or entry[0]() is not result:
        for key in [k for k, (ref, _) in _PREPARED.items() if ref() is None]:
            del _PREPARED[key]
        entry = (weakref.ref(result), {})
        _PREPARED[id(result)] = entry
    cache = entry[1]
    if variant not in cache:
        extra, spec = result.details, result.graph
        if variant in ("single", "average"):
            cache[variant] = edge_matrix(spec, extra.edge_scores[variant])
        elif variant == "ibon":
            winners = {int(b): int(k) for b, k in extra.anchor_winners.items()}
            circuits = {b: names_mask(spec, extra.bon_circuits[str(b)]) for b in winners}
            scores = {
                b: edge_matrix(spec, extra.edge_scores["candidates"][str(k)]) for b, k in winners.items()
            }
            cache[variant] = (circuits, scores)
        elif variant == "bon-csm":
            csm_scores = edge_matrix(spec, extra.csm["scores"])
            tiers = edge_matrix(spec, extra.csm["tiers"], dtype=torch.long)
            cache[variant] = (csm_scores, tiers, csm_order(csm_scores, tiers, spec))
    return cache[variant]


def variant_circuit(result: CircuitResult, budget: int, variant: str | None = None) -> torch.Tensor:
    """The circuit of a stored BoN-family result at any budget, with no model pass.

    variant: single, average, ibon or bon-csm (default: the result's method); bon only at a
    budget that was computed (a new budget needs every candidate evaluated). The tensors are
    rebuilt from ``extra`` once per result object, so later calls only select and prune.  # bool
    """
    extra = result.details
    if not isinstance(extra, QueryCircuitDetails):
        raise ValueError("This result was not made by the Best-of-N family; use result.circuit(budget).")
    variant = variant or result.method
    spec = result.graph
    budget = int(budget)
    if variant in ("single", "average"):
        if extra.edge_scores.get(variant) is None:
            raise ValueError(f"This result holds no {variant} scores; rerun with compare on.")
        return prune(spec, top_n(spec, _prepared(result, variant), budget))
    if variant == "bon":
        names = extra.bon_circuits.get(str(budget))
        if names is None:
            raise ValueError(
                f"BoN at budget {budget} needs every candidate evaluated (a model pass); use ibon or "
                "bon-csm for a new budget, or rerun with this budget."
            )
        return names_mask(spec, names)
    if variant == "ibon":
        circuits, scores = _prepared(result, variant)
        return ibon_circuit(circuits, scores, budget, spec)
    if variant == "bon-csm":
        if extra.csm is None:
            raise ValueError("This result holds no BoN-CSM data; rerun with compare on.")
        csm_scores, tiers, order = _prepared(result, variant)
        return csm_circuit(csm_scores, tiers, budget, spec, order=order)
    raise ValueError(f"Unknown variant {variant!r}; choose one of {', '.join(VARIANTS)}.")
