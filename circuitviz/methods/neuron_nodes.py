"""Neuron-level circuits for the gradient methods (EAP, EAP-IG): their settings, and the details a
run with them keeps (``engine.neurons`` holds the formulas; docs/methods.md)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import torch

from ..core.curves import ndf, necessity
from ..core.graph import GraphSpec
from ..core.tasks import PreparedTask
from ..details.neurons import NeuronDetails
from ..engine.neurons import mlp_activations, neuron_patched_metrics, top_neurons
from .base import OMIT_DEFAULT
from .settings import setting

NEURON_TOP_K_HIGH = 4096
CURVE_KS = (1, 4, 16, 64)
SCORES_NOTE = (
    "a neuron scores its corrupted-minus-clean activation times the metric's gradient there, summed "
    "over positions (the method's own gradients)"
)


def neurons_setting():
    """``neurons``: off by default and then left out of the config's dict (``OMIT_DEFAULT``)."""
    field_ = setting(
        False,
        "also score every MLP neuron from the same gradient passes, and measure the circuit of the top "
        "neurons per MLP by patching every other neuron.",
    )
    return dataclasses.field(default=False, metadata={**field_.metadata, OMIT_DEFAULT: True})


def neuron_top_k_setting():
    field_ = setting(
        16,
        "with neurons: how many neurons of largest |score| each MLP keeps in the neuron circuit and the drawing.",
        low=1,
        high=NEURON_TOP_K_HIGH,
        applies=("neurons", (True,)),  # the form hides it while neurons is off (its value kept)
    )
    return dataclasses.field(default=16, metadata={**field_.metadata, OMIT_DEFAULT: True})


def check_neurons(config) -> None:
    if getattr(config, "neurons", False) and getattr(config, "positions", False):
        raise ValueError("neurons and positions cannot be combined; turn one of them off.")


def neuron_differences(model, spec: GraphSpec, tasks: Sequence[PreparedTask]):
    """(corrupted-minus-clean activations [n, pos, n_layers, d_mlp], corrupted activations, each task's)."""
    corrupted = [mlp_activations(model, spec, t.corrupted_tokens) for t in tasks]
    clean = [mlp_activations(model, spec, t.clean_tokens) for t in tasks]
    return torch.stack([c - k for c, k in zip(corrupted, clean)]), corrupted


def neuron_details(
    model,
    spec: GraphSpec,
    prepared: PreparedTask,
    scores: torch.Tensor,
    corrupted: torch.Tensor,
    k: int,
    baseline,
) -> NeuronDetails:
    """The top ``k`` neurons per MLP and the neuron circuits' curve (``engine.neurons``)."""
    d_mlp = scores.shape[1]
    ks = sorted({min(x, d_mlp) for x in (*CURVE_KS, int(k))})
    kept = torch.stack([top_neurons(scores, x) for x in ks])  # [n_ks, n_layers, d_mlp]
    metrics = neuron_patched_metrics(model, spec, prepared, torch.cat([kept, ~kept]), corrupted)
    values = metrics.double().cpu().tolist()
    curve = [
        {
            "k": x,
            "n_neurons": int(kept[i].sum()),
            "metric": values[i],
            "ndf": ndf(values[i], baseline),
            "necessity": necessity(values[len(ks) + i], baseline),
        }
        for i, x in enumerate(ks)
    ]
    chosen = top_neurons(scores, k)
    neurons = []
    host = scores.double().cpu()
    for layer in range(scores.shape[0]):
        index = chosen[layer].nonzero().flatten().cpu().tolist()
        index.sort(key=lambda n: -abs(float(host[layer, n])))
        neurons += [{"layer": layer, "neuron": n, "score": float(host[layer, n])} for n in index]
    return NeuronDetails(
        top_k=int(min(k, d_mlp)),
        neurons=neurons,
        layer_mass=host.abs().sum(1).tolist(),
        curve=curve,
        scores_note=SCORES_NOTE,
    )
