"""The one place that attaches hooks to a model: writer capture, edge patching, gradient capture.

Every method and the evaluation go through ``hooked_run``, which holds a per-model lock for the
whole run and removes its hooks on exit (also when the run raises), so one model instance can be
shared by several threads or browser sessions without one run seeing another's hooks.

Writers' outputs are their *additive contributions to the residual stream*. For models that
normalise the attention output before adding it (Gemma's ``ln1_post``, OLMo-2's post-norm), a
head's contribution is its result passed through that norm with the norm's scale frozen at this
run's value, so the heads of a layer still sum exactly to what the layer adds.
"""

from __future__ import annotations

import threading
import types
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch

from .graph import QKV, GraphSpec
from .tasks import PreparedTask

_LOCKS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_LOCKS_GUARD = threading.Lock()

Hook = tuple[str, Callable]


def model_lock(model) -> threading.RLock:
    """The lock that serialises hooked runs on one model instance."""
    with _LOCKS_GUARD:
        lock = _LOCKS.get(model)
        if lock is None:
            lock = threading.RLock()
            _LOCKS[model] = lock
        return lock


_TOKENIZER_LOCKS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _tokenizer_lock(model) -> threading.RLock:
    with _LOCKS_GUARD:
        return _TOKENIZER_LOCKS.setdefault(model, threading.RLock())


def _locked_to_tokens(self, *args, **kwargs):
    with _tokenizer_lock(self):
        return type(self).to_tokens(self, *args, **kwargs)


def serialise_tokenizer(model):
    """Make ``model.to_tokens`` safe to call from several threads at once. Idempotent.

    TransformerLens's ``to_tokens(prepend_bos=...)`` overrides ``model.cfg.default_prepend_bos``
    for the duration of the call, and the Hugging Face tokenizer it calls resets its own
    truncation state, so two sessions tokenising on one shared model could get each other's
    <bos> setting (a task measured on the wrong tokens). Each model gets its own lock.
    """
    _tokenizer_lock(model)
    if getattr(model.to_tokens, "__func__", None) is not _locked_to_tokens:
        model.to_tokens = types.MethodType(_locked_to_tokens, model)
    return model


@contextmanager
def hooked_run(model, fwd_hooks: list[Hook]) -> Iterator[None]:
    """Run with hooks under the model's lock; every hook is removed on exit, even on error."""
    with model_lock(model), model.hooks(fwd_hooks=fwd_hooks):
        yield


def model_dtype(model) -> torch.dtype:
    return next(model.parameters()).dtype


def model_device(model) -> torch.device:
    return next(model.parameters()).device


# ----- the metric -----------------------------------------------------------------------------
def final_residual(model, tokens: torch.Tensor, fwd_hooks: list[Hook]) -> torch.Tensor:
    """Residual stream after the last block at the last position.  # [batch, d_model]

    Stops before the unembedding: the metric needs a few logits at one position, not the whole
    vocabulary at every position (for Gemma-3 that is most of the forward pass's cost).
    """
    with hooked_run(model, fwd_hooks):
        residual = model(tokens, stop_at_layer=model.cfg.n_layers)  # [batch, pos, d_model]
    return residual[:, -1]


def logits_from_residual(model, residual: torch.Tensor, ids: torch.Tensor | None = None) -> torch.Tensor:
    """Logits from the final residual at one position: final norm, unembedding, soft-cap.

    residual: [batch, d_model]; ``ids`` restricts the unembedding to those vocabulary columns.
    Returns [batch, len(ids)] or [batch, d_vocab].
    """
    x = residual[:, None, :]  # [batch, 1, d_model]
    if model.cfg.normalization_type is not None:
        x = model.ln_final(x)
    x = x[:, 0]  # [batch, d_model]
    if ids is None:
        logits = x @ model.W_U + model.b_U
    else:
        logits = x @ model.W_U[:, ids] + model.b_U[ids]
    cap = getattr(model.cfg, "output_logits_soft_cap", None)
    if cap is not None and cap > 0:
        logits = cap * torch.tanh(logits / cap)
    return logits


