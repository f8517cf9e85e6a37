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
