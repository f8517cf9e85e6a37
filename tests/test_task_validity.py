"""The meaningful-task check: a corruption must clearly lower the answer's metric, on a tiny model.

The tiny models are random, so the suite runs with the check off (conftest); these tests turn it
on. Which way a corruption moves the metric is read off the model itself (its clean and
corrupted runs), so each case is built to pass or to fail, never assumed.
"""

import pytest

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.core.graph import GraphSpec
from circuitviz.core.tasks import PromptTask, TaskError, prepare_task
from circuitviz.entry.api import discover, evaluate_circuits
from circuitviz.measure.task_validity import (
    CHECK_ENV,
    MIN_GAP,
    clean_and_corrupted_metrics,
    gap_problem,
    task_verdict,
)


@pytest.fixture()
def checked(monkeypatch):
    monkeypatch.setenv(CHECK_ENV, "on")


@pytest.fixture(scope="module")
def tiny():
    return tiny_model("gpt2", seed=0)


def _gap(model, task) -> float:
    clean, corrupted = clean_and_corrupted_metrics(model, prepare_task(model, task))
    return clean - corrupted


def _raising_and_lowering(model) -> tuple[PromptTask, PromptTask]:
    """The IOI task and the same task with answer and foil swapped: one of the two has its metric
    lowered by the corruption, the other raised (the logit difference changes sign)."""
    swapped = PromptTask(IOI_TASK.clean, IOI_TASK.corrupted, IOI_TASK.foils[0], (IOI_TASK.answer,))
    return (IOI_TASK, swapped) if _gap(model, IOI_TASK) < 0 else (swapped, IOI_TASK)


def test_a_corruption_that_raises_the_metric_is_refused_in_one_sentence(tiny, checked):
    raising, lowering = _raising_and_lowering(tiny)
    assert _gap(tiny, raising) < 0 < _gap(tiny, lowering)
    verdict = task_verdict(tiny, raising)
    assert verdict is not None and "raises" in verdict and verdict.count(". ") == 0
    with pytest.raises(TaskError, match="raises the logit difference"):
        discover(tiny, raising, "eap")
    spec = GraphSpec.from_model(tiny)
    with pytest.raises(TaskError, match="raises"):
        evaluate_circuits(tiny, raising, [spec.edge_mask])


def test_the_threshold_decides_on_the_metrics_own_scale(tiny, checked):
    _, lowering = _raising_and_lowering(tiny)
    gap = _gap(tiny, lowering)
    assert gap_problem(lowering, 5.0, 5.0 - 1.01 * MIN_GAP["logit_diff"]) is None
    small = gap_problem(lowering, 5.0, 5.0 - 0.5 * MIN_GAP["logit_diff"])
    assert small is not None and "by only 0.5" in small
    verdict = task_verdict(tiny, lowering)
    assert (verdict is None) == (gap >= MIN_GAP["logit_diff"])


def test_identical_prompts_are_refused_before_any_pass_even_with_the_check_off(tiny, monkeypatch):
    monkeypatch.setenv(CHECK_ENV, "off")
    same = PromptTask(IOI_TASK.clean, IOI_TASK.clean, IOI_TASK.answer, IOI_TASK.foils)
    with pytest.raises(TaskError, match="corrupted prompt is the prompt itself"):
        discover(tiny, same, "eap")
    assert "prompt itself" in task_verdict(tiny, same)
    monkeypatch.setattr("circuitviz.methods.base.Evaluator", None)  # no run may start
    with pytest.raises(TaskError, match="prompt itself"):
        discover(tiny, same, "eap")


def test_with_the_check_off_a_raising_corruption_runs(tiny, monkeypatch):
    monkeypatch.setenv(CHECK_ENV, "off")
    raising, _ = _raising_and_lowering(tiny)
    result, _ = discover(tiny, raising, "eap", budgets=(3,))
    assert result.curve and result.curve[0].n_edges <= 3


def test_a_batch_row_carries_the_reason_and_its_neighbours_run(tiny, checked, monkeypatch):
    from circuitviz.batch.dataset import DatasetTask
    from circuitviz.batch.work import WorkGroup, run_group

    raising, lowering = _raising_and_lowering(tiny)
    # a random model's gaps are small: the threshold is scaled to it (half the lowering gap)
    monkeypatch.setitem(MIN_GAP, "logit_diff", _gap(tiny, lowering) / 2)
    items = [(0, DatasetTask("raising", raising)), (1, DatasetTask("lowering", lowering))]
    outcomes = run_group(tiny, "tiny", WorkGroup("eap", {}, [3], items))
    assert outcomes[0].result is None and "raises" in outcomes[0].error
    assert outcomes[1].error is None and outcomes[1].result.curve


def test_proposals_prefer_a_passing_task_and_a_content_word():
    from circuitviz.measure.task_validity import is_function_word, preferred_task

    tasks = [PromptTask("p", "q", answer, (" x",)) for answer in (" the", " Berlin", " a", " Paris")]
    threshold = MIN_GAP["logit_diff"]
    # the function word ' the' lowers most, ' Berlin' passes too: the content word wins
    assert preferred_task(tasks, [5 * threshold, 2 * threshold, 3 * threshold, 4 * threshold]) == 1
    # only function words pass: the most likely of them
    assert preferred_task(tasks, [0.5 * threshold, -1.0, 2 * threshold, None]) == 2
    # none passes: the model's own top answer (the check before Run explains)
    assert preferred_task(tasks, [-1.0, 0.1, None, -2.0]) == 0
    assert is_function_word(" the") and is_function_word(" ,") and not is_function_word(" Berlin")


def test_among_answers_the_model_barely_predicts_the_corrupted_word_decides():
    """SmolLM2-135M after "the capital of france is": ' the' and ' a' do not pass with 'france'
    swapped for 'italy', and ' located' (4.96 %, its gap over ' a' 1.46) was proposed before
    ' Paris' (3.4 %, 4.21): the model's order among answers under 5 % says little, the gap says
    which the swapped word decides. Answers it predicts keep its order whatever their gaps."""
    from circuitviz.measure.task_validity import preferred_task

    answers = (" the", " a", " located", " f", " Paris")
    tasks = [PromptTask("p", "q", answer, (" x",)) for answer in answers]
    barely = [False, False, True, True, True]
    assert preferred_task(tasks, [0.2, 0.3, 1.46, None, 4.21], barely) == 4
    assert preferred_task(tasks, [0.2, 0.3, 1.46, None, 0.5], barely) == 2  # ' Paris' fails: ' located'
    likely = [False] * 5  # none barely predicted: the model's order among content words, as before
    assert preferred_task(tasks, [0.2, 0.3, 1.46, None, 4.21], likely) == 2
