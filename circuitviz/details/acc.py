"""What an ACC++ run keeps (``ACCDetails``), as plain data, and its circuit at any budget.

The run (``circuitviz.methods.acc``, machinery in ``circuitviz.acc``) writes the position graph
(``acc/circuit.circuit_json``), the knockout check and the completion note here; a stored result
builds its circuit at any budget from its own scores (``acc_circuits``: the top-N found edges,
ranked by their best path into logits, kept if they reach logits), importing none of the tracer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

import torch

from ..core.graph import GraphSpec, top_n
from .base import MethodDetails, register_details

if TYPE_CHECKING:
    from ..core.results import CircuitResult


PATH_STEP = 1e-6  # each edge ranks this share below the best path it starts: ties go downstream first


def path_ranked(spec: GraphSpec, scores: torch.Tensor) -> torch.Tensor:
    """Each edge's score capped by the best path it starts into logits: min(score, imp(reader's
    node) x (1 - PATH_STEP)), imp(node) = its best capped out-edge, imp(logits) unbounded. Every
    edge ranks strictly below the edges of its best path, so a top-N of these scores always holds,
    with an edge, a path from it to the logits, and no budget is spent on edges that pruning would
    drop (ACC++'s signal attributions and its seeds' direct-effect shares are on different scales).
    Without the step, a path's edges tied at its weakest link and the tie went to graph order, the
    input's edges first: SmolLM2-135M's capital of Germany capped 140 edges at its seeds' 0.166 and
    its 123-edge circuit held none into the logits, pruned to an empty circuit (NDF and necessity 0).
    # [n_forward, n_backward] float64, CPU"""
    scores = scores.double().cpu().abs() * spec.edge_mask
    owner = spec.backward_to_forward
    reach = torch.zeros(spec.n_backward, dtype=torch.float64, device="cpu")  # [B] best path from each reader
    reach[owner < 0] = float("inf")
    capped = torch.zeros_like(scores)
    for writer in range(spec.n_forward - 1, -1, -1):
        capped[writer] = torch.minimum(scores[writer], reach)
        reach[owner == writer] = capped[writer].max() * (1.0 - PATH_STEP)
    return capped


def prune_to_logits(spec: GraphSpec, mask: torch.Tensor) -> torch.Tensor:
    """Keep the edges whose reader reaches ``logits`` through kept edges.  # bool mask

    Unlike the engine's ``prune`` it keeps edges out of leaves nothing feeds (ACC++ does not
    trace into MLPs or values, so an MLP signal has no incoming edges and would be dropped).
    """
    mask = mask & spec.edge_mask
    owner = spec.backward_to_forward
    n_forward = spec.n_forward
    reaches = torch.zeros(n_forward + 1, dtype=torch.bool, device=mask.device)
    reaches[n_forward] = True
    targets = torch.where(owner < 0, torch.full_like(owner, n_forward), owner)  # [n_backward]
    for node in range(n_forward - 1, -1, -1):
        readers = mask[node].nonzero(as_tuple=True)[0]
        reaches[node] = bool(reaches[targets[readers]].any()) if readers.numel() else False
    return mask & reaches[targets][None, :]


def report_lines(details: ACCDetails) -> list[str]:
    """A few plain lines about an ACC++ result (for the command line)."""
    summary = details.summary
    # the edges split as the Signals page's help splits them: "44 edges (81 signals, 62% of signal
    # edges rank 1)" left unsaid that 10 of the 44 are edges into the logits and the 62% of the other 34
    n_edges, n_signal = summary.get("n_edges", 0), summary.get("n_signal_edges", 0)
    share = (
        f"{100 * summary.get('rank1_fraction', 0.0):.0f}% of them rank 1" if n_signal else "none of rank 1"
    )
    lines = [
        f"ACC++ circuit: {summary.get('n_nodes', 0)} nodes (component@position), {n_edges} edges: {n_signal} "
        f"signal edges ({summary.get('n_signals', 0)} signals, {share}) and {n_edges - n_signal} into the "
        f"logits; {summary.get('n_decisions', 0)} attention decisions"
    ]
    if not summary.get("n_decisions", 0) and summary:
        # the Signals page's advice, which the command line left out under "0 attention decisions"
        lines.append(
            "  no attention decision of the answer's components reached the threshold tau = k/d "
            "(d: the positions a destination attends over); lower k (--set k=1.5)"
        )
    limits = details.limits
    if limits.get("max_decisions_reached"):
        lines.append(
            f"  stopped at max_decisions={limits.get('max_decisions')} with {limits.get('decisions_left')} "
            "decisions left (raise it with --set max_decisions=N)"
        )
    faithfulness = details.faithfulness
    if faithfulness.get("note"):
        lines.append(f"  faithfulness: {faithfulness['note']}")
    knockout = faithfulness.get("knockout") or {}
    found, rand = knockout.get("found"), knockout.get("random")
    if found and rand:

        def number(value, form):
            return "n/a" if value is None else format(value, form)

        lines.append(
            f"  knockout of the {knockout.get('n_signals')} found signals: metric "
            f"{number(knockout['clean']['metric'], '+.3f')} -> {number(found['metric'], '+.3f')}, traced attention "
            f"{number(knockout['clean']['mean_weight'], '.3f')} -> {number(found['mean_weight'], '.3f')}, residual "
            f"cosine {number(found['cosine'], '.3f')}; as many random signals: metric "
            f"{number(rand.get('metric'), '+.3f')}, attention {number(rand.get('mean_weight'), '.3f')}"
        )
    return lines


