"""Score ensembles: several scoring methods' edge scores combined, optionally resampled over
paraphrases of the prompt for edge stability.

Each member (any registered scoring method) scores the prompt; its scores are normalised so that
methods of different scales can be averaged:

- ``rank``: an edge's place among the member's |scores|, as a fraction (1 the largest, ties
  share their mean place, a score of 0 stays 0), so only each member's order counts;
- ``scale``: |score| over the member's largest |score|, so a member's confident edges weigh more.

The ensemble's score is the mean over members (a magnitude: circuits keep the edges of largest
score, as for every method). With ``n_paraphrases`` > 0 the prompt and its template paraphrases
(each with its own corruption) are all scored, and the circuit at budget N is chosen by
**bootstrap stability**: ``resamples`` times, draw as many prompts as there are, with
replacement, average their ensemble scores and take the top N; an edge's stability at N is the
share of resamples whose top N holds it. The circuit is the N most stable edges (ties by mean
score), pruned, and is measured on the prompt like every circuit.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..core.graph import GraphSpec, top_n_at_budgets
from ..core.results import CircuitResult
from ..core.tasks import prepare_task
from ..core.text import given
from ..details.ensemble import EnsembleDetails
from ..engine.score_checks import require_finite_scores
from ..measure.evaluate import circuits_at_budgets, curves_of_tasks
from .base import Cost, Method, RunContext, ScoringMethod, curve_passes
from .paraphrase_pairs import template_tasks
from .registry import get_method, register
from .scoring import pair_scores, scorer_names
from .settings import check_settings, ig_steps_setting, paraphrases_setting, setting

NORMALISATIONS = ("rank", "scale")


def member_names(members) -> list[str]:
    """The members named (a tuple of names, or one comma-separated string), in order, each once."""
    parts = str(members).split(",") if isinstance(members, str) else members
    return list(dict.fromkeys(str(part).strip().lower() for part in parts if str(part).strip()))


@dataclass(frozen=True)
class EnsembleConfig:
    """Settings of the score ensemble."""

    members: tuple[str, ...] = setting(
        ("eap-ig", "eap"), "the scoring methods combined, comma separated, such as eap-ig,eap-ig-activations."
    )
    normalise: str = setting(
        "rank",
        "rank (an edge's place among a member's scores) or scale (its score over the member's largest).",
        choices=NORMALISATIONS,
    )
    ig_steps: int = ig_steps_setting(20, "IG steps of the members that take them.")
    n_paraphrases: int = paraphrases_setting(
        0, "template paraphrases of the prompt also scored, for bootstrap stability (0: the prompt alone)."
    )
    resamples: int = setting(50, "bootstrap resamples of the prompt and its paraphrases.", low=1, high=10000)
    seed: int = setting(0, "seeds the paraphrase templates and the resamples.")

    def __post_init__(self):
        check_settings(self)  # typed tuples, and every bound its fields declare
        names = member_names(self.members)
        object.__setattr__(self, "members", tuple(names))  # each once, as the registry names them
        if not names:
            raise ValueError("members is empty; name one or more scoring methods, e.g. eap-ig,eap.")
        allowed = [name for name in scorer_names() if name != "ensemble"]
        unknown = [name for name in names if name not in allowed]
        if unknown:
            raise ValueError(
                f"{', '.join(given(name) for name in unknown[:8])}{' and more' if len(unknown) > 8 else ''} "
                "cannot be a member of the ensemble; members are scoring methods: "
                f"{', '.join(allowed)}."
            )
        if self.normalise not in NORMALISATIONS:
            raise ValueError(f"normalise must be rank or scale, not {given(self.normalise)}.")


# ----- normalisation and stability ---------------------------------------------------------------
def normalised(spec: GraphSpec, scores: torch.Tensor, how: str) -> torch.Tensor:
    """One member's |scores| made comparable across members.  # [..., n_forward, n_backward]

    rank: (edges of smaller |score| + half the other edges of equal |score|) / (n_edges - 1), in
    [0, 1], except that a score of 0 stays 0 (a member that finds no effect adds none);
    scale: |score| / the largest |score| (all zero stays zero). Zero off the edge mask.
    """
    graph = spec.tensors(scores.device)
    forward, backward = graph.edge_index
    values = scores[..., forward, backward].abs().float()  # [..., n_edges]
    if how == "rank":
        ordered = torch.sort(values, dim=-1).values.contiguous()
        below = torch.searchsorted(ordered, values.contiguous(), right=False)
        through = torch.searchsorted(ordered, values.contiguous(), right=True)
        places = (below + through - 1).float() / (2 * max(values.shape[-1] - 1, 1))
        values = torch.where(values > 0, places, torch.zeros_like(places))  # no effect stays 0
    else:
        largest = values.amax(dim=-1, keepdim=True)
        values = torch.where(largest > 0, values / largest.clamp_min(torch.finfo(values.dtype).tiny), values)
    out = torch.zeros((*scores.shape[:-2], spec.n_forward * spec.n_backward), device=scores.device)
    out[..., graph.flat_edge_index] = values
    return out.view(*scores.shape[:-2], spec.n_forward, spec.n_backward)


def bootstrap_stability(
    spec: GraphSpec, per_prompt: torch.Tensor, budgets: Sequence[int], resamples: int, seed: int
) -> torch.Tensor:
    """Each edge's share of resamples whose mean score puts it in the top N, for every budget N.

    per_prompt: [n_prompts, n_forward, n_backward] ensemble scores of each prompt. A resample
    draws n_prompts of them with replacement (seeded, on the CPU) and averages them. Returns
    [n_budgets, n_forward, n_backward] in [0, 1] on the scores' device.
    """
    count = per_prompt.shape[0]
    generator = torch.Generator(device="cpu").manual_seed(int(seed))
    draws = torch.randint(count, (int(resamples), count), generator=generator, device="cpu")
    # a resample's mean is a weighted mean of the prompts: weights [resamples, n_prompts]
    weights = torch.zeros(int(resamples), count, device="cpu")
    weights.scatter_add_(1, draws, torch.ones(draws.shape, device="cpu"))
    weights = (weights / count).to(per_prompt.device)
    stability = torch.zeros(len(budgets), spec.n_forward, spec.n_backward, device=per_prompt.device)
    for start in range(0, int(resamples), 16):  # 16 resamples' masks at a time bound the memory
        means = torch.einsum("rp,pfb->rfb", weights[start : start + 16], per_prompt.float())
        masks = top_n_at_budgets(spec, means, budgets)  # [r, n_budgets, n_forward, n_backward]
        stability += masks.float().sum(0)
    return stability / int(resamples)


def member_agreement(
    spec: GraphSpec, members: list[torch.Tensor], budgets: Sequence[int]
) -> dict[str, float]:
    """{budget: mean Jaccard overlap of every two members' top-N edge sets} (1.0 for one member)."""
    if len(members) < 2:
        return {str(int(b)): 1.0 for b in budgets}
    tops = [top_n_at_budgets(spec, scores, budgets) for scores in members]  # each [n_budgets, F, B]
    overlaps: dict[str, list[float]] = {str(int(b)): [] for b in budgets}
    for i in range(len(tops)):
        for j in range(i + 1, len(tops)):
            both = (tops[i] & tops[j]).flatten(1).sum(1).tolist()
            either = (tops[i] | tops[j]).flatten(1).sum(1).tolist()
            for budget, inter, union in zip(budgets, both, either):
                overlaps[str(int(budget))].append(inter / union if union else 1.0)
    return {budget: statistics.fmean(values) for budget, values in overlaps.items()}


# ----- the method ----------------------------------------------------------------------------------
def _members(config: EnsembleConfig) -> list[tuple[ScoringMethod, object]]:
    chosen = []
    for name in member_names(config.members):
        method = get_method(name)
        fields = set(method.Config.__dataclass_fields__)
        settings = {"ig_steps": int(config.ig_steps)} if "ig_steps" in fields else {}
        chosen.append((method, method.make_config(settings)))
    return chosen


@register
class Ensemble(ScoringMethod):
    name = "ensemble"
    label = "Score ensemble"
    summary = (
        "Several scoring methods' normalised scores averaged; with paraphrases, each edge's bootstrap "
        "stability in the top N picks the circuit."
    )
    score_meaning = (
        "the mean of the members' |scores| made comparable (each ranked in [0, 1] or scaled by its "
        "largest), over the prompt and its paraphrases when it has them; with paraphrases the "
        "circuit takes the edges most often in the top N of resampled prompts first"
    )
    Config = EnsembleConfig
    Details = EnsembleDetails
    scores_estimate_metric = False  # normalised scores averaged, or bootstrap stabilities

    def estimate(self, config, spec: GraphSpec, n_tokens: int, n_budgets: int) -> Cost:
        prompts = 1 + int(config.n_paraphrases)
        costs = [
            method.estimate(member_config, spec, n_tokens, 0) for method, member_config in _members(config)
        ]
        return Cost(
            passes=2.0
            + prompts * sum(cost.passes for cost in costs)
            + curve_passes(n_budgets, spec)
            + 2.0 * int(config.n_paraphrases),
            gradient_batch=max(cost.gradient_batch for cost in costs),
            ig_steps=max(cost.ig_steps for cost in costs),
            n_paraphrases=int(config.n_paraphrases),
            # every member scores the prompt on the run's one evaluator, whose runs each member's
            # count holds: all of them are left out when this process kept the runs. Each member's
            # gradient pass on the prompt is chunked apart (the paraphrases' are batched pairs).
            prompt_passes=sum(cost.prompt_passes for cost in costs),
            gradient_rows=tuple(cost.gradient_rows for cost in costs if cost.gradient_rows),
        )

    def member_scores(self, ctx: RunContext, config: EnsembleConfig) -> list[torch.Tensor]:
        """Each member's scores on the prompt.  # each [n_forward, n_backward]"""
        spec = ctx.spec
        scores = []
        members = _members(config)
        for index, (method, member_config) in enumerate(members):
            ((matrix, _),) = method.score_batch([ctx], member_config, ctx.progress)  # a batch of one
            require_finite_scores(matrix, spec, method.name, ctx.model)
            scores.append((matrix.float() * spec.tensors(matrix.device).edge_mask).nan_to_num(0.0))
            ctx.report("ensemble members", (index + 1) / len(members))
        return scores

    def score(self, ctx: RunContext, config) -> torch.Tensor:
        config = self.as_config(config)
        members = self.member_scores(ctx, config)
        return torch.stack([normalised(ctx.spec, s, config.normalise) for s in members]).mean(0)

    def run_task(self, ctx: RunContext, config, budgets: Sequence[int]) -> CircuitResult:
        config = self.as_config(config)
        spec, evaluator = ctx.spec, ctx.evaluator
        budgets = sorted({int(b) for b in budgets})
        details = EnsembleDetails(members=member_names(config.members), normalise=config.normalise)
        with ctx.timed("scoring_s"):
            members = self.member_scores(ctx, config)
            per_member = torch.stack([normalised(spec, s, config.normalise) for s in members])
            scores = per_member.mean(0)  # [n_forward, n_backward]
            details.agreement = member_agreement(spec, members, budgets)
        circuits = None
        if int(config.n_paraphrases) > 0:
            with ctx.timed("paraphrases_s"):
                tasks, note = template_tasks(
                    ctx.model, ctx.task, int(config.n_paraphrases), int(config.seed), ctx.max_tokens
                )
            details.notes += [note] if note else []
            if tasks:
                with ctx.timed("scoring_s"):
                    per_prompt = torch.cat([scores[None], self._paraphrase_scores(ctx, config, tasks)])
                    scores = per_prompt.mean(0)
                with ctx.timed("selection_s"):
                    stability = bootstrap_stability(spec, per_prompt, budgets, config.resamples, config.seed)
                    # the most stable edges first, the mean score breaking ties (it is below 1)
                    order = stability + scores[None] / (2 * scores.max().clamp_min(1e-30))
                    circuits = (
                        torch.stack(
                            [circuits_at_budgets(spec, order[i], [b])[0] for i, b in enumerate(budgets)]
                        )
                        if budgets
                        else None
                    )
                    details.prompts = [ctx.task.clean, *(task.clean for task in tasks)]
                    details.resamples = int(config.resamples)
                    details.stability = {
                        str(b): {
                            "chosen_mean": float(stability[i][circuits[i]].mean())
                            if circuits[i].any()
                            else 0.0,
                            "stable": int((stability[i] >= 0.9).sum()),
                        }
                        for i, b in enumerate(budgets)
                    }
        with ctx.timed("evaluation_s"):
            if circuits is None:
                circuits = circuits_at_budgets(spec, scores, budgets)
            curve = curves_of_tasks([evaluator], circuits[None], budgets, ctx.progress)[0]
        kept = {b: circuits[i] for i, b in enumerate(budgets)}
        return ctx.result(self.name, config, scores, curve, circuits=kept, details=details)

    def run_batch(self, contexts, config, budgets, progress=None) -> list[CircuitResult]:
        """Task by task through ``run_task``: the ensemble's paraphrase selection is not
        score-then-top-N, so the shared passes of scoring methods would skip what it adds."""
        return Method.run_batch(self, contexts, config, budgets, progress)

    def _paraphrase_scores(self, ctx: RunContext, config: EnsembleConfig, tasks) -> torch.Tensor:
        """The ensemble's scores on each paraphrase pair.  # [n_tasks, n_forward, n_backward]"""
        spec = ctx.spec
        prepared = [prepare_task(ctx.model, task, ctx.max_tokens) for task in tasks]
        per_member = []
        for method, member_config in _members(config):
            matrices = pair_scores(ctx.model, spec, prepared, method, member_config, ctx.progress)
            per_member.append(torch.stack([normalised(spec, m, config.normalise) for m in matrices]))
        return torch.stack(per_member).mean(0)
