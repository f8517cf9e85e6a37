"""Paraphrase pruning on tiny models: the held-out share is never fitted to, too few paraphrases
are said in one sentence, and the learning measures each fit task as the evaluator does."""

from __future__ import annotations

import math

import pytest
import torch

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.core.curves import ndf
from circuitviz.core.tasks import PromptTask, prepare_task
from circuitviz.measure.evaluate import Evaluator, circuits_at_budgets
from circuitviz.methods import RunContext, get_method
from circuitviz.methods import paraphrase_pruning as pp

PARAPHRASES = [
    PromptTask(
        "When Tom and Anna went to the park , Anna gave a ball to",
        "When Tom and Anna went to the park , Carl gave a ball to",
        " Tom",
        (" Anna",),
    ),
    PromptTask(
        "When Mary and John went to the park , John gave a ball to",
        "When Alice and Bob went to the park , Carl gave a ball to",
        " Mary",
        (" John",),
    ),
    PromptTask(
        "When Mary and Bob went to the store , Bob gave a drink to",
        "When Alice and John went to the store , Carl gave a drink to",
        " Mary",
        (" Bob",),
    ),
    PromptTask(
        "When Anna and Tom went to the store , Tom gave a drink to",
        "When Alice and Bob went to the store , Carl gave a drink to",
        " Anna",
        (" Tom",),
    ),
]


class _Pair:
    def __init__(self, task):
        self._task = task

    def usable(self, include_mismatched: bool = False) -> bool:
        return True

    def task(self) -> PromptTask:
        return self._task


def _spy_on_the_tasks(monkeypatch) -> dict[str, list[PromptTask]]:
    """{"learn": the tasks the learning saw, "warm": the warm start's}, filled by the next run."""
    tasks: dict[str, list[PromptTask]] = {}
    learn, warm = pp.learn_shared_masks, pp.warm_logits

    def spy_learn(ctx, config, evaluators, start, counts):
        tasks["learn"] = [e.prepared.task for e in evaluators]
        return learn(ctx, config, evaluators, start, counts)

    def spy_warm(ctx, config, evaluators, counts):
        tasks["warm"] = [e.prepared.task for e in evaluators]
        return warm(ctx, config, evaluators, counts)

    monkeypatch.setattr(pp, "learn_shared_masks", spy_learn)
    monkeypatch.setattr(pp, "warm_logits", spy_warm)
    return tasks


@pytest.fixture
def every_paraphrase_valid(monkeypatch):
    """The tiny random model answers its paraphrases differently, so the source's checks refuse
    them; here they pass, to test what the method does with valid ones."""
    monkeypatch.setattr(pp, "gather_configured", lambda *args, **kwargs: [_Pair(t) for t in PARAPHRASES])
    monkeypatch.setattr(pp, "gap_problem", lambda *args, **kwargs: None)


def test_the_held_out_share_is_never_fitted_to_nor_starts_the_logits(every_paraphrase_valid, monkeypatch):
    model = tiny_model("gemma", seed=0)
    tasks = _spy_on_the_tasks(monkeypatch)
    method = get_method("paraphrase-pruning")
    result = method.run_on(
        model, IOI_TASK, method.make_config({"warm_start": "average", "steps": 2}), budgets=[12]
    )
    details = result.details
    assert len(details.held_out) == 2 and len(details.fit) == 2
    assert not set(details.held_out) & set(details.fit)
    assert [t.clean for t in tasks["learn"]] == [IOI_TASK.clean, *details.fit]
    assert [t.clean for t in tasks["warm"]] == [IOI_TASK.clean, *details.fit]
    assert not set(details.held_out) & {t.clean for t in tasks["learn"]}
    (row,) = details.budgets
    held = details.held_out_ndf["12"]
    assert len(held) == 2 and row["held_out_ndf"] == pytest.approx(sum(held) / 2)
    # the held-out figures are the evaluator's, measured again on each held-out paraphrase
    circuit = result.circuit(12)
    for text, value in zip(details.held_out, held):
        task = next(t for t in PARAPHRASES if t.clean == text)
        evaluator = Evaluator(model, result.graph, prepare_task(model, task))
        assert value == pytest.approx(
            ndf(float(evaluator.metrics(circuit[None])[0]), evaluator.baseline), abs=1e-9
        )
    # and the fit share's, measured in the same call as the held-out share's
    fit_values = []
    for text in details.fit:
        task = next(t for t in PARAPHRASES if t.clean == text)
        evaluator = Evaluator(model, result.graph, prepare_task(model, task))
        fit_values.append(ndf(float(evaluator.metrics(circuit[None])[0]), evaluator.baseline))
    assert row["fit_ndf"] == pytest.approx(sum(fit_values) / len(fit_values), abs=1e-9)
    assert row["nodes"] == len(result.graph.node_names_of(circuit))


def test_too_few_valid_paraphrases_are_said_in_one_sentence():
    model = tiny_model("gemma", seed=0)
    method = get_method("paraphrase-pruning")
    text = f"{PARAPHRASES[0].clean}\t{PARAPHRASES[0].corrupted}"
    config = method.make_config({"paraphrase_source": "file", "paraphrases": text, "steps": 1})
    result = method.run_on(model, IOI_TASK, config, budgets=[12])
    assert result.details.held_out == [] and result.details.held_out_ndf == {}
    (sentence,) = [n for n in result.details.notes if "too few to hold any out" in n]
    assert sentence.count(". ") == 0 and sentence.endswith(".")
    # the method's own figure is missing, not every transfer: discover --transfer-file measured 4
    # pairs of our own under "... transfer to paraphrases it never saw is not measured" (2026-12-07)
    assert sentence.endswith("so the method itself measured no transfer to paraphrases it never saw.")
    # and the pair the file's check refused is named, with the check's reason
    (left,) = [n for n in result.details.notes if "left out" in n]
    assert left.startswith(f"1 of 1 paraphrase left out: {PARAPHRASES[0].clean!r}: ") and left.endswith(".")
    assert left.removeprefix(f"1 of 1 paraphrase left out: {PARAPHRASES[0].clean!r}: ") != "."
    assert math.isnan(result.details.budgets[0]["held_out_ndf"])


