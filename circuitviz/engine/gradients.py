"""Gradients of the metric at every reader's input: what the gradient methods score edges with."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import torch

from ..core.graph import QKV, GraphSpec
from ..models.adapter import Hook, adapter_of
from . import sites
from .metric import RowsMetric, metric_from_residual
from .prefix import final_residual

if TYPE_CHECKING:
    from ..core.tasks import PreparedTask

GRADIENT_INPUTS_ENV = "CIRCUITVIZ_GRADIENT_INPUTS"


def shared_attention_inputs(model) -> bool:
    """Whether gradient passes run with one attention input per layer instead of one per head.

    ``$CIRCUITVIZ_GRADIENT_INPUTS`` = ``split`` or ``shared`` decides; by default (``auto``)
    accelerators share (memory-bound: per-head copies hold 3 n_heads times the residual stream
    per layer) and the CPU splits (compute-bound: sharing repeats each layer's q/k/v input
    projection, about 10 % more time on the embedded model). Both give the same gradients.
    """
    choice = os.environ.get(GRADIENT_INPUTS_ENV, "auto").strip().lower()
    if choice in ("split", "shared"):
        return choice == "shared"
    return adapter_of(model).device.type != "cpu"


class ReaderGradients:
    """Gradients of the summed metric at every reader's input, read out one layer at a time.

    With split inputs (TransformerLens's ``use_split_qkv_input``) every head has three private
    copies of the residual stream, and autograd gives each its gradient directly. Those copies
    ([batch, pos, 3 n_heads, d_model] per layer, each normalised on its own and kept for the
    backward pass) dominate a gradient pass's memory, so on accelerators the pass runs with one
    shared input per layer instead, and each head's own input gradient is recovered exactly: in
    an unpatched run every head reads the same residual x, so

        dL/d(q input of head h) = J_norm(x)^T (dL/dq_h W_Q[h]^T)

    with q_h the query before any q-norm or rotation (``hook_q``), and likewise for k and v. The
    norm's vector-Jacobian product is taken at x for all 3 n_heads cotangents in one batched call.
    """

    def __init__(
        self,
        model,
        spec: GraphSpec,
        values: dict[str, torch.Tensor],
        grads: dict[str, torch.Tensor],
        start: int = 0,
    ):
        self.adapter = adapter_of(model)
        self.spec = spec
        self.values = values  # {hook name: activation}: each layer's attention input
        self.grads = grads  # {hook name: gradient of the summed metric there}
        self.start = start  # a pass started at this block: the readers below it read nothing it changed

    @property
    def logits(self) -> torch.Tensor:
        """Gradient at the final residual stream (the ``logits`` reader).  # [batch, pos, d_model]"""
        return self.grads[sites.resid_post(self.spec.n_layers - 1)]

    def layer(self, layer: int) -> torch.Tensor:
        """One layer's reader gradients side by side, in backward-index order: each head's q, k
        and v input, then the MLP.  # [batch, pos, 3 n_heads + 1, d_model]
        """
        if layer < self.start:  # below a started pass: no gradient reaches these readers
            batch, positions, width = self.logits.shape
            shape = (batch, positions, 3 * self.spec.n_heads + 1, width)
            return torch.zeros(shape, dtype=self.logits.dtype, device=self.logits.device)
        mlp = self.grads[sites.mlp_in(layer)][:, :, None]  # [batch, pos, 1, d_model]
        if sites.head_input(layer, "q") in self.grads:  # split inputs: read directly
            heads = [self.grads[sites.head_input(layer, kind)] for kind in QKV]
            return torch.cat([*heads, mlp], dim=2)
        parts = []
        for kind, weight in zip(QKV, self.adapter.qkv_weights(layer)):
            projected = self.grads[sites.head_projection(layer, kind)]  # [batch, pos, H, d_head]
            parts.append(torch.einsum("bphe,hde->bphd", projected, weight))
        cotangents = torch.cat(parts, dim=2)  # [batch, pos, 3H, d_model]
        per_head = self.adapter.attention_norm_vjp(layer, self.values[sites.resid_pre(layer)], cotangents)
        return torch.cat([per_head.to(mlp.dtype), mlp], dim=2)


class SummedGradients:
    """A batch's reader gradients summed per owner, read out like ``ReaderGradients``: row i of
    each layer is the sum over the sequences whose ``owner`` is i. A batch whose sequences share
    the differences they multiply in owner groups (EAP-IG activations: every step of one writer
    group) contracts each group once instead of each sequence."""

    def __init__(self, inner: ReaderGradients, owner: torch.Tensor, n_owners: int):
        self.inner, self.owner, self.n_owners = inner, owner, n_owners

    def _summed(self, gradient: torch.Tensor) -> torch.Tensor:
        shape = (self.n_owners, *gradient.shape[1:])
        summed = torch.zeros(shape, dtype=gradient.dtype, device=gradient.device)
        return summed.index_add_(0, self.owner.to(gradient.device), gradient)

    @property
    def logits(self) -> torch.Tensor:
        return self._summed(self.inner.logits)  # [n_owners, pos, d_model]

    def layer(self, layer: int) -> torch.Tensor:
        return self._summed(self.inner.layer(layer))  # [n_owners, pos, 3 n_heads + 1, d_model]


@torch.no_grad()
def clean_residuals(model, spec: GraphSpec, prepared: PreparedTask) -> torch.Tensor:
    """The clean prompt's residual stream before every block, where a started pass begins.
    # [n_layers, pos, d_model]"""
    adapter = adapter_of(model)
    kept: list[torch.Tensor | None] = [None] * spec.n_layers

    def keep(x, hook, layer: int) -> None:
        kept[layer] = x[0]

    hooks = [
        (sites.resid_pre(layer), lambda x, hook, layer=layer: keep(x, hook, layer))
        for layer in range(spec.n_layers)
    ]
    with adapter.hooked(hooks):
        adapter.blocks(prepared.clean_tokens.to(adapter.device))
    return torch.stack(kept)


def reader_gradients(
    model,
    spec: GraphSpec,
    prepared: PreparedTask,
    batch: int,
    input_replacement: Callable[[torch.Tensor], torch.Tensor] | None = None,
    extra_hooks: list[Hook] | None = None,
    tokens: torch.Tensor | None = None,
    metric: RowsMetric | None = None,
    prefix: int = 0,
    split_inputs: bool | None = None,
    extra_grads: Sequence[str] = (),
    start: int = 0,
    start_residual: torch.Tensor | None = None,
) -> tuple[ReaderGradients, torch.Tensor]:
    """Gradients of the summed metric with respect to every reader's input, on the clean prompt.

    ``input_replacement`` maps the clean embedding [batch, pos, d_model] to what block 0 should
    see (EAP-IG's interpolated inputs). Parameters need no gradient: the embedding is made a
    leaf that requires one, so only activation gradients are computed. ``tokens`` [batch, pos]
    runs other prompts of the task's length instead (Best-of-N's paraphrases in one batch; the
    metric still reads the task's answer and foils, unless ``metric`` (``task_metric``) scores
    each row with its own task's, as a batch of a dataset's prompts does). ``extra_hooks`` may replace what writers
    add (EAP-IG activations); every head still reads the residual stream unpatched. ``prefix``
    leading positions run once without gradients (``shared_prefix``): the gradients, and what
    ``input_replacement`` maps, cover the positions after them. ``split_inputs`` True runs with
    one q/k/v input per head whatever the device (a backward pass whose rules differ from
    autograd's, RelP's, cannot recover them from a shared input); ``extra_grads`` names further
    activations whose gradients ``ReaderGradients.grads`` holds too (AtP*'s attention patterns).
    ``start`` > 0 runs blocks ``start`` onwards only, from ``start_residual`` [pos, d_model] (the
    clean residual stream before that block, ``adapter.starts_at_layer`` models only): a pass
    whose ``extra_hooks`` change nothing below it, whose readers below it get no gradient (zeros).
    Returns (the gradients, read out per layer; metrics [batch]).
    """
    adapter = adapter_of(model)
    device = adapter.device
    if tokens is None:
        tokens = prepared.clean_tokens.expand(batch, -1)
    tokens = tokens.to(device)
    values: dict[str, torch.Tensor] = {}
    captured: dict[str, torch.Tensor] = {}

    def leaf_input(x, hook):
        x = input_replacement(x) if input_replacement is not None else x
        return x.detach().requires_grad_(True)

    def keep_value(x, hook):
        values[hook.name] = x.detach()

    def capture(x, hook):
        captured[hook.name] = x
        return x

    shared = shared_attention_inputs(model) if split_inputs is None else not split_inputs
    hooks: list[Hook] = [(sites.EMBEDDING, leaf_input)]
    hooks += extra_hooks or []
    hooks += [(name, capture) for name in extra_grads]
    if shared:
        for layer in range(spec.n_layers):
            hooks.append((sites.resid_pre(layer), keep_value))
            hooks += [(sites.head_projection(layer, kind), capture) for kind in QKV]
            hooks.append((sites.mlp_in(layer), capture))
        hooks.append((sites.resid_post(spec.n_layers - 1), capture))
    else:
        hooks += [(name, capture) for name, _, _ in sites.reader_sites(spec)]
    with adapter.split_attention_inputs(not shared), torch.enable_grad():
        if start > 0:
            leaf = start_residual.to(device)[None].expand(batch, -1, -1).detach().requires_grad_(True)
            with adapter.hooked(hooks):
                residual = adapter.from_layer(leaf, start, None)[:, -1]  # [batch, d_model]
        else:
            residual = final_residual(model, tokens, hooks, prefix)
        # the extra hooks hold for the final norm the metric applies too (RelP fixes its scale)
        with adapter.hooked(extra_hooks or []):
            metrics = (
                metric(residual) if metric is not None else metric_from_residual(model, prepared, residual)
            )
        names = list(captured)
        grads = torch.autograd.grad(metrics.sum(), [captured[name] for name in names], allow_unused=True)
    gradients = {
        name: (grad if grad is not None else torch.zeros_like(captured[name]))
        for name, grad in zip(names, grads)
    }
    return ReaderGradients(model, spec, values, gradients, start), metrics.detach()
