"""Query circuits: Best-of-N over paraphrases, its fast variants iBoN and BoN-CSM, and baselines.

For one prompt q: score q and p paraphrases q_1..q_p, each against its
own corruption, with a base scorer (EAP-IG by default, reached through the registry), giving
score matrices S_0..S_p. At an edge budget N:

- ``single``: top-N of S_0;  ``average``: top-N of the mean of S_0..S_p;
- ``bon``: candidate i is top-N of S_i; every candidate is evaluated on the ORIGINAL q and the
  most faithful (NDF) wins;
- ``ibon``: BoN circuits exist at the anchor budgets; another budget takes the anchor below it
  and adds the best-scoring edges of the anchor above it (by that anchor winner's scores);
- ``bon-csm``: walking the anchors' BoN circuits in order, each edge gets the score and the tier
  (anchor index) of the first circuit it appears in; a budget takes the first N edges sorted by
  tier, then |score|. One order serves every budget, so the circuits are nested.

Every method of the family runs the same pipeline and keeps the comparison of all five in its
``QueryCircuitDetails`` (plain data), so one run gives the whole comparison and the result builds
iBoN/BoN-CSM circuits for any budget with no model pass (``result.circuit(budget)``). Score
matrices are kept in the run's result store once per (model, prompt pair, scorer) and reused by
every method and budget (store kind "scores"); so is L(C(q)) of every circuit evaluated on q
(kind "circuit-metrics"), so switching the variant or adding a budget evaluates only circuits
never seen before.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy
import torch

from ..activations import (
    model_device,
    model_dtype,
    writers_of_prompts,
)
from ..evaluate import Baseline, CurvePoint, Evaluator, circuits_at_budgets, ndf, nfs
from ..graph import GraphSpec, prune, top_n
from ..models.devices import working_memory_bytes
from ..overlap import shared_subcircuit
from ..paraphrase import (
    SOURCES,
    ParaphrasePair,
    check_task,
    gather_paraphrases,
    original_pair,
    validate_pairs,
)
from ..results import CircuitResult, MethodDetails, parse_circuit, register_details
from ..store import ResultStore, content_key
from ..tasks import PreparedTask, PromptTask, prepare_task
from .base import Cost, Method, Progress, RunContext, ScoringMethod, config_to_dict, get_method, register
from .eap import EAPIG, batched_gradient_scores

VARIANTS = ("single", "average", "bon", "ibon", "bon-csm")
# variants whose circuit exists at any budget without a model pass
ANY_BUDGET_VARIANTS = ("single", "average", "ibon", "bon-csm")
FORMAT_VERSION = 1
# memory for the writer outputs of paraphrases captured in one batch (bytes)
_CAPTURE_BYTES = 1e9


@dataclass(frozen=True)
class QueryCircuitConfig:
    """Settings of the Best-of-N family.

    paraphrase_source: template (built-in families), openai (an LLM) or file (``paraphrases``).
    paraphrases: the pairs as text (JSONL, a JSON list, CSV or 'paraphrase<TAB>corrupted' lines).
    n_paraphrases: p, how many paraphrases to generate (template/openai; a file gives all it has).
    seed: seeds the template choice and the LLM request.
    llm_model: the LLM's name ('' = $CIRCUITVIZ_LLM_MODEL or gpt-4o-mini).
    include_mismatched: also score paraphrases whose model answer differs from the prompt's.
    base_method: the scorer of every (paraphrase, corruption) pair; ig_steps: its IG steps.
    anchor_budgets: budgets whose BoN circuits iBoN and BoN-CSM build from, comma separated
        ('' = every other budget from the smallest, and the largest).
    reference: a reference circuit (EAP-IG JSON or edge names) to overlap the candidates with.
    compare: also compute the other four variants, so one run holds the whole comparison.
    cache_scores: keep score matrices (and circuit evaluations) in the run's result store and reuse them.
    """

    paraphrase_source: str = field(default="template", metadata={"choices": SOURCES})
    paraphrases: str = ""
    n_paraphrases: int = 9
    seed: int = 0
    llm_model: str = ""
    include_mismatched: bool = False
    base_method: str = field(default="eap-ig", metadata={"choices": lambda: scorer_names()})
    ig_steps: int = 20
    anchor_budgets: str = ""
    reference: str = ""
    compare: bool = True
    cache_scores: bool = True

    def __post_init__(self):
        if self.paraphrase_source not in SOURCES:
            raise ValueError(
                f"paraphrase_source must be one of {', '.join(SOURCES)}, not {self.paraphrase_source!r}."
            )
        if not 0 <= int(self.n_paraphrases) <= 64:
            raise ValueError(f"n_paraphrases must be between 0 and 64, not {self.n_paraphrases}.")
        if not 1 <= int(self.ig_steps) <= 1000:
            raise ValueError(f"ig_steps must be between 1 and 1000, not {self.ig_steps}.")


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
        from ..query_report import report_lines

        return report_lines(self)


def scorer_names() -> list[str]:
    """The registered methods that score edges (what ``base_method`` may name)."""
    from . import available_methods

    return sorted(name for name, method in available_methods().items() if isinstance(method, ScoringMethod))


# ----- per-edge vectors (plain data for the app) ---------------------------------------------
def edge_vector(spec: GraphSpec, matrix: torch.Tensor) -> list:
    """A [n_forward, n_backward] tensor as a list over the graph's edges, in ``edge_names`` order."""
    forward, backward = spec.edge_index
    return matrix[forward, backward].tolist()


