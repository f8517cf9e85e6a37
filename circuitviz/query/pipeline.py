"""Query circuits: the Best-of-N family's one pipeline, from a prompt to every variant's circuits.

For one prompt q: gather and check p paraphrases (``sources``), score q and every usable
paraphrase against its own corruption with the base scorer (``scoring``), giving score matrices
S_0..S_p; at each budget make the variants' circuits (``variants``), evaluate each distinct
circuit once on the ORIGINAL q (``pool``), pick BoN's winner (highest NDF), build iBoN and
BoN-CSM from the BoN circuits at the anchor budgets, and compute what the candidates share
(``overlap``). With ``compare`` on, one run computes all five variants.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence

import torch

from ..core.curves import CurvePoint, necessity
from ..core.graph import GraphSpec
from ..core.results import parse_circuit
from ..measure.evaluate import circuits_at_budgets, complements, metrics_of_tasks
from ..models.adapter import backend_of
from .checks import validate_pairs
from .outcome import QueryCircuits
from .overlap import shared_subcircuit
from .pairs import ParaphrasePair, original_pair, unusable_note
from .pool import CircuitPool, MetricsMemo, metrics_key, winner
from .scoring import PairScorer, save_pair_checks, save_source_pairs, stored_pair_scores
from .sources import gather_configured
from .templates import check_task
from .variants import VARIANTS, csm_circuit, csm_matrices, csm_order, ibon_circuit, parse_anchor_budgets


def query_circuits(
    ctx, config, budgets: Sequence[int], scorer: PairScorer, variant: str = "bon"
) -> QueryCircuits:
    """Run the Best-of-N family on a prompt: paraphrases, scores, candidates, every variant asked.

    ctx: the run's context (``methods.base.RunContext``); config: the family's settings
    (``methods.bon.QueryCircuitConfig``); scorer: the base method every pair is scored with.
    With ``config.compare`` all five variants are computed; otherwise only what ``variant``
    needs (single: no paraphrase at all; ibon/bon-csm: candidates only at the anchors).
    """
    if variant not in VARIANTS:
        raise ValueError(f"Unknown variant {variant!r}; choose one of {', '.join(VARIANTS)}.")
    budgets = sorted({int(b) for b in budgets})
    if not budgets:
        raise ValueError("No budgets given; write edge counts such as 100,200,500.")
    anchors = parse_anchor_budgets(config.anchor_budgets, budgets)
    want = set(VARIANTS) if config.compare else {variant}
    notes: list[str] = []

    start = time.perf_counter()
    check_task(ctx.model, ctx.task, ctx.max_tokens)
    spec, prepared, evaluator = ctx.spec, ctx.prepared(), ctx.evaluator
    reference = _reference(config, spec, evaluator.device)
    ctx.timings["clean_corrupted_s"] = time.perf_counter() - start  # the evaluator's runs included

    with ctx.timed("paraphrases_s"):
        pairs, candidates = _pairs_and_candidates(ctx, config, want, notes)
    store = ctx.store if config.cache_scores else None
    tasks = [pairs[i].task() for i in candidates]
    with ctx.timed("scoring_s"):
        scores, from_store = stored_pair_scores(
            ctx.model, ctx.model_id, spec, tasks, scorer, store, ctx.progress, ctx.max_tokens
        )
        candidate_scores = torch.stack(scores)  # [n_candidates, n_forward, n_backward]
    # after the scores: a run cancelled while scoring has kept nothing a next run reads, and says so
    if config.paraphrase_source == "file":  # the user's list: its checks price a rerun of it
        save_pair_checks(ctx.model, ctx.model_id, spec, ctx.task, pairs[1:], store)
    elif want != {"single"}:  # a generated source's pairs: they price a rerun of that source
        save_source_pairs(ctx.model, ctx.model_id, spec, ctx.task, config, tasks[1:], store)
    counts = {"scored_pairs": len(candidates) - from_store, "scores_from_store": from_store}

    pool = CircuitPool()
    with ctx.timed("selection_s"):
        candidate_index, indices = _circuits_from_scores(
            spec, pool, candidate_scores, budgets, anchors, want, config.compare
        )
    with ctx.timed("evaluation_s"):
        memo = MetricsMemo(store, metrics_key(ctx.model, ctx.model_id, spec, ctx.task))
        evaluated = pool.evaluate(evaluator, ctx.progress, memo.values)

    baseline = evaluator.baseline
    candidate_points = {
        b: [pool.point(i, b, baseline) for i in members] for b, members in candidate_index.items()
    }
    winners = {b: winner(points, baseline) for b, points in candidate_points.items()}
    bon_index = {b: candidate_index[b][winners[b]] for b in candidate_index}
    if bon_index:
        indices["bon"] = bon_index
    with ctx.timed("selection_s"):
        csm = _circuits_from_anchors(spec, pool, candidate_scores, budgets, anchors, winners, want, indices)
    with ctx.timed("evaluation_s"):
        evaluated += pool.evaluate(evaluator, ctx.progress, memo.values)
        memo.save()
    counts["circuits_evaluated"] = evaluated

    circuits = {name: {b: pool.masks[i] for b, i in by_budget.items()} for name, by_budget in indices.items()}
    with ctx.timed("evaluation_s"):
        without = _metrics_without(evaluator, spec, pool, indices, ctx.progress)
    curves = {
        name: [
            with_necessity(pool.point(i, b, baseline), without[i], baseline)
            for b, i in sorted(by_budget.items())
        ]
        for name, by_budget in indices.items()
    }
    with ctx.timed("overlap_s"):
        shared = {
            b: shared_subcircuit(spec, [pool.masks[i] for i in candidate_index[b]], winners[b], reference)
            for b in candidate_index
        }
    return QueryCircuits(
        model_id=ctx.model_id,
        spec=spec,
        task=ctx.task,
        config=config,
        prepared=prepared,
        baseline=baseline,
        pairs=pairs,
        candidates=candidates,
        candidate_scores=candidate_scores,
        budgets=budgets,
        anchors=anchors,
        circuits=circuits,
        curves=curves,
        candidate_points=candidate_points,
        winners=winners,
        csm=csm,
        shared=shared,
        reference_edges=None if reference is None else int(reference.sum()),
        timings=ctx.timings,
        counts=counts,
        notes=notes,
        device=str(ctx.device),
        backend=backend_of(ctx.model),
    )


def _reference(config, spec: GraphSpec, device) -> torch.Tensor | None:
    """The reference circuit given in the settings, on the evaluator's device, or None."""
    if not config.reference:
        return None
    circuit = parse_circuit("\n".join(config.reference), spec, origin="The reference circuit")
    return (circuit.mask & spec.edge_mask).to(device)  # [n_forward, n_backward] bool


