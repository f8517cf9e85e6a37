"""Paraphrase pruning: one small circuit learned on the prompt and some of its paraphrases, and
measured on others it never saw.

Edge Pruning fits a mask to one sentence, and its circuit carries over to the prompt's
paraphrases much worse than it explains the prompt (the yardstick's transfer). Query Circuits
finds that the circuits of a query's paraphrases recover the query better than its own. This
method learns ONE edge mask per budget whose faithfulness is measured on the prompt and on a
fit share of its valid paraphrases together, so the mask has to carry the mechanism, not the
sentence:

- paraphrases come from the sources Best-of-N uses, with the same settings
  (``paraphrase_pairs.ParaphraseSource``: the template families, an LLM, the user's list),
  each with its own corruption; a paraphrase is valid when its checks pass and its corruption
  clearly lowers the metric (``task_validity.gap_problem``);
- the valid ones are shuffled (``seed``) and split: a ``held_out`` share is never used to fit,
  to pick a step or to start the logits, and measures transfer; the rest fit. With fewer than
  two valid paraphrases none can be held out, and the result says so in one sentence;
- logits start from EAP-IG scores (``warm_start``: by default the mean of the fit set's
  normalised scores; or that mean with the prompt weighing as much as the paraphrases together;
  or their geometric mean; or the prompt's; or per budget the fit set's most faithful top-N among
  those of the prompt and each fit paraphrase, Best-of-N's pick), as Edge Pruning's do
  (``mask_learning.initial_logits``);
- the masks learn through the loop Edge Pruning runs on the prompt alone
  (``mask_learning.learn_masks``): each step runs every budget's hard top-N mask on every fit
  task (the evaluator's exact patching, tasks of one prompt length in one pass) and descends the
  mean squared normalised deviation, the prompt weighing as much as the fit paraphrases
  together; the circuit kept is the one of the step whose worse of (NDF on the prompt, mean NDF
  on the fit paraphrases) is highest. Opt-in, off by default: ``anchor`` pulls the logits back
  toward the warm start after every step, ``draw`` fits each step on a seeded share of the fit
  paraphrases, ``prompt_weight`` gives the prompt another share of the loss than half (all
  measured on the nine prompts in docs/faithfulness.md).

Every circuit is then measured by the shared evaluator: its curve on the prompt (NDF,
necessity) and its NDF on each held-out paraphrase (``details.held_out_ndf``).
"""

from __future__ import annotations

import dataclasses
import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from ..core.curves import ndf
from ..core.graph import GraphSpec
from ..core.results import CircuitResult
from ..core.tasks import PreparedTask, TaskError, prepare_task
from ..core.text import given
from ..details.paraphrase_pruning import ParaphrasePruningDetails
from ..engine.metric import compatible_groups
from ..engine.prefix import reusing_prefixes
from ..measure.evaluate import (
    Evaluator,
    circuits_at_budgets,
    curves_of_tasks,
    evaluators_of_tasks,
    keeping_runs,
    metrics_of_tasks,
)
from ..measure.task_validity import gap_problem
from ..query.pairs import ParaphraseError, left_out_note
from ..query.sources import gather_configured
from .base import Cost, Method, RunContext
from .bon import PARAPHRASE_CHECK_PASSES
from .mask_learning import (
    MASK_SCORE,
    LearnedMasks,
    Schedule,
    budget_circuits,
    initial_logits,
    learn_masks,
    learning_passes,
    mask_scores,
    selection_error,
)
from .mask_thresholds import CUTS, GIT_SHARES, git_cut
from .paraphrase_pairs import GENERATED, ParaphraseSource, paraphrases_from_cli
from .registry import get_method, register
from .scoring import pair_scores, tasks_scoring_cost
from .settings import ig_steps_setting, paraphrases_setting, setting

WARM_STARTS = ("eap-ig", "average", "balanced", "consensus", "bon")
OBJECTIVES = ("mean", "worst", "worst-weighted")


