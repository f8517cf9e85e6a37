"""Patched rows started at a layer from the clean run (``engine.layer_start``) against the whole
pass: the same metric wherever no circuit removes an edge into a reader below that layer."""

from __future__ import annotations

import pytest
import torch

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.core.graph import GraphSpec
from circuitviz.core.tasks import PromptTask, prepare_task
from circuitviz.engine.layer_start import reader_layers, start_layer
from circuitviz.engine.prefix import shared_prefix
from circuitviz.measure.evaluate import Evaluator, evaluators_of_tasks, metrics_of_tasks

SHAPES = ("gpt2", "gemma", "llama")


def _circuits_from(spec: GraphSpec, layer: int, count: int, seed: int) -> torch.Tensor:
    """Random circuits that keep every edge into the readers below ``layer`` and about half of
    the others.  # [count, n_forward, n_backward] bool"""
    generator = torch.Generator().manual_seed(seed)
    shape = (count, spec.n_forward, spec.n_backward)
    keep = torch.rand(shape, generator=generator, device="cpu") < 0.5  # made on the CPU
    below = torch.tensor([r < layer for r in reader_layers(spec)], device="cpu")  # [n_backward]
    return (keep | below[None, None, :]) & spec.edge_mask


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("model_dtype", [torch.float64, torch.float32])
def test_a_row_started_at_a_layer_equals_the_whole_pass(shape, model_dtype):
    model = tiny_model(shape, seed=3).to(model_dtype)
    spec = GraphSpec.from_model(model)
    prepared = prepare_task(model, IOI_TASK)
    assert shared_prefix(model, [prepared]) > 0  # the rows continue the prefix's keys and values
    evaluator = Evaluator(model, spec, prepared)
    tolerance = 1e-10 if model_dtype == torch.float64 else 1e-6
    for layer in range(1, spec.n_layers):
        circuits = _circuits_from(spec, layer, 6, seed=layer)
        removed = spec.edge_mask & ~circuits
        assert start_layer(spec, removed) == layer  # a reader of this layer loses an edge
        whole = evaluator.metrics(circuits)
        started = evaluator.metrics(circuits, from_layer=True)
        span = abs(evaluator.baseline.clean - evaluator.baseline.corrupted)
        assert torch.allclose(started, whole, atol=tolerance * max(1.0, span), rtol=0)
        assert not torch.allclose(whole, torch.full_like(whole, evaluator.baseline.clean))


@pytest.mark.parametrize("shape", SHAPES)
def test_a_started_run_gives_the_last_block_the_last_position_alone(shape):
    """The metric reads the last position after the last block: on rotary models a started run
    runs that block's MLP at the last position only (the earlier positions give it their keys and
    values), with the whole pass's metrics; GPT-2 (learned positions) runs it whole."""
    model = tiny_model(shape, seed=3).to(torch.float64)
    spec = GraphSpec.from_model(model)
    prepared = prepare_task(model, IOI_TASK)
    evaluator = Evaluator(model, spec, prepared)
    seen = []
    handle = model.blocks[-1].mlp.register_forward_hook(lambda module, args, out: seen.append(out.shape[1]))
    try:
        for layer in (1, spec.n_layers - 1):
            circuits = _circuits_from(spec, layer, 4, seed=layer)
            whole = evaluator.metrics(circuits)
            evaluator.clean_state(shared_prefix(model, [prepared]))  # the clean run, made once
            seen.clear()
            started = evaluator.metrics(circuits, from_layer=True)
            assert torch.allclose(started, whole, atol=1e-10, rtol=0)
            run = prepared.n_positions - shared_prefix(model, [prepared])
            assert seen == ([1] if shape != "gpt2" else [run])
    finally:
        handle.remove()


def test_only_the_logits_patched_starts_at_the_last_block_and_matches():
    model = tiny_model("gemma", seed=4)
    spec = GraphSpec.from_model(model)
    evaluator = Evaluator(model, spec, prepare_task(model, IOI_TASK))
    circuits = spec.edge_mask.expand(spec.n_forward, -1, -1).clone()
    for writer in range(spec.n_forward):  # circuit k: writer k's edge into the logits removed
        circuits[writer, writer, spec.logits_backward] = False
    assert start_layer(spec, spec.edge_mask & ~circuits) == spec.n_layers - 1
    whole = evaluator.metrics(circuits)
    assert torch.allclose(evaluator.metrics(circuits, from_layer=True), whole, atol=1e-10, rtol=0)


