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
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..core.graph import GraphSpec
from ..core.results import CircuitResult, load_circuit
from ..core.tasks import PromptTask
from ..core.text import given
from ..details.query import QueryCircuitDetails
from ..models.adapter import adapter_of, model_device
from ..query.checks import validate_pairs
from ..query.pairs import ParaphraseError
from ..query.pipeline import query_circuits
from ..query.pool import metrics_key
from ..query.scoring import PairScorer, left_out_before, score_key, stored_source_pairs
from ..query.templates import unchecked_template_pairs
from .base import EDGE_CHANGE, Cost, Method, RunContext, ScoringMethod, StoredWork
from .paraphrase_pairs import ParaphraseSource, paraphrases_from_cli
from .registry import get_method, methods_with, register
from .scoring import pair_scores, scorer_names, tasks_scoring_cost
from .settings import ig_steps_setting, setting


@dataclass(frozen=True)
class QueryCircuitConfig(ParaphraseSource):
    """Settings of the Best-of-N family (the paraphrase settings first, ``ParaphraseSource``)."""

    include_mismatched: bool = setting(
        False, "also score paraphrases whose model answer differs from the prompt's."
    )
    base_method: str = setting(
        "eap-ig", "the scorer of every (paraphrase, corruption) pair.", choices=lambda: scorer_names()
    )
    ig_steps: int = ig_steps_setting(20, "IG steps of the base method, when it takes them.")
    anchor_budgets: tuple[int, ...] = setting(
        (),
        "budgets whose BoN circuits iBoN and BoN-CSM build from, comma separated (none = every other budget from the smallest, and the largest).",
        widget="budgets",
    )
    reference: tuple[str, ...] = setting(
        (),
        "a reference circuit's edge names, to overlap the candidates with (the command line's --reference FILE reads EAP-IG JSON or edge names).",
        widget="circuit",
    )
    compare: bool = setting(
        True, "also compute the other four variants, so one run holds the whole comparison."
    )
    cache_scores: bool = setting(
        True, "keep score matrices (and circuit evaluations) in the run's result store and reuse them."
    )


def base_scorer(config: QueryCircuitConfig) -> tuple[ScoringMethod, object]:
    """The registered method that scores every pair, with its settings (``ig_steps`` when it has them)."""
    method = get_method(config.base_method)
    if not isinstance(method, ScoringMethod):
        raise ValueError(
            f"base_method must be a method that scores edges (eap, eap-ig, ...), not {given(config.base_method)}."
        )
    fields = {f.name for f in dataclasses.fields(method.Config)}
    settings = {"ig_steps": int(config.ig_steps)} if "ig_steps" in fields else {}
    return method, method.make_config(settings)


def stored_scores_reader(model, model_id: str, spec: GraphSpec, settings, store):
    """Each pair's score matrix as an earlier run with ``settings`` kept it in ``store``: a function
    of a pair's task giving its [n_forward, n_backward] float32 scores or None; None when the run
    kept none (``cache_scores`` off, no store) or the settings make no scorer (a stored result of
    an older version). The run's own key function and scorer, so the keys match what it stored."""
    try:
        config = settings if isinstance(settings, QueryCircuitConfig) else QueryCircuitConfig(**settings)
        method, method_config = base_scorer(config)
    except (AttributeError, TypeError, ValueError):
        return None
    if store is None or not config.cache_scores:
        return None

    def read(task: PromptTask) -> torch.Tensor | None:
        key = score_key(model, model_id, spec, task, method, method_config)
        state = store.load_state(key, kind="scores")
        return state["scores"].float() if isinstance(state, dict) and "scores" in state else None

    return read


def stored_pairs(model, model_id: str, task: PromptTask, settings, store) -> tuple[bool, bool]:
    """(the prompt's own pair score matrix is stored, its circuit metrics memo is stored) for the
    base scorer of ``settings``: a sibling variant (BoN before iBoN) stored both, so this run
    scores nothing and re-evaluates few circuits. The prompt's pair stands for all the pairs:
    the variants of one prompt and settings share them."""
    spec = adapter_of(model).spec
    read = stored_scores_reader(model, model_id, spec, settings, store)
    if read is None:
        return False, False
    metrics = store.load_state(metrics_key(model, model_id, spec, task), kind="circuit-metrics")
    return read(task) is not None, isinstance(metrics, dict)


