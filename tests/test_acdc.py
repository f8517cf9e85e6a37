"""ACDC against ground truth: the plain one-edge-at-a-time walk written from the paper's algorithm,
exact patching of single edges, and planted circuits."""

from __future__ import annotations

import pytest
import torch

from circuitviz.bench.planted_benchmark import default_cases
from circuitviz.bench.toy_models import IOI_TASK, planted_model, tiny_model
from circuitviz.core.graph import GraphSpec
from circuitviz.core.tasks import prepare_task
from circuitviz.measure.evaluate import Evaluator
from circuitviz.methods import get_method
from circuitviz.methods.acdc import ACDCConfig, acdc_walk

SHAPES = ("gpt2", "gemma", "llama")


def covering(pairs, fast):
    """The (shape, value) cross product, the ``fast`` pairs in the fast set and the rest marked
    slow: each shape and each value meets the fast set once, every pair runs in ``make test``."""
    assert {a for a, _ in fast} == {a for a, _ in pairs} and {b for _, b in fast} == {b for _, b in pairs}
    return [
        pytest.param(
            *pair,
            marks=[] if pair in fast else [pytest.mark.slow],
            id="-".join(str(value).removeprefix("torch.") for value in pair),
        )
        for pair in pairs
    ]


def _reference_walk(evaluator: Evaluator, spec: GraphSpec, tau: float):
    """ACDC as the paper writes it: receivers from the output backwards, each parent tried alone
    against the current circuit, one patched run per try; a receiver whose node feeds nothing
    kept is skipped. (kept edges, {edge: change when tried})"""
    state = spec.edge_mask.clone()
    current = evaluator.metrics(state[None])[0].item()
    changes = {}
    readers = list(range(spec.n_backward))
    for reader in sorted(readers, reverse=True):
        node = int(spec.backward_to_forward[reader])
        if node >= 0 and not state[node].any():
            state[:, reader] = False
            continue
        for parent in sorted(spec.edge_mask[:, reader].nonzero()[:, 0].tolist(), reverse=True):
            trial = state.clone()
            trial[parent, reader] = False
            value = evaluator.metrics(trial[None])[0].item()
            changes[(parent, reader)] = value - current
            if abs(value - current) < tau:
                state = trial
                current = value
    return state, changes


@pytest.mark.parametrize(
    "shape, max_batch",
    covering(
        [(shape, size) for size in (1, 4, 32) for shape in SHAPES],
        fast={("gemma", 32), ("gpt2", 4), ("llama", 1)},  # Gemma's exact norms under speculation
    ),
)
def test_the_batched_walk_makes_the_one_at_a_time_walks_decisions(shape, max_batch):
    model = tiny_model(shape, seed=1)
    spec = GraphSpec.from_model(model)
    evaluator = Evaluator(model, spec, prepare_task(model, IOI_TASK))
    tau = 0.02 * abs(evaluator.baseline.clean - evaluator.baseline.corrupted)
    expected, changes = _reference_walk(evaluator, spec, tau)
    kept, scores, counts = acdc_walk(evaluator, spec, tau, max_batch)
    assert torch.equal(kept, expected)
    assert 0 < int(kept.sum()) < spec.n_edges  # the walk both kept and removed edges
    assert counts.tested == len(changes)
    tested = torch.zeros_like(kept)
    for (parent, reader), change in changes.items():
        tested[parent, reader] = True
        assert scores[parent, reader].item() == pytest.approx(change, abs=1e-9)
    assert not scores[~tested].any()  # edges removed untested score 0
    # the kept edges are those with |score| >= tau: top-N at the circuit's size is the circuit
    assert torch.equal(kept, (scores.abs() >= tau) & spec.edge_mask)
    if max_batch > 1:
        assert counts.passes < counts.rows  # speculation put several circuits in one pass