@dataclass(frozen=True)
class ParaphrasePruningConfig(ParaphraseSource):
    """Settings of paraphrase pruning (the paraphrase settings first, ``ParaphraseSource``)."""

    n_paraphrases: int = paraphrases_setting(
        6, "how many paraphrases to generate (template/openai; a file gives all it has).", applies=GENERATED
    )
    seed: int = setting(0, "seeds the paraphrases and the held-out split.")
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
        "average",
        "eap-ig: the prompt's EAP-IG scores; average: the mean of the fit set's normalised EAP-IG scores; balanced: the same with the prompt weighing as much as the fit paraphrases together (as in the learning); consensus: their geometric mean (an edge ranks high only when every fit task scores it); bon: per budget, the fit set's most faithful top-N among the prompt's and each fit paraphrase's.",
        choices=WARM_STARTS,
    )
    objective: str = setting(
        "mean",
        "mean: a step's circuit is kept by the worse of the prompt's NDF and the fit paraphrases' mean; worst: by the worse of the prompt's and the lowest fit paraphrase's; worst-weighted: the same, and the fit paraphrases' half of the loss goes to each by its error at the step before.",
        choices=OBJECTIVES,
    )
    ig_steps: int = ig_steps_setting(5, "IG steps of the warm start's EAP-IG.")
    steps: int = setting(8, "optimisation steps at most.", low=0, high=10000)
    learning_rate: float = setting(1.0, "how far the logit with the largest gradient moves per step.")
    temperature: float = setting(1.0, "width of the sigmoid around each budget's threshold.")
    sparsity: float = setting(0.01, "weight of the term that pulls every logit down.", low=0.0)
    anchor: float = setting(
        0.0,
        "after every step each logit moves this share of its distance from its warm-start value back (0: off), so the mask cannot wander far from the warm start to fit the fit share.",
        low=0.0,
        high=0.99,
    )
    draw: float = setting(
        0.0,
        "fit each step on the prompt and this share of the fit paraphrases, drawn anew with the seed (0: all of them every step); the step is still kept by all of them.",
        low=0.0,
        high=1.0,
    )
    prompt_weight: float = setting(
        0.5,
        "the prompt's share of the loss; the fit paraphrases share the rest (0.5: the prompt weighs as much as all of them together; lower: the fit paraphrases weigh more).",
        low=0.01,
        high=0.99,
    )
    reverse: bool = setting(
        False,
        "also fit each fit task in the other direction (its corrupted prompt the base, patched toward the clean one), so the circuit must carry the answer both ways.",
    )
    cut: str = setting(
        "count",
        "where each budget's mask is cut. count: each budget keeps its top-N edges, then those on no path are pruned; fill: each step keeps the largest top-N whose pruned circuit has at most the budget's edges; git: fill, then the kept step's mask is cut where the worse of its sufficiency and its necessity on the prompt and fit paraphrases is highest.",
        choices=CUTS,
    )

    def __post_init__(self):
        super().__post_init__()  # the paraphrase settings, and every bound the fields declare
        if self.warm_start not in WARM_STARTS:
            raise ValueError(
                f"warm_start must be one of {', '.join(WARM_STARTS)}, not {given(self.warm_start)}."
            )
        if self.cut not in CUTS:
            raise ValueError(f"cut must be one of {', '.join(CUTS)}, not {given(self.cut)}.")
        if self.objective not in OBJECTIVES:
            raise ValueError(
                f"objective must be one of {', '.join(OBJECTIVES)}, not {given(self.objective)}."
            )
        if not float(self.learning_rate) > 0 or not float(self.temperature) > 0:
            raise ValueError("learning_rate and temperature must be above 0.")
        if not 0 < float(self.prompt_weight) < 1:
            raise ValueError("prompt_weight must be between 0 and 1 (exclusive).")
        if float(self.draw) > 0 and self.objective == "worst-weighted":
            raise ValueError("draw and the worst-weighted objective each set the loss's weights: choose one.")


# ----- paraphrases: gather, check, split ---------------------------------------------------------
@dataclass
class Split:
    """The prompt's valid paraphrases, split: evaluators of the fit and held-out shares, and the
    sentences saying what was left out and why."""

    fit: list[Evaluator]
    held_out: list[Evaluator]
    notes: list[str]
    left_out: list[tuple[str, str]] = field(default_factory=list)  # (clean prompt, reason), every one