def stored_share(model, model_id: str, task: PromptTask, settings, store) -> tuple[int, int]:
    """(the pairs whose score matrices are stored, the pairs the run may score: the prompt and each
    listed pair, a repeat once) for the file source, whose pairs are the user's list: a list typed
    after a run of the same prompt was priced as though its pairs were stored too (Gemma-3-270M, six
    new pairs: "about 5 s" for a run of 71 s). A pair the run will leave out is not counted: one
    whose answer or foils are not the prompt's, and one an earlier run's checks left out (the model
    answers it otherwise; ``query.scoring.left_out_before``), which is never scored or stored and
    was priced as work to do. A pair no run has checked counts: the checks are not run to price a
    run. A generated source (templates, an LLM): the pairs an earlier run of the same source
    settings scored (``query.scoring.stored_source_pairs``); none kept, the prompt's pair and
    ``n_paraphrases`` new ones: a template run after a run of a typed list of the same prompt was
    priced as though its pairs were stored ("about 6 s ... without the paraphrases' scores and
    evaluations an earlier run stored", Gemma-3-270M; the run took 34 s)."""
    config = settings if isinstance(settings, QueryCircuitConfig) else QueryCircuitConfig(**settings)
    spec = adapter_of(model).spec
    read = stored_scores_reader(model, model_id, spec, config, store)
    if config.paraphrase_source != "file":
        earlier = stored_source_pairs(
            model, model_id, spec, task, config, store if config.cache_scores else None
        )
        if earlier is None:
            return int(read is not None and read(task) is not None), 1 + int(config.n_paraphrases)
        tasks = [task, *earlier]
        return sum(read is not None and read(each) is not None for each in tasks), len(tasks)
    if not config.paraphrases:
        return 0, 0
    kept = store if config.cache_scores else None  # the run keeps its checks where it keeps scores
    tasks = [task]
    for record in config.paraphrases:
        try:
            listed = record.pair(task)
            pair = listed.task()
        except ValueError:  # a pair the run leaves out (its own answer): it is not scored
            continue
        if listed.problems or left_out_before(
            model, model_id, spec, task, pair, config.include_mismatched, kept
        ):  # left out by the run, as before: never scored
            continue
        if pair.clean not in (each.clean for each in tasks):  # a repeat is left out, not scored
            tasks.append(pair)
    stored = sum(read is not None and read(each) is not None for each in tasks)
    return stored, len(tasks)


def pair_scorer(config: QueryCircuitConfig) -> PairScorer:
    """The base scorer as the pipeline takes it."""
    method, method_config = base_scorer(config)

    def score(model, spec, pairs, progress) -> list[torch.Tensor]:
        return pair_scores(model, spec, pairs, method, method_config, progress)

    return PairScorer(method, method_config, score)


# what the family's scores are, by default (its base method EAP-IG)
BASE_SCORE = f"the base method is EAP-IG by default, whose score is its estimate of {EDGE_CHANGE}"


# ----- the registered methods -----------------------------------------------------------------
# proposing and checking one paraphrase (templates, tokenising, the model's answer on it and on its
# corruption) takes about 12 forward passes' time (benchmarks/bench_estimates.py, 2026-12-01)
PARAPHRASE_CHECK_PASSES = 12.0


def paraphrases_asked(config) -> int:
    """The paraphrases a run checks and scores: the listed pairs for the file source (all of them,
    whatever ``n_paraphrases`` says: three listed pairs were priced as the default nine), else
    ``n_paraphrases``."""
    if config.paraphrase_source == "file" and config.paraphrases:
        return len(config.paraphrases)
    return int(config.n_paraphrases)


def paraphrases_scored(config) -> int:
    """The paraphrases a run may score, as far as their text tells before the model reads them: for
    the file source the listed pairs less a repeat of an earlier one and a pair whose corruption is
    the paraphrase itself, which the checks leave out unscored (a list holding a pair twice was
    priced as scoring it twice); else ``n_paraphrases``."""
    if config.paraphrase_source != "file" or not config.paraphrases:
        return int(config.n_paraphrases)
    seen: set[str] = set()
    scored = 0
    for record in config.paraphrases:
        clean = record.clean.strip()
        if clean not in seen and clean != record.corrupted.strip():
            scored += 1
        seen.add(clean)
    return scored


# (model, prompt pair, listed pairs) -> whether the run's checks keep each pair, without and with
# mismatched answers, and its paraphrase's token count: the last few lists priced, so the page's
# reruns check a list once
_CHECKED: dict[tuple, list[tuple[bool, bool, int]]] = {}
_CHECKED_KEPT = 16
_CHECKED_GUARD = threading.Lock()


