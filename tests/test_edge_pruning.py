"""Edge Pruning and the engine's differentiable patching, against the boolean evaluator, finite
differences, planted circuits and brute-force recomputation."""

from __future__ import annotations

import pytest
import torch

from circuitviz.bench.planted_benchmark import default_cases
from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.core.graph import GraphSpec, prune, top_n_at_budgets
from circuitviz.core.results import CircuitResult
from circuitviz.core.tasks import prepare_task
from circuitviz.engine.metric import metric_from_residual
from circuitviz.engine.patching import masked_residual
from circuitviz.entry.api import evaluate_circuits
from circuitviz.measure.evaluate import Evaluator
from circuitviz.methods import get_method
from circuitviz.methods.edge_pruning import EdgePruningDetails
from circuitviz.methods.mask_learning import (
    MASKED_FORWARD_PASSES,
    MASKED_STEP_PASSES,
    initial_logits,
    top_counts,
)

SHAPES = ("gpt2", "gemma", "llama")
BUDGETS = [3, 8, 20, 60]


def _setup(shape: str, seed: int = 0):
    model = tiny_model(shape, seed=seed)
    spec = GraphSpec.from_model(model)
    prepared = prepare_task(model, IOI_TASK)
    return model, spec, prepared, Evaluator(model, spec, prepared)


def _masked_metric(model, spec, prepared, evaluator, keep: torch.Tensor) -> torch.Tensor:
    residual = masked_residual(
        model, spec, prepared, evaluator.corrupted_writers, keep, evaluator.corrupted_raw
    )
    return metric_from_residual(model, prepared, residual)


@pytest.mark.parametrize("shape", SHAPES)
def test_a_0_1_mask_runs_the_boolean_evaluation(shape):
    model, spec, prepared, evaluator = _setup(shape)
    generator = torch.Generator().manual_seed(3)
    shape = (5, spec.n_forward, spec.n_backward)
    circuits = (torch.rand(shape, generator=generator, device="cpu") < 0.4) & spec.edge_mask
    circuits[0] = spec.edge_mask  # the whole model and the empty circuit too
    circuits[1] = False
    boolean = evaluator.metrics(circuits)
    relaxed = _masked_metric(model, spec, prepared, evaluator, circuits.double())
    assert torch.allclose(boolean, relaxed.detach(), rtol=0, atol=1e-12)  # float64 rounding
    assert boolean[0].item() == pytest.approx(evaluator.baseline.clean, abs=1e-9)


@pytest.mark.parametrize("shape", SHAPES)
def test_the_mask_gradient_is_the_derivative_of_the_metric(shape):
    """At a fractional mask, against central finite differences of the same function, on edges
    into a query, a key, a value, an MLP and the logits (writers changed upstream included)."""
    model, spec, prepared, evaluator = _setup(shape, seed=1)
    generator = torch.Generator().manual_seed(0)
    shape = (1, spec.n_forward, spec.n_backward)
    keep = torch.rand(shape, generator=generator, device="cpu", dtype=torch.float64)
    keep.requires_grad_(True)
    (gradient,) = torch.autograd.grad(_masked_metric(model, spec, prepared, evaluator, keep).sum(), keep)
    assert gradient[0][~spec.edge_mask].abs().max().item() == 0.0  # off-graph entries are ignored
    step = 1e-6
    for name in ["input->a1.h0<q>", "a0.h1->a1.h1<k>", "m0->a1.h0<v>", "a0.h0->m1", "m1->logits"]:
        place = (0, *spec.edge_position(name))
        shift = torch.zeros_like(keep)
        shift[place] = step
        with torch.no_grad():
            up = _masked_metric(model, spec, prepared, evaluator, keep + shift)
            down = _masked_metric(model, spec, prepared, evaluator, keep - shift)
        numeric = ((up - down) / (2 * step)).item()
        assert gradient[place].item() == pytest.approx(numeric, rel=1e-5, abs=1e-8), name