def test_every_paraphrase_left_out_is_named_with_its_reason(monkeypatch):
    """Nothing is dropped silently: a repeat, the prompt itself and a paraphrase whose corruption
    does not clearly lower the metric are each named in one note, with why."""
    weak = PARAPHRASES[1].clean
    given = [*PARAPHRASES, PARAPHRASES[0], IOI_TASK]
    monkeypatch.setattr(pp, "gather_configured", lambda *args, **kwargs: [_Pair(t) for t in given])
    monkeypatch.setattr(
        pp,
        "gap_problem",
        lambda task, *args, **kwargs: "the gap is too small" if task.clean == weak else None,
    )
    ctx = RunContext(tiny_model("gemma", seed=0), IOI_TASK)
    split = pp.split_paraphrases(ctx, get_method("paraphrase-pruning").make_config({}))
    assert len(split.fit) + len(split.held_out) == len(PARAPHRASES) - 1
    assert split.notes == [
        f"3 of {len(given)} paraphrases left out, {len(given) - 3} kept: {PARAPHRASES[0].clean!r}: a repeat; "
        f"{IOI_TASK.clean!r}: it is the prompt itself; {weak!r}: the gap is too small."
    ]
    assert split.left_out == [  # every one kept whole (the sentence names the first few)
        (PARAPHRASES[0].clean, "a repeat"),
        (IOI_TASK.clean, "it is the prompt itself"),
        (weak, "the gap is too small"),
    ]


def test_each_step_measures_every_fit_task_as_the_evaluator_does(every_paraphrase_valid):
    """The learning's first step runs the warm start's top-N on each fit task: its score is the
    worse of the prompt's NDF and the fit paraphrases' mean NDF, as the evaluator measures them."""
    model = tiny_model("gemma", seed=1)
    ctx = RunContext(model, IOI_TASK)
    config = get_method("paraphrase-pruning").make_config({"steps": 0, "warm_start": "eap-ig"})
    split = pp.split_paraphrases(ctx, config)
    fitting = [ctx.evaluator, *split.fit]
    start, _ = pp.warm_logits(ctx, config, fitting, [15])
    learned = pp.learn_shared_masks(ctx, config, fitting, start, [15])
    scores = pp._fit_scores(ctx, config, fitting[:1])[0]
    circuit = circuits_at_budgets(ctx.spec, scores, [15], prune_dead=False)[0]
    values = [ndf(float(e.metrics(circuit[None])[0]), e.baseline) for e in fitting]
    expected = min(values[0], sum(values[1:]) / len(values[1:]))
    assert learned.scores(0)[0] == pytest.approx(expected, abs=1e-9)
    assert torch.equal(learned.circuits[0], circuits_at_budgets(ctx.spec, scores, [15])[0])


def test_edge_pruning_is_the_shared_loops_one_task_case():
    """One loop learns both methods' masks: Edge Pruning's circuits are the loop's on the prompt
    alone, and the prompt given twice (each weighing half) learns the same circuits, the
    selection reading each task's own deviation."""
    from circuitviz.methods.mask_learning import Schedule, edge_values, initial_logits, learn_masks

    model = tiny_model("gemma", seed=2)
    ctx = RunContext(model, IOI_TASK)
    method = get_method("edge-pruning")
    config = method.make_config({"steps": 4, "ig_steps": 3})
    result = method.run_on(model, IOI_TASK, config, budgets=[6, 15])
    ((warm, _),) = get_method("eap-ig").score_batch(
        [ctx], get_method("eap-ig").make_config({"ig_steps": 3}), None
    )
    start = initial_logits(edge_values(ctx.spec, warm.float() * ctx.spec.edge_mask), [6, 15])
    schedule = Schedule(4, 0.5, 1.0, 0.01)
    once = learn_masks(ctx, [ctx.evaluator], start, [6, 15], schedule)
    twice = learn_masks(ctx, [ctx.evaluator, ctx.evaluator], start, [6, 15], schedule)
    for index, budget in enumerate([6, 15]):
        assert torch.equal(result.circuit(budget).cpu(), once.circuits[index].cpu())
        assert torch.equal(once.circuits[index], twice.circuits[index])
        assert once.best_step[index] == twice.best_step[index]
        for one, two in zip(once.deviations[index], twice.deviations[index]):
            assert two == pytest.approx([one[0], one[0]], abs=1e-9)


def test_best_of_n_and_paraphrase_pruning_share_one_home_for_their_paraphrase_settings():
    import dataclasses

    from circuitviz.methods.paraphrase_pairs import ParaphraseSource

    shared = [f.name for f in dataclasses.fields(ParaphraseSource)]
    assert shared == ["paraphrase_source", "paraphrases", "n_paraphrases", "seed", "llm_model"]
    for name in ("bon", "paraphrase-pruning"):
        config = get_method(name).Config
        assert issubclass(config, ParaphraseSource)
        assert [f.name for f in dataclasses.fields(config)][: len(shared)] == shared
        with pytest.raises(ValueError, match="paraphrase_source must be one of"):
            get_method(name).make_config({"paraphrase_source": "nowhere"})