def edge_matrix(spec: GraphSpec, values: Sequence, dtype=torch.float32, device="cpu") -> torch.Tensor:
    """The inverse of ``edge_vector``; zero off the edge mask.  # [n_forward, n_backward]"""
    matrix = torch.zeros(spec.n_forward, spec.n_backward, dtype=dtype, device=device)
    matrix[spec.tensors(device).edge_index] = torch.as_tensor(values, dtype=dtype, device=device)
    return matrix


def spec_of(matrix: torch.Tensor, spec: GraphSpec | None) -> GraphSpec:
    """The given spec, else the sequential graph whose tensors have this shape.

    Models with parallel attention and MLP (GPT-J, Pythia) have the same shapes and other
    edges: pass their spec.
    """
    if spec is not None:
        return spec
    n_forward, n_backward = (int(size) for size in matrix.shape[-2:])
    writers, readers = n_forward - 1, n_backward - 1  # L(H+1), L(3H+1)
    layers = (3 * writers - readers) // 2
    if layers <= 0 or writers % layers or (3 * writers - readers) % 2 or writers // layers < 2:
        raise ValueError(f"A [{n_forward}, {n_backward}] tensor is no model graph's shape; pass spec=.")
    return GraphSpec(n_layers=layers, n_heads=writers // layers - 1)


# ----- iBoN and BoN-CSM: circuits for any budget with no model pass --------------------------
def _ranked(spec: GraphSpec, scores: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """Flat positions of the allowed edges, largest |score| first, ties in graph order."""
    values = scores.abs().float().flatten()
    positions = allowed.flatten().nonzero().flatten()
    order = torch.sort(values[positions], descending=True, stable=True).indices
    return positions[order]


def _scores_at(candidate_scores, budget: int) -> torch.Tensor:
    return candidate_scores[budget] if isinstance(candidate_scores, dict) else candidate_scores


def ibon_circuit(
    bon_circuits: dict[int, torch.Tensor],
    candidate_scores: dict[int, torch.Tensor] | torch.Tensor,
    budget: int,
    spec: GraphSpec | None = None,
    prune_dead: bool = True,
) -> torch.Tensor:
    """Interpolated Best-of-N: a circuit of ``budget`` edges from BoN circuits, no model pass.

    bon_circuits: {anchor budget: BoN circuit mask}. candidate_scores: {anchor budget: the score
    matrix of the candidate that won there}, or one matrix for all. At an anchor budget the
    anchor's circuit is returned as it is. Otherwise: the circuit of the largest anchor below
    the budget (none: empty), plus the edges of the next anchor's circuit it lacks, best score of
    that anchor's winner first, until ``budget`` edges; past the largest anchor (or when the
    next circuit runs out), the rest of that winner's ranking fills in. Then pruned, as every
    other circuit is.  # [n_forward, n_backward] bool
    """
    budget = int(budget)
    if not bon_circuits:
        raise ValueError("iBoN needs at least one BoN circuit.")
    if budget in bon_circuits:
        return bon_circuits[budget].bool().clone()
    any_mask = next(iter(bon_circuits.values()))
    spec = spec_of(any_mask, spec)
    edge_mask = spec.tensors(any_mask.device).edge_mask
    anchors = sorted(bon_circuits)
    lower = max((a for a in anchors if a < budget), default=None)
    upper = min((a for a in anchors if a > budget), default=None)
    circuit = bon_circuits[lower].bool() & edge_mask if lower is not None else torch.zeros_like(edge_mask)
    source = upper if upper is not None else lower
    scores = _scores_at(candidate_scores, source)
    need = min(budget, spec.n_edges) - int(circuit.sum())
    if need > 0:
        flat = circuit.flatten().clone()
        pools = [edge_mask & ~circuit]
        if upper is not None:
            pools.insert(0, bon_circuits[upper].bool() & edge_mask & ~circuit)
        for pool in pools:
            chosen = _ranked(spec, scores, pool & ~flat.view_as(pool))[:need]
            flat[chosen] = True
            need -= len(chosen)
            if need <= 0:
                break
        circuit = flat.view_as(edge_mask)
    return prune(spec, circuit) if prune_dead else circuit


def csm_matrices(
    bon_circuits: dict[int, torch.Tensor],
    candidate_scores: dict[int, torch.Tensor] | torch.Tensor,
    spec: GraphSpec | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BoN-CSM's score and tier matrices from the BoN circuits at increasing budgets.

    Walking the circuits by budget, an edge takes the score (from that budget's winner) and the
    tier (0, 1, ...) of the first circuit it appears in; edges in none take the largest
    anchor's winner's score and tier k. Returns (scores float32, tiers int64), both
    [n_forward, n_backward], zero score and tier k off the edge mask.
    """
    if not bon_circuits:
        raise ValueError("BoN-CSM needs at least one BoN circuit.")
    anchors = sorted(bon_circuits)
    device = bon_circuits[anchors[0]].device
    spec = spec_of(bon_circuits[anchors[0]], spec)
    edge_mask = spec.tensors(device).edge_mask
    scores = torch.zeros(spec.n_forward, spec.n_backward, dtype=torch.float32, device=device)
    tiers = torch.full((spec.n_forward, spec.n_backward), len(anchors), dtype=torch.long, device=device)
    placed = torch.zeros_like(edge_mask)
    for tier, anchor in enumerate(anchors):
        new = bon_circuits[anchor].bool() & edge_mask & ~placed
        scores[new] = _scores_at(candidate_scores, anchor).float()[new]
        tiers[new] = tier
        placed |= new
    rest = edge_mask & ~placed
    scores[rest] = _scores_at(candidate_scores, anchors[-1]).float()[rest]
    return scores, tiers


def csm_order(
    csm_scores: torch.Tensor, csm_tiers: torch.Tensor, spec: GraphSpec | None = None
) -> torch.Tensor:
    """Flat positions of every edge: tier ascending, then |score| descending, then graph order."""
    spec = spec_of(csm_scores, spec)
    positions = spec.tensors(csm_scores.device).flat_edge_index
    by_score = torch.sort(csm_scores.abs().float().flatten()[positions], descending=True, stable=True).indices
    positions = positions[by_score]
    by_tier = torch.sort(csm_tiers.flatten()[positions], stable=True).indices
    return positions[by_tier]


def csm_circuit(
    csm_scores: torch.Tensor,
    csm_tiers: torch.Tensor,
    budget: int,
    spec: GraphSpec | None = None,
    prune_dead: bool = True,
    order: torch.Tensor | None = None,
) -> torch.Tensor:
    """BoN-CSM circuit: the first ``budget`` edges of ``csm_order``, then pruned (nested in the
    budget: pruning is monotone). Pass a precomputed ``order`` to skip the sort.  # bool"""
    spec = spec_of(csm_scores, spec)
    if order is None:
        order = csm_order(csm_scores, csm_tiers, spec)
    flat = torch.zeros(spec.n_forward * spec.n_backward, dtype=torch.bool, device=csm_scores.device)
    flat[order[: max(0, int(budget))]] = True
    circuit = flat.view(spec.n_forward, spec.n_backward)
    return prune(spec, circuit) if prune_dead else circuit


def names_mask(spec: GraphSpec, names: Sequence[str]) -> torch.Tensor:
    """Membership tensor from edge names in one indexing step (GraphError for a bad name).

    On the CPU, where names are read.  # [n_forward, n_backward] bool"""
    mask = torch.zeros(spec.n_forward, spec.n_backward, dtype=torch.bool, device="cpu")
    if names:
        forward, backward = zip(*(spec.edge_position(name) for name in names))
        mask[list(forward), list(backward)] = True
    return mask


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
                f"BoN at {budget} edges needs every candidate evaluated (a model pass); use ibon or "
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


# ----- scores of every (paraphrase, corruption) pair ------------------------------------------
def _base_scorer(config: QueryCircuitConfig) -> tuple[ScoringMethod, object]:
    method = get_method(config.base_method)
    if not isinstance(method, ScoringMethod):
        raise ValueError(
            f"base_method must be a method that scores edges (eap, eap-ig, ...), not {config.base_method!r}."
        )
    fields = {f.name for f in dataclasses.fields(method.Config)}
    settings = {"ig_steps": int(config.ig_steps)} if "ig_steps" in fields else {}
    return method, method.make_config(settings)


def score_key(model, model_id: str, spec: GraphSpec, task: PromptTask, method: Method, method_config) -> str:
    """The store key of one pair's score matrix: model, dtype, graph, prompt pair, scorer."""
    return content_key(
        kind="scores",
        model=model_id,
        dtype=str(model_dtype(model)),
        graph=spec.to_cfg_dict(),
        task=task.to_dict(),
        scorer=method.name,
        scorer_config=config_to_dict(method_config),
    )


def _batched_ig_scores(
    model,
    spec: GraphSpec,
    prepared: PreparedTask,
    pairs: list[PreparedTask],
    steps: int,
    progress: Progress | None = None,
) -> list[torch.Tensor]:
    """EAP-IG (inputs) scores of many pairs of equal token length, their steps in shared batches.

    Computes exactly what the registered ``eap-ig`` computes for each pair alone (tested): the
    gradient at k/m of the way from the corrupted to the clean embedding, k = 1..m, averaged,
    times the corrupted-minus-clean writer outputs. A batch holds the steps of several pairs;
    their gradients are summed per pair and contracted with each pair's differences in one
    batched product per layer.  # each [n_forward, n_backward], on the model's device
    """
    dtype, device = model_dtype(model), model_device(model)
    positions = pairs[0].n_positions
    per_sequence = positions * spec.n_forward * spec.d_model * torch.finfo(dtype).bits // 8
    capture = max(1, int(min(_CAPTURE_BYTES, working_memory_bytes(device) / 2) // max(2 * per_sequence, 1)))
    scores: list[torch.Tensor] = []
    done = 0
    for start in range(0, len(pairs), capture):
        group = pairs[start : start + capture]
        tokens = torch.cat([p.clean_tokens for p in group] + [p.corrupted_tokens for p in group])
        writers, _ = writers_of_prompts(model, spec, prepared, tokens)  # [2g, pos, n_fwd, d]
        clean, corrupted = writers[: len(group)], writers[len(group) :]

        def report(phase, fraction, done=done, size=len(group) * steps):
            if progress:
                progress(phase, (done + fraction * size) / (len(pairs) * steps))

        # each pair scored with its own answer and foils: the task's, as every pair keeps them
        scores += list(batched_gradient_scores(model, spec, group, clean, corrupted, steps, report))
        done += len(group) * steps
    return scores


def pair_scores(
    model,
    spec: GraphSpec,
    prepared: PreparedTask,
    pairs: list[PreparedTask],
    method: ScoringMethod,
    method_config,
    progress: Progress | None = None,
) -> list[torch.Tensor]:
    """Score matrices of pairs with the base scorer: EAP-IG (inputs) batched across pairs of
    equal length, any other scorer one pair at a time through its ``score``.

    Every pair must share the task's answer, foils and metric.  # each [n_forward, n_backward] float32
    """
    results: list[torch.Tensor | None] = [None] * len(pairs)
    if type(method) is EAPIG:
        groups: dict[int, list[int]] = {}
        for index, pair in enumerate(pairs):
            groups.setdefault(pair.n_positions, []).append(index)
        done = 0
        for _, members in sorted(groups.items()):

            def report(phase, fraction, done=done, size=len(members)):
                if progress:
                    progress(phase, (done + fraction * size) / len(pairs))

            scores = _batched_ig_scores(
                model, spec, prepared, [pairs[i] for i in members], int(method_config.ig_steps), report
            )
            for index, matrix in zip(members, scores):
                results[index] = matrix
            done += len(members)
    else:
        for index, pair in enumerate(pairs):
            results[index] = method.score(RunContext.of_prepared(model, pair), method_config)
            if progress:
                progress("score", (index + 1) / len(pairs))
    return [(matrix.float() * spec.tensors(matrix.device).edge_mask).nan_to_num(0.0) for matrix in results]


def stored_pair_scores(
    model,
    model_id: str,
    spec: GraphSpec,
    prepared: PreparedTask,
    tasks: list[PromptTask],
    config: QueryCircuitConfig,
    store: ResultStore | None,
    progress: Progress | None,
    max_tokens: int,
) -> tuple[list[torch.Tensor], int]:
    """Score matrices of the pairs, from the store when computed before. Returns (scores, how
    many came from the store); new ones are stored (kind "scores")."""
    method, method_config = _base_scorer(config)
    keys = [score_key(model, model_id, spec, task, method, method_config) for task in tasks]
    scores: list[torch.Tensor | None] = [None] * len(tasks)
    if store is not None:
        for index, key in enumerate(keys):
            state = store.load_state(key, kind="scores")
            matrix = state.get("scores") if isinstance(state, dict) else None
            if isinstance(matrix, torch.Tensor) and tuple(matrix.shape) == (spec.n_forward, spec.n_backward):
                scores[index] = matrix.float().to(model_device(model))
    missing = [i for i, matrix in enumerate(scores) if matrix is None]
    if missing:
        prepared_pairs = [prepare_task(model, tasks[i], max_tokens=max_tokens) for i in missing]
        computed = pair_scores(model, spec, prepared, prepared_pairs, method, method_config, progress)
        for index, matrix in zip(missing, computed):
            scores[index] = matrix
            if store is not None:
                store.save_state(
                    keys[index], {"scores": matrix.cpu(), "task": tasks[index].to_dict()}, kind="scores"
                )
    elif progress:
        progress("score", 1.0)
    return [s for s in scores], len(tasks) - len(missing)


# ----- the pipeline -----------------------------------------------------------------------------
def parse_anchor_budgets(text: str, budgets: Sequence[int]) -> list[int]:
    """The anchors: the given ones (each must be a budget), else every other budget from the
    smallest, and the largest."""
    budgets = sorted(budgets)
    if not str(text).strip():
        anchors = set(budgets[::2]) | {budgets[-1]}
        return sorted(anchors)
    anchors = []
    for part in str(text).replace(" ", "").split(","):
        if not part:
            continue
        try:
            value = int(part)
        except ValueError:
            raise ValueError(f"Anchor budget {part!r} is not a whole number of edges.") from None
        if value not in budgets:
            raise ValueError(
                f"Anchor budget {value} is not one of the budgets ({', '.join(map(str, budgets))}); "
                "anchors must be among them."
            )
        anchors.append(value)
    return sorted(set(anchors))


def circuit_digest(mask: torch.Tensor) -> str:
    """A short content hash of a circuit mask (read on the CPU)."""
    return _digest_of_bits(mask.flatten().cpu().numpy())


def _digest_of_bits(bits: numpy.ndarray) -> str:
    return hashlib.sha256(numpy.packbits(bits).tobytes()).hexdigest()[:24]


def metrics_key(model, model_id: str, spec: GraphSpec, task: PromptTask) -> str:
    """The store key of the circuit metrics memo of one (model, prompt)."""
    return content_key(
        kind="circuit-metrics",
        model=model_id,
        dtype=str(model_dtype(model)),
        graph=spec.to_cfg_dict(),
        task=task.to_dict(),
    )


class _CircuitPool:
    """Circuits to evaluate, each once however many variants chose it. Masks stay on their
    device; their identity is read on the CPU, one transfer per batch of masks added."""

    def __init__(self):
        self.masks: list[torch.Tensor] = []
        self.digests: list[str] = []
        self.sizes: list[int] = []
        self._index: dict[bytes, int] = {}
        self.values: list[float | None] = []

    def add(self, mask: torch.Tensor) -> int:
        return self.add_many(mask[None])[0]

    def add_many(self, masks: torch.Tensor) -> list[int]:
        """Add circuits [n, n_forward, n_backward]; returns each one's index in the pool."""
        bits = masks.flatten(1).cpu().numpy()
        indices = []
        for mask, row in zip(masks, bits):
            key = row.tobytes()
            if key not in self._index:
                self._index[key] = len(self.masks)
                self.masks.append(mask)
                self.digests.append(_digest_of_bits(row))
                self.sizes.append(int(row.sum()))
                self.values.append(None)
            indices.append(self._index[key])
        return indices

    def evaluate(
        self, evaluator: Evaluator, progress: Progress | None = None, memo: dict | None = None
    ) -> int:
        """Evaluate the circuits not evaluated yet, all in one batched call; ``memo`` maps
        ``circuit_digest`` to L(C(q)) of circuits evaluated before (and is updated). Returns how
        many circuits went through the model."""
        pending = [i for i, value in enumerate(self.values) if value is None]
        if memo is not None:
            for index in pending:
                self.values[index] = memo.get(self.digests[index])
            pending = [i for i in pending if self.values[i] is None]
        if pending:
            metrics = evaluator.metrics(torch.stack([self.masks[i] for i in pending]), progress)
            for index, value in zip(pending, metrics.tolist()):
                self.values[index] = float(value)
                if memo is not None:
                    memo[self.digests[index]] = float(value)
        return len(pending)

    def point(self, index: int, budget: int, baseline: Baseline) -> CurvePoint:
        value = self.values[index]
        return CurvePoint(
            budget=int(budget),
            n_edges=self.sizes[index],
            metric=value,
            nfs=nfs(value, baseline),
            ndf=ndf(value, baseline),
        )


def _winner(points: list[CurvePoint], baseline: Baseline) -> int:
    """Highest NDF; among equals the smallest |L(M(q)) - L(C(q))|, then the lowest index (q)."""
    return min(
        range(len(points)),
        key=lambda i: (-points[i].ndf, abs(baseline.clean - points[i].metric), i),
    )


def _json_number(value: float) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def _point_dict(point: CurvePoint) -> dict:
    return {
        key: _json_number(value) if isinstance(value, float) else value
        for key, value in point.to_dict().items()
    }


@dataclass
class QueryCircuits:
    """Everything one run of the family computed; ``to_result`` picks one variant's view."""

    model_id: str
    spec: GraphSpec
    task: PromptTask
    config: QueryCircuitConfig
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

    def to_result(self, variant: str) -> CircuitResult:
        """One variant's result, its tensors on the CPU (results are stored and drawn there)."""
        spec = self.spec
        candidate_scores = self.candidate_scores.cpu()
        csm = None if self.csm is None else (self.csm[0].cpu(), self.csm[1].cpu())
        mean = candidate_scores.mean(0)
        largest = max(self.winners) if self.winners else None
        if variant == "single":
            scores = candidate_scores[0]
        elif variant == "average":
            scores = mean
        elif variant == "bon-csm" and csm is not None:
            scores = csm[0]
        elif variant == "ibon" and self.anchors:
            scores = candidate_scores[self.winners[max(self.anchors)]]
        else:
            scores = candidate_scores[self.winners[largest]] if largest is not None else candidate_scores[0]
        anchor_winners = {str(a): self.winners[a] for a in self.anchors if a in self.winners}
        details = QueryCircuitDetails(
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
                    "candidates": [_point_dict(p) for p in self.candidate_points[budget]],
                }
                for budget in sorted(self.candidate_points)
            ],
            curves={name: [_point_dict(p) for p in curve] for name, curve in self.curves.items()},
            bon_circuits={
                str(budget): spec.edge_names_of(mask.cpu())
                for budget, mask in sorted(self.circuits.get("bon", {}).items())
            },
            anchor_winners=anchor_winners,
            edge_scores={
                "single": edge_vector(spec, candidate_scores[0]),
                "average": edge_vector(spec, mean),
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
        return CircuitResult(
            model_id=self.model_id,
            graph=spec,
            task=self.task,
            method=variant,
            config=config_to_dict(self.config),
            scores=scores.float(),
            baseline=self.baseline,
            curve=list(self.curves[variant]),
            timings=dict(self.timings),
            circuits={b: m.cpu() for b, m in self.circuits[variant].items()},
            tokens={"clean": self.prepared.clean_str_tokens, "corrupted": self.prepared.corrupted_str_tokens},
            device=self.device,
            details=details,
        )


def query_circuits(
    ctx: RunContext, config: QueryCircuitConfig, budgets: Sequence[int], variant: str = "bon"
) -> QueryCircuits:
    """Run the Best-of-N family on a prompt: paraphrases, scores, candidates, every variant asked.

    With ``config.compare`` all five variants are computed; otherwise only what ``variant``
    needs (single: no paraphrase at all; ibon/bon-csm: candidates only at the anchors).
    """
    if variant not in VARIANTS:
        raise ValueError(f"Unknown variant {variant!r}; choose one of {', '.join(VARIANTS)}.")
    budgets = sorted({int(b) for b in budgets})
    if not budgets:
        raise ValueError("No budgets given; write edge counts such as 100,200,500.")
    anchors = parse_anchor_budgets(config.anchor_budgets, budgets)
    model, task, model_id, progress, max_tokens = (
        ctx.model,
        ctx.task,
        ctx.model_id,
        ctx.progress,
        ctx.max_tokens,
    )
    timings = ctx.timings
    notes: list[str] = []
    want = set(VARIANTS) if config.compare else {variant}

    start = time.perf_counter()
    check_task(model, task, max_tokens)
    spec, prepared, evaluator = ctx.spec, ctx.prepared(), ctx.evaluator
    baseline = evaluator.baseline
    reference = None
    if config.reference.strip():
        reference = (
            parse_circuit(config.reference, spec, origin="The reference circuit").mask & spec.edge_mask
        ).to(evaluator.device)
    timings["clean_corrupted_s"] = time.perf_counter() - start

    start = time.perf_counter()
    original = validate_pairs(model, task, [original_pair(task)], max_tokens=max_tokens)[0]
    paraphrases: list[ParaphrasePair] = []
    if want != {"single"}:
        n = int(config.n_paraphrases)
        if config.paraphrase_source == "file" or n > 0:
            paraphrases = gather_paraphrases(
                model,
                task,
                config.paraphrase_source,
                n,
                int(config.seed),
                config.paraphrases,
                config.llm_model,
                max_tokens,
                progress,
            )
    pairs = [original] + paraphrases
    candidates = [0] + [i for i in range(1, len(pairs)) if pairs[i].usable(config.include_mismatched)]
    left_out = [pair for pair in paraphrases if not pair.usable(config.include_mismatched)]
    if left_out:
        notes.append(
            f"{len(left_out)} of {len(paraphrases)} paraphrases left out: "
            + "; ".join(f"{pair.clean!r}: {pair.reason}" for pair in left_out[:5])
            + ("; ..." if len(left_out) > 5 else "")
        )
    if want != {"single"} and len(candidates) == 1:
        notes.append("No usable paraphrase: Best-of-N has only the prompt itself, so it equals single.")
    timings["paraphrases_s"] = time.perf_counter() - start

    start = time.perf_counter()
    store = ctx.store if config.cache_scores else None
    scores, from_store = stored_pair_scores(
        model,
        model_id,
        spec,
        prepared,
        [pairs[i].task() for i in candidates],
        config,
        store,
        progress,
        max_tokens,
    )
    candidate_scores = torch.stack(scores)  # [n_candidates, n_forward, n_backward]
    timings["scoring_s"] = time.perf_counter() - start
    counts = {"scored_pairs": len(candidates) - from_store, "scores_from_store": from_store}

    start = time.perf_counter()
    pool = _CircuitPool()
    bon_budgets = (
        budgets if ({"bon"} & want or config.compare) else anchors if want & {"ibon", "bon-csm"} else []
    )
    candidate_index: dict[int, list[int]] = {}
    if bon_budgets:
        # every candidate at every budget from one sort per candidate: [n_candidates, n_budgets, ...]
        masks = circuits_at_budgets(spec, candidate_scores, bon_budgets)
        for column, budget in enumerate(bon_budgets):
            candidate_index[budget] = pool.add_many(masks[:, column])
    single_index = {}
    if "single" in want:
        missing = [b for b in budgets if b not in candidate_index]
        added = dict(zip(missing, pool.add_many(circuits_at_budgets(spec, candidate_scores[0], missing))))
        single_index = {b: candidate_index[b][0] if b in candidate_index else added[b] for b in budgets}
    average_index = {}
    if "average" in want:
        mean = candidate_scores.mean(0)
        average_index = dict(zip(budgets, pool.add_many(circuits_at_budgets(spec, mean, budgets))))
    timings["selection_s"] = time.perf_counter() - start
    start = time.perf_counter()
    memo_key = metrics_key(model, model_id, spec, task)
    state = store.load_state(memo_key, kind="circuit-metrics") if store is not None else None
    memo = None if store is None else dict(state.get("metrics", {})) if isinstance(state, dict) else {}
    memo_size = len(memo or {})
    evaluated = pool.evaluate(evaluator, progress, memo)
    timings["evaluation_s"] = time.perf_counter() - start

    candidate_points = {
        b: [pool.point(i, b, baseline) for i in indices] for b, indices in candidate_index.items()
    }
    winners = {b: _winner(points, baseline) for b, points in candidate_points.items()}
    circuits: dict[str, dict[int, torch.Tensor]] = {}
    indices: dict[str, dict[int, int]] = {}
    if single_index:
        indices["single"] = single_index
    if average_index:
        indices["average"] = average_index
    bon_index = {b: candidate_index[b][winners[b]] for b in candidate_index}
    if bon_index:
        indices["bon"] = bon_index

    start = time.perf_counter()
    csm = None
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
    if "bon-csm" in want:
        csm = csm_matrices(anchor_circuits, anchor_scores, spec)
        order = csm_order(*csm, spec)
        indices["bon-csm"] = {b: pool.add(csm_circuit(*csm, b, spec, order=order)) for b in budgets}
    timings["selection_s"] += time.perf_counter() - start
    start = time.perf_counter()
    evaluated += pool.evaluate(evaluator, progress, memo)
    if store is not None and memo is not None and len(memo) > memo_size:
        store.save_state(memo_key, {"metrics": memo}, kind="circuit-metrics")
    timings["evaluation_s"] += time.perf_counter() - start
    counts["circuits_evaluated"] = evaluated

    curves = {}
    for name, by_budget in indices.items():
        circuits[name] = {b: pool.masks[i] for b, i in by_budget.items()}
        curves[name] = [pool.point(i, b, baseline) for b, i in sorted(by_budget.items())]

    start = time.perf_counter()
    shared = {
        b: shared_subcircuit(spec, [pool.masks[i] for i in candidate_index[b]], winners[b], reference)
        for b in candidate_index
    }
    timings["overlap_s"] = time.perf_counter() - start
    return QueryCircuits(
        model_id=model_id,
        spec=spec,
        task=task,
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
        timings=timings,
        counts=counts,
        notes=notes,
        device=str(next(model.parameters()).device),
    )


# ----- the registered methods -----------------------------------------------------------------
class QueryCircuitMethod(Method):
    """One variant's view of the shared Best-of-N pipeline."""

    Config = QueryCircuitConfig
    Details = QueryCircuitDetails
    needs_corrupted = True

    def estimate(self, config, spec, n_tokens, n_budgets) -> Cost:
        """Each (paraphrase, corruption) pair is scored like one run of the base method, and its
        candidate circuits at every budget are evaluated on the prompt."""
        base, base_config = _base_scorer(config)
        per_pair = base.estimate(base_config, spec, n_tokens, 0)
        pairs = int(config.n_paraphrases) + 1
        return Cost(
            passes=per_pair.passes * pairs + 2.0 * n_budgets * pairs + n_budgets,
            gradient_batch=per_pair.gradient_batch,
            ig_steps=int(config.ig_steps),
            n_paraphrases=int(config.n_paraphrases),
        )

    def settings_from_cli(self, settings: dict, model=None) -> dict:
        """``--paraphrases FILE`` gives the file's pairs (and the file source); ``--reference
        FILE`` gives the reference circuit's edge names, read against the model's graph."""
        settings = dict(settings)
        if settings.get("paraphrases"):
            path = Path(settings["paraphrases"])
            try:
                settings["paraphrases"] = path.read_text(encoding="utf-8")
            except OSError as error:
                raise ValueError(f"Cannot read the paraphrase file {path} ({error.strerror}).") from None
            settings.setdefault("paraphrase_source", "file")
        if settings.get("reference") and model is not None:
            from ..results import load_circuit

            spec = GraphSpec.from_model(model)
            settings["reference"] = "\n".join(
                spec.edge_names_of(load_circuit(settings["reference"], spec).mask)
            )
        return settings

    def run(self, ctx: RunContext, config, budgets: Sequence[int]) -> CircuitResult:
        return query_circuits(ctx, self.as_config(config), budgets, self.name).to_result(self.name)


@register
class SingleQuery(QueryCircuitMethod):
    name = "single"
    label = "Single query (BoN baseline)"
    summary = "Top-N of the prompt's own edge scores; with compare on, BoN and its variants beside it."


@register
class AveragedParaphrases(QueryCircuitMethod):
    name = "average"
    label = "Averaged paraphrase scores"
    summary = "Top-N of the mean score matrix of the prompt and its paraphrases (a BoN baseline)."


@register
class BestOfN(QueryCircuitMethod):
    name = "bon"
    label = "Best-of-N (query circuits)"
    summary = (
        "Score the prompt and p paraphrases; keep the candidate circuit most faithful (NDF) on the prompt."
    )


@register
class InterpolatedBestOfN(QueryCircuitMethod):
    name = "ibon"
    label = "Interpolated BoN"
    summary = "BoN circuits at anchor budgets; a budget between them adds the next anchor's best edges."


@register
class BestOfNCSM(QueryCircuitMethod):
    name = "bon-csm"
    label = "BoN with a constraint-adaptive score matrix"
    summary = "One tier-then-score ordering from the anchors' BoN circuits serves every budget (nested)."
