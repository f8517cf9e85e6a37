"""Node-level checks of edge scores: does a method's node score track patching that node alone?

A method scores edges; a node's score is the sum of its outgoing edges' scores (what its output
does to everything that reads it). The ground truth is the effect of patching the node alone in
the model's own computation (``activations.node_patched_metrics``: a head switched to its
corrupted output at its z, so a post-attention norm renormalises the layer as it would). The
yardstick compares the two by Spearman rank correlation over the heads and MLPs.

For models with a post-attention norm (Gemma's ``ln1_post``) this also checks the engine's
choice of what a head writes: its output passed through the norm with the norm's scale frozen
(``activations.frozen_norm``). ``prenorm_eap_scores`` scores edges the way a tool that takes a
head's output before the norm would, for comparison.
"""

from __future__ import annotations

import torch

from ..core.graph import GraphSpec
from ..engine import sites
from ..engine.capture import observe
from ..engine.gradients import reader_gradients
from ..engine.patching import node_patched_metrics
from ..engine.scores import accumulate_scores, score_dtype
from ..measure.evaluate import Evaluator
from ..models.adapter import adapter_of, model_device

# row name: (registered method, settings); the Best-of-N family comes from one "bon" run
# (in the order they run: the rows the targets compare first, the slow ones last)
YARDSTICK_ROWS = {
    "eap": ("eap", {}),
    "eap-ig": ("eap-ig", {}),
    "edge-pruning": ("edge-pruning", {}),
    "ensemble": ("ensemble", {}),
    "bon-family": ("bon", {"compare": True, "cache_scores": False}),
    "ensemble-bootstrap": ("ensemble", {"n_paraphrases": 5, "resamples": 50}),
    "edge-pruning-from-eap": ("edge-pruning", {"warm_start": "eap"}),
    "acc++": ("acc++", {}),
    "circuit-lasso": ("circuit-lasso", {}),
    "eap-ig-activations": ("eap-ig-activations", {}),
    "relp": ("relp", {}),
    "eap-gp": ("eap-gp", {}),
    "atp-star": ("atp-star", {}),
    "flow-routes": ("flow-routes", {}),
    "acdc": ("acdc", {}),
    "paraphrase-pruning": ("paraphrase-pruning", {}),
    "cd-t": ("cd-t", {}),
    "cd-t-corrupted": ("cd-t", {"baseline": "corrupted"}),
}


def component_nodes(spec: GraphSpec) -> list[int]:
    """Writer indices of every head and MLP, in graph order (the input is not a component)."""
    return list(range(1, spec.n_forward))


def node_scores(spec: GraphSpec, scores: torch.Tensor) -> torch.Tensor:
    """Each writer's score: the sum of its outgoing edges' scores.  # [n_forward]"""
    return (scores * spec.tensors(scores.device).edge_mask).sum(dim=1)


def ranks(values: torch.Tensor) -> torch.Tensor:
    """Ranks 0..n-1 of a vector, ties sharing their mean rank (float64, on the CPU)."""
    values = values.detach().double().cpu()
    ordered = torch.sort(values).values
    below = torch.searchsorted(ordered, values, right=False)
    through = torch.searchsorted(ordered, values, right=True)
    return (below + through - 1).double() / 2


def spearman(first: torch.Tensor, second: torch.Tensor) -> float:
    """Spearman rank correlation of two vectors (NaN when either is constant)."""
    a, b = ranks(first), ranks(second)
    a, b = a - a.mean(), b - b.mean()
    denominator = float(a.norm() * b.norm())
    return float((a * b).sum()) / denominator if denominator > 0 else float("nan")


def node_effects(model, spec: GraphSpec, evaluator: Evaluator) -> torch.Tensor:
    """L(patch one node) - L(M(q)) for every head and MLP (``component_nodes`` order).  # [n]"""
    metrics = node_patched_metrics(model, spec, evaluator.prepared, component_nodes(spec))
    return metrics - evaluator.baseline.clean


def node_tracking(spec: GraphSpec, scores: torch.Tensor, effects: torch.Tensor) -> dict[str, float]:
    """Spearman of node scores against patching effects, over heads, over MLPs and over both.

    ``signed_*``: the scores as they are against the effects (for methods whose scores estimate
    the metric's change, EAP's family); ``*``: magnitudes, |node score| against |effect|, for every
    method (circuits keep the edges of largest |score|; learned masks and normalised ensembles
    have no sign).
    """
    nodes = torch.tensor(component_nodes(spec), device="cpu")  # ranks are compared on the CPU
    mine = node_scores(spec, scores.float().cpu())[nodes]
    truth = effects.float().cpu()
    mlps = torch.tensor([spec.mlp_forward(layer) for layer in range(spec.n_layers)], device="cpu")
    groups = {"all": torch.ones_like(nodes, dtype=torch.bool), "heads": ~torch.isin(nodes, mlps)}
    groups["mlps"] = ~groups["heads"]
    tracking = {}
    for name, chosen in groups.items():
        tracking[name] = spearman(mine[chosen].abs(), truth[chosen].abs())
        tracking[f"signed_{name}"] = spearman(mine[chosen], truth[chosen])
    return tracking


def prenorm_eap_scores(model, spec: GraphSpec, evaluator: Evaluator) -> torch.Tensor:
    """EAP scores with each head's output taken before the post-attention norm.

    As the engine's EAP (one gradient at the clean run times the clean-to-corrupted change of
    each writer), except that a head's change is that of W_O z alone, the way a tool that reads a
    head's output at its projection would take it. On models without a post-attention norm this
    equals EAP. Returns [n_forward, n_backward] on the model's device.
    """
    prepared = evaluator.prepared
    tokens = torch.cat([prepared.clean_tokens, prepared.corrupted_tokens])
    names = [sites.head_z(layer) for layer in range(spec.n_layers)]
    _, captured, _ = observe(model, spec, tokens, hook_names=names, keep_writers=False)
    differences = (evaluator.corrupted_writers - evaluator.clean_writers).clone()  # [1, pos, F, d]
    for layer in range(spec.n_layers):
        results = adapter_of(model).head_results(layer, captured[names[layer]])  # [2, pos, H, d]
        differences[0, :, spec.head_forward(layer)] = (results[1] - results[0]).to(differences.dtype)
    gradients, _ = reader_gradients(model, spec, prepared, batch=1)
    dtype = score_dtype(differences.dtype)
    scores = torch.zeros(spec.n_forward, spec.n_backward, dtype=dtype, device=model_device(model))
    accumulate_scores(spec, scores, gradients, differences)
    return scores