def test_paraphrases_of_one_length_learn_in_one_pass_as_each_would_alone():
    """The shared loop runs tasks of one prompt length in one masked pass, each row patched
    towards its own task's corrupted run: the metrics and their gradient are each task's own run's."""
    from circuitviz.engine.metric import task_metric
    from circuitviz.engine.patching import masked_residual

    model = tiny_model("gemma", seed=0)
    ctx = RunContext(model, IOI_TASK)
    spec = ctx.spec
    evaluators = [Evaluator(model, spec, prepare_task(model, task)) for task in PARAPHRASES[1:4]]
    assert len({e.prepared.n_positions for e in evaluators}) == 1
    keep, alone = _two_masks_each_task_alone(model, spec, evaluators, seed=5)
    residual = masked_residual(
        model,
        spec,
        [e.prepared for e in evaluators],
        torch.cat([e.corrupted_writers for e in evaluators]),
        keep.repeat(3, 1, 1),
        torch.cat([e.corrupted_raw for e in evaluators]),
    )
    owner = torch.arange(3, device="cpu").repeat_interleave(2)
    together = task_metric(model, [e.prepared for e in evaluators], owner)(residual).view(3, 2)
    _assert_each_tasks_own(spec, evaluators, keep, alone, together)


LONGER = PromptTask(
    "When Mary and John went to the big old store , John gave a drink to",
    "When Alice and Bob went to the big old store , Carl gave a drink to",
    " Mary",
    (" John",),
)


def test_prompts_of_several_lengths_learn_in_one_padded_pass_as_each_would_alone():
    """Prompts of other lengths share the learning's pass, the shorter padded at the end: each
    row's metric is read at its own last position, and the metrics and their gradient are each
    task's own run's (to float rounding), on a model with a shared post-attention norm."""
    from circuitviz.engine.metric import compatible_groups, task_metric
    from circuitviz.engine.patching import masked_residual, padded_to

    model = tiny_model("gemma", seed=0)
    spec = RunContext(model, IOI_TASK).spec
    tasks = [PARAPHRASES[1], LONGER, PARAPHRASES[2]]
    evaluators = [Evaluator(model, spec, prepare_task(model, task)) for task in tasks]
    lengths = [e.prepared.n_positions for e in evaluators]
    assert len(set(lengths)) == 2 and evaluators[0].corrupted_raw is not None
    assert len(compatible_groups([e.prepared for e in evaluators], same_length=False)) == 1
    keep, alone = _two_masks_each_task_alone(model, spec, evaluators, seed=6)
    longest = max(lengths)
    prepared = [e.prepared for e in evaluators]
    residual = masked_residual(
        model,
        spec,
        prepared,
        torch.cat([padded_to(e.corrupted_writers, longest) for e in evaluators]),
        keep.repeat(3, 1, 1),
        torch.cat([padded_to(e.corrupted_raw, longest) for e in evaluators]),
    )
    owner = torch.arange(3, device="cpu").repeat_interleave(2)
    together = task_metric(model, prepared, owner, same_length=False)(residual).view(3, 2)
    _assert_each_tasks_own(spec, evaluators, keep, alone, together)
    with pytest.raises(ValueError, match="positions"):
        masked_residual(
            model, spec, prepared, torch.cat([e.corrupted_writers for e in evaluators[::2]]), keep
        )


def _learning_setup(seed: int, tasks: int):
    """A tiny Gemma's prompt (and ``tasks - 1`` paraphrases of one length), warm-started from EAP
    for budgets 6 and 15. Returns (the context, the evaluators, the warm-start logits)."""
    from circuitviz.methods.mask_learning import edge_values, initial_logits

    model = tiny_model("gemma", seed=seed)
    ctx = RunContext(model, IOI_TASK)
    others = [Evaluator(model, ctx.spec, prepare_task(model, task)) for task in PARAPHRASES[1:tasks]]
    eap = get_method("eap")
    ((warm, _),) = eap.score_batch([ctx], eap.make_config({}), None)
    start = initial_logits(edge_values(ctx.spec, warm.float() * ctx.spec.edge_mask), [6, 15])
    return ctx, [ctx.evaluator, *others], start


def _learning(seed: int, steps: int, tasks: int = 1):
    """A learning on a tiny Gemma, to run. Returns (the evaluators, the learning)."""
    from circuitviz.methods.mask_learning import Schedule, learn_masks

    ctx, evaluators, start = _learning_setup(seed, tasks)
    return evaluators, lambda: learn_masks(ctx, evaluators, start, [6, 15], Schedule(steps, 0.5, 1.0, 0.01))


def test_a_learning_runs_each_prefix_once_and_learns_what_it_learned_running_it_every_step(monkeypatch):
    """The positions before the corruption run once for the whole learning (frozen keys and
    values reused by every step): the same deviations, circuits and logits to the bit as running
    them at every step, with one prefix run per pass instead of one per pass and step."""
    import contextlib

    from circuitviz.engine.metric import compatible_groups
    from circuitviz.engine.prefix import shared_prefix
    from circuitviz.methods import mask_learning
    from circuitviz.models.adapter import adapter_of

    evaluators, learn = _learning(seed=3, steps=3, tasks=3)
    model = evaluators[0].model
    groups = compatible_groups([e.prepared for e in evaluators], same_length=False)
    assert all(shared_prefix(model, [evaluators[i].prepared for i in g]) > 0 for g in groups)
    adapter = adapter_of(model)
    runs = []
    original = adapter.prefix_caches
    monkeypatch.setattr(adapter, "prefix_caches", lambda tokens: runs.append(1) or original(tokens))
    reused = learn()
    reused_runs = len(runs)
    runs.clear()
    monkeypatch.setattr(mask_learning, "reusing_prefixes", contextlib.nullcontext)
    fresh = learn()
    assert reused.deviations == fresh.deviations and reused.best_step == fresh.best_step
    assert torch.equal(reused.circuits, fresh.circuits) and torch.equal(reused.logits, fresh.logits)
    passes = len(fresh.deviations[0])  # steps run (both budgets in one batch a step)
    assert reused_runs == len(groups) and len(runs) == len(groups) * passes


