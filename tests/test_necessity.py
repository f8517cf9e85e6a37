"""Necessity against brute force: the model with exactly the circuit's edges patched.

The reference patches each edge u -> v of the circuit by hand on TransformerLens's own hooks, in
one forward pass: reader v's input moves by z'_u - z_u, with z_u the writer's output in that same
patched run (read at ``hook_z`` and ``hook_mlp_out``) and z'_u its corrupted output
(``tests/reference_patching.writer_outputs``). Nothing of the engine's patching is used.
"""

import math

import pytest
import torch
from reference_patching import metric_of, reader_hook, writer_outputs

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.core.curves import Baseline, necessity
from circuitviz.core.graph import GraphSpec
from circuitviz.core.tasks import prepare_task
from circuitviz.measure.evaluate import Evaluator, curves_of_tasks


def _head_outputs(model, layer: int, z: torch.Tensor) -> torch.Tensor:
    """Each head's output added to the residual stream.  # [pos, n_heads, d_model]"""
    attention = model.blocks[layer].attn
    return torch.einsum("phe,hem->phm", z[0], attention.W_O) + attention.b_O / model.cfg.n_heads


def patched_edges_metric(model, spec: GraphSpec, prepared, edge_names: list[str]) -> float:
    """L of the clean run with exactly ``edge_names`` patched to the corrupted run (by hand)."""
    corrupted = writer_outputs(model, spec, prepared.corrupted_tokens)
    current: dict[str, torch.Tensor] = {}
    by_hook: dict[str, list[tuple[int | None, str]]] = {}
    for name in edge_names:
        writer, reader = name.split("->")
        hook_name, slot = reader_hook(spec, reader)
        by_hook.setdefault(hook_name, []).append((slot, writer))

    def keep_input(x, hook):
        current["input"] = x[0].clone()
        return x

    def keep_heads(layer):
        def hook(z, hook):
            for head, output in enumerate(_head_outputs(model, layer, z).unbind(1)):
                current[f"a{layer}.h{head}"] = output
            return z

        return hook

    def keep_mlp(layer):
        def hook(x, hook):
            current[f"m{layer}"] = x[0].clone()
            return x

        return hook

    def patch(hook_name):
        def hook(x, hook):
            x = x.clone()
            for slot, writer in by_hook[hook_name]:
                delta = corrupted[writer] - current[writer]  # [pos, d_model]
                if slot is None:
                    x[0] += delta
                else:
                    x[0, :, slot] += delta
            return x

        return hook

    hooks = [("blocks.0.hook_resid_pre", keep_input)]
    for layer in range(spec.n_layers):
        hooks += [(f"blocks.{layer}.attn.hook_z", keep_heads(layer))]
        hooks += [(f"blocks.{layer}.hook_mlp_out", keep_mlp(layer))]
    hooks += [(hook_name, patch(hook_name)) for hook_name in by_hook]
    with torch.no_grad():
        logits = model.run_with_hooks(prepared.clean_tokens, fwd_hooks=hooks)
    return float(metric_of(model, prepared, logits)[0])


@pytest.fixture(scope="module")
def gpt2():
    model = tiny_model("gpt2", seed=0)
    spec = GraphSpec.from_model(model)
    prepared = prepare_task(model, IOI_TASK)
    return model, spec, prepared, Evaluator(model, spec, prepared)


def _random_circuits(spec: GraphSpec, count: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    fractions = torch.linspace(0.1, 0.9, count, device="cpu")
    noise = torch.rand(count, spec.n_forward, spec.n_backward, generator=generator, device="cpu")
    return (noise < fractions[:, None, None]) & spec.edge_mask


def test_necessity_equals_patching_exactly_the_circuits_edges(gpt2):
    model, spec, prepared, evaluator = gpt2
    circuits = _random_circuits(spec, 4, seed=3)
    points = curves_of_tasks([evaluator], circuits[None], [int(c.sum()) for c in circuits])[0]
    baseline = evaluator.baseline
    assert abs(baseline.clean - baseline.corrupted) > 1e-3
    for circuit, point in zip(circuits, points):
        by_hand = patched_edges_metric(model, spec, prepared, spec.edge_names_of(circuit))
        assert point.metric_without == pytest.approx(by_hand, abs=1e-9)
        expected = min(abs(baseline.clean - by_hand) / abs(baseline.clean - baseline.corrupted), 1.0)
        assert point.necessity == pytest.approx(expected, abs=1e-9)
    assert len({round(p.necessity, 6) for p in points}) > 1  # the circuits differ in what they remove


def test_necessity_of_the_empty_and_the_whole_circuit(gpt2):
    _, spec, _, evaluator = gpt2
    empty, whole = torch.zeros_like(spec.edge_mask), spec.edge_mask.clone()
    points = curves_of_tasks([evaluator], torch.stack([empty, whole])[None], [0, spec.n_edges])[0]
    assert points[0].necessity == 0.0 and points[0].metric_without == evaluator.baseline.clean
    assert points[1].necessity == 1.0
    assert points[1].metric_without == pytest.approx(evaluator.metrics(empty[None]).item(), abs=1e-9)


def test_necessity_in_batched_curves_equals_one_task_alone(gpt2):
    model, spec, _, evaluator = gpt2
    circuits = _random_circuits(spec, 3, seed=5)
    together = curves_of_tasks([evaluator, evaluator], torch.stack([circuits, circuits.flip(0)]), [1, 2, 3])
    alone = curves_of_tasks([evaluator], circuits[None], [1, 2, 3])[0]
    for mine, theirs in zip(together[0], alone):
        assert mine.necessity == pytest.approx(theirs.necessity, abs=1e-10)
    assert together[1][0].necessity == pytest.approx(alone[2].necessity, abs=1e-10)


def test_necessity_formula_is_capped_and_undefined_without_a_gap():
    baseline = Baseline(clean=2.0, corrupted=0.0)
    assert necessity(1.0, baseline) == 0.5
    assert necessity(-3.0, baseline) == 1.0  # removing it overshoots: capped like NDF
    assert necessity(3.0, baseline) == 0.5  # the metric rises: its distance counts, as NDF's does
    assert math.isnan(necessity(1.0, Baseline(clean=1.0, corrupted=1.0)))
