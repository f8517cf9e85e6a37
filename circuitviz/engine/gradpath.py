"""GradPath (EAP-GP, Zhang et al. 2025): an integration path that starts at the clean input
embedding and, step by step, descends the distance between the model's output there and its
output on the corrupted prompt.

    g_j = d/dγ || logits(γ_j) - logits(e') ||²,   γ_{j+1} = γ_j - η g_j / ||g_j||,   γ_0 = e

with the logits of the last position (where the metric reads them), the norm taken over the
whole sequence's embedding, and η the step length. The path is built by m sequential
forward/backward passes; EAP-GP's scores then average the metric's gradient at γ_1..γ_m.

A step of fixed length can climb instead of descend: on the embedded Gemma-3-270M the first step
of length ||e - e'|| / 5 raised the distance on 8 of the 9 yardstick prompts (up to 15x), and the
path, no longer a descent, turned on the last bits (the scores of a 34-token prompt moved by 23 %
between one and two CPU threads). With ``backtrack`` (the default) a step that would not lower the
distance is halved until it does, at most ``HALVINGS`` times a step, each try one forward pass;
the length found is kept for the next steps (a backtracking line search), and a point no halving
improves stays where it is. Without it, the paper's fixed steps.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from ..models.adapter import adapter_of
from . import sites
from .prefix import final_residual, layer_checks

if TYPE_CHECKING:
    from ..core.tasks import PreparedTask


@torch.no_grad()
def last_logits(
    model, tokens: torch.Tensor, embedding: torch.Tensor | None = None, check=None
) -> torch.Tensor:
    """Every vocabulary logit at the last position of a plain run (``embedding`` [1, pos,
    d_model] in place of the tokens' own; ``check`` called before each block).  # [1, d_vocab]"""
    adapter = adapter_of(model)
    hooks = [] if embedding is None else [(sites.EMBEDDING, lambda x, hook: embedding)]
    hooks += layer_checks(adapter.spec.n_layers, check)
    return adapter.unembed(final_residual(model, tokens, hooks))


def _distance(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """||logits - target||², in float32 at least (bfloat16 models).  # scalar"""
    wide = torch.promote_types(logits.dtype, torch.float32)
    return (logits.to(wide) - target.to(wide)).pow(2).sum()


HALVINGS = 6  # a backtracking step tries η, η/2, ..., η/64 before the point stays


def grad_path(
    model,
    prepared: PreparedTask,
    clean: torch.Tensor,
    corrupted: torch.Tensor,
    steps: int,
    step_length: float,
    backtrack: bool = True,
    check=None,
) -> torch.Tensor:
    """γ_1 .. γ_m of the GradPath from the clean embedding towards the corrupted output (each step
    lowering the distance, with ``backtrack``; the module's docstring). ``check``: called before
    each block of every pass, forward and backward (``layer_checks``: a run's progress report,
    which raises once the run is cancelled; the m sequential steps were silent, 20 s of a busy CPU).

    clean, corrupted: the prompts' input embeddings [pos, d_model]. Returns [m, pos, d_model].
    """
    adapter = adapter_of(model)
    tokens = prepared.clean_tokens.to(clean.device)
    target = last_logits(model, prepared.corrupted_tokens.to(clean.device), check=check)  # [1, d_vocab]
    checks = layer_checks(adapter.spec.n_layers, check)
    point = clean[None].detach()  # [1, pos, d_model]
    length = float(step_length)
    path = []
    for _ in range(int(steps)):
        leaf = point.clone().requires_grad_(True)
        with adapter.split_attention_inputs(False), torch.enable_grad():
            embedding = [(sites.EMBEDDING, lambda x, hook, leaf=leaf: leaf)]
            residual = final_residual(model, tokens, embedding + checks)
            distance = _distance(adapter.unembed(residual), target)
            (grad,) = torch.autograd.grad(distance, leaf)
        size = grad.norm()
        if float(size) > 0:  # a point whose output is the corrupted one already stays put
            if backtrack:
                point, length = _descending_step(
                    model, tokens, target, point, grad / size, length, distance, check
                )
            else:
                point = point - (length / size) * grad.to(point.dtype)
        path.append(point[0].detach())
    return torch.stack(path)


def _descending_step(model, tokens, target, point, direction, length: float, distance, check=None):
    """(the next point, the step length for the next step): the first of ``point - length *
    direction`` and its halved steps whose distance to the corrupted output is below ``distance``
    (the point itself, and the length halved once more, if none is)."""
    below = float(distance.detach())
    for _ in range(HALVINGS + 1):
        candidate = point - length * direction.to(point.dtype)
        if float(_distance(last_logits(model, tokens, candidate, check), target)) < below:
            return candidate, length
        length = length / 2
    return point, length
