"""The Best-of-N family's registered methods: single, average, bon, ibon and bon-csm.

Each is one variant's view of the same run (``circuitviz.query.pipeline.query_circuits``):
score the prompt and p paraphrases, each against its own corruption, with a base scorer reached
through the registry (EAP-IG by default), and keep the candidate circuit most faithful on the
prompt, or build iBoN/BoN-CSM circuits from the BoN circuits at anchor budgets. This module holds
what belongs to the registry: the family's settings (``QueryCircuitConfig``, whose fields
become the app's form and the command line's flags), the base scorer, the cost estimate and the
method classes. Score matrices and circuit evaluations are kept in the run's result store.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from ..graph import GraphSpec
from ..models.adapter import adapter_of
from ..query.details import QueryCircuitDetails
from ..query.pairs import read_pairs_text
from ..query.pipeline import query_circuits
from ..query.scoring import PairScorer, batched_ig_scores
from ..query.sources import SOURCES
from ..results import CircuitResult, load_circuit
from ..tasks import PreparedTask
from .base import Cost, Method, Progress, RunContext, ScoringMethod, available_methods, get_method, register
from .eap import EAPIG


def scorer_names() -> list[str]:
    """The registered methods that score edges (what ``base_method`` may name)."""
    return sorted(name for name, method in available_methods().items() if isinstance(method, ScoringMethod))


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


def base_scorer(config: QueryCircuitConfig) -> tuple[ScoringMethod, object]:
    """The registered method that scores every pair, with its settings (``ig_steps`` when it has them)."""
    method = get_method(config.base_method)
    if not isinstance(method, ScoringMethod):
        raise ValueError(
            f"base_method must be a method that scores edges (eap, eap-ig, ...), not {config.base_method!r}."
        )
    fields = {f.name for f in dataclasses.fields(method.Config)}
    settings = {"ig_steps": int(config.ig_steps)} if "ig_steps" in fields else {}
    return method, method.make_config(settings)


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

            scores = batched_ig_scores(
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


def pair_scorer(config: QueryCircuitConfig) -> PairScorer:
    """The base scorer as the pipeline takes it."""
    method, method_config = base_scorer(config)

    def score(model, spec, prepared, pairs, progress) -> list[torch.Tensor]:
        return pair_scores(model, spec, prepared, pairs, method, method_config, progress)

    return PairScorer(method, method_config, score)


# ----- the registered methods -----------------------------------------------------------------
class QueryCircuitMethod(Method):
    """One variant's view of the shared Best-of-N pipeline."""

    Config = QueryCircuitConfig
    Details = QueryCircuitDetails
    needs_corrupted = True

    def estimate(self, config, spec, n_tokens, n_budgets) -> Cost:
        """Each (paraphrase, corruption) pair is scored like one run of the base method, and its
        candidate circuits at every budget are evaluated on the prompt."""
        base, base_config = base_scorer(config)
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
            settings["paraphrases"] = read_pairs_text(settings["paraphrases"])
            settings.setdefault("paraphrase_source", "file")
        if settings.get("reference") and model is not None:
            spec = adapter_of(model).spec
            settings["reference"] = "\n".join(
                spec.edge_names_of(load_circuit(settings["reference"], spec).mask)
            )
        return settings

    def run(self, ctx: RunContext, config, budgets: Sequence[int]) -> CircuitResult:
        config = self.as_config(config)
        return query_circuits(ctx, config, budgets, pair_scorer(config), self.name).to_result(self.name)


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