def test_the_last_step_measures_its_circuits_without_a_backward_pass(monkeypatch):
    """The last step's gradient moves nothing, so it runs forward only: the same deviations as
    the same step of a longer learning (which takes its gradient), and one backward pass fewer."""
    longer = _learning(seed=4, steps=3)[1]()
    _, learn = _learning(seed=4, steps=2)
    calls = []
    grad = torch.autograd.grad
    monkeypatch.setattr(torch.autograd, "grad", lambda *a, **k: calls.append(1) or grad(*a, **k))
    shorter = learn()
    compared = [i for i in range(2) if len(shorter.deviations[i]) == 3]  # not stopped at the tolerance
    assert compared
    for index in compared:
        assert shorter.deviations[index] == longer.deviations[index][:3]
    assert len(calls) == 2  # steps 0 and 1 (one pass each); step 2 forward only


def test_the_price_counts_each_learning_step_of_every_mask_on_every_fitted_task():
    """The masks learn on the prompt and its fitted paraphrases in one batch: each step runs
    every (mask, task) forward and backward, weighted as Edge Pruning's masked step."""
    from circuitviz.core.graph import GraphSpec
    from circuitviz.methods.mask_learning import MASKED_STEP_PASSES

    spec = GraphSpec.from_model(tiny_model("gemma", seed=0))
    method = get_method("paraphrase-pruning")
    settings = {"n_paraphrases": 4, "held_out": 0.5, "fit_paraphrases": True}
    fit = 1 + round(4 * (1 - 0.5))  # the prompt and the paraphrases not held out
    few = method.estimate(method.make_config({**settings, "steps": 2}), spec, 15, 3).passes
    many = method.estimate(method.make_config({**settings, "steps": 12}), spec, 15, 3).passes
    assert many - few == pytest.approx(MASKED_STEP_PASSES * 10 * 3 * fit)


def test_a_finished_run_is_priced_on_the_paraphrases_that_passed_and_the_steps_it_took():
    """The calibration's work of a finished run (``passes_done``): the estimate's passes when every
    paraphrase asked for passed and every step ran; fewer when fewer passed (they are neither
    fitted nor measured) or the learning stopped early; ``reverse`` learns every fitted task twice."""
    from types import SimpleNamespace

    from circuitviz.core.graph import GraphSpec
    from circuitviz.details.paraphrase_pruning import ParaphrasePruningDetails
    from circuitviz.methods.mask_learning import MASKED_STEP_PASSES

    spec = GraphSpec.from_model(tiny_model("gemma", seed=0))
    method = get_method("paraphrase-pruning")
    config = method.make_config({"n_paraphrases": 6})

    def finished(fit: int, held: int, steps: int, settings=None):
        details = ParaphrasePruningDetails(
            fit=[f"fit {i}" for i in range(fit)],
            held_out=[f"held {i}" for i in range(held)],
            budgets=[{"budget": 5, "steps": steps + 1}, {"budget": 9, "steps": steps + 1}],
        )
        chosen = method.make_config({"n_paraphrases": 6, **(settings or {})})
        curve = [SimpleNamespace(budget=b) for b in (5, 9, spec.n_edges)]
        tokens = {"clean": ["t"] * 15}
        return SimpleNamespace(details=details, config=chosen, graph=spec, tokens=tokens, curve=curve)

    estimated = method.estimate(config, spec, 15, 3).passes
    assert method.passes_done(finished(3, 3, 8)) == pytest.approx(estimated)
    fewer = method.passes_done(finished(1, 1, 8))
    assert fewer < estimated
    early = method.passes_done(finished(3, 3, 5))
    assert estimated - early == pytest.approx(MASKED_STEP_PASSES * 3 * 3 * (1 + 3))
    both_ways = method.make_config({"n_paraphrases": 6, "reverse": True})
    assert method.estimate(both_ways, spec, 15, 3).passes - estimated == pytest.approx(
        method.passes_done(finished(3, 3, 8, {"reverse": True})) - estimated
    )
    assert method.estimate(both_ways, spec, 15, 3).passes > estimated
    assert method.passes_done(SimpleNamespace(details=None)) is None  # nothing to count: the estimate's


def test_the_warm_starts_that_combine_the_fit_tasks_scores():
    """average: the mean of the normalised scores; balanced: the prompt (first) weighs as much as
    the paraphrases together; consensus: the geometric mean, so an edge every task scores ranks
    above one only a single task scores highly. One task: each is that task's scores."""
    prompt = torch.tensor([0.5, 0.3, 0.2, 0.0], device="cpu")
    first = torch.tensor([0.1, 0.3, 0.0, 0.6], device="cpu")
    second = torch.tensor([0.1, 0.3, 0.0, 0.6], device="cpu")
    tasks = [prompt, first, second]
    assert torch.allclose(pp._combined(tasks, "average"), (prompt + first + second) / 3)
    assert torch.allclose(pp._combined(tasks, "balanced"), 0.5 * prompt + 0.25 * (first + second))
    consensus = pp._combined(tasks, "consensus")
    assert torch.allclose(consensus[:2], torch.tensor([0.5 * 0.1 * 0.1, 0.3**3], device="cpu") ** (1 / 3))
    assert consensus[1] > consensus[0] > consensus[2] and consensus[1] > consensus[3]
    for how in ("average", "balanced", "consensus"):
        assert torch.allclose(pp._combined([prompt], how), prompt)
    with pytest.raises(ValueError, match="warm_start must be one of"):
        get_method("paraphrase-pruning").make_config({"warm_start": "median"})


