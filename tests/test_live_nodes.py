"""A mask learning's gradient pass leaves out the nodes of its hard circuits that reach the logits
through no kept edge (``engine.live``): the forward values are the same to the bit, no gradient
reaches those nodes, and every mask gradient is the full pass's to float rounding."""

from __future__ import annotations

import pytest
import torch

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.core.graph import GraphSpec
from circuitviz.core.tasks import prepare_task
from circuitviz.engine import patching, sites
from circuitviz.engine.live import dead_layers
from circuitviz.engine.metric import metric_from_residual
from circuitviz.measure.evaluate import Evaluator
from circuitviz.methods import mask_learning
from circuitviz.models.adapter import adapter_of

SHAPES = ("gpt2", "gemma", "llama")


def _keep(spec: GraphSpec, edges) -> torch.Tensor:
    keep = torch.zeros(1, spec.n_forward, spec.n_backward, dtype=torch.float64, device="cpu")
    for writer, reader in edges:
        keep[0, writer, reader] = 1.0
    return keep


def test_dead_layers_follow_kept_edges_back_from_the_logits():
    model = tiny_model("gpt2", seed=0)
    spec = GraphSpec.from_model(model)
    assert spec.n_layers >= 2
    head = spec.head_forward(0).start
    top = spec.n_layers - 1
    keep = _keep(
        spec,
        [
            (0, spec.head_backward(0, "q").start),  # input -> layer 0's head 0
            (head, spec.mlp_backward(top)),  # head 0 -> the last MLP
            (spec.mlp_forward(top), spec.logits_backward),  # the last MLP -> logits
            (0, spec.mlp_backward(0)),  # input -> MLP 0, which leads nowhere
        ],
    )
    mlps, attention = dead_layers(spec, keep)
    assert mlps == list(range(top))  # MLP 0 is kept as a reader only: dead
    assert attention == list(range(1, spec.n_layers))
    # a second circuit in the batch keeps MLP 0 alive
    both = torch.cat([keep, _keep(spec, [(spec.mlp_forward(0), spec.logits_backward)])])
    assert dead_layers(spec, both)[0] == list(range(1, top))
    # the whole graph: nothing dead
    assert dead_layers(spec, spec.tensors("cpu").edge_mask[None].double()) == ([], [])


def _run(model, spec, prepared, evaluator, keep, frozen, reached):
    keep = keep.clone().requires_grad_(True)

    def note(x, hook):  # the MLP inputs a gradient reaches
        if x.requires_grad:
            x.register_hook(lambda g, name=hook.name: reached.append(name))

    hooks = [(sites.mlp_in(layer), note) for layer in range(spec.n_layers)]
    with adapter_of(model).hooked(hooks):
        residual = patching.masked_residual(
            model, spec, prepared, evaluator.corrupted_writers, keep, evaluator.corrupted_raw, frozen=frozen
        )
        metric = metric_from_residual(model, prepared, residual)
        (gradient,) = torch.autograd.grad((metric**2).sum(), keep)
    return metric.detach(), gradient


def _hard_masks(shape: str, rows: int, share: float):
    """The tiny model of ``shape`` on IOI with its evaluator, and ``rows`` random hard masks keeping
    about ``share`` of the edges (float64, seed 0)."""
    model = tiny_model(shape, seed=1)
    spec = GraphSpec.from_model(model)
    prepared = prepare_task(model, IOI_TASK)
    evaluator = Evaluator(model, spec, prepared)
    generator = torch.Generator(device="cpu").manual_seed(0)
    size = (rows, spec.n_forward, spec.n_backward)
    keep = (torch.rand(size, generator=generator, device="cpu") < share).double()
    return model, spec, prepared, evaluator, keep


