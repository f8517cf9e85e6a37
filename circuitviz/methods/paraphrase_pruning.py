"""Paraphrase pruning: one small circuit learned on the prompt and some of its paraphrases, and
measured on others it never saw.

Edge Pruning fits a mask to one sentence, and its circuit carries over to the prompt's
paraphrases much worse than it explains the prompt (the yardstick's transfer). Query Circuits
finds that the circuits of a query's paraphrases recover the query better than its own. This
method learns ONE edge mask per budget whose faithfulness is measured on the prompt and on a
fit share of its valid paraphrases together, so the mask has to carry the mechanism, not the
sentence:

- paraphrases come from Best-of-N's sources (the template families, an LLM, the user's list),
  each with its own corruption; a paraphrase is valid when its checks pass and its corruption
  clearly lowers the metric (``task_validity.gap_problem``);
- the valid ones are shuffled (``seed``) and split: a ``held_out`` share is never used to fit,
  to pick a step or to start the logits, and measures transfer; the rest fit. With fewer than
  two valid paraphrases none can be held out, and the result says so in one sentence;
- logits start from EAP-IG scores (``warm_start``: the prompt's, the mean of the fit set's
  normalised scores, or per budget the fit set's most faithful top-N among those of the prompt
  and each fit paraphrase, Best-of-N's pick), as Edge Pruning's do (``edge_pruning.initial_logits``);
- each step runs every budget's hard top-N mask on every fit task (the evaluator's exact
  patching, ``masked_residual``) and descends the mean squared normalised deviation, the prompt
  weighing as much as the fit paraphrases together, through Edge Pruning's straight-through
  relaxation; the circuit kept is the one of the step whose worse of (NDF on the prompt, mean NDF
  on the fit paraphrases) is highest.

Every circuit is then measured by the shared evaluator: its curve on the prompt (NDF,
necessity) and its NDF on each held-out paraphrase (``details.held_out_ndf``).
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..core.curves import ndf
from ..core.graph import GraphSpec, prune
from ..core.results import CircuitResult
from ..core.tasks import PromptTask, TaskError, prepare_task
from ..details.paraphrase_pruning import ParaphrasePruningDetails
from ..engine.memory import evaluation_bytes_per_position, gradient_bytes_per_position
from ..engine.metric import metric_from_residual
from ..engine.patching import masked_residual
from ..engine.scores import score_dtype
from ..measure.chunks import run_in_chunks
from ..measure.evaluate import Evaluator, circuits_at_budgets, curves_of_tasks
from ..measure.task_validity import gap_problem
from ..models.adapter import model_dtype
from ..query.pairs import ParaphraseError, ParaphraseRecord, paraphrase_records, read_pairs_text, records_text
from ..query.sources import SOURCES, gather_paraphrases
from .base import Cost, Method, RunContext
from .bon import PARAPHRASE_CHECK_PASSES
from .edge_pruning import MOMENTUM, TOLERANCE, initial_logits, top_counts
from .registry import get_method, register
from .scoring import pair_scores
from .settings import check_settings, ig_steps_setting, paraphrases_setting, setting

WARM_STARTS = ("eap-ig", "average", "bon")


@dataclass(frozen=True)
class ParaphrasePruningConfig:
    """Settings of paraphrase pruning."""

    paraphrase_source: str = setting(
        "template",
        "template (built-in families), openai (an LLM) or file (``paraphrases``).",
        choices=SOURCES,
    )
    paraphrases: tuple[ParaphraseRecord, ...] = setting(
        (),
        "the pairs as text (JSONL, a JSON list, CSV or 'paraphrase<TAB>corrupted' lines).",
        widget="lines",
        parse=paraphrase_records,
        show=records_text,
    )
    n_paraphrases: int = paraphrases_setting(
        8, "how many paraphrases to generate (template/openai; a file gives all it has)."
    )
    held_out: float = setting(
        0.5,
        "the share of the valid paraphrases held out to measure transfer (never fitted to; at least one when there are two or more).",
        low=0.0,
        high=0.9,
    )
    fit_paraphrases: bool = setting(
        True, "fit the mask on the prompt and the other paraphrases together (off: on the prompt alone)."
    )
    warm_start: str = setting(
        "eap-ig",
        "eap-ig: the prompt's EAP-IG scores; average: the mean of the fit set's normalised EAP-IG scores; bon: per budget, the fit set's most faithful top-N among the prompt's and each fit paraphrase's.",
        choices=WARM_STARTS,
    )
    ig_steps: int = ig_steps_setting(5, "IG steps of the warm start's EAP-IG.")
    steps: int = setting(20, "optimisation steps at most.", low=0, high=10000)
    learning_rate: float = setting(0.5, "how far the logit with the largest gradient moves per step.")
    temperature: float = setting(1.0, "width of the sigmoid around each budget's threshold.")
    sparsity: float = setting(0.01, "weight of the term that pulls every logit down.", low=0.0)
    seed: int = setting(0, "seeds the paraphrases and the held-out split.")
    llm_model: str = setting("", "the LLM's name ('' = $CIRCUITVIZ_LLM_MODEL or gpt-4o-mini).")

    def __post_init__(self):
        check_settings(self)  # every bound its fields declare
        if self.paraphrase_source not in SOURCES:
            raise ValueError(
                f"paraphrase_source must be one of {', '.join(SOURCES)}, not {self.paraphrase_source!r}."
            )
        if self.warm_start not in WARM_STARTS:
            raise ValueError(f"warm_start must be one of {', '.join(WARM_STARTS)}, not {self.warm_start!r}.")
        if not float(self.learning_rate) > 0 or not float(self.temperature) > 0:
            raise ValueError("learning_rate and temperature must be above 0.")


# ----- paraphrases: gather, check, split ---------------------------------------------------------
@dataclass
class Split:
    """The prompt's valid paraphrases, split: evaluators of the fit and held-out shares, and the
    sentences saying what was left out and why."""

    fit: list[Evaluator]
    held_out: list[Evaluator]
    notes: list[str]


def split_paraphrases(ctx: RunContext, config: ParaphrasePruningConfig) -> Split:
    """Gather the paraphrases, keep the valid ones (checks passed, the corruption clearly lowers
    the metric), shuffle them with the seed and hold out a share."""
    notes: list[str] = []
    tasks: list[PromptTask] = []
    if int(config.n_paraphrases) > 0 or config.paraphrase_source == "file":
        try:
            pairs = gather_paraphrases(
                ctx.model,
                ctx.task,
                config.paraphrase_source,
                int(config.n_paraphrases),
                int(config.seed),
                text=config.paraphrases,
                llm_model=config.llm_model or None,
                max_tokens=ctx.max_tokens,
            )
            tasks = [pair.task() for pair in pairs if pair.usable()]
        except ParaphraseError as error:
            notes.append(str(error))
    valid: list[Evaluator] = []
    seen = {ctx.task.clean}
    for task in tasks:
        if task.clean in seen:
            continue
        seen.add(task.clean)
        try:
            evaluator = Evaluator(ctx.model, ctx.spec, prepare_task(ctx.model, task, ctx.max_tokens))
        except TaskError:
            continue
        if gap_problem(task, evaluator.baseline.clean, evaluator.baseline.corrupted) is None:
            valid.append(evaluator)
    random.Random(int(config.seed)).shuffle(valid)
    n_valid = len(valid)
    if n_valid < 2:
        found = "no valid paraphrase" if n_valid == 0 else "only one valid paraphrase"
        notes.append(
            f"The {config.paraphrase_source} source gave {found} of this prompt (checks passed and a "
            "corruption that clearly lowers the metric), too few to hold any out: this circuit's "
            "transfer to paraphrases it never saw is not measured."
        )
        return Split(valid, [], notes)
    n_held = (
        min(n_valid - 1, max(1, round(float(config.held_out) * n_valid))) if float(config.held_out) > 0 else 0
    )
    return Split(valid[n_held:], valid[:n_held], notes)


# ----- the learning ------------------------------------------------------------------------------
@dataclass
class Learned:
    circuits: torch.Tensor  # [n_budgets, n_forward, n_backward] bool, pruned
    logits: torch.Tensor  # [n_budgets, n_edges], centred on each threshold
    best_step: list[int]
    steps_run: int
    history: list[list[float]]  # per budget, the selection score of each step


def _keep_masks(spec: GraphSpec, theta: torch.Tensor, counts: torch.Tensor, temperature: float, dtype):
    """The straight-through masks of logits theta [b, n_edges]: hard top-N forward, the soft
    sigmoid's gradient backward. Returns (keep [b, n_forward, n_backward], soft [b, n_edges])."""
    graph = spec.tensors(theta.device)
    hard, threshold = top_counts(theta.detach(), counts)
    soft = torch.sigmoid((theta - threshold) / temperature)
    kept = hard + soft - soft.detach()
    keep = torch.zeros(theta.shape[0], spec.n_forward * spec.n_backward, dtype=dtype, device=theta.device)
    keep = keep.scatter(1, graph.flat_edge_index.expand(theta.shape[0], -1), kept)
    return keep.view(-1, spec.n_forward, spec.n_backward), soft


