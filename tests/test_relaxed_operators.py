"""The relaxed run's fewer operators give, to the bit, what the formulations they replaced gave:
the writers' differences joined from the first part on, einsum's head mixes and head results,
each layer's pair weights gathered on their own, each reader group's weights sliced apart.
Forward values and mask gradients, and Edge Pruning's learned scores and histories."""

from __future__ import annotations

import pytest
import torch

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.core.graph import GraphSpec
from circuitviz.core.tasks import prepare_task
from circuitviz.engine import capture, patching, renorm
from circuitviz.engine.metric import metric_from_residual
from circuitviz.measure.evaluate import Evaluator
from circuitviz.methods import get_method
from circuitviz.models import base_adapter

SHAPES = ("gpt2", "gemma", "llama")


def _rejoined_upstream(self, count: int) -> torch.Tensor:
    """``WriterDifferences.upstream`` as it was: every part from the first, sliced and joined."""
    if count not in self._joined:
        joined, total = [], 0
        for part in self.parts:
            if total >= count:
                break
            joined.append(part[:, : count - total])
            total += joined[-1].shape[1]
        self._joined[count] = joined[0] if len(joined) == 1 else torch.cat(joined, dim=1)
    return self._joined[count]


def _einsum_head_results(attention, z):
    return torch.einsum("bphd,hdm->bphm", z, attention.W_O) + attention.b_O / z.shape[2]


def _use_earlier_formulations(monkeypatch) -> None:
    monkeypatch.setattr(capture.WriterDifferences, "upstream", _rejoined_upstream)
    monkeypatch.setattr(
        renorm, "_weighted", lambda pattern, masks, moves: torch.einsum(pattern, masks, moves)
    )
    monkeypatch.setattr(base_adapter, "head_results", _einsum_head_results)
    monkeypatch.setattr(patching, "_reader_major_groups", lambda spec, weights: {})
    planned = renorm.SharedNormPatch._plan_relaxed

    def layer_by_layer(self):  # each layer's masks gathered from the weights on their own
        planned(self)
        for layer, (index, _) in self.pairs.items():
            on_device = index.to(self.weights.device)
            self.entries[layer] = (on_device[:, 0], None, None, on_device)

    monkeypatch.setattr(renorm.SharedNormPatch, "_plan_relaxed", layer_by_layer)


def _metric_and_gradient(model, spec, prepared, evaluator, keep):
    keep = keep.clone().requires_grad_(True)
    residual = patching.masked_residual(
        model, spec, prepared, evaluator.corrupted_writers, keep, evaluator.corrupted_raw
    )
    metric = metric_from_residual(model, prepared, residual)
    (gradient,) = torch.autograd.grad((metric**2).sum(), keep)
    return metric.detach(), gradient


@pytest.mark.parametrize("shape", SHAPES)
def test_masked_runs_match_the_earlier_formulations_to_the_bit(shape, monkeypatch):
    model = tiny_model(shape, seed=1)
    spec = GraphSpec.from_model(model)
    prepared = prepare_task(model, IOI_TASK)
    evaluator = Evaluator(model, spec, prepared)
    generator = torch.Generator(device="cpu").manual_seed(0)
    size = (3, spec.n_forward, spec.n_backward)
    hard = (torch.rand(size, generator=generator, device="cpu") < 0.6).double()  # mixed pairs
    fractional = torch.rand(size, generator=generator, device="cpu", dtype=torch.float64)
    now = [_metric_and_gradient(model, spec, prepared, evaluator, keep) for keep in (hard, fractional)]
    _use_earlier_formulations(monkeypatch)
    before = [_metric_and_gradient(model, spec, prepared, evaluator, keep) for keep in (hard, fractional)]
    for (metric, gradient), (metric_before, gradient_before) in zip(now, before):
        assert torch.equal(metric, metric_before)
        assert torch.equal(gradient, gradient_before)
        assert gradient.abs().sum() > 0


@pytest.mark.parametrize("shape", ("gemma", "llama"))
def test_edge_pruning_learns_the_same_masks_to_the_bit(shape, monkeypatch):
    model = tiny_model(shape, seed=0)
    method = get_method("edge-pruning")
    config = method.make_config({"steps": 4, "ig_steps": 2})
    now = method.run_on(model, IOI_TASK, config, budgets=[6, 15, 40])
    _use_earlier_formulations(monkeypatch)
    before = method.run_on(model, IOI_TASK, config, budgets=[6, 15, 40])
    assert torch.equal(now.scores, before.scores)
    assert all(torch.equal(now.circuits[b], before.circuits[b]) for b in before.circuits)
    assert now.details.history == before.details.history
    assert [p.metric for p in now.curve] == [p.metric for p in before.curve]