@register_details
@dataclass
class ACCDetails(MethodDetails):
    """What an ACC++ run found, as plain data (``acc/circuit.py`` writes the graph part).

    nodes: (component, position) nodes, each {id, component, kind, layer, head, position, token}.
    edges: signals grouped per (upstream node, decision side): {source, target, side (query, key
        or logits), decision, directions, rank, attribution, weight_drop, via_source}.
    decisions: each traced attention decision with its query and key removal curves.
    seeds: the components traced from, with their direct effect on the answer.
    tokens: the prompt's tokens. summary: counts (nodes, edges, signals, rank-1 share, ...).
    limits: where tracing stopped (max_decisions reached, decisions left).
    full_circuit_budget: edges in the whole traced circuit (always one of the result's budgets).
    faithfulness: {kind: "patching" or "signal-knockout", note, knockout (found versus random
        signals), knockout_curve}.
    svd: the per-head SVD cache's state (cached, seconds, path, bytes).
    completion: how the scores complete the traced circuit for patching (``acc/completion.py``):
        {note, traced_edges, completion_edges}.
    """

    kind: ClassVar[str] = "acc++"
    version: ClassVar[int] = 1
    no_corrupted_reference: ClassVar[str] = (
        "its signals knocked out (the prompt with every signal ACC++ found knocked out of the queries and keys)"
    )

    nodes: list = field(default_factory=list)
    edges: list = field(default_factory=list)
    decisions: list = field(default_factory=list)
    seeds: list = field(default_factory=list)
    tokens: list = field(default_factory=list)
    summary: dict = field(default_factory=dict)
    limits: dict = field(default_factory=dict)
    full_circuit_budget: int = 0
    faithfulness: dict = field(default_factory=dict)
    svd: dict = field(default_factory=dict)
    completion: dict = field(default_factory=dict)

    def found_edges(self, result: CircuitResult) -> tuple[torch.Tensor, str]:
        """The traced edges (into queries, keys and logits); the rest is the completion."""
        from ..acc.completion import claimed_mask  # torch only, none of the tracer

        traced = (result.scores != 0) & claimed_mask(result.graph)
        measured = (  # without a corrupted prompt nothing is patched: the knockout measures the signals
            "; with no corrupted prompt, this NDF is the knockout of its signals, which these do not enter"
            if self.faithfulness.get("kind") == "signal-knockout"
            else ""
        )
        return traced, (
            "its completion: the value inputs of its heads and the inputs of its MLPs, added so that "
            "patching can measure the circuit, each scored just below the traced edge out of the node "
            f"it feeds (a rank, not a finding){measured}"
        )

    def reference_name(self) -> str | None:
        """Without a corrupted prompt the curve's 0 is the knockout of every found signal."""
        return "signals knocked out" if self.faithfulness.get("kind") == "signal-knockout" else None

    def circuit(self, result: CircuitResult, budget: int) -> torch.Tensor:
        """The top-N found edges (the traced signals and their completion, never another edge),
        kept if they reach logits."""
        return acc_circuits(result.graph, result.scores, [budget])[int(budget)]

    def one_off_seconds(self) -> float:
        """The SVD of the model's heads when this run computed it (stored on disk, read by the next
        runs in 0.1 s): counted in the first run's seconds, it priced the next Gemma-3-270M run on
        the Signals page at "about 24 s" for 3.2 s."""
        svd = self.svd or {}
        return 0.0 if svd.get("cached", True) else max(0.0, float(svd.get("seconds") or 0.0))

    def report_lines(self, result: CircuitResult) -> list[str]:
        from ..acc.tables import knockout_verdict, metric_words

        verdict = knockout_verdict(self, metric_words(getattr(result, "task", None)))  # as Signals says it
        return report_lines(self) + ([f"  {verdict}"] if verdict else []) + self._above_full(result)

    def _above_full(self, result: CircuitResult) -> list[str]:
        """The budget ACC++ adds (its whole traced circuit), and those above it, which keep the
        same edges: on a random Qwen 3, budgets 60 and 500 kept the 33 found edges under 'Budget
        500 is over the 110 edges of this model's graph, so it keeps the whole graph', and the
        table held a budget of 33 nobody asked for, unsaid."""
        full = int(self.full_circuit_budget)
        above = [p.budget for p in getattr(result, "curve", None) or [] if p.budget > full]
        if not full:
            return []
        traced = (self.completion or {}).get("traced_edges")
        # the traced edges are fewer: 'budget 3,214 is ACC++'s whole traced circuit' was said under
        # 'ACC++ circuit: 169 nodes, 431 edges' (SmolLM2-135M's IOI prompt; 2,783 were its completion)
        # ... and the traced edges count components, not the position graph's "157 edges" said above
        # them (Gemma's IOI prompt: 125 edges between components, the same signals at two positions
        # being one edge here)
        of = (
            f" ({traced:,} traced edges between components and their completion)"
            if traced and traced != full
            else ""
        )
        line = f"budget {full:,} is ACC++'s whole circuit{of}, always evaluated beside the budgets asked"
        if above:
            shown = ", ".join(f"{b:,}" for b in above)
            line += (
                f"; {shown} above it keep that circuit, not the whole graph: ACC++ keeps no edge it did "
                "not find"
            )
        return [line]


def acc_circuits(spec: GraphSpec, scores: torch.Tensor, budgets: Sequence[int]) -> dict[int, torch.Tensor]:
    """The circuit at each budget: the top-N found edges (no unfound edge), kept if they reach logits;
    ranked by each edge's score capped by its best path into logits (``completion.path_ranked``),
    so a budget is not spent on edges pruning would drop."""
    found = (scores != 0) & spec.edge_mask
    ranked = path_ranked(spec, scores)
    return {int(b): prune_to_logits(spec, top_n(spec, ranked, int(b)) & found) for b in budgets}
