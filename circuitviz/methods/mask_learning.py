"""Learning edge masks by gradient descent on exact faithfulness: the loop Edge Pruning and
paraphrase pruning share.

One mask per budget, each a row of logits over the edges. Every step runs, for every task (the
prompt alone for Edge Pruning; the prompt and its fit paraphrases for paraphrase pruning), the
hard top-N mask of each budget through the evaluator's differentiable patching
(``masked_residual``, exact at 0/1 masks) and descends

    sum_t weight_t ((L(C(q_t)) - L(M(q_t))) / (L(M(q_t)) - L(M(q_t'))))^2
        + sparsity x (relaxed mask size / N)

through a straight-through top-N: forward the hard top-N, backward the sigmoid of
(logit - t_N) / temperature around that budget's threshold t_N. Steps are normalised gradient
steps with momentum (the edge with the largest gradient moves ``learning_rate`` logit units).
The circuit kept at a budget is the (earliest) step's whose selection error is smallest: |deviation| on the
prompt for one task; for several, the worse of the prompt's and the other tasks' mean (each
deviation capped at 1, i.e. 1 - NDF), so a circuit must hold on both. A budget stops once that
error is within ``TOLERANCE``. With one task and weight 1 this is Edge Pruning's loop exactly
(tested against its earlier code's circuits and histories).
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..core.graph import GraphSpec, prune
from ..engine.live import dead_layers
from ..engine.memory import evaluation_bytes_per_position, gradient_bytes_per_position
from ..engine.metric import compatible_groups, metric_from_residual, task_metric
from ..engine.patching import masked_residual, padded_to
from ..engine.prefix import reusing_prefixes, shared_prefix
from ..engine.scores import score_dtype
from ..measure.chunks import run_in_chunks
from ..measure.evaluate import Evaluator
from ..models.adapter import model_dtype
from .base import RunContext
from .mask_thresholds import filled_counts

# a budget stops learning once its circuit's selection error is within this of 0 (NDF 0.99)
TOLERANCE = 0.01
# a later step's circuit replaces the kept one only when its selection error is smaller by more
# than this: errors that differ in the last bits (one task's pass against the same task batched
# with others, or another CPU's summation order) tie, and the earlier step stays
TIE = 1e-12
# momentum of the normalised-gradient steps
MOMENTUM = 0.8
# logits of edges a warm start scores 0 sit this far (log units) below the smallest nonzero score
_ZERO_LOGIT_GAP = 5.0
# A learning step of one mask, in plain forward passes of the prompt (``Cost.passes``): the masked
# forward and backward (every reader's input mixed from the writers' differences by the relaxed
# mask, each shared post-norm renormalised per reader pair, all in the autograd graph), and the
# last step's forward with the learning's set-up (its unchanged prefix run once). Measured on the
# embedded model, IOI, 9 masks learning together, against a plain batched forward pass in the
# same process (benchmarks/bench_pass_weights.py, 2026-12-02, load 3): 6.0 and 6.3. They were
# counted 3 and 0, and the step cost 11.4 before each layer's table was split per reader group
# (engine/renorm.py): Edge Pruning ran 3.25x over its price.
MASKED_STEP_PASSES = 6.0
MASKED_FORWARD_PASSES = 6.0
FREEZE_DEAD = True


def learning_passes(steps: int, masks: int, tasks: int = 1) -> float:
    """The plain-pass equivalents of ``learn_masks`` with ``steps`` steps of ``masks`` masks on
    ``tasks`` tasks: every step a forward and backward of each (mask, task), then the last step's
    forward (a budget that reaches its tolerance earlier stops earlier: this is the most)."""
    return (MASKED_STEP_PASSES * int(steps) + MASKED_FORWARD_PASSES) * int(masks) * int(tasks)


@dataclass(frozen=True)
class Schedule:
    """How the masks learn: at most ``steps`` steps of ``learning_rate``, the sigmoid's
    ``temperature``, the ``sparsity`` weight, and ``warmup`` steps over which each mask shrinks
    from the whole graph to its budget (0: it starts at its budget). With several tasks,
    ``worst`` selects each budget's circuit by the worse of the prompt's NDF and the lowest other
    task's (not their mean), and ``reweight`` shares the other tasks' half of the loss in
    proportion to each one's error at the step before (the lagging ones weigh most).

    ``anchor`` (0 to 1) pulls the logits back toward their start after every step: each moves that
    share of its distance from its warm-start value back (decoupled weight decay toward the start;
    in plain gradient descent the penalty anchor / (2 learning_rate) x |theta - theta_0|^2, here
    independent of the normalised gradient's scale). ``draw`` (0 to 1, 0: off) fits each step on
    the prompt and a seeded random share (``draw_seed``) of the other tasks, at least one; every
    task is still run and the step is still kept by all of them. ``prompt_weight`` (0 to 1,
    exclusive) is the prompt's share of the loss with several tasks, the others sharing the rest
    (evenly, by ``reweight`` or among those ``draw`` picks); 0.5: the prompt weighs as much as the
    others together. ``fill``: once at its budget, each step's hard mask keeps the largest top-N
    whose pruned circuit has at most the budget's edges (``mask_thresholds.filled_count``), not the
    top-N of the budget itself."""

    steps: int
    learning_rate: float
    temperature: float
    sparsity: float
    warmup: int = 0
    worst: bool = False
    reweight: bool = False
    anchor: float = 0.0
    draw: float = 0.0
    draw_seed: int = 0
    prompt_weight: float = 0.5
    fill: bool = False

    def __post_init__(self):
        if not 0 < float(self.prompt_weight) < 1:
            raise ValueError(f"prompt_weight must be between 0 and 1 (exclusive), not {self.prompt_weight}.")


@dataclass
class LearnedMasks:
    """The outcome of ``learn_masks``: per budget, the best circuit and its record."""

    circuits: torch.Tensor  # [n_budgets, n_forward, n_backward] bool, pruned
    logits: torch.Tensor  # [n_budgets, n_edges] the final logits, centred on each threshold
    deviations: list[list[list[float]]]  # per budget, per step, per task (L(C) - L(M)) / span
    best_step: list[int]
    steps_run: int
    first_at_size: list[list[float]]  # per budget, per task, the first circuit of its size's deviations
    worst: bool = False  # selected by the lowest other task's NDF, not their mean
    best_logits: torch.Tensor | None = None  # [n_budgets, n_edges] each kept step's logits

    @property
    def deviation(self) -> list[list[float]]:
        """Per budget, the prompt's (first task's) deviation at each step."""
        return [[step[0] for step in budget] for budget in self.deviations]

    def scores(self, budget: int) -> list[float]:
        """Per step, 1 - the selection error of that step's circuit (the worse of the prompt's NDF
        and the other tasks' mean NDF; the prompt's NDF for one task)."""
        return [1 - min(1.0, selection_error(step, self.worst)) for step in self.deviations[budget]]


def selection_error(deviations: Sequence[float], worst: bool = False) -> float:
    """How far a circuit is from its model on the tasks: |deviation| on the prompt alone; with more
    tasks, the worse of the prompt's and the others' mean (``worst``: the others' largest), each
    capped at 1 (1 - NDF)."""
    if len(deviations) == 1:
        return abs(deviations[0])
    others = [min(abs(d), 1.0) for d in deviations[1:]]
    return max(min(abs(deviations[0]), 1.0), max(others) if worst else statistics.fmean(others))


def loss_weights(prompt_weight: float, parts: Sequence[float]) -> list[float]:
    """Every task's weight in the loss: the prompt's ``prompt_weight`` first, then each other
    task's ``part`` (the parts sum to 1; 0: not fitted at that step) of the rest."""
    rest = 1.0 - float(prompt_weight)
    return [float(prompt_weight), *[rest * part for part in parts]]


def initial_logits(values: torch.Tensor, counts: Sequence[int]) -> torch.Tensor:
    """theta = log(|score| / |score of the N-th edge|) per budget N: step 0 is the top-N circuit.

    values: [n_edges] warm-start scores (all equal: no warm start). Edges scored 0 sit
    ``_ZERO_LOGIT_GAP`` below the smallest nonzero score. Returns [n_budgets, n_edges].
    """
    size = values.abs() if values.is_floating_point() else values.abs().float()
    logits = _logits_of(size, counts)
    if bool(torch.isfinite(logits).all()):
        return logits
    # a float32 score near its smallest (7e-45 of a normalised warm start on a planted model) put the
    # floor below float32's range, 0, and the zero-scored edges' logits at -inf, which the learning
    # turned into NaN on every edge (an empty circuit): then in float64 (on the CPU: MPS has none).
    # Only then, so every other warm start keeps its float32 logits to the bit.
    wide = _logits_of(values.detach().abs().to("cpu", torch.float64), counts)
    return wide.to(values.device, size.dtype)


def _logits_of(size: torch.Tensor, counts: Sequence[int]) -> torch.Tensor:
    positive = size[size > 0]
    floor = float(positive.min()) * math.exp(-_ZERO_LOGIT_GAP) if positive.numel() else 1.0
    logs = torch.log(size.clamp_min(floor))  # [n_edges]
    ordered = torch.sort(logs, descending=True).values
    thresholds = torch.stack([ordered[int(n) - 1] for n in counts])  # [n_budgets]
    return logs[None, :] - thresholds[:, None]


def top_counts(logits: torch.Tensor, counts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The hard top-N mask of each row and the threshold between its N-th and N+1-th logit.

    logits: [n_budgets, n_edges]; counts: [n_budgets] (each below n_edges). Ties in edge order.
    Returns (hard [n_budgets, n_edges] in the logits' dtype, thresholds [n_budgets, 1]).
    """
    order = torch.sort(logits, dim=1, descending=True, stable=True)
    ranks = torch.empty_like(order.indices)
    positions = torch.arange(logits.shape[1], device=logits.device).expand_as(ranks)
    ranks.scatter_(1, order.indices, positions)
    hard = (ranks < counts[:, None]).to(logits.dtype)
    inside = order.values.gather(1, (counts - 1)[:, None])
    outside = order.values.gather(1, counts[:, None])
    return hard, (inside + outside) / 2


def scheduled_count(target: int, n_edges: int, step: int, warmup: int) -> int:
    """The edge count a budget's mask keeps at ``step``: over the first ``warmup`` steps it falls
    geometrically from the whole graph (n_edges - 1) to the budget, then stays there."""
    if warmup <= 0 or step >= warmup:
        return int(target)
    start = n_edges - 1
    return int(round(math.exp(math.log(start) + (math.log(target) - math.log(start)) * step / warmup)))


def straight_through(hard: torch.Tensor, soft: torch.Tensor) -> torch.Tensor:
    """The hard mask in the forward pass, exactly, with the soft mask's gradient backward.

    Written ``hard + soft - soft.detach()`` it read (hard + soft) - soft: 0.99999994 for a kept
    edge in float32, so the exact evaluator took nearly every all-kept reader for a mixed one."""
    return hard + (soft - soft.detach())


def learn_masks(
    ctx: RunContext,
    evaluators: Sequence[Evaluator],
    start: torch.Tensor,
    counts: Sequence[int],
    schedule: Schedule,
) -> LearnedMasks:
    """Learn one mask per budget in ``counts`` (each 0 < N < n_edges) on every task of
    ``evaluators`` (the prompt first; it weighs ``prompt_weight``, by default as much as the others
    together, and the others share the rest), all budgets in one
    batch per task and step. start: [n_budgets, n_edges] logits (``initial_logits``). With a
    ``warmup`` only circuits of the budget's size compete for the best."""
    model, spec = ctx.model, ctx.spec
    device = evaluators[0].device
    graph = spec.tensors(device)
    n_budgets, n_edges = len(counts), int(graph.edge_index[0].shape[0])
    dtype = score_dtype(model_dtype(model))  # float32 at least
    logits = start.to(device=device, dtype=dtype).clone()  # [n_budgets, n_edges]
    n_tasks = len(evaluators)
    # the prompt's share of the loss, the others sharing the rest (half each by default; at 0.5
    # exactly the weights 0.5 and 0.5 / (n_tasks - 1) of before, to the bit); one task weighs 1
    prompt = float(schedule.prompt_weight)
    weights = [1.0] if n_tasks == 1 else loss_weights(prompt, [1 / (n_tasks - 1)] * (n_tasks - 1))
    # per budget, each task's weight (``reweight``: the others' share split by their last errors)
    budget_weights = [list(weights) for _ in range(n_budgets)]
    reweight = bool(schedule.reweight) and n_tasks > 2
    anchor = float(schedule.anchor)
    anchored = start.to(device=device, dtype=dtype).clone() if anchor > 0 else None
    # ``draw``: each step's loss on the prompt and a seeded share of the others (weights per step)
    drawing = 0 < float(schedule.draw) < 1 and n_tasks > 2
    n_drawn = max(1, round(float(schedule.draw) * (n_tasks - 1))) if drawing else 0
    draws = random.Random(int(schedule.draw_seed))
    step_weights: list[float] = list(weights)
    spans = [e.baseline.clean - e.baseline.corrupted for e in evaluators]
    velocity = torch.zeros_like(logits)
    # each budget's kept hard mask, pruned after the learning (``prune`` treats rows alone)
    best_circuits = torch.zeros(n_budgets, spec.n_forward, spec.n_backward, dtype=torch.bool, device=device)
    best_error, best_step = [math.inf] * n_budgets, [0] * n_budgets
    best_logits = logits.clone()  # each budget's logits at its kept step
    history: list[list[list[float]]] = [[] for _ in range(n_budgets)]
    first_at_size: list[list[float]] = [[math.nan] * n_tasks for _ in range(n_budgets)]
    temperature, sparsity, steps = float(schedule.temperature), float(schedule.sparsity), int(schedule.steps)
    training, step = list(range(n_budgets)), 0
    said = [0.0]  # the learning's fraction last reported

    def report(fraction: float | None = None) -> None:
        """Report the learning's fraction (``None``: the last one again, from inside a pass: a
        step of paraphrase pruning was one silent minute on a busy CPU, and a run stops, when
        cancelled, at its next report)."""
        if fraction is not None:
            said[0] = min(1.0, fraction)
        ctx.report("learning masks", said[0])

    check = report if ctx.progress is not None else None  # before each block of a pass, both ways

    positions = max(e.prepared.n_positions for e in evaluators)
    # every task's rows run padded to the longest prompt (tasks of several lengths share a pass)
    per_item = len(evaluators) * (
        gradient_bytes_per_position(model, positions) + evaluation_bytes_per_position(spec, 4)
    )
    budget_counts = torch.tensor([int(n) for n in counts], device=device)

    def keep_masks(theta: torch.Tensor, chosen: torch.Tensor):
        """Straight-through masks: hard top-N forward, the sigmoid's gradient backward.
        Returns (keep [b, n_forward, n_backward], soft [b, n_edges])."""
        hard, threshold = top_counts(theta.detach(), budget_counts[chosen])
        soft = torch.sigmoid((theta - threshold) / temperature)  # [b, n_edges]
        # the hard top-N runs unpruned: an edge whose path is not yet complete then still has a
        # gradient (pruning it would cut the path its missing link is learned through)
        kept = straight_through(hard, soft)
        keep = torch.zeros(len(chosen), spec.n_forward * spec.n_backward, dtype=dtype, device=device)
        keep = keep.scatter(1, graph.flat_edge_index.expand(len(chosen), -1), kept)
        return keep.view(-1, spec.n_forward, spec.n_backward), soft

    prepared = [e.prepared for e in evaluators]
    # tasks of one metric and number of foils share a pass, the shorter prompts padded at the end
    # (on the CPU one padded pass costs much less than one pass per prompt length)
    passes = compatible_groups(prepared, same_length=False)
    longest = [max(prepared[t].n_positions for t in group) for group in passes]
    # each pass's corrupted runs, padded to its longest prompt: [g, pos, ...] (None: one task's own)
    pass_writers = [
        torch.cat([padded_to(evaluators[t].corrupted_writers, n) for t in group]) if len(group) > 1 else None
        for group, n in zip(passes, longest)
    ]
    pass_raw = [
        torch.cat([padded_to(evaluators[t].corrupted_raw, n) for t in group])
        if len(group) > 1 and evaluators[group[0]].corrupted_raw is not None
        else None
        for group, n in zip(passes, longest)
    ]
    row_weight = [torch.tensor([weights[t] for t in group], device=device, dtype=dtype) for group in passes]
    scales = [
        torch.tensor([spans[t] if spans[t] != 0 else 1.0 for t in group], device=device, dtype=dtype)
        for group in passes
    ]
    cleans = [
        torch.tensor([evaluators[t].baseline.clean for t in group], device=device, dtype=dtype)
        for group in passes
    ]

    # each pass's unchanged prefix, read once (not a step: on an accelerator a sync or two each)
    prefixes = [shared_prefix(model, [prepared[t] for t in group]) for group in passes]

    def run_pass(number: int, keep: torch.Tensor) -> torch.Tensor:
        """The deviations of the circuits ``keep`` [b, ...] on pass ``number``'s tasks.  # [g, b]"""
        group = passes[number]
        # a gradient pass leaves out the nodes no kept edge leads on from (``engine.live``)
        frozen = dead_layers(spec, keep) if FREEZE_DEAD and torch.is_grad_enabled() else None
        if len(group) == 1:  # one task: its own run (Edge Pruning's, to the bit)
            evaluator = evaluators[group[0]]
            residual = masked_residual(
                model,
                spec,
                evaluator.prepared,
                evaluator.corrupted_writers,
                keep,
                evaluator.corrupted_raw,
                prefix=prefixes[number],
                check=check,
                frozen=frozen,
            )
            metric = metric_from_residual(model, evaluator.prepared, residual).to(dtype)  # [b]
            span = spans[group[0]]
            return ((metric - evaluator.baseline.clean) / (span if span != 0 else 1.0))[None]
        chosen = [evaluators[t].prepared for t in group]
        residual = masked_residual(
            model,
            spec,
            chosen,
            pass_writers[number],
            keep.repeat(len(group), 1, 1),  # task 0's circuits, then task 1's, ...
            pass_raw[number],
            prefix=prefixes[number],
            check=check,
            frozen=frozen,
        )
        owner = torch.arange(len(group), device=device).repeat_interleave(keep.shape[0])
        metric = task_metric(model, chosen, owner, same_length=False)(residual).to(dtype)  # [g b]
        metric = metric.view(len(group), -1)
        return (metric - cleans[number][:, None]) / scales[number][:, None]

    def pass_rows(rows: slice, active: list[int], backward: bool = True):
        """Forward and backward of the budgets ``active[rows]`` on every task:
        (deviations [task][row], circuits, gradient). ``backward`` False: the forward only (the
        last step, whose gradient no step uses; the same masks, so the same deviations) and a
        zero gradient."""
        chosen = torch.tensor(active[rows], device=device)
        theta = logits[chosen].detach().requires_grad_(backward)  # [b, n_edges]
        gradient = torch.zeros_like(theta)
        deviations: list[list[float]] = [[] for _ in evaluators]
        circuits = None
        for number, group in enumerate(passes):
            with torch.set_grad_enabled(backward):
                keep, soft = keep_masks(theta, chosen)
                if circuits is None:  # pruned once at the end, the kept ones only (row by row alike)
                    circuits = keep.detach() > 0.5
                deviation = run_pass(number, keep)  # [g, b]
                if backward:
                    if drawing:
                        rows_weight = [[step_weights[t]] * len(active[rows]) for t in group]
                        loss = (torch.tensor(rows_weight, device=device, dtype=dtype) * deviation**2).sum()
                    elif reweight:
                        rows_weight = [[budget_weights[i][t] for i in active[rows]] for t in group]
                        loss = (torch.tensor(rows_weight, device=device, dtype=dtype) * deviation**2).sum()
                    elif len(group) == 1:
                        loss = weights[group[0]] * (deviation[0] ** 2).sum()
                    else:
                        loss = (row_weight[number][:, None] * deviation**2).sum()
                    if number == len(passes) - 1:  # the sparsity term rides on the last pass
                        loss = loss + sparsity * (soft.sum(1) / budget_counts[chosen].to(dtype)).sum()
                    (part,) = torch.autograd.grad(loss, theta)
                    gradient += part
            for task, values in zip(group, deviation.detach().tolist()):
                deviations[task] = values
        return deviations, circuits, gradient

    # each prompt's unchanged prefix runs once for the whole learning, not once a step
    with reusing_prefixes():
        while training:
            sizes = [scheduled_count(n, n_edges, step, schedule.warmup) for n in counts]
            reached = [size == int(n) for size, n in zip(sizes, counts)]  # at the budget's size
            if schedule.fill:  # the largest top-N whose pruned circuit fits the budget
                filled = filled_counts(spec, logits, counts)
                sizes = [f if at else size for f, at, size in zip(filled, reached, sizes)]
            budget_counts = torch.tensor(sizes, device=device)
            active = list(training)
            results: dict[int, tuple] = {}
            if drawing:
                drawn = set(draws.sample(range(1, n_tasks), n_drawn))
                step_weights = loss_weights(
                    prompt, [1 / n_drawn if t in drawn else 0.0 for t in range(1, n_tasks)]
                )
            # the last step of every active budget: its circuits are measured, its gradient unused
            last = step >= steps and all(reached[i] for i in active)

            def compute(rows: slice, active=active, last=last):
                return pass_rows(rows, active, backward=not last)

            def commit(rows: slice, result, active=active, results=results):
                deviations, circuits, gradient = result
                for offset, index in enumerate(active[rows]):
                    results[index] = ([d[offset] for d in deviations], circuits[offset], gradient[offset])

            run_in_chunks(model, "gradient", len(active), positions, per_item, compute, commit)
            moving: list[int] = []  # the budgets that learn on, stepped together below
            for index in active:
                deviations, circuit, gradient = results[index]
                history[index].append(deviations)
                at_size = reached[index]
                if at_size and math.isnan(first_at_size[index][0]):
                    first_at_size[index] = list(deviations)
                error = selection_error(deviations, schedule.worst)
                if reweight:
                    errors = [min(abs(d), 1.0) for d in deviations[1:]]
                    total = sum(errors)
                    shares = [e / total for e in errors] if total > 0 else [1 / len(errors)] * len(errors)
                    budget_weights[index] = loss_weights(prompt, shares)
                if at_size and error < best_error[index] - TIE:
                    best_error[index], best_step[index] = error, step
                    best_circuits[index] = circuit
                    best_logits[index] = logits[index]
                if at_size and (best_error[index] <= TOLERANCE or step >= steps or spans[0] == 0):
                    training.remove(index)
                    continue
                moving.append(index)
            if moving:  # every learning budget's step at once, on the device (no sync per budget)
                rows = torch.tensor(moving, device=device)
                gradient = torch.stack([results[index][2] for index in moving])  # [m, n_edges]
                largest = gradient.abs().amax(1, keepdim=True)  # each row's own largest
                direction = torch.where(largest > 0, gradient / largest, gradient)
                velocity[rows] = MOMENTUM * velocity[rows] + direction
                logits[rows] -= float(schedule.learning_rate) * velocity[rows]
                if anchored is not None:  # back toward the warm start by a share of the distance
                    logits[rows] -= anchor * (logits[rows] - anchored[rows])
            report((step + 1) / max(steps, 1))
            step += 1
    _, thresholds = top_counts(logits, torch.tensor([int(n) for n in counts], device=device))
    return LearnedMasks(
        prune(spec, best_circuits),
        logits - thresholds,
        history,
        best_step,
        step,
        first_at_size,
        bool(schedule.worst),
        best_logits,
    )


def edge_values(spec: GraphSpec, scores: torch.Tensor) -> torch.Tensor:
    """A [n_forward, n_backward] score matrix as one value per edge.  # [n_edges]"""
    forward, backward = spec.tensors(scores.device).edge_index
    return scores[forward, backward]


def budget_circuits(spec: GraphSpec, budgets: Sequence[int], trained: Sequence[int], learned, device):
    """The circuit of every budget: the learned mask of a trained one (``learned``, None when none
    was trained), the whole graph (pruned) for a budget of every edge or more, else empty.
    # [n_budgets, n_forward, n_backward] bool"""
    circuits = torch.zeros(len(budgets), spec.n_forward, spec.n_backward, dtype=torch.bool, device=device)
    for index, budget in enumerate(budgets):
        if budget >= spec.n_edges:
            circuits[index] = prune(spec, spec.tensors(device).edge_mask)
        elif budget in trained and learned is not None:
            circuits[index] = learned.circuits[list(trained).index(budget)]
    return circuits


# what ``mask_scores`` gives, in the edge table's words
MASK_SCORE = (
    "how firmly the learned masks keep the edge: its relaxed mask (0 to 1) averaged over the budgets "
    "learned; each budget's circuit is that budget's own learned mask, so this ranking need not "
    "match it (with no budget learned: the warm start's |score|)"
)


def mask_scores(spec: GraphSpec, learned: LearnedMasks, temperature: float, device) -> torch.Tensor:
    """An edge's score: how firmly the budgets' masks keep it (the relaxed mask, averaged over
    the budgets).  # [n_forward, n_backward]"""
    scores = torch.zeros(spec.n_forward, spec.n_backward, device=device)
    kept = torch.sigmoid(learned.logits / float(temperature)).mean(0)  # [n_edges]
    scores[spec.tensors(device).edge_index] = kept.float()
    return scores