@pytest.mark.parametrize("shape", SHAPES)
def test_the_unchanged_prefix_runs_once_and_changes_nothing(shape, monkeypatch):
    """The positions before the first corrupted token run from a cache: the metric and its
    gradient at a fractional mask are those of the whole prompt run with every position."""
    from circuitviz.engine import prefix as engine_prefix

    model, spec, prepared, evaluator = _setup(shape, seed=2)
    prefix = engine_prefix.unchanged_prefix(prepared)
    differ = (prepared.clean_tokens[0] != prepared.corrupted_tokens[0]).tolist()
    assert 0 < prefix < prepared.n_positions and differ.index(True) == prefix and not any(differ[:prefix])
    generator = torch.Generator().manual_seed(1)
    shape = (2, spec.n_forward, spec.n_backward)
    keep = torch.rand(shape, generator=generator, device="cpu", dtype=torch.float64)

    def metric_and_gradient():
        mask = keep.clone().requires_grad_(True)
        metric = _masked_metric(model, spec, prepared, evaluator, mask)
        (gradient,) = torch.autograd.grad(metric.sum(), mask)
        return metric.detach(), gradient

    cached = metric_and_gradient()
    monkeypatch.setattr(engine_prefix, "unchanged_prefix", lambda prepared: 0)
    whole = metric_and_gradient()
    assert torch.allclose(cached[0], whole[0], rtol=0, atol=1e-12)
    assert torch.allclose(cached[1], whole[1], rtol=0, atol=1e-12)


def test_step_zero_is_the_warm_start_top_n():
    spec = GraphSpec(n_layers=2, n_heads=2)
    generator = torch.Generator().manual_seed(0)
    scores = torch.randn(spec.n_forward, spec.n_backward, generator=generator, device="cpu") * spec.edge_mask
    scores[0, :5] = 0.0  # zero scores tie at the bottom, in graph order, as top-N breaks ties
    forward, backward = spec.edge_index
    counts = [1, 7, 30, spec.n_edges - 1]
    logits = initial_logits(scores[forward, backward], counts)
    hard, thresholds = top_counts(logits, torch.tensor(counts, device=logits.device))
    expected = top_n_at_budgets(spec, scores, counts)[:, forward, backward]
    assert torch.equal(hard.bool(), expected)
    assert hard.sum(1).tolist() == counts
    inside = torch.where(hard.bool(), logits, torch.inf).amin(1)
    outside = torch.where(hard.bool(), -torch.inf, logits).amax(1)
    assert bool(((outside <= thresholds[:, 0]) & (thresholds[:, 0] <= inside)).all())


@pytest.mark.parametrize("shape", SHAPES)
def test_learned_circuits_are_never_less_faithful_than_the_warm_start(shape):
    model = tiny_model(shape, seed=0)
    warm = get_method("eap-ig").run_on(model, IOI_TASK, budgets=BUDGETS)
    learned = get_method("edge-pruning").run_on(model, IOI_TASK, {"steps": 25}, budgets=BUDGETS)
    spec = learned.graph
    gained = 0.0
    for budget in BUDGETS:
        circuit = learned.circuit(budget)
        assert int(circuit.sum()) <= budget and torch.equal(prune(spec, circuit), circuit)
        assert learned.point(budget).ndf >= warm.point(budget).ndf - 1e-9
        gained = max(gained, learned.point(budget).ndf - warm.point(budget).ndf)
        # measured like every circuit: the curve's point is the shared evaluation of that circuit
        _, (again,) = evaluate_circuits(model, IOI_TASK, [circuit])
        assert again.metric == pytest.approx(learned.point(budget).metric, abs=1e-9)
    assert gained > 0.1  # it learns: some budget's circuit is clearly more faithful
    rows = {row["budget"]: row for row in learned.details.budgets}
    assert rows[8]["warm_ndf"] == pytest.approx(warm.point(8).ndf, abs=1e-9)  # step 0 is the warm start