def metric_from_residual(model, prepared: PreparedTask, residual: torch.Tensor) -> torch.Tensor:
    """The task's metric from the final residual at the last position.  # [batch]"""
    if prepared.task.metric == "logit_diff":
        ids = torch.tensor((prepared.answer_id, *prepared.foil_ids), device=residual.device)
        logits = logits_from_residual(model, residual, ids)  # [batch, 1 + n_foils]
        return logits[:, 0] - logits[:, 1:].mean(-1)
    logits = logits_from_residual(model, residual)  # [batch, d_vocab]
    logprob = torch.log_softmax(logits.float(), dim=-1)[:, prepared.answer_id]
    return logprob.exp() if prepared.task.metric == "prob" else logprob


# ----- writers -----------------------------------------------------------------------------
def _attention_post_norm(model, layer: int):
    """The norm applied to a layer's summed attention output before the residual add, if any."""
    block = model.blocks[layer]
    if getattr(model.cfg, "use_normalization_before_and_after", False):
        return block.ln1_post, "ln1_post"
    from transformer_lens.components.transformer_block import POST_NORM_ARCHITECTURES

    if model.cfg.original_architecture in POST_NORM_ARCHITECTURES:
        return block.ln1, "ln1"
    return None, None


def _frozen_norm(norm, heads: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """Apply ``norm`` to each head's share with the scale of the whole sum frozen.

    heads: [batch, pos, n_heads, d_model]; scale: [batch, pos, 1]. LayerNorm's centring and bias
    are linear, so they distribute over the heads too (the bias split evenly).
    """
    n_heads = heads.shape[2]
    centred = "LayerNorm" in type(norm).__name__
    if centred:
        heads = heads - heads.mean(-1, keepdim=True)
    out = heads / scale[:, :, None, :]
    weight = getattr(norm, "w", None)
    if weight is not None:
        out = out * weight
    bias = getattr(norm, "b", None)
    if bias is not None:
        out = out + bias / n_heads
    return out


def head_results(attention, z: torch.Tensor) -> torch.Tensor:
    """Each head's output from its z, with the output bias shared out evenly.

    z: [batch, pos, n_heads, d_head] -> [batch, pos, n_heads, d_model]. Computed here rather than
    read from ``hook_result``: TransformerLens builds that hook's value by broadcasting a
    [batch, pos, n_heads, d_head, d_model] product (786 MB per layer for 20 Gemma-3 sequences),
    which made every run several times slower; an einsum gives the same numbers.
    """
    return torch.einsum("bphd,hdm->bphm", z, attention.W_O) + attention.b_O / z.shape[2]


def writer_hooks(model, spec: GraphSpec, sink: Callable[[int | slice, torch.Tensor], None]) -> list[Hook]:
    """Hooks that hand each writer's residual contribution to ``sink(forward_index, tensor)``.

    tensor shapes: input and MLP [batch, pos, d_model]; heads [batch, pos, n_heads, d_model].
    """
    hooks: list[Hook] = [("blocks.0.hook_resid_pre", lambda x, hook: sink(0, x))]
    for layer in range(spec.n_layers):
        heads = spec.head_forward(layer)
        attention = model.blocks[layer].attn
        norm, norm_name = _attention_post_norm(model, layer)
        if norm is None:
            hooks.append(
                (
                    f"blocks.{layer}.attn.hook_z",
                    lambda z, hook, heads=heads, attention=attention: sink(heads, head_results(attention, z)),
                )
            )
        else:
            pending: dict[str, torch.Tensor] = {}

            def keep(z, hook, pending=pending, attention=attention):
                pending["result"] = head_results(attention, z)

            def scaled(scale, hook, pending=pending, heads=heads, norm=norm):
                sink(heads, _frozen_norm(norm, pending.pop("result"), scale))

            hooks.append((f"blocks.{layer}.attn.hook_z", keep))
            hooks.append((f"blocks.{layer}.{norm_name}.hook_scale", scaled))
        mlp = spec.mlp_forward(layer)
        hooks.append((f"blocks.{layer}.hook_mlp_out", lambda x, hook, mlp=mlp: sink(mlp, x)))
    return hooks


class WriterBuffer:
    """Every writer's contribution of one run in one tensor.  # [batch, pos, n_forward, d_model]"""

    def __init__(self, spec: GraphSpec, batch: int, positions: int, dtype, device):
        self.values = torch.zeros(batch, positions, spec.n_forward, spec.d_model, dtype=dtype, device=device)

    def __call__(self, index, tensor: torch.Tensor) -> None:
        self.values[:, :, index] = tensor.detach()


def reader_hook_points(spec: GraphSpec) -> list[tuple[str, int, int | slice]]:
    """(hook name, number of upstream writers, backward index) for every reader of the graph."""
    points = []
    for layer in range(spec.n_layers):
        for qkv in QKV:
            points.append(
                (
                    f"blocks.{layer}.hook_{qkv}_input",
                    spec.upstream_of_heads(layer),
                    spec.head_backward(layer, qkv),
                )
            )
        points.append((f"blocks.{layer}.hook_mlp_in", spec.upstream_of_mlp(layer), spec.mlp_backward(layer)))
    points.append((f"blocks.{spec.n_layers - 1}.hook_resid_post", spec.n_forward, spec.logits_backward))
    return points


# ----- runs -----------------------------------------------------------------------------------
@torch.no_grad()
def clean_and_corrupted(model, spec: GraphSpec, prepared: PreparedTask):
    """One batched run of the clean and the corrupted prompt.

    Returns (writers [2, pos, n_forward, d_model], metrics [2]) with index 0 clean, 1 corrupted.
    """
    tokens = torch.cat([prepared.clean_tokens, prepared.corrupted_tokens]).to(model_device(model))
    buffer = WriterBuffer(spec, 2, tokens.shape[1], model_dtype(model), tokens.device)
    residual = final_residual(model, tokens, writer_hooks(model, spec, buffer))
    return buffer.values, metric_from_residual(model, prepared, residual)


@torch.no_grad()
def writers_of_prompts(
    model, spec: GraphSpec, prepared: PreparedTask, tokens: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """One batched run of several different prompts of equal length (Best-of-N's paraphrases
    and their corruptions), scored with the task's metric.

    tokens: [batch, pos]. Returns (writers [batch, pos, n_forward, d_model], metrics [batch]).
    """
    tokens = tokens.to(model_device(model))
    buffer = WriterBuffer(spec, tokens.shape[0], tokens.shape[1], model_dtype(model), tokens.device)
    residual = final_residual(model, tokens, writer_hooks(model, spec, buffer))
    return buffer.values, metric_from_residual(model, prepared, residual)


@torch.no_grad()
def observe(
    model, spec: GraphSpec, tokens: torch.Tensor, hook_names=(), keep_writers: bool = True
) -> tuple[torch.Tensor | None, dict[str, torch.Tensor], torch.Tensor]:
    """One plain forward pass that keeps what an observational method (CircuitLasso) reads.

    tokens: [batch, pos]. Returns (every writer's contribution [batch, pos, n_forward, d_model],
    or None without ``keep_writers``; {hook name: the activation as that hook saw it}; the
    residual stream after the last block at every position [batch, pos, d_model]).
    """
    device = model_device(model)
    tokens = tokens.to(device)
    buffer = None
    if keep_writers:
        buffer = WriterBuffer(spec, tokens.shape[0], tokens.shape[1], model_dtype(model), device)
    captured: dict[str, torch.Tensor] = {}

    def capture(x, hook):
        captured[hook.name] = x.detach()

    hooks = writer_hooks(model, spec, buffer) if buffer is not None else []
    hooks += [(name, capture) for name in hook_names]
    with hooked_run(model, hooks):
        residual = model(tokens, stop_at_layer=model.cfg.n_layers)  # [batch, pos, d_model]
    return (buffer.values if buffer is not None else None), captured, residual


@torch.no_grad()
def patched_metrics(
    model,
    spec: GraphSpec,
    prepared: PreparedTask,
    corrupted_writers: torch.Tensor,
    removed: torch.Tensor,
) -> torch.Tensor:
    """Metric of the clean run with the edges in ``removed`` carrying corrupted activations.

    corrupted_writers: [1, pos, n_forward, d_model]; removed: [batch, n_forward, n_backward] bool,
    one circuit's complement per batch element. A reader's input becomes its current input plus,
    for each removed edge, (corrupted - current) output of the edge's source. Returns [batch].
    """
    batch = removed.shape[0]
    device = model_device(model)
    tokens = prepared.clean_tokens.to(device).expand(batch, -1)
    dtype = model_dtype(model)
    current = WriterBuffer(spec, batch, tokens.shape[1], dtype, device)
    corrupted_writers = corrupted_writers.to(device=device, dtype=dtype)
    removed = removed.to(device=device, dtype=dtype)
    hooks = writer_hooks(model, spec, current)
    # readers with a removed edge in any circuit of the batch, read off in one transfer
    active = removed.any(dim=1).any(dim=0).tolist()  # [n_backward]

    def patch(x, hook, upstream, backward):
        weights = removed[:, :upstream, backward]  # [batch, upstream, (n_heads)]
        # sum_f w[f] (corrupted_f - current_f), as two contractions: no [b, pos, up, d] temporary
        corrupted = corrupted_writers[0, :, :upstream]  # [pos, up, d_model]
        now = current.values[:, :, :upstream]  # [batch, pos, up, d_model]
        if x.dim() == 4:  # a head input: [batch, pos, n_heads, d_model]
            return (
                x
                + torch.einsum("pfd,bfh->bphd", corrupted, weights)
                - torch.einsum("bpfd,bfh->bphd", now, weights)
            )
        return (
            x + torch.einsum("pfd,bf->bpd", corrupted, weights) - torch.einsum("bpfd,bf->bpd", now, weights)
        )

    for name, upstream, backward in reader_hook_points(spec):
        readers = range(spec.n_backward)[backward]
        if not any(active[reader] for reader in (readers if isinstance(readers, range) else [readers])):
            continue  # every circuit keeps all of this reader's edges: its input stays clean
        hooks.append(
            (name, lambda x, hook, upstream=upstream, backward=backward: patch(x, hook, upstream, backward))
        )
    return metric_from_residual(model, prepared, final_residual(model, tokens, hooks))


def reader_gradients(
    model,
    spec: GraphSpec,
    prepared: PreparedTask,
    batch: int,
    input_replacement: Callable[[torch.Tensor], torch.Tensor] | None = None,
    extra_hooks: list[Hook] | None = None,
    tokens: torch.Tensor | None = None,
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """Gradients of the summed metric with respect to every reader's input, on the clean prompt.

    ``input_replacement`` maps the clean embedding [batch, pos, d_model] to what block 0 should
    see (EAP-IG's interpolated inputs). Parameters need no gradient: the embedding is made a
    leaf that requires one, so only activation gradients are computed. ``tokens`` [batch, pos]
    runs other prompts of the task's length instead (Best-of-N's paraphrases in one batch; the
    metric still reads the task's answer and foils).
    Returns ({reader hook name: gradient}, metrics [batch]).
    """
    device = model_device(model)
    if tokens is None:
        tokens = prepared.clean_tokens.expand(batch, -1)
    tokens = tokens.to(device)
    captured: dict[str, torch.Tensor] = {}

    def leaf_input(x, hook):
        x = input_replacement(x) if input_replacement is not None else x
        return x.detach().requires_grad_(True)

    def capture(x, hook):
        captured[hook.name] = x
        return x

    hooks: list[Hook] = [("blocks.0.hook_resid_pre", leaf_input)]
    hooks += extra_hooks or []
    hooks += [(name, capture) for name, _, _ in reader_hook_points(spec)]
    with torch.enable_grad():
        residual = final_residual(model, tokens, hooks)
        metrics = metric_from_residual(model, prepared, residual)
        names = list(captured)
        grads = torch.autograd.grad(metrics.sum(), [captured[name] for name in names], allow_unused=True)
    gradients = {
        name: (grad if grad is not None else torch.zeros_like(captured[name]))
        for name, grad in zip(names, grads)
    }
    return gradients, metrics.detach()


def score_dtype(dtype: torch.dtype) -> torch.dtype:
    """The precision edge scores accumulate in: float32 at least (bfloat16 models included)."""
    return torch.promote_types(dtype, torch.float32)


def _layer_gradients(spec: GraphSpec, gradients: dict[str, torch.Tensor], layer: int) -> torch.Tensor:
    """One layer's reader gradients side by side, in backward-index order (q, k, v heads, MLP).

    Returns [batch, pos, 3 n_heads + 1, d_model].
    """
    parts = [gradients[f"blocks.{layer}.hook_{qkv}_input"] for qkv in QKV]
    parts.append(gradients[f"blocks.{layer}.hook_mlp_in"][:, :, None])
    return torch.cat(parts, dim=2)


def accumulate_scores(
    spec: GraphSpec,
    scores: torch.Tensor,
    gradients: dict[str, torch.Tensor],
    differences: torch.Tensor,
) -> None:
    """scores[u, v] += sum over batch and positions of differences[u] . gradient[v].

    differences: [batch or 1, pos, n_forward, d_model] (corrupted minus clean writer outputs,
    per batch element when each element perturbs something different). ``scores`` is
    [n_forward, n_backward], or [batch, n_forward, n_backward] to keep each element's scores
    apart (then ``differences`` and the gradients have that batch). One contraction per layer
    covers all its readers; the products are formed in ``scores``' precision.
    """
    per_element = scores.dim() == 3
    shared = differences.shape[0] == 1 and not per_element
    dtype = scores.dtype
    width = 3 * spec.n_heads + 1
    for layer in range(spec.n_layers):
        upstream = spec.upstream_of_mlp(layer)
        readers = slice(layer * width, (layer + 1) * width)
        gradient = _layer_gradients(spec, gradients, layer)  # [batch, pos, 3H+1, d_model]
        delta = differences[:, :, :upstream]  # [batch or 1, pos, upstream, d_model]
        if shared:
            part = torch.einsum("pfd,prd->fr", delta[0].to(dtype), gradient.sum(0).to(dtype))
        elif per_element:
            part = torch.einsum("bpfd,bprd->bfr", delta.to(dtype), gradient.to(dtype))
        else:
            part = torch.einsum("bpfd,bprd->fr", delta.to(dtype), gradient.to(dtype))
        # a layer's own heads feed its MLP but not its own queries, keys and values
        part[..., spec.upstream_of_heads(layer) :, : 3 * spec.n_heads] = 0
        scores[..., :upstream, readers] += part
    gradient = gradients[f"blocks.{spec.n_layers - 1}.hook_resid_post"]  # [batch, pos, d_model]
    if shared:
        part = torch.einsum("pfd,pd->f", differences[0].to(dtype), gradient.sum(0).to(dtype))
    elif per_element:
        part = torch.einsum("bpfd,bpd->bf", differences.to(dtype), gradient.to(dtype))
    else:
        part = torch.einsum("bpfd,bpd->f", differences.to(dtype), gradient.to(dtype))
    scores[..., :, spec.logits_backward] += part


# ----- residual-stream reads and edits (SAE labels and steering) ---------------------------------
def resid_post_name(layer: int) -> str:
    """Hook name of the residual stream after block ``layer`` (where the embedded SAEs read)."""
    return f"blocks.{layer}.hook_resid_post"


@torch.no_grad()
def residual_stream(model, tokens: torch.Tensor, layers) -> dict[int, torch.Tensor]:
    """The residual stream after each block in ``layers``.  {layer: [batch, pos, d_model]}

    The forward pass stops after the last requested block, so reading early layers never pays
    for the rest of the model or the unembedding.
    """
    layers = sorted({int(layer) for layer in layers})
    captured: dict[int, torch.Tensor] = {}

    def capture(x, hook, layer):
        captured[layer] = x.detach()

    hooks: list[Hook] = [
        (resid_post_name(layer), lambda x, hook, layer=layer: capture(x, hook, layer)) for layer in layers
    ]
    with hooked_run(model, hooks):
        model(tokens.to(model_device(model)), stop_at_layer=layers[-1] + 1)
    return captured


def final_residual_with_edits(
    model, tokens: torch.Tensor, edits: dict[int, Callable[[torch.Tensor], torch.Tensor]]
) -> torch.Tensor:
    """Final residual at the last position when each ``edits[layer]`` rewrites that layer's output.

    An edit maps the residual stream after block ``layer`` [batch, pos, d_model] to its
    replacement (e.g. an SAE reconstruction with chosen features removed); later blocks see
    the edited stream. Returns [batch, d_model], ready for ``metric_from_residual``.
    """
    hooks: list[Hook] = [
        (resid_post_name(layer), lambda x, hook, edit=edit: edit(x)) for layer, edit in sorted(edits.items())
    ]
    return final_residual(model, tokens.to(model_device(model)), hooks)


# ----- query/key edits (ACC++ signal knockouts) --------------------------------------------------
def qk_hook_names(model, layer: int) -> tuple[str, str]:
    """Where the queries and keys a layer's scores are made of can be edited.

    Rotary models: ``hook_rot_q``/``hook_rot_k`` (after any q/k-norm and the rotation); others
    ``hook_q``/``hook_k``. A q/k-norm without rotation follows ``hook_q``, so such models are refused.
    """
    prefix = f"blocks.{layer}.attn"
    if model.cfg.positional_embedding_type == "rotary":
        return f"{prefix}.hook_rot_q", f"{prefix}.hook_rot_k"
    if getattr(model.cfg, "use_qk_norm", False):
        raise ValueError("Query/key edits need rotary positions when the model has q/k-norms.")
    return f"{prefix}.hook_q", f"{prefix}.hook_k"


@torch.no_grad()
def run_with_qk_edits(
    model,
    tokens: torch.Tensor,
    q_edits: dict[int, torch.Tensor],
    k_edits: dict[int, torch.Tensor],
    pattern_layers=(),
) -> tuple[torch.Tensor, dict[int, torch.Tensor]]:
    """Run with additive edits to the queries and keys heads score with; read patterns and output.

    tokens: [batch, pos]; q_edits[layer], k_edits[layer]: [batch, pos, n_heads, d_head], added
    where ``qk_hook_names`` says. Returns (residual after the last block at the last position
    [batch, d_model], {layer: attention pattern [batch, n_heads, pos, pos]} for ``pattern_layers``).
    """
    captured: dict[int, torch.Tensor] = {}
    hooks: list[Hook] = []
    for edits, which in ((q_edits, 0), (k_edits, 1)):
        for layer, delta in edits.items():
            name = qk_hook_names(model, layer)[which]
            hooks.append((name, lambda x, hook, delta=delta: x + delta.to(device=x.device, dtype=x.dtype)))
    for layer in sorted({int(layer) for layer in pattern_layers}):
        hooks.append(
            (
                f"blocks.{layer}.attn.hook_pattern",
                lambda x, hook, layer=layer: captured.__setitem__(layer, x.detach()),
            )
        )
    residual = final_residual(model, tokens.to(model_device(model)), hooks)
    return residual, captured