def _listed_checks(model, task: PromptTask, config) -> list[tuple[bool, bool, int]] | None:
    """(kept, kept with mismatched answers, the paraphrase's tokens) of each listed pair by the
    run's own checks, run here once per list and model; None for another source, or when the checks
    cannot run here (a prompt pair the run would refuse, a model without weights)."""
    if config.paraphrase_source != "file" or not config.paraphrases:
        return None
    if model_device(model).type == "meta":
        return None
    key = (adapter_of(model).key, repr(sorted(task.to_dict().items())), tuple(config.paraphrases))
    with _CHECKED_GUARD:
        flags = _CHECKED.get(key)
    if flags is None:
        try:
            pairs = validate_pairs(model, task, [record.pair(task) for record in config.paraphrases])
        except ValueError:  # the prompt pair itself is refused (TaskError): the run says why
            return None
        flags = [(pair.usable(False), pair.usable(True), int(pair.n_tokens or 0)) for pair in pairs]
        with _CHECKED_GUARD:
            _CHECKED[key] = flags
            while len(_CHECKED) > _CHECKED_KEPT:
                _CHECKED.pop(next(iter(_CHECKED)))
    return flags


def listed_pairs_kept(model, task: PromptTask, config) -> int | None:
    """How many of the file source's listed pairs the run's checks keep for scoring
    (``query.checks.validate_pairs``, the run's own: same token length as the corruption, within
    256 tokens, the prompt's answer and foils, no repeat, and the model's answer on the paraphrase
    the prompt's unless ``include_mismatched``); None for another source, or when the checks cannot
    run here (a prompt pair the run would refuse, a model without weights). The first estimate of a
    typed list counted every pair but a repeat, so a pair the model answers otherwise was priced as
    scored and evaluated (Gemma-3-270M: six listed, a repeat among them, the run kept two and took
    16 s; priced as five, 26 s). The checks are a forward pass over the list's texts, run once per
    list (kept for the next estimates)."""
    checks = _listed_checks(model, task, config)
    if checks is None:
        return None
    return sum(check[1 if config.include_mismatched else 0] for check in checks)


def listed_pairs_tokens(model, task: PromptTask, config) -> int | None:
    """The tokens of the listed pairs the checks keep, together (``listed_pairs_kept``'s pairs):
    each is scored over its own tokens, so a list of long paraphrases costs more than as many
    prompts (Gemma-3-270M, a 574-character paraphrase of 117 tokens beside a 15-token prompt:
    priced at about 30 s at the load of the time, the run took 61 s)."""
    checks = _listed_checks(model, task, config)
    if checks is None:
        return None
    return sum(check[2] for check in checks if check[1 if config.include_mismatched else 0])


def template_pairs_tokens(model, task: PromptTask, config) -> int | None:
    """The tokens of the ``n_paraphrases`` pairs the template source would give, together, from its
    rewrites as they come (``query.templates.unchecked_template_pairs``: no model pass; the run
    draws these first, and more only for pairs its checks leave out); None for another source or a
    prompt no family recognises. A finished run counts its pairs' own tokens (``passes_done``), so
    an estimate at the prompt's length read short of the runs it calibrates from."""
    n = int(config.n_paraphrases)
    if config.paraphrase_source != "template" or n <= 0:
        return None
    try:
        pairs = unchecked_template_pairs(task, n, int(config.seed))
    except ParaphraseError:
        return None
    if not pairs:
        return None
    count = adapter_of(model).token_count
    return round(sum(count(clean) for clean, _ in pairs) * n / len(pairs))


def _prompt_lengths(pairs: int, kept_tokens: int | None, n_tokens: int) -> float:
    """The pairs a run scores in prompts' lengths: the prompt and the kept pairs' ``kept_tokens``
    over the prompt's ``n_tokens`` when known, else ``pairs`` prompts."""
    if kept_tokens is None or n_tokens <= 0:
        return float(pairs)
    return 1.0 + kept_tokens / n_tokens


def _mean_length(result, n_tokens: int, config) -> float:
    """A finished run's candidate pairs' mean token count over the prompt's (1 where unknown, and
    for the LLM source, whose estimate cannot know its pairs' lengths: priced as the estimate was)."""
    if config.paraphrase_source not in ("file", "template"):
        return 1.0
    pairs, candidates = result.details.pairs, result.details.candidates
    lengths = [pairs[i].get("n_tokens") for i in candidates if i < len(pairs)]
    if not lengths or any(not length for length in lengths) or n_tokens <= 0:
        return 1.0
    return sum(lengths) / len(lengths) / n_tokens