@pytest.mark.parametrize(
    "shape, guess",
    covering(
        [(shape, guess) for guess in ("none", "random", "wrong", "right") for shape in ("gpt2", "gemma")],
        fast={("gemma", "wrong"), ("gpt2", "random"), ("gemma", "right"), ("gpt2", "none")},
    ),
)
def test_the_guess_changes_the_rows_never_the_decisions(shape, guess):
    """Each pass's rows build on a guess of the earlier edges' decisions (kept ones left in); the
    walk keeps the one-at-a-time walk's decisions and changes whatever the guess is: every edge
    guessed removed (the walk before the guess), a random guess, the opposite of every decision,
    and the decisions themselves (then no row is stale: one row per tested edge). After a wrong
    guess the pass's later rows give the next guesses, so only the first guesses are these."""
    model = tiny_model(shape, seed=1)
    spec = GraphSpec.from_model(model)
    evaluator = Evaluator(model, spec, prepare_task(model, IOI_TASK))
    tau = 0.02 * abs(evaluator.baseline.clean - evaluator.baseline.corrupted)
    expected, changes = _reference_walk(evaluator, spec, tau)
    generator = torch.Generator().manual_seed(3)
    guesses = {
        "none": torch.zeros_like(expected, device=expected.device),
        "random": torch.rand(expected.shape, generator=generator, device="cpu") < 0.5,
        "wrong": ~expected,
        "right": expected.clone(),
    }
    kept, scores, counts = acdc_walk(evaluator, spec, tau, 8, guess=guesses[guess])
    assert torch.equal(kept, expected)
    assert counts.tested == len(changes)
    for (parent, reader), change in changes.items():
        assert scores[parent, reader].item() == pytest.approx(change, abs=1e-9)
    if guess == "right":
        assert counts.mispredicted == 0 and counts.rows == counts.tested
    if guess == "wrong":
        assert counts.mispredicted > 0 and counts.rows > counts.tested


@pytest.mark.parametrize("shape", ["gpt2", "llama"])
def test_the_guess_from_the_whole_model_is_eap(shape):
    """The walk's guess is the gradient of the metric in each edge's kept share at the current
    circuit; at the whole model that is EAP's score (one gradient at the clean run) in size, so
    the first block's guess is EAP's against tau. (On Gemma's shared post-attention norm the
    gradient also goes through each reader's renormalisation, which EAP's does not.)"""
    from circuitviz.engine.scores import batched_gradient_scores
    from circuitviz.methods.acdc import attribution_guess

    model = tiny_model(shape, seed=1)
    spec = GraphSpec.from_model(model)
    evaluator = Evaluator(model, spec, prepare_task(model, IOI_TASK))
    clean, corrupted = evaluator.clean_writers, evaluator.corrupted_writers
    eap = batched_gradient_scores(model, spec, [evaluator.prepared], clean, corrupted, None)[0].abs()
    on = spec.edge_mask
    for quantile in (0.3, 0.6, 0.9):
        tau = float(eap[on].quantile(quantile))
        near = ((eap - tau).abs() < 1e-3 * tau) & on  # the guess is taken a hair from the whole model
        guessed = attribution_guess(evaluator, spec, spec.edge_mask.clone(), tau)
        assert torch.equal(guessed[~near], ((eap >= tau) & on)[~near])


@pytest.mark.parametrize(
    "shape, model_dtype",
    covering(
        [(shape, dtype) for dtype in (torch.float64, torch.float32) for shape in SHAPES],
        fast={("gemma", torch.float32), ("gpt2", torch.float64), ("llama", torch.float64)},
    ),
)
def test_rows_started_at_the_readers_layer_make_the_whole_pass_walks_decisions(shape, model_dtype):
    """The walk's rows start at the tested reader's block from the clean run (every reader below
    it still has all its edges); the walk on whole passes makes the same decisions, with the same
    changes to float rounding, in float64 and in float32 (how the embedded models run)."""
    model = tiny_model(shape, seed=2).to(model_dtype)
    spec = GraphSpec.from_model(model)
    evaluator = Evaluator(model, spec, prepare_task(model, IOI_TASK))
    tau = 0.02 * abs(evaluator.baseline.clean - evaluator.baseline.corrupted)
    kept, scores, counts = acdc_walk(evaluator, spec, tau, 8, from_layer=False)
    started_kept, started_scores, started_counts = acdc_walk(evaluator, spec, tau, 8, from_layer=True)
    assert torch.equal(started_kept, kept)
    assert 0 < int(kept.sum()) < spec.n_edges
    assert started_counts == counts
    tolerance = 1e-10 if model_dtype == torch.float64 else 1e-6
    assert (started_scores - scores).abs().max().item() < tolerance * max(1.0, tau / 0.02)


def test_the_first_tests_are_exact_patching_of_single_edges():
    """Before anything is removed, ACDC's change for an edge into the logits is exact patching of
    that edge alone (the reference of every scoring method)."""
    model = tiny_model("gemma", seed=2)
    spec = GraphSpec.from_model(model)
    prepared = prepare_task(model, IOI_TASK)
    evaluator = Evaluator(model, spec, prepared)
    exact = get_method("exact").score(_context(model, evaluator), get_method("exact").default_config())
    _, scores, _ = acdc_walk(evaluator, spec, float("inf"), 8)  # infinite tau: nothing is kept
    last_mlp = spec.mlp_forward(spec.n_layers - 1)
    logits = spec.logits_backward
    # with tau infinite every edge is removed, so only the very first test sees the whole model
    assert scores[last_mlp, logits].item() == pytest.approx(exact[last_mlp, logits].item(), abs=1e-10)
    # with tau 0 every edge is kept, so every edge into the logits is tested against the whole model
    _, scores, _ = acdc_walk(evaluator, spec, 0.0, 8)
    column = spec.edge_mask[:, logits]
    assert torch.allclose(scores[column, logits], exact[column, logits].double(), atol=1e-10)