def split_paraphrases(ctx: RunContext, config: ParaphrasePruningConfig) -> Split:
    """Gather the paraphrases, keep the valid ones (checks passed, the corruption clearly lowers
    the metric), shuffle them with the seed and hold out a share."""
    notes: list[str] = []
    pairs = []
    # the checks' runs of the paraphrases are kept: their evaluators read them, not run them again
    with keeping_runs():
        try:
            pairs = gather_configured(ctx, config, ctx.progress)  # a report each batch checked
        except ParaphraseError as error:
            notes.append(str(error))
        left_out = [(pair.clean, pair.reason) for pair in pairs if not pair.usable()]
        prepared: list[PreparedTask] = []
        seen = {ctx.task.clean}
        for task in [pair.task() for pair in pairs if pair.usable()]:
            if task.clean in seen:
                repeat = "it is the prompt itself" if task.clean == ctx.task.clean else "a repeat"
                left_out.append((task.clean, repeat))
                continue
            seen.add(task.clean)
            try:
                prepared.append(prepare_task(ctx.model, task, ctx.max_tokens))
            except TaskError as error:
                left_out.append((task.clean, str(error)))
        evaluators = _evaluators(ctx, prepared)
    valid = []
    for evaluator in evaluators:
        baseline = evaluator.baseline
        weak = gap_problem(evaluator.prepared.task, baseline.clean, baseline.corrupted, advice=False)
        if weak is None:
            valid.append(evaluator)
        else:
            left_out.append((evaluator.prepared.task.clean, weak))
    if left_out:
        notes.append(left_out_note(left_out, len(pairs)))
    random.Random(int(config.seed)).shuffle(valid)
    n_valid = len(valid)
    if n_valid < 2:
        found = "no valid paraphrase" if n_valid == 0 else "only one valid paraphrase"
        notes.append(
            f"The {config.paraphrase_source} source gave {found} of this prompt (checks passed and a "
            "corruption that clearly lowers the metric), too few to hold any out, so the method itself "
            "measured no transfer to paraphrases it never saw."
        )
        return Split(valid, [], notes, left_out)
    n_held = (
        min(n_valid - 1, max(1, round(float(config.held_out) * n_valid))) if float(config.held_out) > 0 else 0
    )
    return Split(valid[n_held:], valid[:n_held], notes, left_out)


def _evaluators(ctx: RunContext, tasks: Sequence[PreparedTask]) -> list[Evaluator]:
    """An evaluator per task, the clean and corrupted runs of tasks of one length made together
    (each block of them reports, ``RunContext.preparing``: a Cancel is heard inside them)."""
    found: list[Evaluator | None] = [None] * len(tasks)
    for group in compatible_groups(tasks):
        made = evaluators_of_tasks(ctx.model, ctx.spec, [tasks[i] for i in group], check=ctx.preparing())
        for index, evaluator in zip(group, made):
            found[index] = evaluator
    return found


def _ndfs(evaluators: Sequence[Evaluator], circuits: torch.Tensor, progress=None) -> list[list[float]]:
    """NDF of every circuit [n_circuits, n_forward, n_backward] on every task, in shared patched
    passes (the shorter prompts padded at the end: one pass, not one per prompt length;
    ``progress``: the run's, told before each block of them). # [n_tasks][n_circuits]"""
    found: list[list[float]] = [[] for _ in evaluators]
    for group in compatible_groups([e.prepared for e in evaluators], same_length=False):
        chosen = [evaluators[i] for i in group]
        expanded = circuits[None].expand(len(group), -1, -1, -1)
        values = metrics_of_tasks(chosen, expanded, progress, padded=True)
        for index, evaluator, row in zip(group, chosen, values.tolist()):
            found[index] = [ndf(float(v), evaluator.baseline) for v in row]
    return found