class QueryCircuitMethod(Method):
    """One variant's view of the shared Best-of-N pipeline."""

    # the variants run one pipeline: a variant not yet run here is priced from the others' runs
    calibration_family = ("single", "average", "bon", "ibon", "bon-csm")
    Config = QueryCircuitConfig
    Details = QueryCircuitDetails
    needs_corrupted = True

    def estimate(
        self, config, spec, n_tokens, n_budgets, kept: int | None = None, kept_tokens: int | None = None
    ) -> Cost:
        """Each (paraphrase, corruption) pair is scored like one run of the base method over its own
        tokens, and its candidate circuits at every budget are evaluated on the prompt. ``kept``:
        the listed pairs the run's checks keep (``listed_pairs_kept``), when known, and
        ``kept_tokens`` their tokens together (``listed_pairs_tokens``); else the pairs left once a
        repeat and a pair whose corruption is itself are taken out (``paraphrases_scored``), each
        priced as long as the prompt."""
        base, base_config = base_scorer(config)
        per_pair = base.estimate(base_config, spec, n_tokens, 0)
        scored = paraphrases_scored(config) if kept is None else kept
        pairs = scored + 1  # every listed pair is checked, not every one scored
        checks = PARAPHRASE_CHECK_PASSES * paraphrases_asked(config)
        # the pairs' rows in one batched gradient pass, its chunks counted (``tasks_scoring_cost``)
        scoring, rows = tasks_scoring_cost(
            base, per_pair, pairs, _prompt_lengths(pairs, kept_tokens, n_tokens)
        )
        return Cost(
            passes=scoring + 2.0 * n_budgets * pairs + n_budgets + checks,
            gradient_batch=per_pair.gradient_batch,
            ig_steps=int(config.ig_steps),
            n_paraphrases=paraphrases_asked(config),  # the listed pairs for a file: what the run checks
            n_scored=kept,
            # the prompt's evaluator, read back when kept (the pairs' groups are scored on runs of
            # their own)
            prompt_passes=per_pair.prompt_passes,
            gradient_rows=rows,
        )

    def estimate_for_task(self, model, task, config, spec, n_tokens, n_budgets) -> Cost:
        """``estimate`` with the pairs of the user's list that the run's checks keep, and their tokens."""
        kept, tokens = listed_pairs_kept(model, task, config), listed_pairs_tokens(model, task, config)
        if tokens is None:
            tokens = template_pairs_tokens(model, task, config)
        return self.estimate(config, spec, n_tokens, n_budgets, kept, tokens)

    def passes_done(self, result) -> float | None:
        """The passes of the run as it went: a pair whose score matrix it read from the store
        (``cache_scores``: the same paraphrase scored by an earlier run) was not scored, candidates
        whose metrics it read back were not evaluated, and only the pairs that passed the checks
        were scored. Priced on the whole list, a rerun with an edited list that kept most of its
        pairs recorded their scoring as done in 3.4 s, and the next estimates came out at about a
        quarter of the runs' time."""
        counts = getattr(result.details, "counts", None) or {}
        if "scored_pairs" not in counts:
            return None
        config = self.as_config(result.config)
        base, base_config = base_scorer(config)
        n_tokens = len(result.tokens.get("clean", ())) or 16
        n_budgets = len(result.curve)
        scored = int(counts["scored_pairs"])
        candidates = scored + int(counts.get("scores_from_store", 0))  # the pairs that passed the checks
        # each pair scored over its own tokens (``estimate``): the candidates' mean length, in prompts
        lengths = _mean_length(result, n_tokens, config)
        per_pair = base.estimate(base_config, result.graph, n_tokens, 0)
        scoring, _ = tasks_scoring_cost(base, per_pair, scored, lengths * scored)
        evaluation = 0.0 if counts.get("circuits_evaluated") == 0 else 2.0 * n_budgets * candidates
        checks = PARAPHRASE_CHECK_PASSES * paraphrases_asked(config)
        return scoring + evaluation + n_budgets + checks  # ``estimate``'s terms, as they went

    def stored_work(self, model, model_id, task, config, n_tokens, n_budgets, store) -> StoredWork | None:
        """The pairs' scoring when their score matrices are in the store, and the candidates'
        evaluation when their metrics are: iBoN after BoN on the same prompt finds it all stored
        (it was announced at four times what it took before this was priced off)."""
        if not self.has_paraphrases_view:  # single and average are priced whole, as they were
            return None
        config = self.as_config(config)
        scores_stored, metrics_stored = stored_pairs(model, model_id, task, config, store)
        if not scores_stored:
            return None
        kept = listed_pairs_kept(model, task, config)
        pairs = (paraphrases_scored(config) if kept is None else kept) + 1  # as ``estimate`` counts them
        stored, listed = stored_share(model, model_id, task, config, store)
        share = stored / listed if listed else 1.0  # a listed pair new to the store is scored anew
        candidates = 2.0 * n_budgets * pairs  # the candidates' evaluation passes (``estimate``)
        evaluation_stored = share * candidates / (candidates + n_budgets) if metrics_stored else 0.0
        base, base_config = base_scorer(config)
        lengths = _prompt_lengths(
            pairs, listed_pairs_tokens(model, task, config), n_tokens
        )  # as ``estimate``
        per_pair = base.estimate(base_config, adapter_of(model).spec, n_tokens, 0)
        scoring = tasks_scoring_cost(base, per_pair, pairs, lengths)[0] * share
        what = "the paraphrases' scores and evaluations" if metrics_stored else "the paraphrases' scores"
        if share < 1.0:
            what = f"the scores of the {stored} of its {listed} pairs"
        return StoredWork(
            timings={"scoring_s": share, "evaluation_s": evaluation_stored},
            passes=scoring + evaluation_stored * candidates,
            family=(self.name, *(name for name in methods_with("has_paraphrases_view") if name != self.name)),
            what=what,
        )

    def settings_from_cli(self, settings: dict, model=None) -> dict:
        """``--paraphrases FILE`` gives the file's pairs (and the file source); ``--reference
        FILE`` gives the reference circuit's edge names, read against the model's graph."""
        settings = paraphrases_from_cli(settings)
        if settings.get("reference") and model is not None:
            spec = adapter_of(model).spec
            settings["reference"] = tuple(spec.edge_names_of(load_circuit(settings["reference"], spec).mask))
        return settings

    def run_task(self, ctx: RunContext, config, budgets: Sequence[int]) -> CircuitResult:
        config = self.as_config(config)
        return query_circuits(ctx, config, budgets, pair_scorer(config), self.name).to_result(self.name)


