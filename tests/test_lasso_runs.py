"""CircuitLasso's clean and corrupted runs come from its observation pass: the prompt and its
corruption are two of the observed texts, so a task run alone takes its evaluator's runs from
their rows instead of two one-row passes. The scores are those of a run whose evaluator was made
apart (bit for bit: the observations are the same); the runs equal the one-row passes' to
float rounding (a row of a batch is not bit for bit a pass of one row), and so do the baseline
and the curve."""

import pytest
import torch

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.core.tasks import PromptTask, prepare_task
from circuitviz.lasso.observations import collect_observations, observation_texts
from circuitviz.lasso.units import component_hook_names
from circuitviz.measure.evaluate import Evaluator, forget_prompt_runs, kept_prompt_run
from circuitviz.methods import get_method
from circuitviz.methods.base import RunContext
from circuitviz.models.adapter import adapter_of

BUDGETS = [5, 20]


def without_seconds(details: dict) -> dict:
    """A run's details without the solver's timing."""
    return {**details, "regression": {k: v for k, v in details["regression"].items() if k != "solve_s"}}


@pytest.mark.parametrize("shape", ["gpt2", "gemma"])
def test_the_observation_pass_makes_the_clean_and_corrupted_runs(shape):
    model = tiny_model(shape, seed=0)
    spec = adapter_of(model).spec
    prepared = prepare_task(model, IOI_TASK)
    texts = observation_texts(IOI_TASK, 2)
    observed = collect_observations(
        model, spec, prepared, texts, component_hook_names(model, spec), keep_runs=True
    )
    writers, residual, raw = observed.runs
    apart = Evaluator(model, spec, prepared)
    assert writers.shape == (2, *apart.clean_writers.shape[1:])
    assert torch.allclose(writers[:1], apart.clean_writers, rtol=1e-4, atol=1e-5)
    assert torch.allclose(writers[1:], apart.corrupted_writers, rtol=1e-4, atol=1e-5)
    assert torch.allclose(residual[:1], apart.clean_residual, rtol=1e-4, atol=1e-5)
    if shape == "gemma":  # a shared post-attention norm: the patching reads the raw heads
        assert torch.allclose(raw[1:], apart.corrupted_raw, rtol=1e-4, atol=1e-5)
    else:
        assert raw is None and apart.corrupted_raw is None
    # the observed rows are the same with or without the runs kept
    plain = collect_observations(model, spec, prepared, texts, component_hook_names(model, spec))
    assert torch.equal(plain.writers, observed.writers) and plain.runs is None


@pytest.mark.parametrize("shape", ["gpt2", "gemma"])
@pytest.mark.parametrize("paraphrases", [2, 0])
def test_a_run_alone_makes_no_one_row_passes_and_scores_as_before(shape, paraphrases):
    model = tiny_model(shape, seed=0)
    method = get_method("circuit-lasso")
    config = method.make_config({"n_paraphrases": paraphrases})
    prepared = prepare_task(model, IOI_TASK)
    forget_prompt_runs(model)
    alone = method.run_on(model, IOI_TASK, config, budgets=BUDGETS, model_id="tiny")
    assert kept_prompt_run(model, prepared.clean_tokens) is None  # no one-row pass was made
    assert kept_prompt_run(model, prepared.corrupted_tokens) is None
    ctx = RunContext(model, IOI_TASK, "tiny")
    ctx.evaluator  # noqa: B018  (the one-row runs first, as the app and the api make them)
    apart = method.run(ctx, config, BUDGETS)
    assert torch.equal(alone.scores, apart.scores)
    assert without_seconds(alone.details.to_dict()) == without_seconds(apart.details.to_dict())
    assert alone.baseline.clean == pytest.approx(apart.baseline.clean, rel=1e-5, abs=1e-6)
    assert alone.baseline.corrupted == pytest.approx(apart.baseline.corrupted, rel=1e-5, abs=1e-6)
    for mine, theirs in zip(alone.curve, apart.curve):
        assert (mine.budget, mine.n_edges) == (theirs.budget, theirs.n_edges)
        assert mine.metric == pytest.approx(theirs.metric, rel=1e-5, abs=1e-6)
    assert not ctx.kept  # the scoring took what the runs' step left


def test_several_tasks_share_their_runs_and_each_scores_as_alone():
    model = tiny_model("gpt2", seed=0)
    method = get_method("circuit-lasso")
    config = method.make_config({"n_paraphrases": 2})
    other = PromptTask(
        "When Tom and Anna went to the park , Anna gave a ball to",
        "When Alice and Bob went to the park , Carl gave a ball to",
        " Tom",
        (" Anna",),
    )
    tasks = [IOI_TASK, other]
    together = method.run_batch([RunContext(model, task, "tiny") for task in tasks], config, BUDGETS)
    for task, mine in zip(tasks, together):
        alone = method.run_on(model, task, config, budgets=BUDGETS, model_id="tiny")
        assert torch.equal(mine.scores, alone.scores)
        assert mine.baseline.clean == pytest.approx(alone.baseline.clean, rel=1e-5, abs=1e-6)


def test_target_edges_runs_with_the_default_lambda():
    """--target-edges 50 with the default lambda ('adaptive') ended after the estimate in "fit_sem
    needs a lambda or 'auto'" (a command-line audit); the target chooses its own lambda."""
    from circuitviz.bench.toy_models import planted_model

    planted = planted_model()
    result = get_method("circuit-lasso").run_on(planted.model, planted.task, {"target_edges": 4}, budgets=[4])
    regression = result.details.regression
    assert regression["selection"] == "target_edges" and regression["target_edges"] == 4
