"""The engine against ground truth on tiny models: exact patching, planted circuits, IG identities.

Edge by edge against a re-derivation from the definitions (exact, EAP, EAP-IG): tests/test_reference.py.
"""

import pytest
import torch

from circuitviz.bench.toy_models import IOI_TASK, planted_model, tiny_model
from circuitviz.core.graph import GraphSpec, prune, top_n
from circuitviz.core.tasks import PromptTask, prepare_task
from circuitviz.measure.evaluate import Evaluator, curves_of_tasks
from circuitviz.methods import get_method

SHAPES = ["gpt2", "gemma", "llama"]


def run(model, method, budgets=(5,), **config):
    chosen = get_method(method)
    return chosen.run_on(model, IOI_TASK, chosen.make_config(config), budgets=budgets)


@pytest.fixture(scope="module", params=SHAPES)
def tiny(request):
    return tiny_model(request.param, seed=0)


def test_full_circuit_is_clean_and_empty_circuit_is_corrupted(tiny):
    spec = GraphSpec.from_model(tiny)
    prepared = prepare_task(tiny, IOI_TASK)
    evaluator = Evaluator(tiny, spec, prepared)
    logits = tiny(prepared.clean_tokens)[0, -1]
    reference = logits[prepared.answer_id] - logits[list(prepared.foil_ids)].mean()
    assert evaluator.baseline.clean == pytest.approx(float(reference), abs=1e-9)
    full, empty = spec.edge_mask[None], torch.zeros_like(spec.edge_mask)[None]
    values = evaluator.metrics(torch.cat([full, empty]))
    assert values[0].item() == pytest.approx(evaluator.baseline.clean, abs=1e-5)
    assert values[1].item() == pytest.approx(evaluator.baseline.corrupted, abs=1e-5)
    assert abs(evaluator.baseline.clean - evaluator.baseline.corrupted) > 1e-3


def test_batched_evaluation_equals_one_circuit_at_a_time(tiny):
    spec = GraphSpec.from_model(tiny)
    evaluator = Evaluator(tiny, spec, prepare_task(tiny, IOI_TASK))
    generator = torch.Generator().manual_seed(1)
    circuits = (torch.rand(6, spec.n_forward, spec.n_backward, generator=generator) < 0.5) & spec.edge_mask
    together = evaluator.metrics(circuits)
    alone = torch.cat([evaluator.metrics(c[None]) for c in circuits])
    assert torch.allclose(together, alone, atol=1e-10)


@pytest.mark.parametrize("shape", SHAPES)
def test_pruning_never_changes_the_metric(shape):
    """Exact on every shape: under Gemma's post-attention norm each reader renormalises its own
    mix of heads, so a dead-end head (computing its corrupted output, or read by no one) changes
    nothing."""
    tiny = tiny_model(shape, seed=0)
    spec = GraphSpec.from_model(tiny)
    evaluator = Evaluator(tiny, spec, prepare_task(tiny, IOI_TASK))
    scores = run(tiny, "eap").scores
    for budget in (3, 8, 20):
        circuit = top_n(spec, scores, budget)
        pruned = prune(spec, circuit)
        values = evaluator.metrics(torch.stack([circuit, pruned]))
        assert values[0].item() == pytest.approx(values[1].item(), abs=1e-9)


@pytest.mark.parametrize("shape", SHAPES)
def test_ig_inputs_completeness(shape):
    """IG's input-row scores sum to L(q') - L(q): the embedding feeds the graph only through them."""
    model = tiny_model(shape, seed=1)
    result = run(model, "eap-ig", ig_steps=300)
    change = result.baseline.corrupted - result.baseline.clean
    # a right Riemann sum: the gap shrinks as 1/steps (measured: 0.009, 0.003, 0.0009 at 100/300/1000)
    assert result.scores[0].sum().item() == pytest.approx(change, rel=0.05, abs=1e-3)


@pytest.mark.parametrize("shape", SHAPES)
def test_ig_activations_completeness_per_group(shape):
    """An MLP's (or a layer's heads') row sum equals corrupting its whole output, as patched."""
    model = tiny_model(shape, seed=2)
    spec = GraphSpec.from_model(model)
    result = run(model, "eap-ig-activations", ig_steps=200)
    evaluator = Evaluator(model, spec, prepare_task(model, IOI_TASK))
    for rows in (slice(spec.mlp_forward(0), spec.mlp_forward(0) + 1), spec.head_forward(1)):
        circuit = spec.edge_mask.clone()
        circuit[rows] = False
        patched = evaluator.metrics(circuit[None])[0].item() - evaluator.baseline.clean
        assert result.scores[rows].sum().item() == pytest.approx(patched, rel=0.03, abs=2e-3)