def _context(model, evaluator):
    from circuitviz.methods import RunContext

    ctx = RunContext(model, IOI_TASK)
    ctx._evaluator = evaluator
    return ctx


@pytest.mark.parametrize("case", default_cases(6)[:6], ids=lambda case: case.name)
def test_acdc_keeps_only_planted_edges_and_the_circuits_behaviour(case):
    """No edge outside the planted circuit survives (precision 1), and what ACDC keeps reproduces
    the model. Planted edges whose patching alone moves the metric less than the threshold (a key
    input of a head with flat attention) are removed, as ACDC's rule says; on the default planted
    model there are none, and ACDC's circuit is exactly the planted one."""
    planted = case.build()
    spec = GraphSpec.from_model(planted.model)
    n_true = int(planted.true_edges.sum())
    result = get_method("acdc").run_on(planted.model, planted.task, None, budgets=[n_true])
    own = spec.mask_from_edge_names(result.details.circuit_edges)
    assert not (own & ~planted.true_edges).any(), spec.edge_names_of(own & ~planted.true_edges)
    assert own.any()
    if case == default_cases(1)[0]:
        assert torch.equal(own, planted.true_edges)
    evaluator = Evaluator(planted.model, spec, prepare_task(planted.model, planted.task))
    ndf = result.curve[0].ndf if int(own.sum()) == n_true else None
    value = evaluator.metrics(own[None])[0].item()
    span = abs(evaluator.baseline.clean - evaluator.baseline.corrupted)
    assert abs(value - evaluator.baseline.clean) < 0.1 * span, (value, evaluator.baseline)
    if ndf is not None:
        assert ndf > 0.9


def test_the_default_planted_model_and_its_report():
    planted = planted_model()
    result = get_method("acdc").run_on(planted.model, planted.task, {"threshold": 0.05}, budgets=[5])
    details = result.details
    assert details.kind == "own-circuit" and details.threshold == 0.05
    assert details.counts["edges_kept"] >= len(details.circuit_edges)
    assert "0.05" in details.report_lines(result)[0]


@pytest.mark.parametrize("values", [{"threshold": -0.1}, {"threshold": 1.5}, {"max_batch": 0}])
def test_settings_out_of_range_are_refused_in_one_sentence(values):
    with pytest.raises(ValueError, match="must be"):
        ACDCConfig(**values)


def test_the_speculative_size_is_the_cheapest_per_decided_edge():
    """The size minimises (overhead + b) / E[edges decided] for the next guesses' chances of
    being wrong (the share wrong so far among guesses of their kind), E counted here over every
    pattern of right and wrong guesses (a row is used when the guesses before it in its pass are
    all right), so a wrong formula picks another size."""
    from itertools import product

    from circuitviz.methods.acdc import SpeculationSize

    def decided(p: float, b: int) -> float:
        total = 0.0
        for pattern in product([0, 1], repeat=b):
            chance = 1.0
            for wrong in pattern:
                chance *= p if wrong else 1 - p
            first = pattern.index(1) + 1 if 1 in pattern else b  # the pass stops at the first wrong
            total += chance * first
        return total

    kind = SpeculationSize.kind(0.5, stale=False)
    for wrong_of_ten in (0, 1, 2, 5, 9):
        size = SpeculationSize(cap=8, overhead=2.8, prior=0.05)
        size.record([kind] * 10, [True] * wrong_of_ten + [False] * (10 - wrong_of_ten))
        p = (wrong_of_ten + 0.1) / 12
        costs = {b: (2.8 + b) / decided(p, b) for b in range(1, 9)}
        assert size.size([kind] * 8) == min(costs, key=costs.get)
    size = SpeculationSize(cap=32)
    sure, unsure = SpeculationSize.kind(0.01, stale=False), SpeculationSize.kind(1.2, stale=True)
    assert sure != unsure
    size.record([sure] * 200, [False] * 200)
    assert size.size([sure] * 32) == 32  # guesses of this kind are never wrong: the longest pass
    size.record([unsure] * 50, [True] * 50)
    assert size.size([unsure] * 32) == 1  # always wrong: one row a pass
    assert size.size([sure] * 5 + [unsure] + [sure] * 26) == 6  # the pass ends at the likely wrong guess
    assert size.size([sure] * 3) == 3  # never more rows than edges left