def test_the_worst_objective_keeps_a_circuit_by_its_lowest_fit_paraphrase(every_paraphrase_valid):
    """objective worst: each step's score is the worse of the prompt's NDF and the LOWEST fit
    paraphrase's (mean: their mean); worst-weighted learns with the lagging paraphrases weighing
    more, scored the same way. Edge Pruning's one task is untouched (the selection reads it alone)."""
    from circuitviz.methods.mask_learning import selection_error

    assert selection_error([0.1, 0.2, 0.6]) == pytest.approx(0.4)
    assert selection_error([0.1, 0.2, 0.6], worst=True) == pytest.approx(0.6)
    assert selection_error([-0.3], worst=True) == selection_error([-0.3]) == pytest.approx(0.3)
    model = tiny_model("gemma", seed=1)
    ctx = RunContext(model, IOI_TASK)
    config = get_method("paraphrase-pruning").make_config({"steps": 2, "objective": "worst-weighted"})
    split = pp.split_paraphrases(ctx, config)
    fitting = [ctx.evaluator, *split.fit]
    assert len(fitting) >= 3
    start, _ = pp.warm_logits(ctx, config, fitting, [15])
    learned = pp.learn_shared_masks(ctx, config, fitting, start, [15])
    for step, score in zip(learned.deviations[0], learned.scores(0)):
        errors = [min(abs(d), 1.0) for d in step]
        assert score == pytest.approx(1 - max(errors[0], max(errors[1:])), abs=1e-12)
    assert learned.scores(0)[learned.best_step[0]] == max(learned.scores(0))
    with pytest.raises(ValueError, match="objective must be one of"):
        get_method("paraphrase-pruning").make_config({"objective": "median"})


def test_the_checks_runs_serve_the_evaluators_and_the_warm_start_without_a_second_pass(monkeypatch):
    """Within ``keeping_runs`` the runs a check made (``last_residuals``) are kept and the
    paraphrases' evaluators read them: no second pass, and the writers and baselines of evaluators
    that run their own (to the bit on this model; batches of other sizes may round differently
    elsewhere); the warm start reads those evaluators' runs too (no new ones), with the same
    scores. A check reads the top-1 token of the rows it asks for only."""
    from circuitviz.measure import evaluate
    from circuitviz.methods import scoring
    from circuitviz.query.checks import _last_position

    model = tiny_model("gemma", seed=0)
    ctx = RunContext(model, IOI_TASK)
    prepared = [prepare_task(model, task) for task in PARAPHRASES]
    assert len({p.n_positions for p in prepared}) == 1
    fresh = pp._evaluators(ctx, prepared)  # outside: their own batched pass
    rows: list[int] = []
    forward = model.forward

    def counted(tokens, *args, **kwargs):
        rows.append(int(tokens.shape[0]))
        return forward(tokens, *args, **kwargs)

    monkeypatch.setattr(model, "forward", counted)
    sequences = torch.cat([t for p in prepared for t in (p.clean_tokens, p.corrupted_tokens)])
    with evaluate.keeping_runs():
        metrics, top = _last_position(model, prepared[0], sequences, top_of=[0, 2])
        assert rows == [len(sequences)]
        rows.clear()
        kept = pp._evaluators(ctx, prepared)
        assert rows == []  # read, not run again
    for a, b in zip(kept, fresh):
        assert torch.equal(a.clean_writers, b.clean_writers)
        assert torch.equal(a.corrupted_writers, b.corrupted_writers)
        assert torch.equal(a.corrupted_raw, b.corrupted_raw)
        assert a.baseline == b.baseline
    _, every_top = _last_position(model, prepared[0], sequences)
    assert top[[0, 2]].tolist() == every_top[[0, 2]].tolist() and top[1] == -1 and top[3:].eq(-1).all()
    config = get_method("paraphrase-pruning").make_config({"ig_steps": 2})
    eap_ig = get_method("eap-ig")
    made = scoring.pair_scores(model, ctx.spec, prepared, eap_ig, eap_ig.make_config({"ig_steps": 2}))
    monkeypatch.setattr(scoring, "evaluators_of_tasks", lambda *args, **kwargs: pytest.fail("ran again"))
    for a, b in zip(pp._fit_scores(ctx, config, kept), made):
        assert torch.equal(a, b)