def test_a_planted_circuit_at_its_size_is_found_with_no_edge_outside_it():
    """Case 5 of the planted benchmark: EAP-IG scores three of its edges exactly 0 (saturated
    attention), so the gradient cannot find them either; what the mask keeps is all planted."""
    case = default_cases(20, 0)[5]
    planted = case.build()
    size = int(planted.true_edges.sum())
    result = get_method("edge-pruning").run_on(planted.model, planted.task, {"steps": 10}, budgets=[size])
    circuit = result.circuit(size)
    assert not bool((circuit & ~planted.true_edges).any())
    assert result.details.circuit_edges == result.graph.edge_names_of(circuit)
    small = default_cases(20, 0)[1]  # a case whose warm start is already the planted circuit
    planted = small.build()
    size = int(planted.true_edges.sum())
    result = get_method("edge-pruning").run_on(planted.model, planted.task, budgets=[size])
    assert torch.equal(result.circuit(size), planted.true_edges)
    assert result.curve[0].ndf == pytest.approx(1.0, abs=1e-9)
    assert result.details.steps_run == 1  # NDF 1 at step 0 stops the learning


def test_progress_every_step_and_a_cost_that_counts_the_steps():
    from circuitviz.entry.limits import estimate_run

    model = tiny_model("gpt2", seed=2)
    seen: list[tuple[str, float]] = []
    result = get_method("edge-pruning").run_on(
        model, IOI_TASK, {"steps": 6}, budgets=[8, 20], progress=lambda phase, f: seen.append((phase, f))
    )
    steps = [f for phase, f in seen if phase == "learning masks"]
    assert steps == sorted(steps)  # every step reported, and on a CPU its paced chunks too
    ends = {round(min(1.0, (step + 1) / 6), 9) for step in range(result.details.steps_run)}
    assert ends <= {round(f, 9) for f in steps} and max(steps) == max(ends)
    few = estimate_run(model, "edge-pruning", {"steps": 10}, n_tokens=15, n_budgets=4)
    many = estimate_run(model, "edge-pruning", {"steps": 40}, n_tokens=15, n_budgets=4)
    assert many.sequences - few.sequences == pytest.approx(MASKED_STEP_PASSES * 30 * 4)
    assert few.ig_steps == 20  # the warm start's IG steps, priced and limited like EAP-IG's


def test_the_price_counts_every_masked_pass_the_learning_runs(monkeypatch):
    """Every step runs each mask forward and backward, and the last step forward only: the
    price counts exactly those rows at their measured weights (no budget stops early here)."""
    from circuitviz.methods import edge_pruning, mask_learning

    rows = {True: 0, False: 0}  # masks run with a gradient / forward only
    counted = mask_learning.masked_residual

    def counting(model, spec, prepared, writers, keep, raw=None, prefix=None, check=None, frozen=None):
        rows[torch.is_grad_enabled() and keep.requires_grad] += keep.shape[0]
        return counted(model, spec, prepared, writers, keep, raw, prefix, check, frozen)

    monkeypatch.setattr(mask_learning, "masked_residual", counting)
    monkeypatch.setattr(mask_learning, "TOLERANCE", -1.0)  # every budget learns every step
    model = tiny_model("gemma", seed=1)
    steps, budgets = 3, [3, 8, 20]  # each below the whole graph: each learns a mask
    get_method("edge-pruning").run_on(model, IOI_TASK, {"steps": steps}, budgets=budgets)
    assert rows == {True: steps * len(budgets), False: len(budgets)}
    spec = GraphSpec.from_model(model)
    method = get_method("edge-pruning")
    config = method.make_config({"steps": steps})
    with_learning = method.estimate(config, spec, 15, len(budgets)).passes
    priced = with_learning - method.estimate(method.make_config({"steps": 0}), spec, 15, len(budgets)).passes
    # the difference between 3 steps and none: the forward and backward rows; the last forward is in both
    assert priced == pytest.approx(MASKED_STEP_PASSES * rows[True])
    assert edge_pruning.learning_passes(steps, len(budgets)) == pytest.approx(
        MASKED_STEP_PASSES * rows[True] + MASKED_FORWARD_PASSES * rows[False]
    )


