"""GradPath (EAP-GP, Zhang et al. 2025): an integration path that starts at the clean input
embedding and, step by step, descends the distance between the model's output there and its
output on the corrupted prompt.

    g_j = d/dγ || logits(γ_j) - logits(e') ||²,   γ_{j+1} = γ_j - η g_j / ||g_j||,   γ_0 = e

with the logits of the last position (where the metric reads them), the norm taken over the
whole sequence's embedding, and η the step length. The path is built by m sequential
forward/backward passes; EAP-GP's scores then average the metric's gradient at γ_1..γ_m.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from ..models.adapter import adapter_of
from . import sites
from .prefix import final_residual

if TYPE_CHECKING:
    from ..core.tasks import PreparedTask


@torch.no_grad()
def last_logits(model, tokens: torch.Tensor, embedding: torch.Tensor | None = None) -> torch.Tensor:
    """Every vocabulary logit at the last position of a plain run (``embedding`` [1, pos,
    d_model] in place of the tokens' own).  # [1, d_vocab]"""
    adapter = adapter_of(model)
    hooks = [] if embedding is None else [(sites.EMBEDDING, lambda x, hook: embedding)]
    return adapter.unembed(final_residual(model, tokens, hooks))


def grad_path(
    model,
    prepared: PreparedTask,
    clean: torch.Tensor,
    corrupted: torch.Tensor,
    steps: int,
    step_length: float,
) -> torch.Tensor:
    """γ_1 .. γ_m of the GradPath from the clean embedding towards the corrupted output.

    clean, corrupted: the prompts' input embeddings [pos, d_model]. Returns [m, pos, d_model].
    """
    adapter = adapter_of(model)
    tokens = prepared.clean_tokens.to(clean.device)
    target = last_logits(model, prepared.corrupted_tokens.to(clean.device))  # [1, d_vocab]
    point = clean[None].detach()  # [1, pos, d_model]
    path = []
    for _ in range(int(steps)):
        leaf = point.clone().requires_grad_(True)
        with adapter.split_attention_inputs(False), torch.enable_grad():
            residual = final_residual(model, tokens, [(sites.EMBEDDING, lambda x, hook, leaf=leaf: leaf)])
            logits = adapter.unembed(residual)
            wide = torch.promote_types(logits.dtype, torch.float32)  # bfloat16 models: float32 at least
            distance = (logits.to(wide) - target.to(wide)).pow(2).sum()
            (grad,) = torch.autograd.grad(distance, leaf)
        size = grad.norm()
        if float(size) > 0:  # a point whose output is the corrupted one already stays put
            point = point - (step_length / size) * grad.to(point.dtype)
        path.append(point[0].detach())
    return torch.stack(path)