def test_a_prefix_runs_once_for_every_batch_that_continues_its_rows(monkeypatch):
    """Within ``reusing_prefixes`` the positions before the corruption run once per distinct set
    of prefix rows, whatever batch continues them next (the warm start's IG steps, the learning's
    masks, the measurement's circuits ask with batches of other sizes), and each batch's residuals
    are those of a run without the reuse, to the bit; nested scopes share one store."""
    from circuitviz.engine.prefix import final_residual, reusing_prefixes, unchanged_prefix
    from circuitviz.models.adapter import adapter_of

    model = tiny_model("gemma", seed=0)
    prepared = [prepare_task(model, task) for task in PARAPHRASES[1:4]]
    prefix = min(unchanged_prefix(p) for p in prepared)
    assert prefix > 0
    one = prepared[0].clean_tokens
    batches = [one.expand(3, -1), one, torch.cat([p.clean_tokens for p in prepared]), one.expand(5, -1)]
    fresh = [final_residual(model, tokens, [], prefix) for tokens in batches]
    adapter = adapter_of(model)
    runs = []
    original = adapter.prefix_caches
    monkeypatch.setattr(adapter, "prefix_caches", lambda tokens: runs.append(len(tokens)) or original(tokens))
    with reusing_prefixes():
        reused = [final_residual(model, tokens, [], prefix) for tokens in batches[:2]]
        with reusing_prefixes():
            reused += [final_residual(model, tokens, [], prefix) for tokens in batches[2:]]
    distinct = len(torch.unique(batches[2][:, :prefix], dim=0))
    assert runs == ([1] if distinct == 1 else [1, distinct])
    for a, b in zip(reused, fresh):
        assert torch.equal(a, b)


def test_a_prefix_kept_with_shared_attention_inputs_is_not_served_to_a_split_run():
    """A gradient pass on an accelerator runs with one attention input per layer, which rounds the
    prefix's keys and values otherwise than the split runs of the learning and the measurement; a
    prefix kept in one mode serves that mode only (the simulated device's run of paraphrase pruning
    differed from the host's when the warm start's kept prefix served the learning)."""
    from circuitviz.engine.prefix import final_residual, reusing_prefixes, unchanged_prefix
    from circuitviz.models.adapter import adapter_of

    model = tiny_model("gemma", seed=0)
    prepared = prepare_task(model, PARAPHRASES[1])
    prefix = unchanged_prefix(prepared)
    assert prefix > 0
    tokens = prepared.clean_tokens.expand(2, -1)
    adapter = adapter_of(model)

    def run(split: bool) -> torch.Tensor:
        with adapter.split_attention_inputs(split):
            return final_residual(model, tokens, [], prefix)

    fresh = {split: run(split) for split in (False, True)}
    with reusing_prefixes():
        reused = {split: run(split) for split in (False, True)}
    for split in (False, True):
        assert torch.equal(reused[split], fresh[split])


def test_the_measurement_of_several_prompt_lengths_in_one_padded_pass():
    """The fit and held-out paraphrases are measured in one patched pass whatever their lengths,
    the shorter padded at the end: each NDF is its own evaluator's (to float rounding)."""
    from circuitviz.engine import patching

    model = tiny_model("gemma", seed=1)
    spec = RunContext(model, IOI_TASK).spec
    evaluators = [
        Evaluator(model, spec, prepare_task(model, t)) for t in (PARAPHRASES[2], LONGER, PARAPHRASES[0])
    ]
    assert len({e.prepared.n_positions for e in evaluators}) == 2
    generator = torch.Generator().manual_seed(7)
    circuits = torch.rand((3, spec.n_forward, spec.n_backward), generator=generator, device="cpu") > 0.6
    circuits &= spec.edge_mask
    alone = [[ndf(float(v), e.baseline) for v in e.metrics(circuits)] for e in evaluators]
    passes = []
    original = patching.final_residual
    patching.final_residual = lambda *a, **k: passes.append(1) or original(*a, **k)
    try:
        together = pp._ndfs(evaluators, circuits)
    finally:
        patching.final_residual = original
    assert len(passes) == 1
    for a, b in zip(alone, together):
        assert a == pytest.approx(b, abs=1e-9)


def _two_masks_each_task_alone(model, spec, evaluators, seed: int):
    """(masks [2, n_forward, n_backward]: a 0/1 circuit and a fractional one, needing gradients;
    each evaluator's task's metrics under them, run alone)."""
    from circuitviz.engine.metric import metric_from_residual
    from circuitviz.engine.patching import masked_residual

    generator = torch.Generator().manual_seed(seed)
    keep = torch.rand((2, spec.n_forward, spec.n_backward), generator=generator, device="cpu").double()
    keep[0] = (keep[0] > 0.5).double()
    keep.requires_grad_(True)
    alone = [
        metric_from_residual(
            model,
            e.prepared,
            masked_residual(model, spec, e.prepared, e.corrupted_writers, keep, e.corrupted_raw),
        )
        for e in evaluators
    ]
    return keep, alone


def _assert_each_tasks_own(spec, evaluators, keep, alone, together) -> None:
    """The rows run together equal each task run alone (the 0/1 circuit also its evaluator's
    metric), and so do the gradients with respect to the masks."""
    for e, one, row in zip(evaluators, alone, together):
        assert torch.allclose(one, row, rtol=0, atol=1e-9)
        circuit = (keep[0] > 0.5) & spec.edge_mask
        assert float(row[0].detach()) == pytest.approx(float(e.metrics(circuit[None])[0]), abs=1e-9)
    (grad_alone,) = torch.autograd.grad(sum(m.sum() for m in alone), keep)
    (grad_together,) = torch.autograd.grad(together.sum(), keep)
    assert torch.allclose(grad_alone, grad_together, rtol=0, atol=1e-9)


def test_anchor_and_draw_off_by_default_leave_the_circuits_unchanged(every_paraphrase_valid):
    """The two opt-in settings default to off: the defaults, and both named at their off values
    (a draw of 1 is every fit paraphrase), learn the same circuits, steps and logits to the bit."""
    model = tiny_model("gemma", seed=2)
    method = get_method("paraphrase-pruning")
    config = method.make_config({"steps": 3})
    assert config.anchor == 0.0 and config.draw == 0.0
    plain = method.run_on(model, IOI_TASK, config, budgets=[12])
    for off in ({"anchor": 0.0, "draw": 0.0}, {"draw": 1.0}):
        named = method.run_on(model, IOI_TASK, method.make_config({"steps": 3, **off}), budgets=[12])
        assert torch.equal(plain.circuit(12), named.circuit(12))
        assert torch.equal(plain.scores, named.scores)
        assert plain.details.budgets == named.details.budgets
        assert plain.details.held_out_ndf == named.details.held_out_ndf
    with pytest.raises(ValueError, match="choose one"):
        method.make_config({"draw": 0.5, "objective": "worst-weighted"})


