"""Edge Pruning: a circuit per budget learned by gradient descent on a mask over the edges.

Every edge e has a mask logit theta_e. A circuit is a mask m in [0, 1]^edges: each reader's
input takes, per edge, m_e of its writer's current output and 1 - m_e of its corrupted output
(``activations.masked_residual``: the evaluator's patching with weights, exact at 0/1 masks).
The loss is the faithfulness of the circuit on the prompt, in the task's own metric (the logit
difference of answer and foil for the usual tasks, not a KL divergence),

    ((L(C(q)) - L(M(q))) / (L(M(q)) - L(M(q'))))^2

plus a sparsity term ``sparsity`` x (the relaxed mask's size / N), which pulls down the logits
of edges that do nothing for faithfulness (dead ends) so useful ones take their place. The
relaxation is a straight-through top-N: the forward pass runs the hard mask of exactly the N
edges of largest logit, and the backward pass differentiates the soft mask
sigmoid((theta - t_N) / temperature) around that budget's threshold t_N. So every step runs a
circuit of exactly the budget's size and measures its faithfulness exactly; the circuit kept at
a budget is the most faithful mask the run passed through, with its dead-end edges pruned
(which changes nothing: a dead end is read by no one), and is measured again by the
shared evaluator like every method's. The hard mask runs unpruned, so an edge whose path is not
complete yet still gets a gradient through the rest of its path.

Logits start from a scoring method's scores (``warm_start``, EAP-IG by default, through the
registry): theta_e = log(|score_e| / |score of the N-th edge|), so step 0 is that method's top-N
circuit and the learned circuit is never less faithful than it. Without a warm start (``none``)
every logit starts equal and each mask starts as the whole graph, its size falling
geometrically to the budget over the first half of the steps (as Edge Pruning anneals its
sparsity target): an edge from a node that nothing feeds has no gradient, so paths must be
there from the start. All budgets learn at once, one mask each, in one batched forward and
backward pass per step; a budget whose circuit reaches NDF ``1 - TOLERANCE`` stops. Optionally
every circuit is also measured on template paraphrases of the prompt (``check_paraphrases``):
the mask is fitted to one sentence, and this shows how far it carries to others.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..core.curves import ndf
from ..core.graph import GraphSpec
from ..core.results import CircuitResult
from ..core.tasks import prepare_task
from ..core.text import given
from ..details.edge_pruning import EdgePruningDetails
from ..engine.score_checks import require_finite_scores
from ..engine.scores import score_dtype
from ..measure.evaluate import Evaluator, curves_of_tasks
from ..models.adapter import model_dtype
from .base import Cost, Method, RunContext, ScoringMethod, curve_passes
from .mask_learning import (
    MASK_SCORE,
    Schedule,
    budget_circuits,
    edge_values,
    initial_logits,
    learn_masks,
    learning_passes,
    mask_scores,
)
from .paraphrase_pairs import template_tasks
from .registry import get_method, register
from .scoring import scorer_names
from .settings import check_settings, ig_steps_setting, paraphrases_setting, setting


def warm_start_names() -> tuple[str, ...]:
    """What may start the logits: any registered scoring method, or none."""
    return ("none", *scorer_names())


@dataclass(frozen=True)
class EdgePruningConfig:
    """Settings of Edge Pruning."""

    steps: int = setting(
        20,
        "optimisation steps at most, each one forward and backward pass of every budget's mask together.",
        low=0,
        high=10000,
    )
    learning_rate: float = setting(
        0.5,
        "how far the logit of the edge with the largest gradient moves per step (log-score units, above 0).",
    )
    temperature: float = setting(
        1.0,
        "width of the sigmoid around each budget's threshold through which gradients pass (log-score units, above 0).",
    )
    sparsity: float = setting(
        0.01,
        "weight of the term that pulls every logit down (the relaxed mask's size over the budget).",
        low=0.0,
    )
    warm_start: str = setting(
        "eap-ig",
        "the scoring method whose scores start the logits (none: each mask starts as the whole graph and shrinks to its budget over the first half of the steps).",
        choices=warm_start_names,
    )
    ig_steps: int = ig_steps_setting(20, "IG steps of the warm start, when it takes them.")
    check_paraphrases: int = paraphrases_setting(
        0, "also measure every circuit on this many template paraphrases of the prompt (0: none)."
    )
    seed: int = setting(0, "seeds the paraphrase templates.")

    def __post_init__(self):
        check_settings(self)  # every bound its fields declare
        if not float(self.learning_rate) > 0:
            raise ValueError(f"learning_rate must be above 0, not {self.learning_rate}.")
        if not float(self.temperature) > 0:
            raise ValueError(f"temperature must be above 0, not {self.temperature}.")


# ----- the method ----------------------------------------------------------------------------------
def _warm_scores(ctx: RunContext, config: EdgePruningConfig) -> torch.Tensor:
    """The warm start's edge scores on the prompt (all ones for none).  # [n_forward, n_backward]"""
    spec = ctx.spec
    if config.warm_start == "none":
        return spec.tensors(ctx.device).edge_mask.float()
    method = get_method(config.warm_start)
    if not isinstance(method, ScoringMethod):
        raise ValueError(
            f"warm_start must be a method that scores edges (eap, eap-ig, ...) or none, not {given(config.warm_start)}."
        )
    ((scores, _),) = method.score_batch([ctx], _scorer_config(method, config), ctx.progress)  # a batch of one
    require_finite_scores(scores, spec, method.name, ctx.model)
    return (scores.float() * spec.tensors(scores.device).edge_mask).nan_to_num(0.0)