# ----- the learning ------------------------------------------------------------------------------
def learn_shared_masks(
    ctx: RunContext,
    config: ParaphrasePruningConfig,
    evaluators: Sequence[Evaluator],
    start: torch.Tensor,
    counts: Sequence[int],
) -> LearnedMasks:
    """One mask per budget in ``counts``, fitted on every task of ``evaluators`` at once (the
    prompt first, weighing ``prompt_weight`` of the loss, by default as much as the others
    together): the loop Edge Pruning runs on the prompt alone (``mask_learning``). start:
    [n_budgets, n_edges] logits."""
    schedule = Schedule(
        int(config.steps),
        float(config.learning_rate),
        float(config.temperature),
        float(config.sparsity),
        worst=config.objective != "mean",
        reweight=config.objective == "worst-weighted",
        anchor=float(config.anchor),
        draw=float(config.draw),
        draw_seed=int(config.seed),
        prompt_weight=float(config.prompt_weight),
        fill=config.cut in ("fill", "git"),
    )
    return learn_masks(ctx, evaluators, start, counts, schedule)


def _git(ctx: RunContext, fitting: Sequence[Evaluator], learned: LearnedMasks, j: int, budget: int) -> dict:
    """Budget ``j``'s circuit cut by ``mask_thresholds.git_cut`` on the fit set (the prompt and
    the fit paraphrases; never the held-out share), in place; returns what the cut found."""
    circuit, record = git_cut(ctx.spec, fitting, learned.best_logits[j], learned.circuits[j], budget)
    learned.circuits[j] = circuit
    return record


def _record_uncut(cuts: list[dict], uncut: torch.Tensor, tasks: Sequence[Evaluator], n_fit: int) -> None:
    """Add to each budget's cut record the NDFs of the circuit before the cut (``fill``'s) on the
    prompt, the fit share and the held-out share (``tasks`` in that order), measured after the cut
    was chosen, so a reader sees what the cut changed."""
    values = _ndfs(tasks, uncut)  # [n_tasks][n_trained]
    for j, record in enumerate(cuts):
        fit, held = [row[j] for row in values[1 : 1 + n_fit]], [row[j] for row in values[1 + n_fit :]]
        record["uncut"] = {
            "edges": int(uncut[j].sum()),
            "ndf": values[0][j],
            "fit_ndf": statistics.fmean(fit) if fit else math.nan,
            "held_out_ndf": statistics.fmean(held) if held else math.nan,
        }


def _reversed(ctx: RunContext, evaluators: Sequence[Evaluator]) -> list[Evaluator]:
    """Each task the other way round: its corrupted prompt the base run, its clean one the
    patch (the metric's span then negative; the learning's deviations are normalised by it)."""
    tasks = [e.prepared.task for e in evaluators]
    turned = [dataclasses.replace(t, clean=t.corrupted, corrupted=t.clean) for t in tasks]
    return _evaluators(ctx, [prepare_task(ctx.model, t, ctx.max_tokens) for t in turned])


# ----- warm starts -------------------------------------------------------------------------------
def _fit_scores(ctx: RunContext, config, evaluators: Sequence[Evaluator]) -> list[torch.Tensor]:
    """EAP-IG score matrices of every fit task (the prompt first), sharing gradient passes and
    reading the evaluators' clean and corrupted runs (not running them again), with the run's
    progress (22 s of a busy CPU were silent before the learning's first report)."""
    method = get_method("eap-ig")
    method_config = method.make_config({"ig_steps": int(config.ig_steps)})
    prepared = [e.prepared for e in evaluators]
    return pair_scores(ctx.model, ctx.spec, prepared, method, method_config, ctx.progress, evaluators)


def _fit_score(ndfs: Sequence[float]) -> float:
    """The selection score of a circuit on the fit tasks: the worse of the prompt's NDF and the
    fit paraphrases' mean NDF (the prompt's alone without any), as the learning selects."""
    return 1 - min(1.0, selection_error([1 - v for v in ndfs]))