def _shared_learning(schedule, tasks: int = 4, seed: int = 5):
    """A learning of budgets 6 and 15 on the prompt and ``tasks - 1`` paraphrases of a tiny Gemma
    with ``schedule``. Returns (the warm-start logits, the learned masks)."""
    from circuitviz.methods.mask_learning import learn_masks

    ctx, evaluators, start = _learning_setup(seed, tasks)
    return start, learn_masks(ctx, evaluators, start, [6, 15], schedule)


def test_an_anchor_pulls_the_learned_logits_toward_the_warm_start():
    """anchor: after each step every logit moves that share of its distance from its start back,
    so the learned logits end nearer the warm start than without it (each row's distance, with
    the logits centred on their thresholds as returned)."""
    from circuitviz.methods.mask_learning import Schedule

    start, free = _shared_learning(Schedule(4, 1.0, 1.0, 0.01, anchor=0.0))
    _, held = _shared_learning(Schedule(4, 1.0, 1.0, 0.01, anchor=0.6))
    assert free.steps_run > 1 and held.steps_run > 1
    for row in range(2):
        centred = start[row] - start[row].median()
        free_gap = (free.logits[row] - free.logits[row].median() - centred).abs().max()
        held_gap = (held.logits[row] - held.logits[row].median() - centred).abs().max()
        assert held_gap < 0.5 * free_gap


def test_a_draw_fits_each_step_on_a_seeded_share_and_keeps_the_step_by_every_task():
    """draw: each step's loss takes the prompt and a seeded share of the other tasks (the same
    draws for the same seed), while every task is still measured at every step (the selection
    reads all of them). A share that draws them all weighs them as the default loss does."""
    from circuitviz.methods.mask_learning import Schedule

    _, default = _shared_learning(Schedule(3, 1.0, 1.0, 0.01))
    _, drawn = _shared_learning(Schedule(3, 1.0, 1.0, 0.01, draw=0.5, draw_seed=7))
    _, again = _shared_learning(Schedule(3, 1.0, 1.0, 0.01, draw=0.5, draw_seed=7))
    assert drawn.deviations == again.deviations and torch.equal(drawn.logits, again.logits)
    assert all(len(step) == 4 for budget in drawn.deviations for step in budget)
    assert drawn.deviations[0][0] == default.deviations[0][0]  # step 0: the warm start's circuit
    _, every = _shared_learning(Schedule(3, 1.0, 1.0, 0.01, draw=0.99, draw_seed=7))  # 3 of 3 drawn
    assert torch.allclose(every.logits, default.logits, atol=1e-5)
    assert every.best_step == default.best_step and torch.equal(every.circuits, default.circuits)


def test_a_prompt_weight_of_one_half_leaves_the_circuits_unchanged(every_paraphrase_valid):
    """prompt_weight defaults to 0.5 (the prompt weighs as much as the fit paraphrases together):
    the defaults and 0.5 named learn the same circuits, steps and logits to the bit; the weight
    must lie strictly between 0 and 1."""
    from circuitviz.methods.mask_learning import Schedule

    model = tiny_model("gemma", seed=2)
    method = get_method("paraphrase-pruning")
    config = method.make_config({"steps": 3})
    assert config.prompt_weight == 0.5 and Schedule(1, 1.0, 1.0, 0.0).prompt_weight == 0.5
    plain = method.run_on(model, IOI_TASK, config, budgets=[12])
    named = method.run_on(
        model, IOI_TASK, method.make_config({"steps": 3, "prompt_weight": 0.5}), budgets=[12]
    )
    assert torch.equal(plain.circuit(12), named.circuit(12))
    assert torch.equal(plain.scores, named.scores)
    assert plain.details.budgets == named.details.budgets
    assert plain.details.held_out_ndf == named.details.held_out_ndf
    for outside in (0.0, 1.0):
        with pytest.raises(ValueError, match="prompt_weight"):
            method.make_config({"prompt_weight": outside})
        with pytest.raises(ValueError, match="prompt_weight"):
            Schedule(1, 1.0, 1.0, 0.0, prompt_weight=outside)


def test_a_smaller_prompt_weight_gives_the_other_tasks_the_rest_of_the_loss(monkeypatch):
    """prompt_weight w: the prompt weighs w and the other tasks share 1 - w, evenly, among those a
    draw picks, or by their errors (reweight); at 0.5 the weights are 0.5 and 0.5 / (n - 1)."""
    from circuitviz.methods import mask_learning
    from circuitviz.methods.mask_learning import Schedule, loss_weights

    assert loss_weights(0.5, [1 / 3] * 3) == [0.5, 0.5 / 3, 0.5 / 3, 0.5 / 3]
    assert loss_weights(0.25, [1 / 3] * 3) == pytest.approx([0.25] * 4)
    assert loss_weights(0.35, [0.5, 0.0, 0.5]) == pytest.approx([0.35, 0.325, 0.0, 0.325])
    seen: list[list[float]] = []
    original = mask_learning.loss_weights
    monkeypatch.setattr(mask_learning, "loss_weights", lambda *a: seen.append(original(*a)) or seen[-1])
    _, default = _shared_learning(Schedule(3, 1.0, 1.0, 0.01))
    assert seen and all(w == [0.5, 0.5 / 3, 0.5 / 3, 0.5 / 3] for w in seen)
    for extra in ({}, {"draw": 0.5, "draw_seed": 7}, {"reweight": True, "worst": True}):
        seen.clear()
        _, light = _shared_learning(Schedule(3, 1.0, 1.0, 0.01, prompt_weight=0.25, **extra))
        assert len(seen) > (1 if extra else 0)  # the draws and the reweighting each step
        assert all(w[0] == 0.25 and sum(w) == pytest.approx(1.0) for w in seen)
        if not extra:
            assert all(w == pytest.approx([0.25] * 4) for w in seen)
            assert not torch.equal(light.logits, default.logits)


