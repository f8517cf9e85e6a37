"""The checks every gradient method's neuron scores pass (RelP, EAP-GP, AtP*): each neuron's score
equals an independent reference, and the neuron circuit at k = 4 (in each MLP the 4 neurons of
largest |reference score| kept, every other patched to its corrupted activation) gives the metric
the run reports."""

from __future__ import annotations

import pytest
import torch
from reference_patching import metric_of


def assert_neuron_scores(result, expected: torch.Tensor) -> None:
    """Every neuron's score in ``result.details.neurons`` equals ``expected[layer, neuron]``."""
    found = {(n["layer"], n["neuron"]): n["score"] for n in result.details.neurons}
    assert len(found) == expected.numel()
    for (layer, neuron), value in found.items():
        assert value == pytest.approx(expected[layer, neuron].item(), rel=1e-6, abs=1e-9)


def assert_neuron_circuit_at_4(
    model, prepared, result, expected: torch.Tensor, corrupted: torch.Tensor
) -> None:
    """The run's neuron curve at k = 4 is the metric of patching all but those 4 neurons by hand."""
    n_layers = expected.shape[0]
    point = next(p for p in result.details.curve if p["k"] == 4)
    order = torch.argsort(expected.abs(), dim=1, descending=True, stable=True)[:, :4]
    kept = torch.zeros_like(expected, dtype=torch.bool).scatter_(1, order, True)

    def patch(x, hook):
        layer = int(hook.name.split(".")[1])
        return torch.where(kept[layer], x, corrupted[None, :, layer])

    hooks = [(f"blocks.{i}.mlp.hook_post", patch) for i in range(n_layers)]
    with torch.no_grad():
        logits = model.run_with_hooks(prepared.clean_tokens, fwd_hooks=hooks)
    assert point["n_neurons"] == 4 * n_layers
    assert point["metric"] == pytest.approx(metric_of(model, prepared, logits)[0].item(), abs=1e-9)
