"""Session 48's pass counts: Best-of-N and paraphrase pruning score their pairs in one batched
gradient pass, which pays its set-up once a chunk the device's memory cuts it into, not once a pair;
flow routes' observed pass costs what the graph's shape makes it, not one figure on both embedded
models."""

from __future__ import annotations

import pytest

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.core import pass_weights
from circuitviz.core.graph import GraphSpec
from circuitviz.engine.memory import gradient_bytes_per_position
from circuitviz.entry.limits import estimate_request
from circuitviz.measure.chunks import chunk_size
from circuitviz.measure.evaluate import forget_prompt_runs
from circuitviz.methods import flow_routes, get_method
from circuitviz.methods.bon import PARAPHRASE_CHECK_PASSES, paraphrases_asked, paraphrases_scored
from circuitviz.methods.scoring import shares_gradient_passes, tasks_scoring_cost
from circuitviz.models.devices import WORKING_MEMORY_ENV

GEMMA = GraphSpec(n_layers=18, n_heads=4, d_model=640)  # Gemma-3-270M's graph
SMOLLM2 = GraphSpec(n_layers=30, n_heads=9, d_model=576)  # SmolLM2-135M's
SETUP = pass_weights.GRADIENT_SETUP_PASSES


@pytest.fixture(scope="module")
def tiny():
    return tiny_model("gpt2", n_layers=1, n_heads=2)


@pytest.mark.parametrize(("spec", "measured"), [(GEMMA, (4.14, 6.1)), (SMOLLM2, (5.9, 7.55))])
def test_flow_routes_observed_pass_follows_the_graphs_shape(spec, measured):
    """Measured at 15 tokens in two sessions (today's and session 47's medians, one thread):
    Gemma-3-270M 4.1 and 6.1 plain passes, SmolLM2-135M 5.9 and 7.1-8.0; counted 6.5 on both, the
    figure of one session's runs. Each model's count is the mean of its two, within 5 %."""
    assert flow_routes.observed_passes(spec) == pytest.approx(sum(measured) / 2, rel=0.05)
    cost = get_method("flow-routes").estimate(get_method("flow-routes").default_config(), spec, 15, 4)
    assert cost.passes == pytest.approx(
        flow_routes.observed_passes(spec) + pass_weights.PREPARE_PASSES + pass_weights.curve_passes(4, spec)
    )


def test_flow_routes_without_the_graphs_shape_is_counted_as_gemmas():
    assert flow_routes.observed_passes(None) == flow_routes.OBSERVED_PASSES
    assert flow_routes.observed_passes(GEMMA) == pytest.approx(flow_routes.OBSERVED_PASSES, rel=0.02)
    assert flow_routes.share_rows(GEMMA) == 1729 and flow_routes.share_rows(SMOLLM2) == 9331


@pytest.mark.parametrize("spec", [GEMMA, SMOLLM2])
def test_best_of_n_counts_one_set_up_for_its_pairs_gradient_pass(spec):
    """Ten pairs of 20 IG steps were counted ten set-ups (the base method's cost a pair) and no chunk:
    the run scores them as one batched gradient pass of 200 rows."""
    method = get_method("bon")
    config = method.default_config()
    pairs = paraphrases_scored(config) + 1
    per_pair = get_method("eap-ig").estimate(get_method("eap-ig").make_config({"ig_steps": 20}), spec, 15, 0)
    cost = method.estimate(config, spec, 15, 4)
    assert cost.gradient_rows == pairs * int(config.ig_steps) == 200
    checks = PARAPHRASE_CHECK_PASSES * paraphrases_asked(config)
    before = per_pair.passes * pairs + 2.0 * 4 * pairs + 4 + checks
    assert cost.passes == pytest.approx(before - SETUP * (pairs - 1))


def test_a_scorer_that_goes_pair_by_pair_pays_a_set_up_and_chunks_a_pair():
    """EAP-IG over activations has no shared passes: each pair is a gradient pass of its own."""
    base = get_method("eap-ig-activations")
    assert not shares_gradient_passes(base)
    assert shares_gradient_passes(get_method("eap-ig")) and shares_gradient_passes(get_method("eap"))
    per_task = base.estimate(base.default_config(), GEMMA, 15, 0)
    passes, rows = tasks_scoring_cost(base, per_task, 3, 3.0)
    assert passes == pytest.approx(3 * per_task.passes)
    assert rows == (per_task.gradient_rows,) * 3
    assert tasks_scoring_cost(base, per_task, 0, 0.0) == (0.0, 0)


@pytest.mark.parametrize(
    ("method", "config", "rows"),
    [
        ("bon", {"n_paraphrases": 3, "ig_steps": 10}, 40),  # the prompt and three pairs, 10 steps each
        ("paraphrase-pruning", {"n_paraphrases": 4, "ig_steps": 5}, 15),  # the prompt and two fitted
    ],
)
def test_the_pairs_gradient_pass_counts_its_chunks(tiny, monkeypatch, method, config, rows):
    """Where the device's memory cuts the pairs' rows into chunks, each chunk pays the set-up again
    (``limits.gradient_chunk_passes``): before, the pairs' chunks were not counted at all."""
    forget_prompt_runs(tiny)
    cost = get_method(method).estimate(get_method(method).make_config(config), GEMMA, 15, 1)
    assert cost.gradient_rows == rows
    whole = estimate_request(tiny, IOI_TASK, method, config, n_budgets=1)
    monkeypatch.setenv(WORKING_MEMORY_ENV, "0.000001")  # a chunk of a row or a few
    n_tokens = whole.n_tokens
    size = chunk_size(tiny, "gradient", n_tokens, gradient_bytes_per_position(tiny, n_tokens))
    chunks = -(-rows // size)
    assert chunks > 1
    cut = estimate_request(tiny, IOI_TASK, method, config, n_budgets=1)
    assert cut.sequences == pytest.approx(whole.sequences + (chunks - 1) * SETUP)
    assert cut.beside_count == pytest.approx((chunks - 1) * SETUP)


def test_weights_version_moved_with_the_counts():
    """Runs recorded with version 5 counted flow routes 6.5 and a set-up a pair: left out."""
    assert pass_weights.WEIGHTS_VERSION >= 6  # 7: ACC++ counted anew (test_acc_cost.py)