def test_reverse_adds_each_fit_task_the_other_way_round_to_the_learning_only(
    every_paraphrase_valid, monkeypatch
):
    """``reverse``: the learning also sees the prompt and each fit paraphrase with their clean and
    corrupted prompts swapped; the warm start and the held-out share are as without it."""
    model = tiny_model("gemma", seed=0)
    tasks = _spy_on_the_tasks(monkeypatch)
    method = get_method("paraphrase-pruning")
    result = method.run_on(model, IOI_TASK, method.make_config({"steps": 2, "reverse": True}), budgets=[12])
    details = result.details
    by_clean = {t.clean: t for t in [IOI_TASK, *PARAPHRASES]}
    forward = [(text, by_clean[text].corrupted) for text in [IOI_TASK.clean, *details.fit]]
    learned = [(t.clean, t.corrupted) for t in tasks["learn"]]
    assert learned == forward + [(corrupted, clean) for clean, corrupted in forward]
    assert [t.clean for t in tasks["warm"]] == [IOI_TASK.clean, *details.fit]  # the forward tasks'
    assert not set(details.held_out) & {text for pair in learned for text in pair}
    assert len(details.held_out_ndf["12"]) == len(details.held_out)


def test_the_report_says_what_the_mask_was_fitted_on_and_started_from():
    """With no valid fit paraphrase the fit set is the prompt alone, and a combined warm start is
    the prompt's own EAP-IG: the report says so rather than naming a set of one."""
    from circuitviz.details.paraphrase_pruning import ParaphrasePruningDetails

    alone = ParaphrasePruningDetails(warm_start="average", fit=[], steps_run=9).report_lines(None)[0]
    assert "fitted on the prompt alone, warm-started from the prompt's EAP-IG scores (no fit" in alone
    assert "8 learning steps; 0 paraphrases held out" in alone
    shared = ParaphrasePruningDetails(warm_start="average", fit=["a", "b"], held_out=["c"], steps_run=9)
    line = shared.report_lines(None)[0]
    assert "fitted on the prompt and 2 paraphrases, warm-started from the mean of the fit set's" in line
    assert "1 paraphrase held out" in line


def test_the_report_counts_the_edges_the_circuit_kept_not_its_budget():
    """A circuit kept under its budget is said as the table under it says it: the line read "103
    edges (28 nodes)" for a 90-edge circuit (a reviewer's prompt of our own, 2026-12-07)."""
    from circuitviz.details.paraphrase_pruning import ParaphrasePruningDetails

    row = {"budget": 103, "edges": 90, "nodes": 28, "ndf": 0.986}
    details = ParaphrasePruningDetails(fit=["a"], held_out=["b"], steps_run=9, budgets=[row])
    details.held_out_ndf = {"103": [0.9, 0.7]}
    line = details.report_lines(None)[1]
    assert (
        line
        == "  budget 103, 90 edges, 28 nodes: NDF 0.986 on the prompt, mean 0.800 on 2 held-out paraphrases"
    )
    details.budgets = [{**row, "edges": 103}]
    assert details.report_lines(None)[1].startswith("  103 edges, 28 nodes: NDF 0.986")


def test_the_estimate_is_a_range_from_a_stop_at_the_first_pass_to_every_step():
    """The masks stop learning at the tolerance, as Edge Pruning's do, whose estimate said the most
    as 'about 4 min' for a 9-token prompt that took 72 s (Gemma-3-270M): the estimate says the
    range and why; its least is a run whose every mask stopped at its first pass."""
    from types import SimpleNamespace

    from circuitviz.core.graph import GraphSpec
    from circuitviz.details.paraphrase_pruning import ParaphrasePruningDetails
    from circuitviz.entry.limits import estimate_run

    model = tiny_model("gemma", seed=0)
    spec = GraphSpec.from_model(model)
    method = get_method("paraphrase-pruning")
    config = method.make_config({"n_paraphrases": 6})
    cost = method.estimate(config, spec, 15, 3)
    least, most = cost.passes_range
    assert most == cost.passes and least < most
    fit = round(6 * (1 - float(config.held_out)))
    details = ParaphrasePruningDetails(
        fit=[f"fit {i}" for i in range(fit)],
        held_out=[f"held {i}" for i in range(6 - fit)],
        budgets=[{"budget": 5, "steps": 1}, {"budget": 9, "steps": 1}],
    )
    stopped = SimpleNamespace(
        details=details,
        config=config,
        graph=spec,
        tokens={"clean": ["t"] * 15},
        curve=[SimpleNamespace(budget=b) for b in (5, 9, spec.n_edges)],
    )
    assert method.passes_done(stopped) == pytest.approx(least)
    said = estimate_run(model, "paraphrase-pruning", None, n_tokens=15, n_budgets=3).summary()
    assert " to " in said and "Paraphrase pruning stops learning a budget's mask" in said