def _combined(normalised: Sequence[torch.Tensor], how: str) -> torch.Tensor:
    """One warm-start score per edge from the fit tasks' normalised scores (the prompt first), each
    [n_edges]: their mean (``average``), the prompt weighing as much as the paraphrases together
    (``balanced``, the learning's weights), or their geometric mean (``consensus``; an edge a
    task scores 0 counts there as the smallest score that task gives, over e^5)."""
    stacked = torch.stack(list(normalised))  # [n_tasks, n_edges]
    if how == "average" or len(normalised) == 1:
        return stacked.mean(0)
    if how == "balanced":
        return 0.5 * stacked[0] + 0.5 * stacked[1:].mean(0)
    floors = [
        float(row[row > 0].min()) * math.exp(-5.0) if bool((row > 0).any()) else 1e-30 for row in stacked
    ]
    floor = torch.tensor(floors, dtype=stacked.dtype, device=stacked.device)[:, None]
    return torch.exp(torch.log(torch.maximum(stacked, floor)).mean(0))


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
    if config.warm_start in ("average", "balanced", "consensus"):
        return initial_logits(_combined(normalised, config.warm_start), counts), [config.warm_start] * len(
            counts
        )
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
    # the same learning loop (methods/mask_learning.py): until this method has runs of its own, priced
    # from Edge Pruning's rather than every method's (Edge Pruning's first estimate was 2.3x its run)
    calibration_family = ("edge-pruning",)
    label = "Paraphrase pruning (one mask for the prompt and its paraphrases)"
    scores_are_exact = False
    summary = (
        "One small mask per budget learned on the prompt and a share of its paraphrases together, "
        "warm-started from their mean EAP-IG scores; its NDF on held-out paraphrases measures transfer."
    )
    score_meaning = MASK_SCORE
    Config = ParaphrasePruningConfig
    Details = ParaphrasePruningDetails
    fitted_to_prompt = "Paraphrase pruning learns its mask on this prompt and a share of its paraphrases"
    scores_estimate_metric = False  # how firmly the learned masks keep an edge (MASK_SCORE)

    def estimate(self, config, spec: GraphSpec, n_tokens: int, n_budgets: int) -> Cost:
        config = self.as_config(config)
        paraphrases = int(config.n_paraphrases)
        fit = round(paraphrases * (1 - float(config.held_out))) if config.fit_paraphrases else 0
        most = self._cost(config, spec, n_tokens, n_budgets, paraphrases, fit, int(config.steps))
        least = self._cost(config, spec, n_tokens, n_budgets, paraphrases, fit, 0)
        return dataclasses.replace(  # a mask stops learning at the tolerance (Edge Pruning's range)
            most,
            passes_range=(least.passes, most.passes),
            range_reason="Paraphrase pruning stops learning a budget's mask once its circuit is "
            "faithful enough, so a prompt its warm start already explains ends early",
        )

    def passes_done(self, result) -> float | None:
        """The passes of the run as it went: only the valid paraphrases are run, fitted and measured
        (a prompt whose template paraphrases mostly fail the checks learns on fewer tasks than the
        estimate assumed), and a learning that reached its tolerance stopped early. Priced on these,
        the next estimate's rate is the machine's, not the share of paraphrases that passed."""
        details = result.details
        if not isinstance(details, ParaphrasePruningDetails):
            return None
        config = self.as_config(result.config)
        valid = len(details.fit) + len(details.held_out)
        # a budget's "steps" counts the circuits it measured: the warm start's, then one a step
        steps = max((int(row["steps"]) - 1 for row in details.budgets), default=int(config.steps))
        n_tokens = len(result.tokens.get("clean", ())) or 16
        return self._cost(
            config, result.graph, n_tokens, len(result.curve), valid, len(details.fit), max(steps, 0)
        ).passes

    def _cost(self, config, spec, n_tokens: int, n_budgets: int, valid: int, fit: int, steps: int) -> Cost:
        """The run's passes with ``valid`` paraphrases run and measured (the requested count before
        the checks), ``fit`` of them fitted and ``steps`` learning steps."""
        paraphrases = int(config.n_paraphrases)
        tasks = 1 + (fit if config.fit_paraphrases else 0)
        warm = get_method("eap-ig").estimate(
            get_method("eap-ig").make_config({"ig_steps": int(config.ig_steps)}), spec, n_tokens, 0
        )
        scored = 1 if config.warm_start == "eap-ig" else tasks
        # the tasks' EAP-IG rows in one batched gradient pass (``pair_scores``), its chunks counted
        scoring, rows = tasks_scoring_cost(get_method("eap-ig"), warm, scored, float(scored))
        masks = max(int(n_budgets), 1)
        learned = tasks * (2 if config.reverse else 1)  # ``reverse``: each fitted task both ways
        return Cost(
            passes=scoring
            + PARAPHRASE_CHECK_PASSES * paraphrases
            + 2.0 * valid
            + learning_passes(steps, masks, learned)  # every mask on every fitted task
            + (valid + 2.0) * masks
            # ``git``: each candidate cut and its complement on every fitted task
            + (2.0 * (len(GIT_SHARES) + 1) * tasks * masks if config.cut == "git" else 0.0),
            gradient_batch=max(warm.gradient_batch, masks),
            ig_steps=int(config.ig_steps),
            n_paraphrases=paraphrases,
            prompt_passes=warm.prompt_passes,  # the prompt's evaluator's runs (the paraphrases' are made anew)
            gradient_rows=rows,
        )

    def settings_from_cli(self, settings: dict, model=None) -> dict:
        """``--paraphrases FILE`` gives the file's pairs (and the file source)."""
        return paraphrases_from_cli(settings)

    def run_task(self, ctx: RunContext, config, budgets: Sequence[int]) -> CircuitResult:
        config = self.as_config(config)
        spec, evaluator = ctx.spec, ctx.evaluator
        device = evaluator.device
        budgets = sorted({int(b) for b in budgets})
        with ctx.timed("paraphrases_s"):
            split = split_paraphrases(ctx, config)
        fitting = [evaluator, *(split.fit if config.fit_paraphrases else [])]
        trained = [b for b in budgets if 0 < b < spec.n_edges]
        details = ParaphrasePruningDetails(
            warm_start=config.warm_start,
            fit_paraphrases=bool(config.fit_paraphrases),
            fit=[e.prepared.task.clean for e in split.fit] if config.fit_paraphrases else [],
            held_out=[e.prepared.task.clean for e in split.held_out],
            notes=list(split.notes),
            left_out=[{"paraphrase": text, "reason": reason} for text, reason in split.left_out],
        )
        scores = torch.zeros(spec.n_forward, spec.n_backward, device=device)
        learned = None
        # the positions before each corruption run once for the warm start, the learning and the
        # measurement together (the same prompts pass many times)
        with reusing_prefixes():
            if trained:
                with ctx.timed("scoring_s"):
                    start, origin = warm_logits(ctx, config, fitting, trained)
                with ctx.timed("learning_s"):
                    learning = fitting + (_reversed(ctx, fitting) if config.reverse else [])
                    learned = learn_shared_masks(ctx, config, learning, start, trained)
                if config.cut == "git":  # cut where sufficiency and necessity both hold
                    uncut = learned.circuits.clone()  # fill's circuits, measured below for the record
                    with ctx.timed("cut_s"):
                        cuts = [_git(ctx, fitting, learned, j, b) for j, b in enumerate(trained)]
                scores = mask_scores(spec, learned, config.temperature, device)
                details.steps_run = learned.steps_run
            circuits = budget_circuits(spec, budgets, trained, learned, device)
            with ctx.timed("evaluation_s"):
                curve = curves_of_tasks([evaluator], circuits[None], budgets, ctx.progress)[0]
                # the fit and held-out shares in one call: paraphrases of one length share a pass
                every = _ndfs([*split.fit, *split.held_out], circuits, ctx.progress)
                measured = {"fit": every[: len(split.fit)], "held": every[len(split.fit) :]}
                if config.cut == "git":  # after the cut was chosen: a record, never a choice
                    _record_uncut(cuts, uncut, [evaluator, *split.fit, *split.held_out], len(split.fit))
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
                    "warm_ndf": learned.scores(j)[0] if learned.deviations[j] else math.nan,
                    "warm_from": origin[j],
                    "best_step": learned.best_step[j],
                    "steps": len(learned.deviations[j]),
                    **({"cut": cuts[j]} if config.cut == "git" else {}),
                }
            )
        if budgets:  # its own circuit is the learned mask, as Edge Pruning's: not its nonzero scores
            details.circuit_edges = spec.edge_names_of(circuits[-1].cpu())
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