@pytest.mark.parametrize("shape", SHAPES)
def test_the_estimate_prices_each_edge_from_its_readers_block(shape):
    """Each edge is priced as a row run from its reader's block (the layer start): its reader's
    layer read off its name here (``a3.h0<q>``, ``m3``, ``logits`` after the last block), so
    the estimate is below one whole row per edge and grows with the budgets' whole rows."""
    import re

    from circuitviz.methods.acdc import GUESS_PASSES, ROW_PASSES, ROWS_PER_EDGE
    from circuitviz.methods.base import PREPARE_PASSES, curve_passes

    model = tiny_model(shape, seed=1, n_layers=3)
    spec = GraphSpec.from_model(model)
    depth = 0.0
    for _writer, reader in spec.edge_mask.nonzero().tolist():
        name = spec.backward_names[reader]
        layer = spec.n_layers - 1 if name == "logits" else int(re.match(r"[am](\d+)", name).group(1))
        depth += (spec.n_layers - layer) / spec.n_layers
    method = get_method("acdc")
    cost = method.estimate(ACDCConfig(), spec, 15, 0)
    guesses = GUESS_PASSES * spec.n_layers  # the guess's gradient pass at each block
    assert cost.passes == pytest.approx(PREPARE_PASSES + 1.0 + guesses + ROW_PASSES * ROWS_PER_EDGE * depth)
    assert depth < spec.n_edges  # cheaper than a whole pass per edge
    more = method.estimate(ACDCConfig(), spec, 15, 5)
    assert more.passes == pytest.approx(cost.passes + curve_passes(5, spec))


def test_the_estimate_says_a_range_and_a_finished_walk_is_priced_by_the_rows_it_ran():
    """ACDC's work depends on what it finds: the estimate says the least and most a walk takes,
    and the run calibrates the next estimates with the rows it really patched, not the guess."""
    from circuitviz.entry.limits import estimate_run
    from circuitviz.methods.acdc import PRICED_ROWS_PER_EDGE, ROW_PASSES, ROWS_PER_EDGE, walk_depth

    model = tiny_model("gpt2", seed=1, n_layers=3)
    spec = GraphSpec.from_model(model)
    method = get_method("acdc")
    cost = method.estimate(ACDCConfig(), spec, 15, 2)
    low, high = cost.passes_range
    assert low < cost.passes < high
    estimate = estimate_run(model, "acdc", n_tokens=15, n_budgets=2)
    assert estimate.seconds_range[0] < estimate.seconds < estimate.seconds_range[1]
    assert " to " in estimate.summary() and "ACDC tests an edge only while" in estimate.summary()

    result = method.run_on(model, IOI_TASK, ACDCConfig(), budgets=[5, 10])
    rows = result.details.counts["patched_rows"]
    done = method.passes_done(result)
    walk = ROW_PASSES * ROWS_PER_EDGE * walk_depth(spec) / PRICED_ROWS_PER_EDGE
    assert done - cost.passes == pytest.approx(walk * (rows / spec.n_edges - PRICED_ROWS_PER_EDGE))
    assert estimate.flops_done("acdc", result) == pytest.approx(estimate.flops * done / estimate.sequences)
    assert estimate.flops_done("eap", result) == estimate.flops  # a method whose passes are its work


def test_the_report_says_why_its_own_circuit_has_fewer_edges_than_the_walk_kept():
    """'its own circuit has 122 edges (... edges kept 129)' on the embedded model's Japan prompt
    (a command-line audit): two counts of kept edges, the pruning between them unsaid."""
    from circuitviz.details.own_circuit import OwnCircuitDetails

    details = OwnCircuitDetails(
        method="acdc", threshold=0.01, circuit_edges=["input->logits"] * 122, counts={"edges_kept": 129}
    )
    lines = details.report_lines(None)
    assert lines[0] == "acdc at threshold 0.01: its own circuit has 122 edges (edges kept 129)"
    assert lines[1] == (
        "of the 129 edges the walk kept, 7 lie on no path from the input to the logits, so its own "
        "circuit (pruned) has 122"
    )
    whole = OwnCircuitDetails(method="acdc", circuit_edges=["input->logits"] * 3, counts={"edges_kept": 3})
    assert len(whole.report_lines(None)) == 1
