"""AtP* (Kramár et al. 2024): attribution patching with the QK fix and GradDrop.

- **QK fix.** An edge into a head's query or key moves the attention pattern, and a saturated
  softmax makes the gradient a poor guide to that move. For an edge u -> (h, query) the queries
  of head h are recomputed exactly from the patched input x + (z'_u - z_u) (the layer's norm,
  projection, q-norm and rotation included), the scores become S + (q' - q) k^T / scale, the
  softmax is taken exactly, and only then is the change linearised through the pattern:
  ``score = sum_{t,s} (A'_ts - A_ts) dL/dA_ts``. Keys likewise, every query row renormalised.
- **GradDrop.** Direct and indirect paths can cancel in the gradient. For each layer l the
  gradient is computed with layer l's contribution to the residual stream (its attention and
  MLP outputs) cut from the backward pass, and ``score = sum_l |score_l| / (L - 1)``: a magnitude,
  no longer signed. The L backward passes run as one batch whose rows drop different layers.

With ``neuron_differences`` an MLP neuron scores as an edge does, from the same rows: its
corrupted-minus-clean hidden activation times the row's gradient there, summed over positions,
then ``sum_l |.| / (L - 1)`` with GradDrop (the QK fix does not touch MLPs).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from ..core.graph import GraphSpec
from ..measure.chunks import run_in_chunks
from ..models.adapter import adapter_of
from . import sites
from .capture import observe_with_raw_heads
from .gradients import reader_gradients
from .memory import gradient_bytes_per_position
from .neurons import neuron_sites
from .prefix import layer_checks
from .scores import accumulate_scores, score_dtype

if TYPE_CHECKING:
    from ..core.tasks import PreparedTask

WRITER_CHUNK = 16  # upstream writers whose patched queries and keys are recomputed at once
KEEP_CHANGES_BYTES = 512 * 2**20  # pattern changes kept for every chunk of rows when they fit


def pattern_changes(
    model,
    spec: GraphSpec,
    layer: int,
    residual: torch.Tensor,
    scores: torch.Tensor,
    differences: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """A' - A of every head of ``layer`` when its query (first) or key (second) input moves by
    one upstream writer's change, the softmax recomputed exactly.

    residual: the layer's clean input [pos, d_model]; scores: its clean attention scores, masked
    [n_heads, pos, pos]; differences: [pos, n_upstream, d_model]. Returns two [n_upstream,
    n_heads, pos, pos].
    """
    adapter = adapter_of(model)
    upstream = differences.shape[1]
    scale = adapter.attention(layer).score_scale
    queries = adapter.head_queries_keys(layer, residual[None], "q")[0]  # [pos, H, d_head]
    keys = adapter.head_queries_keys(layer, residual[None], "k")[0]
    pattern = torch.softmax(scores, dim=-1)  # [H, pos, pos]
    query_part, key_part = [], []
    for start in range(0, upstream, WRITER_CHUNK):
        moved = residual[None] + differences[:, start : start + WRITER_CHUNK].transpose(0, 1)  # [u, pos, d]
        query_change = adapter.head_queries_keys(layer, moved, "q") - queries  # [u, pos, H, d_head]
        key_change = adapter.head_queries_keys(layer, moved, "k") - keys
        shifted = scores[None] + torch.einsum("uthe,she->uhts", query_change, keys) / scale
        query_part.append(torch.softmax(shifted, dim=-1).nan_to_num(0.0) - pattern)
        shifted = scores[None] + torch.einsum("the,ushe->uhts", queries, key_change) / scale
        key_part.append(torch.softmax(shifted, dim=-1).nan_to_num(0.0) - pattern)
    return torch.cat(query_part), torch.cat(key_part)


def atp_star_scores(
    model,
    spec: GraphSpec,
    prepared: PreparedTask,
    clean_writers: torch.Tensor,
    corrupted_writers: torch.Tensor,
    qk_fix: bool = True,
    grad_drop: bool = True,
    progress: Callable[[str, float], None] | None = None,
    neuron_differences: torch.Tensor | None = None,
):
    """AtP* edge scores of one task (AtP, that is EAP, with both switched off); with
    ``neuron_differences`` ([1, pos, n_layers, d_mlp]) also every MLP neuron's ([n_layers, d_mlp]):
    (edges, neurons).

    clean_writers, corrupted_writers: [1, pos, n_forward, d_model]. Returns [n_forward,
    n_backward] on the model's device, in the precision scores accumulate in. ``progress`` is
    told again before each block of every pass, forward and backward (``layer_checks``), and
    before each layer's pattern changes: a run's Cancel is heard inside a chunk, not only after it.
    """
    adapter = adapter_of(model)
    problem = adapter.attention_score_problem() if qk_fix else None
    if problem is not None:
        raise ValueError(
            f"AtP*'s QK fix recomputes attention exactly, and this model's cannot be: {problem}; "
            "switch the QK fix off (the setting qk_fix; --no-qk-fix on the command line)."
        )
    n_layers = spec.n_layers
    rows = n_layers if grad_drop else 1
    differences = corrupted_writers - clean_writers  # [1, pos, n_forward, d_model]
    dtype, device = score_dtype(adapter.dtype), differences.device
    names = [
        name for layer in range(n_layers) for name in (sites.resid_pre(layer), sites.attention_scores(layer))
    ]

    def check_at(done: int):
        """The run's report of ``done`` rows done, said again inside a pass (None: no callback)."""
        return (lambda: progress("score", done / rows)) if progress else None

    seen = {}
    if qk_fix:
        tokens = prepared.clean_tokens
        seen = observe_with_raw_heads(model, spec, tokens, names, keep_writers=False, check=check_at(0))[1]
    patterns = [sites.attention_pattern(layer) for layer in range(n_layers)] if qk_fix else []
    total = torch.zeros(spec.n_forward, spec.n_backward, dtype=dtype, device=device)
    neuron_names = neuron_sites(spec) if neuron_differences is not None else []
    neurons = None
    if neuron_differences is not None:
        neurons = torch.zeros(neuron_differences.shape[2:], dtype=dtype, device=device)
    # A' - A does not depend on the row (the dropped layer): made once when all layers' fit
    positions = prepared.n_positions
    size = sum(2 * spec.upstream_of_heads(layer) * spec.n_heads * positions**2 for layer in range(n_layers))
    kept: dict[int, tuple[torch.Tensor, torch.Tensor]] | None = (
        {} if size * adapter.element_size <= KEEP_CHANGES_BYTES else None
    )

    def changes_of(layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        if kept is not None and layer in kept:
            return kept[layer]
        found = pattern_changes(
            model,
            spec,
            layer,
            seen[sites.resid_pre(layer)][0],
            seen[sites.attention_scores(layer)][0],
            differences[0, :, : spec.upstream_of_heads(layer)],
        )
        if kept is not None:
            kept[layer] = found
        return found

    def compute(chunk: slice) -> torch.Tensor:
        count = chunk.stop - chunk.start
        dropped = torch.arange(chunk.start, chunk.stop, device=device)  # the layer each row drops

        def drop(x, hook, layer):
            cut = (dropped == layer)[:, None, None].to(x.device)  # x: on its layer's device
            return torch.where(cut, x.detach(), x)

        hooks = []
        if grad_drop:
            for layer in range(n_layers):
                for name in (sites.attention_out(layer), sites.mlp_out(layer)):
                    hooks.append((name, lambda x, hook, layer=layer: drop(x, hook, layer)))
        check = check_at(chunk.start)
        hooks += layer_checks(n_layers, check)
        gradients, _ = reader_gradients(
            model, spec, prepared, count, extra_hooks=hooks, extra_grads=patterns + neuron_names
        )
        part = torch.zeros(count, spec.n_forward, spec.n_backward, dtype=dtype, device=device)
        owner = torch.arange(count, device=device)
        accumulate_scores(spec, part, gradients, differences.expand(count, -1, -1, -1), owner, check=check)
        for layer in range(n_layers if qk_fix else 0):
            if check is not None:
                check()
            upstream = spec.upstream_of_heads(layer)
            changes = changes_of(layer)
            # [rows, H, t, s], from the layer's device to the scores' (a split model's may differ)
            pattern_gradient = gradients.grads[sites.attention_pattern(layer)].to(device, dtype)
            for kind, change in zip("qk", changes):
                estimate = torch.einsum("uhts,rhts->ruh", change.to(dtype), pattern_gradient)
                part[:, :upstream, spec.head_backward(layer, kind)] = estimate
        neuron_part = None
        if neurons is not None:  # [rows, n_layers, d_mlp]: each row's products, summed over positions
            neuron_part = torch.stack(
                [
                    (gradients.grads[name].to(device, dtype) * neuron_differences[0, :, layer].to(dtype)).sum(
                        1
                    )
                    for layer, name in enumerate(neuron_names)
                ],
                dim=1,
            )
            neuron_part = neuron_part.abs().sum(0) / max(n_layers - 1, 1) if grad_drop else neuron_part[0]
        return (part.abs().sum(0) / max(n_layers - 1, 1) if grad_drop else part[0]), neuron_part

    def commit(chunk: slice, found) -> None:
        part, neuron_part = found
        total.add_(part)
        if neuron_part is not None:
            neurons.add_(neuron_part)
        if progress:
            progress("score", chunk.stop / rows)

    run_in_chunks(
        model,
        "gradient",
        rows,
        prepared.n_positions,
        gradient_bytes_per_position(model, prepared.n_positions),
        compute,
        commit,
    )
    return total if neurons is None else (total, neurons)
