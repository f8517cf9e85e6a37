"""ACC++'s count (``methods.acc_cost``): the work a run does, as a range where it depends on what
the run finds. The count of 2026-12-01 gave every run ``max_decisions`` (200) decisions and 8
passes a knockout draw, one figure: on the IOI prompt a run traced 28 (Gemma-3-270M) and 52
(SmolLM2-135M) decisions and its knockout ran 13 sequences of about 1.2 passes, so the estimate
was 2.3-4.9 times the run."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.core import pass_weights
from circuitviz.core.pass_weights import PREPARE_PASSES, curve_passes
from circuitviz.core.tasks import PromptTask
from circuitviz.methods import get_method
from circuitviz.methods.acc_cost import KNOCKOUT_ROW_PASSES, acc_passes, decision_bound

ACC = get_method("acc++")
GEMMA = SimpleNamespace(n_layers=18, n_heads=4, n_edges=10_342, d_model=640)  # Gemma-3-270M's graph
SMOLLM2 = SimpleNamespace(n_layers=30, n_heads=9, n_edges=123_211, d_model=576)


def cost(settings=None, n_tokens=15, n_budgets=4, spec=GEMMA):
    return ACC.estimate(ACC.make_config(settings), spec, n_tokens, n_budgets)


def test_the_estimate_is_a_range_from_no_decision_to_the_bound():
    """The decisions a run traces are what it finds: none where no seed is a head's decision, at
    most ``max_decisions``; both ends are said, with why."""
    whole = cost()
    low, high = whole.passes_range
    assert low == pytest.approx(acc_passes(0, 0, 1, corrupted=True, n_tokens=15, spec=GEMMA))
    assert high == pytest.approx(acc_passes(200, 5, 5, corrupted=True, n_tokens=15, spec=GEMMA))
    assert whole.passes == pytest.approx(high)  # a limit never lets a run through on its low end
    assert "none to 200" in whole.range_reason
    assert cost({"max_decisions": 20}).passes_range[0] == pytest.approx(low)  # no decision at its low end
    assert cost({"max_decisions": 20}).passes_range[1] < high


@pytest.mark.parametrize(
    ("spec", "decisions", "measured"), [(GEMMA, 28, 49.3), (SMOLLM2, 52, 70.9)], ids=["gemma", "smollm2"]
)
def test_the_ioi_runs_measured_lie_inside_the_range_and_near_their_own_count(spec, decisions, measured):
    """The IOI prompt's runs (15 tokens, 5 draws, 5 distinct circuits) traced 28 decisions on
    Gemma-3-270M and took 49.3 passes of the EAP-IG run the estimate is priced from, 52 and 70.9 on
    SmolLM2-135M; the count said 145.6 and 149.8, every run the same."""
    low, high = cost(spec=spec).passes_range
    done = acc_passes(decisions, 5, 5, corrupted=True, n_tokens=15, spec=spec)
    assert low < measured < high and low < done < high
    assert done == pytest.approx(measured, rel=0.25)


def test_a_knockout_draw_is_one_sequence_not_eight_passes():
    """A random draw of the knockout is one more sequence of its batched forward pass (1.2 passes
    measured); the count gave each draw 8 passes (48 at the default 5 draws)."""
    with_draws, without = cost({"n_random": 5}).passes_range[1], cost({"n_random": 0}).passes_range[1]
    assert with_draws - without == pytest.approx(5 * KNOCKOUT_ROW_PASSES)


def test_a_decision_costs_the_same_seconds_at_any_length():
    """A decision's work does not grow with the prompt's passes: 34 ms at 15 tokens and 35 ms at 32
    on Gemma-3-270M, so its passes shrink as the prompt's pass grows."""
    per_decision = [
        acc_passes(1, 0, 1, corrupted=False, n_tokens=n, spec=GEMMA)
        - acc_passes(0, 0, 1, corrupted=False, n_tokens=n, spec=GEMMA)
        for n in (15, 30)
    ]
    assert per_decision[0] == pytest.approx(2 * per_decision[1])
    assert per_decision[0] == pytest.approx(0.5, rel=0.01)  # 0.49 measured at 15 tokens


def test_the_bound_follows_the_prompts_length_the_threshold_and_the_depth():
    """A head's row at destination d holds at most n_sources / k weights of at least k / n_sources;
    at ``max_depth`` 1 only the seeds are traced."""
    config = ACC.make_config(None)
    assert decision_bound(config, GEMMA, 1) == 0  # one position: no decision anywhere
    assert decision_bound(config, GEMMA, 3) == 72 * 2  # 2 and 3 sources: one weight of 1 and of 2/3
    assert decision_bound(ACC.make_config({"k": 3.0}), GEMMA, 3) == 72  # 3 sources at 1/1, none at 2
    assert decision_bound(config, GEMMA, 15) == 200  # max_decisions
    assert decision_bound(ACC.make_config({"max_depth": 1}), GEMMA, 15) == 10  # direct_top_k
    assert "none to 144" in cost(n_tokens=3).range_reason


def test_without_a_corrupted_prompt_no_evaluator_or_patching_curve_is_counted():
    """The knockout is then the curve; with one, the evaluator's runs (read back when kept) and
    the patching curve of each distinct circuit."""
    model = tiny_model("gpt2", n_layers=1, n_heads=2)
    spec = SimpleNamespace(n_layers=1, n_heads=2, n_edges=10, d_model=16)
    config = ACC.make_config(None)
    bare = PromptTask(clean=IOI_TASK.clean, corrupted="", answer=IOI_TASK.answer, foils=IOI_TASK.foils)
    without = ACC.estimate_for_task(model, bare, config, spec, 15, 4)
    with_one = ACC.estimate_for_task(model, IOI_TASK, config, spec, 15, 4)
    assert without.prompt_passes == 0 and with_one.prompt_passes == PREPARE_PASSES
    assert with_one.passes - without.passes == pytest.approx(PREPARE_PASSES + curve_passes(5, spec))


def test_a_finished_run_counts_what_it_traced(monkeypatch, tmp_path):
    """The run's record holds the decisions it traced, its draws and its distinct circuits
    (``passes_done``), inside the estimate's range, so a run that traced few does not price the
    next one's high end cheap."""
    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path))
    model = tiny_model("gpt2", n_layers=2, n_heads=2)
    result = ACC.run_on(model, IOI_TASK, {"k": 1.0}, budgets=(2, 5))
    details = result.details
    n_tokens = len(details.tokens)
    circuits = len({point["n_edges"] for point in details.faithfulness["knockout_curve"]})
    done = ACC.passes_done(result)
    assert details.decisions and done == pytest.approx(
        acc_passes(
            len(details.decisions),
            details.faithfulness["knockout"]["n_random_draws"],
            circuits,
            corrupted=True,
            n_tokens=n_tokens,
            spec=result.graph,
        )
    )
    low, high = ACC.estimate(ACC.make_config({"k": 1.0}), result.graph, n_tokens, 2).passes_range
    assert low <= done <= high


def test_weights_version_moved_with_the_count():
    """ACC++'s runs recorded with version 6 were counted 145.6 passes on the IOI prompt, about
    three times the count of the same work now: they are left out."""
    assert pass_weights.WEIGHTS_VERSION == 7
