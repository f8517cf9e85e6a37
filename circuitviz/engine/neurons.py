"""MLP neurons as circuit nodes: their attribution scores and the exact metric of a neuron circuit.

A neuron is one coordinate of an MLP's hidden activation, what its output projection reads
(``mlp.hook_post``: act(W_in x + b_in), or act(gate) * linear for a gated MLP). Its score is the
gradient methods' product at that coordinate,

    score(l, n) = sum_p (a'_{l,n,p} - a_{l,n,p}) * g_{l,n,p},

a' and a its corrupted and clean activations, g the metric's gradient there: at the clean run for
EAP, averaged over the IG path's steps for EAP-IG (the same passes as the edge scores). A neuron
circuit keeps, in every MLP, the k neurons of largest |score|; evaluating it runs the clean
prompt with every other neuron patched to its corrupted activation (heads and the residual
stream compute as they do), and its necessity patches only the kept ones.
"""

from __future__ import annotations

import torch

from ..core.graph import GraphSpec
from ..core.tasks import PreparedTask
from ..measure.chunks import run_in_chunks
from ..models.adapter import adapter_of
from . import sites
from .memory import evaluation_bytes_per_position
from .metric import metric_from_residual
from .prefix import final_residual


def neuron_sites(spec: GraphSpec) -> list[str]:
    """The hidden activation of every MLP, in layer order."""
    return [sites.mlp_post(layer) for layer in range(spec.n_layers)]


def neuron_bytes(spec: GraphSpec, d_mlp: int, n_tokens: int, steps: int, element_size: int = 4) -> float:
    """Working memory of the neuron scores: clean and corrupted activations, one pass's gradients
    at every neuron, the scores."""
    per_position = spec.n_layers * d_mlp * element_size
    return per_position * n_tokens * (2 + max(steps, 1)) + spec.n_layers * d_mlp * 8


class NeuronScores:
    """Every MLP neuron's difference times its gradient, summed per task over a scoring's gradient
    passes (``engine.scores.gradient_scores``): a chunk's part is kept apart until that chunk is
    committed, since a chunk that ran out of memory runs again in halves.

    differences: corrupted-minus-clean activations [n_tasks, pos, n_layers, d_mlp]; ``total``:
    [n_tasks, n_layers, d_mlp] on ``device`` in ``dtype``."""

    def __init__(self, spec: GraphSpec, differences: torch.Tensor, dtype: torch.dtype, device):
        self.names = neuron_sites(spec)
        self.differences = differences
        shape = (differences.shape[0], *differences.shape[2:])
        self.total = torch.zeros(shape, dtype=dtype, device=device)
        self._pending: dict[tuple[int, int], torch.Tensor] = {}

    def add(self, rows: slice, grads: dict, owner: torch.Tensor, prefix: int = 0) -> None:
        """The chunk ``rows``'s part: ``grads`` by site [b, pos - prefix, d_mlp], ``owner`` [b] each
        sequence's task."""
        part = torch.zeros_like(self.total)
        for layer, name in enumerate(self.names):
            product = grads[name] * self.differences[owner, prefix:, layer]  # [b, pos, d_mlp]
            part[:, layer].index_add_(0, owner, product.sum(1).to(part.dtype))
        self._pending[(rows.start, rows.stop)] = part

    def commit(self, rows: slice) -> None:
        self.total.add_(self._pending.pop((rows.start, rows.stop)))


@torch.no_grad()
def mlp_activations(model, spec: GraphSpec, tokens: torch.Tensor) -> torch.Tensor:
    """Every MLP's hidden activation of one run.  # [pos, n_layers, d_mlp]"""
    kept: dict[str, torch.Tensor] = {}

    def keep(x, hook):
        kept[hook.name] = x.detach()[0]

    names = neuron_sites(spec)
    final_residual(model, tokens[:1].to(adapter_of(model).device), [(name, keep) for name in names])
    return torch.stack([kept[name] for name in names], dim=1)


def top_neurons(scores: torch.Tensor, k: int) -> torch.Tensor:
    """In each layer the ``k`` neurons of largest |score| (ties by index).  # [n_layers, d_mlp] bool"""
    k = min(int(k), scores.shape[1])
    order = torch.argsort(scores.abs(), dim=1, descending=True, stable=True)[:, :k]
    kept = torch.zeros_like(scores, dtype=torch.bool)
    return kept.scatter_(1, order, True)


@torch.no_grad()
def neuron_patched_metrics(
    model, spec: GraphSpec, prepared: PreparedTask, kept: torch.Tensor, corrupted: torch.Tensor
) -> torch.Tensor:
    """The metric of the clean run with every neuron outside each circuit patched to its corrupted
    activation.

    kept: [b, n_layers, d_mlp] bool (True: the neuron computes as it does); corrupted: the
    corrupted run's activations [pos, n_layers, d_mlp]. Returns [b] on the model's device."""
    adapter = adapter_of(model)
    device = adapter.device
    kept = kept.to(device)
    corrupted = corrupted.to(device)
    results: list[torch.Tensor] = []

    def compute(rows: slice) -> torch.Tensor:
        chosen = kept[rows]  # [c, n_layers, d_mlp]
        tokens = prepared.clean_tokens.to(device).expand(chosen.shape[0], -1)

        def patch(x, hook, layer: int):
            return torch.where(chosen[:, None, layer], x, corrupted[None, :, layer])

        hooks = [
            (name, lambda x, hook, layer=layer: patch(x, hook, layer))
            for layer, name in enumerate(neuron_sites(spec))
        ]
        return metric_from_residual(model, prepared, final_residual(model, tokens, hooks))

    run_in_chunks(
        model,
        "evaluate",
        kept.shape[0],
        prepared.n_positions,
        evaluation_bytes_per_position(spec, adapter.element_size),
        compute,
        lambda rows, values: results.append(values),
    )
    return torch.cat(results) if results else torch.zeros(0, device=device)