def test_gradients_summed_per_owner_score_as_each_sequence_alone():
    """Sequences that multiply the same differences (one writer group's steps) may be summed
    before the contraction: the scores equal each sequence's own product, summed after."""
    from circuitviz.engine.gradients import SummedGradients, reader_gradients
    from circuitviz.engine.scores import accumulate_scores

    model = tiny_model("llama", seed=4)
    spec = GraphSpec.from_model(model)
    prepared = prepare_task(model, IOI_TASK)
    evaluator = Evaluator(model, spec, prepared)
    differences = (evaluator.corrupted_writers[0] - evaluator.clean_writers[0]).double()
    noise = torch.linspace(0.5, 1.5, 5, dtype=torch.float64, device="cpu")[:, None, None]

    def noisy(x):
        return x * noise.to(x.dtype)  # five different sequences

    gradients, _ = reader_gradients(model, spec, prepared, 5, input_replacement=noisy)
    owner = torch.tensor([1, 0, 1, 2, 0], device="cpu")
    masks = torch.rand((3, spec.n_forward), generator=torch.Generator().manual_seed(0), device="cpu") > 0.5
    each = torch.zeros((spec.n_forward, spec.n_backward), dtype=torch.float64, device="cpu")
    per_sequence = differences[None] * masks[owner].to(differences.dtype)[:, None, :, None]
    accumulate_scores(spec, each, gradients, per_sequence)
    grouped = torch.zeros((spec.n_forward, spec.n_backward), dtype=torch.float64, device="cpu")
    per_owner = differences[None] * masks.to(differences.dtype)[:, None, :, None]
    accumulate_scores(spec, grouped, SummedGradients(gradients, owner, 3), per_owner)
    assert each.abs().max() > 1e-3
    assert torch.allclose(grouped, each, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("shape", SHAPES)
def test_a_pass_started_at_a_block_gives_the_whole_passs_gradients_there(shape):
    """Where nothing below block l changes, running from the clean residual stream before l gives
    every reader at and above l the gradient of a pass from the embedding; those below get zero."""
    from circuitviz.engine import sites
    from circuitviz.engine.gradients import clean_residuals, reader_gradients

    model = tiny_model(shape, seed=5)
    spec = GraphSpec.from_model(model)
    prepared = prepare_task(model, IOI_TASK)
    halve = [(sites.attention_out(1), lambda x, hook: 0.5 * x)]  # a change at block 1 only
    whole, metrics = reader_gradients(model, spec, prepared, 2, extra_hooks=halve)
    residual = clean_residuals(model, spec, prepared)[1]
    started, started_metrics = reader_gradients(
        model, spec, prepared, 2, extra_hooks=halve, start=1, start_residual=residual
    )
    assert torch.allclose(started_metrics, metrics, rtol=1e-5, atol=1e-6)
    assert torch.allclose(started.logits, whole.logits, rtol=1e-5, atol=1e-7)
    for layer in range(1, spec.n_layers):
        assert torch.allclose(started.layer(layer), whole.layer(layer), rtol=1e-4, atol=1e-7)
    assert whole.layer(0).abs().max() > 0 and started.layer(0).abs().max() == 0


def test_ig_activations_input_row_equals_ig_inputs():
    model = tiny_model("gemma", seed=3)
    inputs = run(model, "eap-ig", ig_steps=16)
    activations = run(model, "eap-ig-activations", ig_steps=16)
    assert torch.allclose(inputs.scores[0], activations.scores[0], atol=1e-10)


def test_ig_is_closer_to_exact_patching_than_eap():
    """Averaged over random GPT-2-shaped models; on a single random seed either can win."""
    errors = {"eap": 0.0, "eap-ig": 0.0}
    for seed in range(4):
        model = tiny_model("gpt2", seed=seed)
        spec = GraphSpec.from_model(model)
        exact = run(model, "exact").scores[spec.edge_mask]
        errors["eap"] += (run(model, "eap").scores[spec.edge_mask] - exact).abs().mean().item()
        ig = run(model, "eap-ig", ig_steps=100).scores[spec.edge_mask]
        errors["eap-ig"] += (ig - exact).abs().mean().item()
    assert errors["eap-ig"] < 0.85 * errors["eap"], errors


def test_ig_steps_converge():
    """More steps approach the integral: 100 and 400 steps agree better than 2 and 400."""
    model = tiny_model("gpt2", seed=1)
    finest = run(model, "eap-ig", ig_steps=400).scores
    coarse = (run(model, "eap-ig", ig_steps=2).scores - finest).abs().max()
    fine = (run(model, "eap-ig", ig_steps=100).scores - finest).abs().max()
    assert fine < coarse / 10


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_planted_circuit_is_recovered(seed):
    planted = planted_model(seed=seed)
    spec = GraphSpec.from_model(planted.model)
    chosen = get_method("exact")
    exact = chosen.run_on(planted.model, planted.task, budgets=[1]).scores
    found = exact.abs() > 1e-9
    assert torch.equal(found, planted.true_edges), spec.edge_names_of(found ^ planted.true_edges)
    for method in ("eap", "eap-ig", "eap-ig-activations"):
        scores = get_method(method).run_on(planted.model, planted.task, budgets=[1]).scores
        assert scores[~planted.true_edges].abs().max().item() == 0.0, method
        # and the true circuit is exactly the top-|true| edges
        top = top_n(spec, scores, int(planted.true_edges.sum()))
        assert torch.equal(top, planted.true_edges), method


def test_planted_true_circuit_is_fully_faithful():
    planted = planted_model(seed=4)
    spec = GraphSpec.from_model(planted.model)
    evaluator = Evaluator(planted.model, spec, prepare_task(planted.model, planted.task))
    value = evaluator.metrics(planted.true_edges[None])[0].item()
    assert value == pytest.approx(evaluator.baseline.clean, abs=1e-9)


LATE_CORRUPTION = PromptTask(  # differs from IOI_TASK's clean prompt only at the second name
    clean=IOI_TASK.clean,
    corrupted="When Mary and John went to the store , Mary gave a drink to",
    answer=" Mary",
    foils=(" John",),
)


@pytest.mark.parametrize("shape", SHAPES)
def test_positions_before_the_corruption_run_once_and_change_nothing(shape, monkeypatch):
    """The positions where clean and corrupted prompts agree run once, unhooked: EAP-IG's scores
    and every curve point equal a run over every position, alone and in a batch of tasks whose
    unchanged prefixes differ."""
    from circuitviz.engine import scores
    from circuitviz.engine.prefix import unchanged_prefix
    from circuitviz.measure import evaluate
    from circuitviz.methods.base import RunContext
    from circuitviz.models.adapter import ModelAdapter

    model = tiny_model(shape, seed=1)
    method = get_method("eap-ig")
    config = method.make_config({"ig_steps": 4})
    budgets = [3, 10, 40]
    tasks = [LATE_CORRUPTION, IOI_TASK]
    assert [unchanged_prefix(prepare_task(model, t)) for t in tasks] == [10, 2]

    skipped: list[int] = []
    real_caches, real_blocks = ModelAdapter.prefix_caches, ModelAdapter.blocks

    def prefix_caches(self, tokens):  # a run that skips the first tokens.shape[1] positions
        skipped.append(int(tokens.shape[1]))
        return real_caches(self, tokens)

    def blocks(self, tokens, stop_at_layer=None):  # a run of every position
        skipped.append(0)
        return real_blocks(self, tokens, stop_at_layer)

    monkeypatch.setattr(ModelAdapter, "prefix_caches", prefix_caches)
    monkeypatch.setattr(ModelAdapter, "blocks", blocks)
    alone = [method.run_on(model, task, config, budgets) for task in tasks]
    together = method.run_batch([RunContext(model, t, "", None, None) for t in tasks], config, budgets)
    assert 10 in skipped and 2 in skipped  # alone: each its own prefix; together: the shorter

    monkeypatch.setattr(scores, "shared_prefix", lambda model, tasks: 0)
    monkeypatch.setattr(evaluate, "shared_prefix", lambda model, tasks: 0)
    skipped.clear()
    whole = [method.run_on(model, task, config, budgets) for task in tasks]
    assert set(skipped) == {0}
    for results in (alone, together):
        for result, reference in zip(results, whole):
            assert torch.allclose(result.scores, reference.scores, rtol=0, atol=1e-10)
            for point, expected in zip(result.curve, reference.curve):
                assert point.n_edges == expected.n_edges
                assert point.metric == pytest.approx(expected.metric, abs=1e-10)


def test_a_circuit_of_every_edge_is_the_model_and_needs_no_patched_run(tiny, monkeypatch):
    from circuitviz.measure import evaluate

    spec = GraphSpec.from_model(tiny)
    evaluators = [Evaluator(tiny, spec, prepare_task(tiny, task)) for task in (IOI_TASK, LATE_CORRUPTION)]
    generator = torch.Generator().manual_seed(2)
    shape = (2, spec.n_forward, spec.n_backward)
    half, other = (torch.rand(shape, generator=generator, device="cpu") < 0.5) & spec.edge_mask
    full = spec.edge_mask.clone()
    ran: list[int] = []
    real = evaluate.patched_metrics
    monkeypatch.setattr(
        evaluate, "patched_metrics", lambda *a, **k: ran.append(a[4].shape[0]) or real(*a, **k)
    )

    points = curves_of_tasks(
        [evaluators[0]], torch.stack([half, full])[None], [5, spec.n_edges], with_necessity=False
    )[0]
    assert ran == [1]  # the half circuit only
    assert points[1].metric == evaluators[0].baseline.clean and points[1].ndf == 1.0

    ran.clear()  # task 0's second circuit is whole, task 1's is not: that column runs, task 0 keeps clean
    circuits = torch.stack([torch.stack([half, full]), torch.stack([half, other])])
    curves = curves_of_tasks(evaluators, circuits, [5, 6], with_necessity=False)
    assert ran == [4]
    assert curves[0][1].metric == evaluators[0].baseline.clean
    alone = curves_of_tasks([evaluators[1]], other[None, None], [6], with_necessity=False)[0][0]
    assert curves[1][1].metric == pytest.approx(alone.metric, abs=1e-10)
    ran.clear()
    curves_of_tasks(evaluators, torch.stack([torch.stack([half, full])] * 2), [5, 6], with_necessity=False)
    assert ran == [2]  # a column whole for every task does not run
    ran.clear()  # with necessity: the half circuit and its complement; a whole circuit's is the corrupted run
    points = curves_of_tasks([evaluators[0]], torch.stack([half, full])[None], [5, spec.n_edges])[0]
    assert ran == [2]
    assert points[1].metric_without == evaluators[0].baseline.corrupted and points[1].necessity == 1.0


def test_kept_prompt_runs_are_read_not_run_again_and_change_nothing(tiny, monkeypatch):
    """The plain runs a task's evaluator (or the next tokens) made are read by the next evaluator
    of that prompt pair: it runs no pass and holds exactly what a fresh one holds."""
    from circuitviz.measure.evaluate import forget_prompt_runs
    from circuitviz.models.adapter import adapter_of

    spec = GraphSpec.from_model(tiny)
    prepared = prepare_task(tiny, IOI_TASK)
    forget_prompt_runs(tiny)
    rows: list[list[tuple[int, ...]]] = []
    forward = tiny.forward

    def counted(tokens, *args, **kwargs):
        rows.append([tuple(row) for row in tokens.tolist()])
        return forward(tokens, *args, **kwargs)

    monkeypatch.setattr(tiny, "forward", counted)
    fresh = Evaluator(tiny, spec, prepared)
    clean = tuple(adapter_of(tiny).to_tokens(IOI_TASK.clean)[0].tolist())
    corrupted = tuple(adapter_of(tiny).to_tokens(IOI_TASK.corrupted)[0].tolist())
    assert rows == [[clean], [corrupted]]  # a task alone: its two prompts, one at a time
    rows.clear()
    again = Evaluator(tiny, spec, prepared)
    assert rows == []  # both read, none run again
    assert torch.equal(again.clean_writers, fresh.clean_writers)
    assert torch.equal(again.corrupted_writers, fresh.corrupted_writers)
    assert again.baseline == fresh.baseline
    forget_prompt_runs(tiny)
    Evaluator(tiny, spec, prepared)
    assert rows == [[clean], [corrupted]]  # forgotten: both run again