@register
class SingleQuery(QueryCircuitMethod):
    name = "single"
    label = "Single query (BoN baseline)"
    summary = "Top-N of the prompt's own edge scores; with compare on, BoN and its variants beside it."
    score_meaning = f"the base method's score on the prompt; {BASE_SCORE}"


@register
class AveragedParaphrases(QueryCircuitMethod):
    name = "average"
    label = "Averaged paraphrase scores"
    summary = "Top-N of the mean score matrix of the prompt and its paraphrases (a BoN baseline)."
    score_meaning = f"the mean of the base method's scores on the prompt and its paraphrases; {BASE_SCORE}"


@register
class BestOfN(QueryCircuitMethod):
    name = "bon"
    label = "Best-of-N (query circuits)"
    fitted_to_prompt = "Best-of-N keeps the candidate of highest NDF on this prompt"
    has_paraphrases_view = True
    summary = (
        "Score the prompt and p paraphrases; keep the candidate circuit most faithful (NDF) on the prompt."
    )
    score_meaning = (
        "the base method's score on the candidate, the prompt or a paraphrase, that won at the largest "
        f"budget (each budget's circuit is the top N of its own winner's scores); {BASE_SCORE}"
    )


@register
class InterpolatedBestOfN(QueryCircuitMethod):
    name = "ibon"
    label = "Interpolated BoN"
    fitted_to_prompt = "iBoN keeps, per budget, the candidate of highest NDF on this prompt"
    has_paraphrases_view = True
    summary = "BoN circuits at anchor budgets; a budget between them adds the next anchor's best edges."
    score_meaning = (
        f"the base method's score on the candidate that won at the largest anchor budget; {BASE_SCORE}"
    )


@register
class BestOfNCSM(QueryCircuitMethod):
    name = "bon-csm"
    label = "BoN with a constraint-adaptive score matrix"
    fitted_to_prompt = "BoN-CSM merges the sub-circuits of highest NDF on this prompt"
    has_paraphrases_view = True
    summary = "One tier-then-score ordering from the anchors' BoN circuits serves every budget (nested)."
    score_meaning = (
        "the base method's score on the winner of the smallest anchor whose circuit "
        "holds the edge (an edge in none: the largest anchor's winner's); the circuits order edges by that "
        f"anchor first, then by score; {BASE_SCORE}"
    )