def learn_shared_masks(
    ctx: RunContext,
    config: ParaphrasePruningConfig,
    evaluators: Sequence[Evaluator],
    start: torch.Tensor,
    counts: Sequence[int],
) -> Learned:
    """One mask per budget in ``counts``, fitted on every task of ``evaluators`` at once (the
    prompt first, weighing as much as the others together). start: [n_budgets, n_edges] logits."""
    model, spec = ctx.model, ctx.spec
    device = evaluators[0].device
    dtype = score_dtype(model_dtype(model))
    logits = start.to(device=device, dtype=dtype).clone()
    n_budgets = len(counts)
    budget_counts = torch.tensor([int(n) for n in counts], device=device)
    weights = [0.5, *[0.5 / (len(evaluators) - 1)] * (len(evaluators) - 1)] if len(evaluators) > 1 else [1.0]
    velocity = torch.zeros_like(logits)
    best_circuits = torch.zeros(n_budgets, spec.n_forward, spec.n_backward, dtype=torch.bool, device=device)
    best_score, best_step = [-math.inf] * n_budgets, [0] * n_budgets
    history: list[list[float]] = [[] for _ in range(n_budgets)]
    temperature, sparsity = float(config.temperature), float(config.sparsity)
    training, step = list(range(n_budgets)), 0
    per_item = sum(
        gradient_bytes_per_position(model, e.prepared.n_positions) + evaluation_bytes_per_position(spec, 4)
        for e in evaluators
    )
    positions = max(e.prepared.n_positions for e in evaluators)

    def pass_rows(rows: slice, active: list[int]):
        chosen = torch.tensor(active[rows], device=device)
        theta = logits[chosen].detach().requires_grad_(True)  # [b, n_edges]
        gradient = torch.zeros_like(theta)
        ndfs = []
        for weight, evaluator in zip(weights, evaluators):
            keep, _ = _keep_masks(spec, theta, budget_counts[chosen], temperature, dtype)
            base = evaluator.baseline
            span = base.clean - base.corrupted
            with torch.enable_grad():
                residual = masked_residual(
                    model,
                    spec,
                    evaluator.prepared,
                    evaluator.corrupted_writers,
                    keep,
                    evaluator.corrupted_raw,
                )
                metric = metric_from_residual(model, evaluator.prepared, residual).to(dtype)  # [b]
                deviation = (metric - base.clean) / (span if span != 0 else 1.0)
                loss = weight * (deviation**2).sum()
                (part,) = torch.autograd.grad(loss, theta)
            gradient += part
            ndfs.append((1 - deviation.detach().abs().clamp(max=1)).tolist())
        with torch.enable_grad():
            _, soft = _keep_masks(spec, theta, budget_counts[chosen], temperature, dtype)
            size = soft.sum(1) / budget_counts[chosen].to(dtype)
            (part,) = torch.autograd.grad(sparsity * size.sum(), theta)
        gradient += part
        circuits = prune(spec, keep.detach() > 0.5)
        return ndfs, circuits, gradient

    while training:
        active = list(training)
        results: dict[int, tuple] = {}

        def compute(rows: slice, active=active):
            return pass_rows(rows, active)

        def commit(rows: slice, result, active=active, results=results):
            ndfs, circuits, gradient = result
            for offset, index in enumerate(active[rows]):
                per_task = [values[offset] for values in ndfs]
                results[index] = (per_task, circuits[offset], gradient[offset])

        run_in_chunks(model, "gradient", len(active), positions, per_item, compute, commit)
        for index in active:
            per_task, circuit, gradient = results[index]
            score = per_task[0] if len(per_task) == 1 else min(per_task[0], statistics.fmean(per_task[1:]))
            history[index].append(score)
            if score > best_score[index]:
                best_score[index], best_step[index] = score, step
                best_circuits[index] = circuit
            if best_score[index] >= 1 - TOLERANCE or step >= int(config.steps):
                training.remove(index)
                continue
            largest = gradient.abs().max()
            direction = gradient / largest if largest > 0 else gradient
            velocity[index] = MOMENTUM * velocity[index] + direction
            logits[index] -= float(config.learning_rate) * velocity[index]
        ctx.report("learning masks", min(1.0, (step + 1) / max(int(config.steps), 1)))
        step += 1
    _, thresholds = top_counts(logits, budget_counts)
    return Learned(best_circuits, logits - thresholds, best_step, step, history)