def _scorer_config(method: Method, config: EdgePruningConfig):
    names = set(method.Config.__dataclass_fields__)
    return method.make_config({"ig_steps": int(config.ig_steps)} if "ig_steps" in names else {})


def _paraphrase_check(ctx: RunContext, config: EdgePruningConfig, circuits: torch.Tensor, budgets):
    """NDF of every circuit on template paraphrases of the prompt: ({budget: [ndf]}, prompts, notes)."""
    tasks, note = template_tasks(ctx.model, ctx.task, int(config.check_paraphrases), int(config.seed))
    notes = [note] if note else []
    by_budget: dict[str, list[float]] = {str(int(b)): [] for b in budgets}
    for index, task in enumerate(tasks):
        evaluator = Evaluator(ctx.model, ctx.spec, prepare_task(ctx.model, task, ctx.max_tokens))
        for budget, value in zip(budgets, evaluator.metrics(circuits).tolist()):
            by_budget[str(int(budget))].append(ndf(float(value), evaluator.baseline))
        ctx.report("paraphrases", (index + 1) / len(tasks))
    return by_budget, [task.clean for task in tasks], notes


@register
class EdgePruning(Method):
    name = "edge-pruning"
    # the same learning loop (methods/mask_learning.py): until this method has runs of its own, priced
    # from paraphrase pruning's rather than every method's (Edge Pruning's first estimate was 2.3x its run)
    calibration_family = ("paraphrase-pruning",)
    label = "Edge Pruning (learned masks)"
    # a near-tie of two logits that rounds one way on the CPU and the other on a GPU changes one
    # step's hard mask, and the final logits (the scores) with it; on an H200 (2026-12-01) the
    # circuits and curve still matched the CPU's exactly while the scores differed by 0.06
    scores_are_exact = False
    summary = (
        "A mask per budget learned by gradient descent on the circuit's faithfulness, warm-started "
        "from EAP-IG; the circuit is the thresholded mask."
    )
    score_meaning = MASK_SCORE
    Config = EdgePruningConfig
    Details = EdgePruningDetails
    fitted_to_prompt = "Edge Pruning learns its mask on this prompt"
    scores_estimate_metric = False  # how firmly the learned masks keep an edge (MASK_SCORE)

    def estimate(self, config, spec: GraphSpec, n_tokens: int, n_budgets: int) -> Cost:
        masks = max(int(n_budgets), 1)
        # each step: a masked forward and backward pass of every mask, then the last step's forward;
        # a mask whose circuit reaches the tolerance stops, at the least after its first pass
        most = self._cost(config, spec, n_tokens, n_budgets, learning_passes(int(config.steps), masks))
        least = self._cost(config, spec, n_tokens, n_budgets, learning_passes(0, masks))
        return dataclasses.replace(
            most,
            passes_range=(least.passes, most.passes),
            range_reason="Edge Pruning stops learning a budget's mask once its circuit is faithful "
            "enough, so a prompt its warm start already explains ends early",
        )

    def _cost(self, config, spec: GraphSpec, n_tokens: int, n_budgets: int, training: float) -> Cost:
        """The run's passes with ``training`` passes of mask learning (``learning_passes``)."""
        warm = Cost(passes=0.0)
        if config.warm_start != "none":
            method = get_method(config.warm_start)
            warm = method.estimate(_scorer_config(method, config), spec, n_tokens, 0)
        masks = max(int(n_budgets), 1)
        paraphrases = int(config.check_paraphrases) * (2.0 + masks)
        return Cost(
            passes=warm.passes + 2.0 + training + curve_passes(n_budgets, spec) + paraphrases,
            gradient_batch=max(warm.gradient_batch, masks),
            ig_steps=warm.ig_steps,
            n_paraphrases=int(config.check_paraphrases),
            # the warm start scores on the run's evaluator (its clean and corrupted runs, read back
            # when this process kept them) in one gradient pass of its rows, chunked as its own run
            prompt_passes=warm.prompt_passes,
            gradient_rows=warm.gradient_rows,
        )

    def passes_done(self, result) -> float | None:
        """The passes a finished run took: its masks' passes as they ran (a budget measured n times
        took n - 1 steps and its last forward), so an early stop does not make the next run's
        price look cheap (priced at 4 min, a 9-token prompt took 72 s, Gemma-3-270M)."""
        details = result.details
        if not isinstance(details, EdgePruningDetails) or not details.budgets:
            return None
        config = self.as_config(result.config or {})
        ran = sum(learning_passes(max(int(entry.get("steps", 1)) - 1, 0), 1) for entry in details.budgets)
        n_tokens = len((result.tokens or {}).get("clean") or []) or 1
        return self._cost(config, result.graph, n_tokens, len(result.curve), ran).passes

    def run_task(self, ctx: RunContext, config, budgets: Sequence[int]) -> CircuitResult:
        config = self.as_config(config)
        spec, evaluator = ctx.spec, ctx.evaluator
        device = evaluator.device
        budgets = sorted({int(b) for b in budgets})
        with ctx.timed("scoring_s"):
            warm = _warm_scores(ctx, config)
        trained = [b for b in budgets if 0 < b < spec.n_edges]
        details = EdgePruningDetails(warm_start=config.warm_start)
        learned = None
        if trained:
            with ctx.timed("learning_s"):
                warmup = int(config.steps) // 2 if config.warm_start == "none" else 0
                dtype = score_dtype(model_dtype(ctx.model))  # float32 at least
                start = initial_logits(edge_values(spec, warm).to(dtype=dtype), trained)
                schedule = Schedule(
                    int(config.steps),
                    float(config.learning_rate),
                    float(config.temperature),
                    float(config.sparsity),
                    warmup,
                )
                learned = learn_masks(ctx, [evaluator], start, trained, schedule)
            scores = mask_scores(spec, learned, config.temperature, device)
            details.steps_run = learned.steps_run
            details.history = {
                str(b): [ndf(clean_deviation(d, evaluator), evaluator.baseline) for d in learned.deviation[i]]
                for i, b in enumerate(trained)
            }
        else:
            scores = warm.abs()
        circuits = budget_circuits(spec, budgets, trained, learned, device)
        with ctx.timed("evaluation_s"):
            curve = curves_of_tasks([evaluator], circuits[None], budgets, ctx.progress)[0]
        points = {p.budget: p for p in curve}
        if trained:
            details.budgets = [
                {
                    "budget": b,
                    "edges": points[b].n_edges,
                    "warm_ndf": ndf(
                        clean_deviation(learned.first_at_size[i][0], evaluator), evaluator.baseline
                    ),
                    "ndf": points[b].ndf,
                    "best_step": learned.best_step[i],
                    "steps": len(learned.deviation[i]),
                }
                for i, b in enumerate(trained)
            ]
        if budgets:
            details.circuit_edges = spec.edge_names_of(circuits[-1].cpu())
        if evaluator.baseline.clean == evaluator.baseline.corrupted:
            details.notes.append(
                "The clean and corrupted prompts give the same metric, so there was nothing to learn: "
                "the circuits are the warm start's."
            )
        if int(config.check_paraphrases) > 0 and budgets:
            with ctx.timed("paraphrases_s"):
                found, prompts, notes = _paraphrase_check(ctx, config, circuits, budgets)
            details.paraphrase_ndf, details.paraphrases = found, prompts
            details.notes += notes
        return ctx.result(
            self.name,
            config,
            scores,
            curve,
            circuits={b: circuits[i] for i, b in enumerate(budgets)},
            details=details,
        )


def clean_deviation(deviation: float, evaluator: Evaluator) -> float:
    """The circuit's metric from its normalised deviation (L(C) - L(M)) / span."""
    span = evaluator.baseline.clean - evaluator.baseline.corrupted
    return evaluator.baseline.clean + deviation * (span if span != 0 else 1.0)