def test_the_result_survives_the_store_and_reports_its_learning(tmp_path):
    from circuitviz.entry.api import discover
    from circuitviz.services.store import ResultStore

    model = tiny_model("llama", seed=1)
    store = ResultStore(tmp_path)
    result, cached = discover(model, IOI_TASK, "edge-pruning", {"steps": 5}, budgets=[8, 20], store=store)
    again, cached_again = discover(
        model, IOI_TASK, "edge-pruning", {"steps": 5}, budgets=[8, 20], store=store
    )
    assert (cached, cached_again) == (False, True)
    assert isinstance(again.details, EdgePruningDetails)
    assert again.details.to_dict() == result.details.to_dict()
    restored = CircuitResult.from_state(result.to_state())
    for budget in (8, 20):
        assert torch.equal(restored.circuit(budget), result.circuit(budget))
    lines = result.details.report_lines(result)
    assert lines[0].startswith("Edge Pruning from eap-ig") and len(lines) >= 3


def test_paraphrase_ndf_is_each_circuit_measured_on_each_paraphrase():
    from circuitviz.methods.paraphrase_pairs import template_tasks

    model = tiny_model("gpt2", seed=0)
    config = {"steps": 5, "check_paraphrases": 3}
    result = get_method("edge-pruning").run_on(model, IOI_TASK, config, budgets=[8, 20])
    tasks, _ = template_tasks(model, IOI_TASK, 3, 0)
    assert result.details.paraphrases == [task.clean for task in tasks] and tasks
    for budget in (8, 20):
        values = result.details.paraphrase_ndf[str(budget)]
        for task, value in zip(tasks, values):
            _, (point,) = evaluate_circuits(model, task, [result.circuit(budget)])
            assert value == pytest.approx(point.ndf, abs=1e-9)


def test_bad_settings_are_refused_in_one_sentence():
    method = get_method("edge-pruning")
    for values, words in (
        ({"steps": -1}, "steps must be"),
        ({"temperature": 0.0}, "temperature must be above 0"),
        ({"learning_rate": 0}, "learning_rate must be above 0"),
    ):
        with pytest.raises(ValueError, match=words):
            method.make_config(values)
    with pytest.raises(ValueError, match="warm_start must be a method that scores edges"):
        method.run_on(tiny_model("gpt2"), IOI_TASK, {"warm_start": "acc++"}, budgets=[5])


def test_the_straight_through_mask_is_the_hard_mask_exactly_with_the_soft_gradient():
    """In float32 hard + soft - soft.detach() read 0.99999994 for a kept edge, and the exact
    evaluator then renormalised every all-kept reader as a mixed one."""
    from circuitviz.methods.mask_learning import straight_through

    generator = torch.Generator(device="cpu").manual_seed(0)
    theta = torch.randn(4, 500, generator=generator, device="cpu", dtype=torch.float32).requires_grad_()
    soft = torch.sigmoid(theta)
    hard = (theta.detach() > 0.3).to(torch.float32)
    kept = straight_through(hard, soft)
    assert torch.equal(kept, hard)
    assert not torch.equal(hard + soft - soft.detach(), hard)  # the old form, off by rounding
    (gradient,) = torch.autograd.grad(kept.sum(), theta, retain_graph=True)
    (expected,) = torch.autograd.grad(soft.sum(), theta)
    assert torch.equal(gradient, expected)


def test_the_estimate_is_a_range_and_a_run_stopped_early_is_priced_as_it_ran(monkeypatch):
    """Priced at 'about 4 min' for 20 steps of every mask, Edge Pruning on a 9-token prompt its warm
    start already explained took 72 s (Gemma-3-270M; SmolLM2-135M: 2 min against 34 s): its masks
    stop at the tolerance. The estimate says the range and why, and a finished run calibrates the
    rate with the passes it took, not the most it could."""
    from circuitviz.entry.limits import estimate_run
    from circuitviz.methods import mask_learning

    model = tiny_model("gemma", seed=1)
    method = get_method("edge-pruning")
    spec = GraphSpec.from_model(model)
    config = method.make_config({"steps": 3})
    budgets = [3, 8, 20]
    cost = method.estimate(config, spec, 15, len(budgets))
    least, most = cost.passes_range
    assert most == cost.passes and least == pytest.approx(most - MASKED_STEP_PASSES * 3 * len(budgets))
    said = estimate_run(model, "edge-pruning", {"steps": 3}, n_tokens=15, n_budgets=3).summary()
    assert " to " in said and "stops learning a budget's mask once its circuit is faithful enough" in said
    monkeypatch.setattr(mask_learning, "TOLERANCE", -1.0)  # every budget learns every step: the most
    full = method.run_on(model, IOI_TASK, {"steps": 3}, budgets=budgets)
    n_tokens = len(full.tokens["clean"])
    assert method.passes_done(full) == pytest.approx(method.estimate(config, spec, n_tokens, 3).passes)
    monkeypatch.setattr(mask_learning, "TOLERANCE", 10.0)  # every budget stops at its first pass
    early = method.run_on(model, IOI_TASK, {"steps": 3}, budgets=budgets)
    assert early.details.steps_run == 1
    assert method.passes_done(early) == pytest.approx(
        method.estimate(config, spec, n_tokens, 3).passes_range[0]
    )