# ----- warm starts -------------------------------------------------------------------------------
def _fit_scores(ctx: RunContext, config, evaluators: Sequence[Evaluator]) -> list[torch.Tensor]:
    """EAP-IG score matrices of every fit task (the prompt first), sharing gradient passes."""
    method = get_method("eap-ig")
    method_config = method.make_config({"ig_steps": int(config.ig_steps)})
    return pair_scores(ctx.model, ctx.spec, [e.prepared for e in evaluators], method, method_config)


def _fit_score(ndfs: Sequence[float]) -> float:
    """The selection score of a circuit on the fit tasks: the worse of the prompt's NDF and the
    fit paraphrases' mean NDF (the prompt's alone without any)."""
    return ndfs[0] if len(ndfs) == 1 else min(ndfs[0], statistics.fmean(ndfs[1:]))


def warm_logits(
    ctx: RunContext, config, evaluators: Sequence[Evaluator], counts: Sequence[int]
) -> tuple[torch.Tensor, list[str]]:
    """Starting logits [n_budgets, n_edges] and, per budget, where they came from."""
    spec = ctx.spec
    device = evaluators[0].device
    forward, backward = spec.tensors(device).edge_index
    scores = _fit_scores(ctx, config, evaluators if config.warm_start != "eap-ig" else evaluators[:1])
    values = [s.to(device)[forward, backward].float() for s in scores]  # each [n_edges]
    if config.warm_start == "eap-ig":
        return initial_logits(values[0], counts), ["prompt"] * len(counts)
    normalised = [v.abs() / v.abs().sum().clamp(min=1e-12) for v in values]
    if config.warm_start == "average":
        return initial_logits(torch.stack(normalised).mean(0), counts), ["average"] * len(counts)
    # bon: each candidate's top-N, measured on every fit task; the best per budget starts it
    matrices = torch.stack([s.to(device) for s in scores])  # [n_candidates, fwd, bwd]
    candidates = circuits_at_budgets(spec, matrices, counts)  # [n_candidates, n_budgets, fwd, bwd]
    flat = candidates.flatten(0, 1)
    per_task = torch.stack([e.metrics(flat) for e in evaluators])  # [n_tasks, n_cand * n_budgets]
    ndfs = [[ndf(float(v), e.baseline) for v in row] for e, row in zip(evaluators, per_task.tolist())]
    logits, origin = [], []
    for b, count in enumerate(counts):
        best = max(range(len(scores)), key=lambda c: _fit_score([row[c * len(counts) + b] for row in ndfs]))
        logits.append(initial_logits(values[best], [count])[0])
        origin.append("prompt" if best == 0 else f"fit paraphrase {best}")
    return torch.stack(logits), origin


