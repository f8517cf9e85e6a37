"""Neuron-level circuits for the gradient methods (EAP, EAP-IG, RelP, EAP-GP, AtP*): their settings, the scores
beside a batch's edge scores, and the details a run with them keeps (``engine.neurons`` holds the
formulas; docs/methods.md)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import torch

from ..core.curves import ndf, necessity
from ..core.graph import GraphSpec
from ..core.tasks import PreparedTask
from ..details.neurons import NeuronDetails
from ..engine.neurons import mlp_activations, neuron_bytes, neuron_patched_metrics, top_neurons
from .base import OMIT_DEFAULT
from .settings import setting

NEURON_TOP_K_HIGH = 4096
CURVE_KS = (1, 4, 16, 64)
SCORES_NOTE = (
    "a neuron scores its corrupted-minus-clean activation times the method's own backward pass there "
    "(the metric's gradient; RelP's relevance), summed over positions"
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


def scores_with_neurons(
    contexts, config, batch_scores: Callable, note: str = SCORES_NOTE
) -> list[tuple[torch.Tensor, object]]:
    """A gradient method's scores of one batch of tasks, each with its neuron details when
    ``config.neurons`` is on. ``batch_scores(differences)`` runs the method's own passes
    (``engine.scores.batched_gradient_scores`` with ``neuron_differences=differences``): with
    None it returns the edge scores, else (edge scores, neuron scores). ``note``: what a neuron's
    score is, where the method's differs from the product (AtP*'s GradDrop)."""
    if not getattr(config, "neurons", False):
        return [(matrix, None) for matrix in batch_scores(None)]
    model, spec = contexts[0].model, contexts[0].spec
    prepared = [ctx.prepared() for ctx in contexts]
    differences, corrupted_neurons = neuron_differences(model, spec, prepared)
    scores, neurons = batch_scores(differences)
    k = int(config.neuron_top_k)
    return [
        (
            scores[j],
            neuron_details(
                model,
                spec,
                prepared[j],
                neurons[j],
                corrupted_neurons[j],
                k,
                contexts[j].evaluator.baseline,
                note,
            ),
        )
        for j in range(len(contexts))
    ]


def neuron_cost(config, spec: GraphSpec, n_tokens: int, steps: int) -> dict:
    """What ``neurons`` adds to a gradient method's cost: two plain runs for the activations and the
    neuron circuits' patched runs (two per k of the curve), and the neurons' working memory."""
    if not getattr(config, "neurons", False):
        return {}
    return {
        "extra_passes": 2.0 + 2.0 * (len(CURVE_KS) + 1),
        # the graph does not hold the MLPs' width: taken as at most 6 d_model (Gemma-3 3.2, Llama 4)
        "extra_bytes": neuron_bytes(spec, 6 * spec.d_model, n_tokens, steps),
    }


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
    note: str = SCORES_NOTE,
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
        scores_note=note,
    )