@pytest.mark.parametrize("shape", SHAPES)
def test_frozen_nodes_get_no_gradient_and_the_rest_is_the_full_pass(shape):
    model, spec, prepared, evaluator, keep = _hard_masks(shape, rows=2, share=0.08)  # sparse
    keep[:, :, spec.logits_backward] = 0
    keep[:, spec.mlp_forward(spec.n_layers - 1), spec.logits_backward] = 1  # one path to the logits
    keep[:, spec.mlp_forward(0)] = 0  # MLP 0 leads nowhere
    keep[:, 0, spec.mlp_backward(0)] = 1  # though it reads the input
    frozen = dead_layers(spec, keep)
    assert 0 in frozen[0]
    full_reached: list[str] = []
    metric, gradient = _run(model, spec, prepared, evaluator, keep, None, full_reached)
    reached: list[str] = []
    metric_frozen, gradient_frozen = _run(model, spec, prepared, evaluator, keep, frozen, reached)
    assert torch.equal(metric, metric_frozen)  # the same forward pass, to the bit
    dead_inputs = {sites.mlp_in(layer) for layer in frozen[0]}
    assert dead_inputs & set(full_reached)  # the full pass runs them backward
    assert not dead_inputs & set(reached)  # the frozen pass does not
    assert torch.allclose(gradient, gradient_frozen, rtol=1e-9, atol=1e-12 * gradient.abs().max())
    for layer in frozen[0]:  # no gradient into a frozen MLP's reader
        assert not gradient_frozen[:, :, spec.mlp_backward(layer)].any()


@pytest.mark.parametrize("shape", ("gemma", "llama"))
def test_learning_with_frozen_nodes_keeps_its_circuits_and_histories(shape, monkeypatch):
    from circuitviz.methods import get_method

    model = tiny_model(shape, seed=0)
    method = get_method("edge-pruning")
    config = method.make_config({"steps": 4, "ig_steps": 2})
    frozen_calls: list[bool] = []
    real = patching.masked_residual

    def spy(*args, frozen=None, **kwargs):
        frozen_calls.append(frozen is not None)
        return real(*args, frozen=frozen, **kwargs)

    monkeypatch.setattr(mask_learning, "masked_residual", spy)
    now = method.run_on(model, IOI_TASK, config, budgets=[6, 15, 40])
    assert any(frozen_calls)  # the gradient passes leave dead nodes out
    monkeypatch.setattr(mask_learning, "FREEZE_DEAD", False)
    before = method.run_on(model, IOI_TASK, config, budgets=[6, 15, 40])
    assert all(torch.equal(now.circuits[b], before.circuits[b]) for b in before.circuits)
    assert now.details.history == before.details.history
    assert torch.allclose(now.scores, before.scores, atol=1e-9)


@pytest.mark.parametrize("shape", ("gpt2", "gemma"))
def test_a_left_out_node_still_runs_forward_for_its_edges_gradient(shape):
    """A node no kept edge leads on from is left out of the backward pass only: the mask gradient
    of each of its edges (into every reader, live ones included) reads its output, so its forward
    must run. Its output replaced by the corrupted run's (the module skipped: the same metric to
    float rounding, as the patches cancel it) would make those gradients 0."""
    model, spec, prepared, evaluator, keep = _hard_masks(shape, rows=1, share=0.4)  # dense
    writer = spec.mlp_forward(0)
    keep[:, writer] = 0  # MLP 0 leads nowhere
    keep[:, 0, spec.mlp_backward(0)] = 1
    frozen = dead_layers(spec, keep)
    assert 0 in frozen[0]
    edges = spec.tensors("cpu").edge_mask[writer]  # MLP 0's edges, none kept
    metric, full = _run(model, spec, prepared, evaluator, keep, None, [])
    metric_frozen, gradient = _run(model, spec, prepared, evaluator, keep, frozen, [])
    assert gradient[0, writer][edges].abs().sum() > 0.1 * gradient.abs().max()
    assert torch.allclose(gradient[0, writer], full[0, writer], rtol=1e-9, atol=1e-12)
    corrupted = evaluator.corrupted_writers[:, :, writer]  # [1, pos, d_model]

    calls: list[int] = []

    def skipped(x, hook):  # the unchanged prefix runs first, then the rest of the positions
        first = not calls and x.shape[1] < corrupted.shape[1]
        calls.append(x.shape[1])
        part = corrupted[:, : x.shape[1]] if first else corrupted[:, -x.shape[1] :]
        return part.to(x.dtype).expand_as(x).clone()

    with adapter_of(model).hooked([(sites.mlp_out(0), skipped)]):
        metric_skipped, gradient_skipped = _run(model, spec, prepared, evaluator, keep, frozen, [])
    assert torch.allclose(metric_skipped, metric_frozen, rtol=0, atol=1e-12)
    assert not gradient_skipped[0, writer].any()