def _pairs_and_candidates(
    ctx, config, want: set[str], notes: list[str]
) -> tuple[list[ParaphrasePair], list[int]]:
    """The prompt (pair 0) and its checked paraphrases, and the pairs Best-of-N scores; what is
    left out, and why, goes into ``notes``."""
    original = validate_pairs(ctx.model, ctx.task, [original_pair(ctx.task)], max_tokens=ctx.max_tokens)[0]
    paraphrases: list[ParaphrasePair] = []
    n = int(config.n_paraphrases)
    if want != {"single"} and (config.paraphrase_source == "file" or n > 0):
        paraphrases = gather_configured(ctx, config, ctx.progress)
    pairs = [original] + paraphrases
    candidates = [0] + [i for i in range(1, len(pairs)) if pairs[i].usable(config.include_mismatched)]
    left_out = unusable_note(paraphrases, config.include_mismatched)
    if left_out:
        notes.append(left_out)
    if want != {"single"} and len(candidates) == 1:
        notes.append("No usable paraphrase: Best-of-N has only the prompt itself, so it equals single.")
    return pairs, candidates


def _metrics_without(evaluator, spec, pool: CircuitPool, indices: dict, progress=None) -> dict[int, float]:
    """L((M\\C)(q)) of every circuit a variant keeps, each pool circuit once: their complements
    (only the circuit's edges corrupted) in one batched evaluation, for the curves' necessity
    (``progress``: the run's, told before each block: 10 s of a busy CPU were silent after the
    curve's last report)."""
    chosen = sorted({i for by_budget in indices.values() for i in by_budget.values()})
    if not chosen:
        return {}
    others = complements(spec, torch.stack([pool.masks[i] for i in chosen]))  # [n, n_forward, n_backward]
    return dict(zip(chosen, metrics_of_tasks([evaluator], others[None], progress)[0].tolist()))