def test_warm_start_logits_stay_finite_under_a_score_at_float32s_smallest():
    """A normalised warm start on a planted model held a score of 7e-45 (float32's subnormal
    range): the floor for zero-scored edges, five e-folds below it, was 0 in float32, their logits
    -inf, and paraphrase pruning's learning made every edge NaN and its circuit empty."""
    values = torch.tensor([0.6, 0.4, 7e-45, 0.0, 0.0], dtype=torch.float32, device="cpu")
    logits = initial_logits(values, [2, 3])
    assert logits.dtype == torch.float32 and bool(torch.isfinite(logits).all()), logits
    assert logits[1, 3] < logits[1, 2] < logits[1, 1]  # a zero below the smallest score, still ranked


def test_an_ordinary_warm_start_keeps_its_float32_logits_to_the_bit():
    """The float64 way out is taken only where float32's floor underflows: every other warm start
    keeps the logits (and so the learned circuits) it had."""
    import math

    from circuitviz.methods import mask_learning

    values = torch.randn(500, generator=torch.Generator().manual_seed(3), device="cpu")
    values[::7] = 0.0
    size = values.abs()
    floor = float(size[size > 0].min()) * math.exp(-mask_learning._ZERO_LOGIT_GAP)
    logs = torch.log(size.clamp_min(floor))
    ordered = torch.sort(logs, descending=True).values
    expected = logs[None, :] - torch.stack([ordered[n - 1] for n in (10, 50)])[:, None]
    assert torch.equal(initial_logits(values, [10, 50]), expected)


def test_paraphrase_pruning_finds_the_planted_circuit_its_scores_start_with():
    """Seed 90817's case 3: the prompt alone fits (no template paraphrase is valid), its scores hold
    a 7e-45, and the default warm start gave an empty circuit where Edge Pruning's is exact."""
    planted = default_cases(4, 90817)[3].build()
    n_true = int(planted.true_edges.sum())
    method = get_method("paraphrase-pruning")
    result = method.run_on(planted.model, planted.task, method.default_config(), budgets=[n_true])
    assert bool(torch.isfinite(result.scores).all())
    assert torch.equal(result.circuit(n_true).cpu(), planted.true_edges.cpu())


def test_the_report_counts_the_edges_the_circuit_kept_not_its_budget():
    """Edge Pruning's line read "103 edges: NDF 0.321 (warm start) -> 0.992" for a 91-edge circuit
    beside a table whose "edges kept" said 91 (a reviewer's prompt of our own, 2026-12-07)."""
    from circuitviz.details.edge_pruning import EdgePruningDetails

    row = {"budget": 103, "edges": 91, "warm_ndf": 0.321, "ndf": 0.992, "best_step": 6, "steps": 7}
    lines = EdgePruningDetails(steps_run=7, budgets=[row]).report_lines(None)
    assert lines[1] == "  budget 103, 91 edges: NDF 0.321 (warm start) -> 0.992 at step 6"
    full = EdgePruningDetails(steps_run=7, budgets=[{**row, "edges": 103}]).report_lines(None)
    assert full[1].startswith("  103 edges: NDF 0.321")