@register
class ParaphrasePruning(Method):
    name = "paraphrase-pruning"
    label = "Paraphrase pruning (one mask for the prompt and its paraphrases)"
    scores_are_exact = False
    summary = (
        "One small mask per budget learned on the prompt and a share of its paraphrases together, "
        "warm-started from EAP-IG; its NDF on held-out paraphrases measures transfer."
    )
    Config = ParaphrasePruningConfig
    Details = ParaphrasePruningDetails
    fitted_to_prompt = "Paraphrase pruning learns its mask on this prompt and a share of its paraphrases"
    scores_estimate_metric = False  # the learned masks' logits

    def estimate(self, config, spec: GraphSpec, n_tokens: int, n_budgets: int) -> Cost:
        config = self.as_config(config)
        paraphrases = int(config.n_paraphrases)
        fit = 1 + (round(paraphrases * (1 - float(config.held_out))) if config.fit_paraphrases else 0)
        warm = get_method("eap-ig").estimate(
            get_method("eap-ig").make_config({"ig_steps": int(config.ig_steps)}), spec, n_tokens, 0
        )
        scored = 1 if config.warm_start == "eap-ig" else fit
        masks = max(int(n_budgets), 1)
        return Cost(
            passes=warm.passes * scored
            + PARAPHRASE_CHECK_PASSES * paraphrases
            + 2.0 * paraphrases
            + 3.0 * int(config.steps) * masks * fit
            + (paraphrases + 2.0) * masks,
            gradient_batch=max(warm.gradient_batch, masks),
            ig_steps=int(config.ig_steps),
            n_paraphrases=paraphrases,
        )

    def settings_from_cli(self, settings: dict, model=None) -> dict:
        """``--paraphrases FILE`` gives the file's pairs (and the file source)."""
        settings = dict(settings)
        if settings.get("paraphrases"):
            settings["paraphrases"] = read_pairs_text(settings["paraphrases"])
            settings.setdefault("paraphrase_source", "file")
        return settings

    def run_task(self, ctx: RunContext, config, budgets: Sequence[int]) -> CircuitResult:
        config = self.as_config(config)
        spec, evaluator = ctx.spec, ctx.evaluator
        device = evaluator.device
        budgets = sorted({int(b) for b in budgets})
        with ctx.timed("paraphrases_s"):
            split = split_paraphrases(ctx, config)
        fitting = [evaluator, *(split.fit if config.fit_paraphrases else [])]
        n_edges = spec.n_edges
        trained = [b for b in budgets if 0 < b < n_edges]
        circuits = torch.zeros(len(budgets), spec.n_forward, spec.n_backward, dtype=torch.bool, device=device)
        for index, budget in enumerate(budgets):
            if budget >= n_edges:
                circuits[index] = prune(spec, spec.tensors(device).edge_mask)
        details = ParaphrasePruningDetails(
            warm_start=config.warm_start,
            fit_paraphrases=bool(config.fit_paraphrases),
            fit=[e.prepared.task.clean for e in split.fit] if config.fit_paraphrases else [],
            held_out=[e.prepared.task.clean for e in split.held_out],
            notes=list(split.notes),
        )
        scores = torch.zeros(spec.n_forward, spec.n_backward, device=device)
        learned = None
        if trained:
            with ctx.timed("scoring_s"):
                start, origin = warm_logits(ctx, config, fitting, trained)
            with ctx.timed("learning_s"):
                learned = learn_shared_masks(ctx, config, fitting, start, trained)
            for index, budget in enumerate(trained):
                circuits[budgets.index(budget)] = learned.circuits[index]
            kept = torch.sigmoid(learned.logits / float(config.temperature)).mean(0)  # [n_edges]
            scores[spec.tensors(device).edge_index] = kept.float()
            details.steps_run = learned.steps_run
        with ctx.timed("evaluation_s"):
            curve = curves_of_tasks([evaluator], circuits[None], budgets, ctx.progress)[0]
            measured = {
                "fit": [[ndf(v, e.baseline) for v in e.metrics(circuits).tolist()] for e in split.fit],
                "held": [[ndf(v, e.baseline) for v in e.metrics(circuits).tolist()] for e in split.held_out],
            }
        details.held_out_ndf = {
            str(b): [row[i] for row in measured["held"]] for i, b in enumerate(budgets) if measured["held"]
        }
        points = {p.budget: p for p in curve}
        for i, b in enumerate(budgets):
            if b not in trained:
                continue
            j = trained.index(b)
            fit_values = [row[i] for row in measured["fit"]] if config.fit_paraphrases else []
            held_values = [row[i] for row in measured["held"]]
            details.budgets.append(
                {
                    "budget": b,
                    "edges": points[b].n_edges,
                    "nodes": len(spec.node_names_of(circuits[i])),
                    "ndf": points[b].ndf,
                    "fit_ndf": statistics.fmean(fit_values) if fit_values else math.nan,
                    "held_out_ndf": statistics.fmean(held_values) if held_values else math.nan,
                    "warm_ndf": learned.history[j][0] if learned.history[j] else math.nan,
                    "warm_from": origin[j],
                    "best_step": learned.best_step[j],
                    "steps": len(learned.history[j]),
                }
            )
        if evaluator.baseline.clean == evaluator.baseline.corrupted:
            details.notes.append(
                "The clean and corrupted prompts give the same metric, so there was nothing to learn."
            )
        return ctx.result(
            self.name,
            config,
            scores,
            curve,
            circuits={b: circuits[i] for i, b in enumerate(budgets)},
            details=details,
        )
