"""Edge scores before they are summed over positions: the same gradients and differences as the
engine's scores, contracted with the position axis kept.

    score(u, v, p) = (z'_u[p] - z_u[p]) . dL/d(input of v)[p]

summed over the batch (IG steps, a task's rows) only. The engine's ``accumulate_scores`` is the
sum over p of this (tested exactly on float64 tiny models).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from ..activations import (
    ReaderGradients,
    gradient_bytes_per_position,
    model_device,
    model_dtype,
    reader_gradients,
    rows_metric,
    score_dtype,
    shared_prefix,
)
from ..chunks import run_in_chunks
from ..graph import GraphSpec
from ..tasks import PreparedTask


def accumulate_position_scores(
    spec: GraphSpec,
    scores: torch.Tensor,
    gradients: ReaderGradients,
    differences: torch.Tensor,
    owner: torch.Tensor | None = None,
) -> None:
    """scores[..., u, v, p] += sum over the batch of differences[u, p] . gradient[v, p].

    scores: [n_forward, n_backward, pos] (or [n, ...] with ``owner`` [batch], as the engine's
    ``accumulate_scores``); differences: [1 or n or batch, pos', n_forward, d_model]. When the
    pass skipped a shared prefix (pos' < pos), its positions are the last pos' of ``scores``.
    """
    dtype = scores.dtype
    width = 3 * spec.n_heads + 1
    groups = "g" if owner is not None else ""
    offset = scores.shape[-1] - differences.shape[1]

    def reduce(gradient: torch.Tensor) -> torch.Tensor:
        gradient = gradient.to(dtype)
        if owner is not None:
            summed = torch.zeros((scores.shape[0], *gradient.shape[1:]), dtype=dtype, device=gradient.device)
            return summed.index_add_(0, owner, gradient)
        return gradient.sum(0, keepdim=True) if differences.shape[0] == 1 else gradient

    for layer in range(spec.n_layers):
        upstream = spec.upstream_of_mlp(layer)
        readers = slice(layer * width, (layer + 1) * width)
        gradient = reduce(gradients.layer(layer))  # [g, pos', 3H+1, d_model]
        delta = differences[:, :, :upstream].to(dtype)  # [g, pos', upstream, d_model]
        part = torch.einsum(f"gpfd,gprd->{groups}frp", delta, gradient)  # [(g,) up, 3H+1, pos']
        part[..., spec.upstream_of_heads(layer) :, : 3 * spec.n_heads, :] = 0
        scores[..., :upstream, readers, offset:] += part
    gradient = reduce(gradients.logits)  # [g, pos', d_model]
    scores[..., :, spec.logits_backward, offset:] += torch.einsum(
        f"gpfd,gpd->{groups}fp", differences.to(dtype), gradient
    )


def gradient_position_scores(
    model,
    spec: GraphSpec,
    n_items: int,
    n_positions: int,
    batch_pass: Callable,
    n_groups: int | None = None,
    progress: Callable[[str, float], None] | None = None,
) -> torch.Tensor:
    """Position scores summed over ``n_items`` gradient sequences, in chunks that fit the device
    (``batch_pass`` as the engine's ``gradient_scores`` takes it).
    Returns [(n_groups,) n_forward, n_backward, pos] on the model's device."""
    dtype, device = score_dtype(model_dtype(model)), model_device(model)
    graph = (spec.n_forward, spec.n_backward, n_positions)
    scores = torch.zeros((*(() if n_groups is None else (n_groups,)), *graph), dtype=dtype, device=device)

    def compute(rows: slice):
        gradients, differences, owner, groups = batch_pass(rows)
        size = () if owner is None else (groups.stop - groups.start,)
        part = torch.zeros((*size, *graph), dtype=dtype, device=device)
        accumulate_position_scores(spec, part, gradients, differences, owner=owner)
        return groups, part

    def commit(rows: slice, result) -> None:
        groups, part = result
        (scores if groups is None else scores[groups]).add_(part)
        if progress:
            progress("score", rows.stop / n_items)

    per_position = gradient_bytes_per_position(model, n_positions)
    run_in_chunks(model, "gradient", n_items, n_positions, per_position, compute, commit)
    return scores


def integrated_position_scores(
    model,
    spec: GraphSpec,
    tasks: Sequence[PreparedTask],
    clean_writers: torch.Tensor,
    corrupted_writers: torch.Tensor,
    steps: int | None,
    progress: Callable[[str, float], None] | None = None,
) -> torch.Tensor:
    """EAP-IG (inputs) position scores of tasks of one length (``steps`` None: EAP), as the
    engine's ``batched_gradient_scores`` computes them, the position axis kept.
    Returns [n_tasks, n_forward, n_backward, pos]."""
    tasks = list(tasks)
    device = model_device(model)
    differences = corrupted_writers - clean_writers  # [n, pos, n_forward, d_model]
    clean_input, corrupted_input = clean_writers[:, :, 0], corrupted_writers[:, :, 0]  # [n, pos, d_model]
    tokens = torch.cat([t.clean_tokens for t in tasks]).to(device)  # [n, pos]
    n_steps = int(steps) if steps else 1
    jobs = [(j, k) for j in range(len(tasks)) for k in range(1, n_steps + 1)]

    def batch_pass(rows: slice):
        batch = jobs[rows]
        owners = [j for j, _ in batch]
        lowest, highest = owners[0], owners[-1]
        members = slice(lowest, highest + 1)
        prefix = shared_prefix(model, tasks[members])
        owner = torch.tensor(owners, device=device)
        interpolate = None
        if steps:
            alpha = torch.tensor([k / n_steps for _, k in batch], dtype=clean_input.dtype, device=device)
            alpha = alpha[:, None, None]  # [b, 1, 1]
            start_value = corrupted_input[owner, prefix:]  # [b, pos - prefix, d_model]
            end_value = clean_input[owner, prefix:]

            def interpolate(x):
                return start_value + alpha * (end_value - start_value)

        metric = rows_metric(model, tasks, owner)
        gradients, _ = reader_gradients(
            model, spec, tasks[0], len(batch), interpolate, tokens=tokens[owner], metric=metric, prefix=prefix
        )
        return gradients, differences[members, prefix:], owner - lowest, members

    scores = gradient_position_scores(
        model, spec, len(jobs), tasks[0].n_positions, batch_pass, n_groups=len(tasks), progress=progress
    )
    return scores / n_steps