def with_necessity(point: CurvePoint, without: float, baseline) -> CurvePoint:
    """The pool's point with the circuit's necessity from ``without`` = L((M\\C)(q))."""
    return dataclasses.replace(point, necessity=necessity(without, baseline), metric_without=without)


def _circuits_from_scores(
    spec: GraphSpec,
    pool: CircuitPool,
    candidate_scores: torch.Tensor,
    budgets: list[int],
    anchors: list[int],
    want: set[str],
    compare: bool,
) -> tuple[dict[int, list[int]], dict[str, dict[int, int]]]:
    """Every candidate's top-N at the budgets BoN needs, and the single and average circuits,
    added to the pool. Returns ({budget: pool index per candidate}, {variant: {budget: index}})."""
    bon_budgets = budgets if ({"bon"} & want or compare) else anchors if want & {"ibon", "bon-csm"} else []
    candidate_index: dict[int, list[int]] = {}
    if bon_budgets:
        # every candidate at every budget from one sort per candidate: [n_candidates, n_budgets, ...]
        masks = circuits_at_budgets(spec, candidate_scores, bon_budgets)
        for column, budget in enumerate(bon_budgets):
            candidate_index[budget] = pool.add_many(masks[:, column])
    indices: dict[str, dict[int, int]] = {}
    if "single" in want:
        missing = [b for b in budgets if b not in candidate_index]
        added = dict(zip(missing, pool.add_many(circuits_at_budgets(spec, candidate_scores[0], missing))))
        indices["single"] = {b: candidate_index[b][0] if b in candidate_index else added[b] for b in budgets}
    if "average" in want:
        mean = candidate_scores.mean(0)  # [n_forward, n_backward]
        indices["average"] = dict(zip(budgets, pool.add_many(circuits_at_budgets(spec, mean, budgets))))
    return candidate_index, indices


def _circuits_from_anchors(
    spec: GraphSpec,
    pool: CircuitPool,
    candidate_scores: torch.Tensor,
    budgets: list[int],
    anchors: list[int],
    winners: dict[int, int],
    want: set[str],
    indices: dict[str, dict[int, int]],
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """iBoN's and BoN-CSM's circuits at every budget from the BoN circuits at the anchors, added
    to the pool and to ``indices``. Returns BoN-CSM's (scores, tiers) when computed."""
    bon_index = indices.get("bon", {})
    anchor_circuits = {a: pool.masks[bon_index[a]] for a in anchors if a in bon_index}
    anchor_scores = {a: candidate_scores[winners[a]] for a in anchor_circuits}
    if "ibon" in want:
        indices["ibon"] = {
            b: (
                bon_index[b]
                if b in anchor_circuits
                else pool.add(ibon_circuit(anchor_circuits, anchor_scores, b, spec))
            )
            for b in budgets
        }
    if "bon-csm" not in want:
        return None
    csm = csm_matrices(anchor_circuits, anchor_scores, spec)
    order = csm_order(*csm, spec)
    indices["bon-csm"] = {b: pool.add(csm_circuit(*csm, b, spec, order=order)) for b in budgets}
    return csm