def _joins_copied(monkeypatch) -> list[int]:
    """``WriterDifferences``'s joins as they were, each a copy (``cat``) of the earlier join and
    the parts written since, instead of a view of the store. Returns a list that counts the
    joins made."""
    made: list[int] = []

    def copied(view, *parts):
        made.append(len(parts))
        return torch.cat(parts, dim=1)

    monkeypatch.setattr(capture._Joined, "apply", copied)
    return made


@pytest.mark.parametrize("shape", SHAPES)
def test_joins_read_from_the_store_match_the_copied_joins_to_the_bit(shape, monkeypatch):
    """The writers' differences copied once into one store, each join a view of it: the relaxed
    run's metric and its mask gradient are the copied joins' to the bit, on one task and on
    three tasks of two prompt lengths in one padded pass (the learning's)."""
    from circuitviz.core.tasks import PromptTask
    from circuitviz.engine.metric import task_metric

    model = tiny_model(shape, seed=2)
    spec = GraphSpec.from_model(model)
    longer = PromptTask(
        "After lunch , When Mary and John went to the park , John gave a ball to",
        "After lunch , When Alice and Bob went to the park , Carl gave a ball to",
        " Mary",
        (" John",),
    )
    tasks = [prepare_task(model, task) for task in (IOI_TASK, longer, IOI_TASK)]
    assert len({task.n_positions for task in tasks}) == 2
    evaluators = [Evaluator(model, spec, task) for task in tasks]
    longest = max(task.n_positions for task in tasks)
    generator = torch.Generator(device="cpu").manual_seed(3)
    size = (2, spec.n_forward, spec.n_backward)
    hard = (torch.rand(size, generator=generator, device="cpu") < 0.6).double()
    fractional = torch.rand(size, generator=generator, device="cpu", dtype=torch.float64)

    def runs():
        results = []
        for keep in (hard, fractional):
            results.append(_metric_and_gradient(model, spec, tasks[0], evaluators[0], keep[:1]))
            leaf = keep.clone().requires_grad_(True)
            raw = [e.corrupted_raw for e in evaluators]
            residual = patching.masked_residual(
                model,
                spec,
                tasks,
                torch.cat([patching.padded_to(e.corrupted_writers, longest) for e in evaluators]),
                leaf.repeat(3, 1, 1),
                torch.cat([patching.padded_to(r, longest) for r in raw]) if raw[0] is not None else None,
            )
            owner = torch.arange(3, device="cpu").repeat_interleave(2)
            metric = task_metric(model, tasks, owner, same_length=False)(residual)
            (gradient,) = torch.autograd.grad((metric**2).sum(), leaf)
            results.append((metric.detach(), gradient))
        return results

    now = runs()
    made = _joins_copied(monkeypatch)
    before = runs()
    assert made  # the store served joins of several parts
    for (metric, gradient), (metric_before, gradient_before) in zip(now, before):
        assert torch.equal(metric, metric_before)
        assert torch.equal(gradient, gradient_before)
        assert gradient.abs().sum() > 0


def test_paraphrase_pruning_learns_the_same_masks_with_the_store_to_the_bit(monkeypatch):
    """A paraphrase-pruning learning (prompt and paraphrases in one pass, several steps) with the
    joins read from the store learns the copied joins' masks, histories and logits to the bit."""
    from circuitviz.core.tasks import PromptTask
    from circuitviz.methods.base import RunContext
    from circuitviz.methods.mask_learning import Schedule, edge_values, initial_logits, learn_masks

    model = tiny_model("gemma", seed=0)
    ctx = RunContext(model, IOI_TASK)
    other = PromptTask(
        "When Mary and Bob went to the store , Bob gave a drink to",
        "When Alice and John went to the store , Carl gave a drink to",
        " Mary",
        (" Bob",),
    )
    evaluators = [ctx.evaluator, Evaluator(model, ctx.spec, prepare_task(model, other))]
    eap = get_method("eap")
    ((warm, _),) = eap.score_batch([ctx], eap.make_config({}), None)
    start = initial_logits(edge_values(ctx.spec, warm.float() * ctx.spec.edge_mask), [6, 15])

    def learned():
        return learn_masks(ctx, evaluators, start, [6, 15], Schedule(4, 0.5, 1.0, 0.01))

    now = learned()
    _joins_copied(monkeypatch)
    before = learned()
    assert torch.equal(now.circuits, before.circuits)
    assert torch.equal(now.logits, before.logits)
    assert now.deviations == before.deviations and now.best_step == before.best_step