def test_a_batch_of_two_tasks_starts_each_row_from_its_own_task():
    model = tiny_model("gemma", seed=5)
    spec = GraphSpec.from_model(model)
    other = PromptTask(
        "When Tom and Anna went to the park , Anna gave a ball to",
        "When Alice and Bob went to the park , Carl gave a ball to",
        " Tom",
        (" Anna",),
    )
    tasks = [prepare_task(model, task) for task in (IOI_TASK, other)]
    evaluators = evaluators_of_tasks(model, spec, tasks)
    circuits = torch.stack([_circuits_from(spec, 1, 3, seed=seed) for seed in (7, 8)])  # [2, 3, ...]
    whole = metrics_of_tasks(evaluators, circuits)
    started = metrics_of_tasks(evaluators, circuits, from_layer=True)
    assert torch.allclose(started, whole, atol=1e-10, rtol=0)
    assert not torch.allclose(whole[0], whole[1])  # the rows really are each task's own


def test_a_start_above_a_patched_reader_is_refused():
    from circuitviz.engine.layer_start import rows_from_layer
    from circuitviz.engine.metric import task_metric
    from circuitviz.engine.patching import patched_metrics

    model = tiny_model("gpt2", seed=6)
    spec = GraphSpec.from_model(model)
    prepared = prepare_task(model, IOI_TASK)
    evaluator = Evaluator(model, spec, prepared)
    removed = spec.edge_mask & ~_circuits_from(spec, 0, 2, seed=1)
    owner = torch.zeros(2, dtype=torch.long, device="cpu")  # the tiny model is on the CPU
    start = rows_from_layer(model, [evaluator.clean_state(0)], owner, 1)
    with pytest.raises(ValueError, match="below layer 1"):
        patched_metrics(
            model,
            spec,
            prepared,
            evaluator.corrupted_writers,
            removed,
            metric=task_metric(model, [prepared], owner),
            start=start,
        )


@pytest.mark.parametrize("model_dtype", [torch.float64, torch.float32])
def test_the_layers_below_the_start_take_their_norm_corrections_from_the_clean_state(
    model_dtype, monkeypatch
):
    """Below a run's start every row's heads are the clean ones: each (layer, mask of the
    layer's heads) correction is made once per clean state and read by later runs, and the
    metrics equal those of runs that compute every correction in the pass (to the bit)."""
    import circuitviz.engine.patching as patching

    model = tiny_model("gemma", seed=3, n_layers=4).to(model_dtype)
    spec = GraphSpec.from_model(model)
    evaluator = Evaluator(model, spec, prepare_task(model, IOI_TASK))
    circuits = [_circuits_from(spec, layer, 6, seed=10 + layer) for layer in range(1, spec.n_layers)]
    stored = [evaluator.metrics(c, from_layer=True) for c in circuits]
    store = next(iter(evaluator._clean_states.values())).corrections
    layers = {layer for layer, _ in store}
    assert layers == set(range(spec.n_layers - 1))  # every layer below some start
    assert all(0 <= code < 2**spec.n_heads for _, code in store)
    made = len(store)
    again = [evaluator.metrics(c, from_layer=True) for c in circuits]
    assert len(store) == made  # read, not made again
    monkeypatch.setattr(patching, "CleanCorrections", lambda *parts: None)  # every correction in the pass
    fresh = [evaluator.metrics(c, from_layer=True) for c in circuits]
    for a, b, c in zip(stored, again, fresh):
        assert torch.equal(a, b) and torch.equal(a, c)


@pytest.mark.parametrize("positions", [False, True])
def test_plan_keys_sort_as_the_rows_they_stand_for(positions):
    """The plan's integer keys give what ``torch.unique(rows, dim=0)`` gives: the same distinct
    keys in the same order and the same inverse (the tables' layout depends on it)."""
    from circuitviz.engine.renorm import _unique_keys

    generator = torch.Generator().manual_seed(2)
    for n_heads in (1, 4, 12):
        index = torch.randint(0, 7, (300, 3 if positions else 2), generator=generator, device="cpu")
        bits = torch.randint(0, 2, (300, n_heads), generator=generator, device="cpu")
        unique, inverse = _unique_keys(index, bits, positions)
        lead = [index[:, :1]] + ([index[:, 2:3]] if positions else [])
        expected, expected_inverse = torch.unique(torch.cat(lead + [bits], 1), dim=0, return_inverse=True)
        assert torch.equal(unique, expected) and torch.equal(inverse, expected_inverse)
