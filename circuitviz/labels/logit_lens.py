"""Logit-lens labels: which tokens a node's output pushes up or down at the prompt's last position.

A writer's residual contribution o (a head's share, an MLP's output, the embedding) is read
through the unembedding as the final norm would see it: centred if the norm centres, divided by
the final residual's norm scale (frozen, as in direct logit attribution), times the norm's
weight, then ``W_U``. The top tokens of that vector are what the node *promotes*, the bottom
ones what it *suppresses*. ``logits`` is labelled with the model's own top next tokens.

Also here, because the Explore page needs it before any circuit exists: the model's next-token
distribution for a prompt, computed under the model's lock so that a run sharing the model in
another session cannot interleave its hooks with this forward pass.
"""

from __future__ import annotations

import torch

from ..core.graph import GraphSpec
from ..core.tasks import PreparedTask
from ..engine.metric import logits_from_residual
from ..measure.evaluate import prompt_run
from ..models.adapter import adapter_of

DEFAULT_TOP_K = 5
_CHUNK = 32  # writers unembedded at once: bounds the [chunk, d_vocab] block in memory


def _token_strings(model, ids: list[int]) -> list[str]:
    return [adapter_of(model).decode([token]) for token in ids]


def _final_norm_direction(model, residual: torch.Tensor, outputs: torch.Tensor) -> torch.Tensor:
    """outputs [n, d_model] as the final norm maps them, with residual [d_model]'s scale frozen."""
    norm_type = model.cfg.normalization_type
    if norm_type is None:
        return outputs
    if norm_type.startswith("LN"):
        centred_residual = residual - residual.mean()
        scale = (centred_residual.pow(2).mean() + model.cfg.eps).sqrt()
        outputs = outputs - outputs.mean(-1, keepdim=True)
    else:
        scale = (residual.pow(2).mean() + model.cfg.eps).sqrt()
    weight = adapter_of(model).final_norm_weight
    outputs = outputs / scale
    return outputs * weight if weight is not None else outputs


@torch.no_grad()
def logit_lens_labels(
    model, spec: GraphSpec, prepared: PreparedTask, top_k: int = DEFAULT_TOP_K
) -> dict[str, dict[str, list[str]]]:
    """{node name: {"promotes": [top_k tokens], "suppresses": [top_k tokens]}} on the clean prompt.

    The prompt's plain run (``evaluate.prompt_run``: the one a run or the next tokens made
    already, else one forward pass under the model's lock) and one matrix product with the
    unembedding per chunk of writers.
    """
    writers = prompt_run(model, spec, prepared.clean_tokens).writers  # [1, pos, n_forward, d_model]
    clean_last = writers[0, -1].float()  # [n_forward, d_model]
    residual = clean_last.sum(0)  # the final residual stream: writers add up to it
    W_U, b_U = adapter_of(model).unembedding
    unembed = W_U.float()  # [d_model, d_vocab]
    labels: dict[str, dict[str, list[str]]] = {}
    for start in range(0, spec.n_forward, _CHUNK):
        block = _final_norm_direction(model, residual, clean_last[start : start + _CHUNK])
        logits = block @ unembed  # [chunk, d_vocab]
        k = min(top_k, logits.shape[-1])
        top = logits.topk(k, dim=-1).indices.tolist()
        bottom = (-logits).topk(k, dim=-1).indices.tolist()
        for offset, (up, down) in enumerate(zip(top, bottom)):
            name = spec.forward_names[start + offset]
            labels[name] = {"promotes": _token_strings(model, up), "suppresses": _token_strings(model, down)}
    final = _final_norm_direction(model, residual, residual[None])[0] @ unembed + b_U.float()
    k = min(top_k, final.shape[-1])
    labels["logits"] = {
        "top next tokens": _token_strings(model, final.topk(k).indices.tolist()),
    }
    return labels


@torch.no_grad()
def next_token_probabilities(model, prompt: str, top_k: int = 10) -> list[tuple[str, float]]:
    """The model's ``top_k`` most likely next tokens after ``prompt``, with probabilities.

    It reads the prompt's plain run (``evaluate.prompt_run``, under the model's lock: a plain call
    while another session's hooks are attached would run through them), which the evaluator and
    the logit-lens labels then read too: the clean prompt goes through the model once. Only the
    last position is unembedded.
    """
    tokens = adapter_of(model).to_tokens(prompt)  # [1, pos]
    residual = prompt_run(model, adapter_of(model).spec, tokens).residual  # [1, d_model]
    logits = logits_from_residual(model, residual)[0].float()  # [d_vocab]
    probabilities = torch.softmax(logits, dim=-1)
    values, ids = probabilities.topk(min(top_k, probabilities.shape[-1]))
    return list(zip(_token_strings(model, ids.tolist()), values.tolist()))


def next_token_distribution(model, prompt: str) -> torch.Tensor:
    """The model's probability of every token after ``prompt``, from the prompt's one plain run
    (``next_token_probabilities``).  # [d_vocab]"""
    tokens = adapter_of(model).to_tokens(prompt)  # [1, pos]
    residual = prompt_run(model, adapter_of(model).spec, tokens).residual  # [1, d_model]
    return torch.softmax(logits_from_residual(model, residual)[0].float(), dim=-1)


def token_probability(model, prompt: str, token_id: int) -> tuple[float, str, float]:
    """(the model's probability of token ``token_id`` after ``prompt``, its top token, that
    token's probability), from the prompt's one plain run (``next_token_probabilities``)."""
    probabilities = next_token_distribution(model, prompt)  # [d_vocab]
    top = int(probabilities.argmax())
    return float(probabilities[int(token_id)]), _token_strings(model, [top])[0], float(probabilities[top])
