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

import os
import threading
import types
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import torch

from .chunks import run_in_chunks
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
    """Run with hooks under the model's lock; every hook is removed on exit, even on error.

    The tokenizer's lock is held too: TransformerLens's ``forward`` saves ``cfg.default_prepend_bos``
    on entry and writes it back on exit, so a forward pass that ended while another thread was
    inside ``to_tokens(prepend_bos=False)`` put the <bos> setting back under it (a one-token
    answer came out as two tokens, 3 times in 180 concurrent discoveries), or left the override
    in place for good.
    """
    with model_lock(model), _tokenizer_lock(model), model.hooks(fwd_hooks=fwd_hooks):
        yield


def model_dtype(model) -> torch.dtype:
    return next(model.parameters()).dtype


def model_device(model) -> torch.device:
    return next(model.parameters()).device


# ----- the metric -----------------------------------------------------------------------------
def final_residual(model, tokens: torch.Tensor, fwd_hooks: list[Hook], prefix: int = 0) -> torch.Tensor:
    """Residual stream after the last block at the last position.  # [batch, d_model]

    Stops before the unembedding: the metric needs a few logits at one position, not the whole
    vocabulary at every position (for Gemma-3 that is most of the forward pass's cost). With
    ``prefix`` > 0 the first ``prefix`` positions run once per distinct row, without hooks or
    gradients, and the hooked run continues from their keys and values: the hooks see positions
    ``prefix`` onwards only (``shared_prefix`` says when that changes nothing a caller reads).
    """
    if prefix <= 0:
        with hooked_run(model, fwd_hooks):
            residual = model(tokens, stop_at_layer=model.cfg.n_layers)  # [batch, pos, d_model]
        return residual[:, -1]
    caches = _prefix_caches(model, tokens[:, :prefix])
    mask = torch.ones_like(tokens)  # [batch, pos]
    with hooked_run(model, fwd_hooks):
        residual = _run_continuing(model, tokens[:, prefix:], caches, mask)  # [batch, pos - prefix, d_model]
    return residual[:, -1]


def logits_from_residual(model, residual: torch.Tensor, ids: torch.Tensor | None = None) -> torch.Tensor:
    """Logits from the final residual at one position: final norm, unembedding, soft-cap.

    residual: [batch, d_model]; ``ids`` restricts the unembedding to those vocabulary columns:
    [k] for every row alike, or [batch, k] for each row its own (a batch of a dataset's tasks).
    Returns [batch, k] or [batch, d_vocab].
    """
    x = residual[:, None, :]  # [batch, 1, d_model]
    if model.cfg.normalization_type is not None:
        x = model.ln_final(x)
    x = x[:, 0]  # [batch, d_model]
    if ids is None:
        logits = x @ model.W_U + model.b_U
    elif ids.dim() == 2:  # each row's own columns: [d_model, batch, k] gathered, then one product a row
        logits = torch.einsum("bd,dbk->bk", x, model.W_U[:, ids]) + model.b_U[ids]
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


Metric = Callable[[torch.Tensor], torch.Tensor]


def batch_compatible(tasks: Sequence[PreparedTask]) -> str | None:
    """Why these tasks cannot share a batched pass, or None when they can.

    A batch of several tasks needs one prompt length (its sequences are stacked), one metric and
    one number of foils (each row's metric is then the same formula with its own token ids).
    """
    if not tasks:
        return "no tasks were given"
    first = tasks[0]
    shape = (first.n_positions, first.task.metric, len(first.foil_ids))
    for task in tasks[1:]:
        if (task.n_positions, task.task.metric, len(task.foil_ids)) != shape:
            return (
                "tasks of one batch must share the prompt length, the metric and the number of foils "
                f"({first.n_positions} tokens, {first.task.metric}, {len(first.foil_ids)} foils first; "
                f"then {task.n_positions} tokens, {task.task.metric}, {len(task.foil_ids)} foils)"
            )
    return None


def rows_metric(model, tasks: Sequence[PreparedTask], owner: torch.Tensor) -> Metric:
    """The metric of a batch whose row b belongs to ``tasks[owner[b]]``, each row scored with
    its own task's answer and foils, as ``metric_from_residual`` scores that task alone.

    ``tasks`` must pass ``batch_compatible``. The returned function maps the final residual
    [batch, d_model] to [batch].
    """
    problem = batch_compatible(tasks)
    if problem is not None:
        raise ValueError(f"These tasks cannot run in one batch: {problem}.")
    kind = tasks[0].task.metric
    ids = torch.tensor([(t.answer_id, *t.foil_ids) for t in tasks], device=owner.device)[owner]  # [b, 1+f]

    def metric(residual: torch.Tensor) -> torch.Tensor:
        if kind == "logit_diff":
            logits = logits_from_residual(model, residual, ids.to(residual.device))  # [batch, 1 + n_foils]
            return logits[:, 0] - logits[:, 1:].mean(-1)
        logits = logits_from_residual(model, residual)  # [batch, d_vocab]
        logprob = torch.log_softmax(logits.float(), dim=-1)
        answer = logprob.gather(1, ids[:, :1].to(residual.device))[:, 0]  # [batch]
        return answer.exp() if kind == "prob" else answer

    return metric


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
    """Every writer's contribution of one run in one tensor.  # [batch, pos, n_forward, d_model]

    ``writer_major`` keeps them as [batch, n_forward, pos, d_model] instead, so the writers a
    reader sums over are one contiguous block per row (the patched runs contract them with a
    matrix product and no transposed copy).
    """

    def __init__(
        self, spec: GraphSpec, batch: int, positions: int, dtype, device, writer_major: bool = False
    ):
        shape = (
            (batch, spec.n_forward, positions, spec.d_model)
            if writer_major
            else (batch, positions, spec.n_forward, spec.d_model)
        )
        self.writer_major = writer_major
        self.values = torch.zeros(shape, dtype=dtype, device=device)

    def __call__(self, index, tensor: torch.Tensor) -> None:
        if not self.writer_major:
            self.values[:, :, index] = tensor.detach()
        elif tensor.dim() == 4:  # a layer's heads: [batch, pos, n_heads, d_model]
            self.values[:, index] = tensor.detach().transpose(1, 2)
        else:
            self.values[:, index] = tensor.detach()

    def major(self, count: int) -> torch.Tensor:
        """The first ``count`` writers' contributions, writer-major (a view; needs ``writer_major``).
        # [batch, count, pos, d_model]"""
        if not self.writer_major:
            raise ValueError(
                "patching reads the writers writer-major: make the buffer with writer_major=True"
            )
        return self.values[:, :count]


class WriterDifferences:
    """(corrupted - current) output of every writer of one run, kept in the autograd graph (a
    learned mask's run), laid out so that a reader's masked change is one batched matrix product.

    A reader's change is sum_f w[f] (corrupted_f - current_f); with each writer's difference
    stored as a [pos * d_model] row, that is [n_readers, up] @ [up, pos * d_model] per circuit:
    one product over every position at once, differentiable in both the weights and the current
    outputs. (``WriterBuffer`` writes into one preallocated tensor in place, which autograd cannot
    differentiate through.) Writers arrive in forward order, as ``writer_hooks`` calls them;
    ``upstream(count)`` concatenates the first ``count`` (once per count: a layer's q, k and v
    readers share theirs).
    """

    def __init__(self, corrupted_writers: torch.Tensor):
        self.corrupted = corrupted_writers[0].transpose(0, 1)  # [n_forward, pos, d_model]
        self.parts: list[torch.Tensor] = []  # [batch, k, pos * d_model] each, in forward order
        self.count = 0
        self._joined: dict[int, torch.Tensor] = {}

    def __call__(self, index, tensor: torch.Tensor) -> None:
        start = index.start if isinstance(index, slice) else index
        if start != self.count:
            raise RuntimeError(f"writer {start} arrived after {self.count} writers; hooks out of order")
        part = tensor if tensor.dim() == 4 else tensor[:, :, None]  # [batch, pos, k, d_model]
        k = part.shape[2]
        corrupted = self.corrupted[start : start + k]  # [k, pos, d_model]
        difference = corrupted[None] - part.transpose(1, 2)  # [batch, k, pos, d_model], contiguous
        self.parts.append(difference.flatten(2))
        self.count += k

    def upstream(self, count: int) -> torch.Tensor:
        """The first ``count`` writers' differences.  # [batch, count, pos * d_model]"""
        if count not in self._joined:
            joined, total = [], 0
            for part in self.parts:
                if total >= count:
                    break
                joined.append(part[:, : count - total])
                total += joined[-1].shape[1]
            if total != count:
                raise RuntimeError(f"{count} writers asked for, {total} written so far")
            self._joined[count] = joined[0] if len(joined) == 1 else torch.cat(joined, dim=1)
        return self._joined[count]


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
    model, spec: GraphSpec, prepared: PreparedTask | None, tokens: torch.Tensor, metric: Metric | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """One batched run of several different prompts of equal length (Best-of-N's paraphrases
    and their corruptions, a dataset's prompts), scored with the task's metric or ``metric``
    (``rows_metric``: each row its own task's).

    tokens: [batch, pos]. Returns (writers [batch, pos, n_forward, d_model], metrics [batch]).
    """
    tokens = tokens.to(model_device(model))
    buffer = WriterBuffer(spec, tokens.shape[0], tokens.shape[1], model_dtype(model), tokens.device)
    residual = final_residual(model, tokens, writer_hooks(model, spec, buffer))
    if metric is not None:
        return buffer.values, metric(residual)
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


def patch_hooks(
    spec: GraphSpec,
    corrupted_writers: torch.Tensor | None,
    weights: torch.Tensor,
    current,
) -> list[Hook]:
    """Hooks that move each reader's input towards the corrupted run, edge by edge.

    weights: [batch, n_forward, n_backward] in the model's dtype, the share of each edge that
    carries its writer's corrupted output (1: the edge is removed, 0: kept, between: a learned
    mask's relaxation). ``current`` is this run's writer-major ``WriterBuffer`` (the boolean
    evaluation), with corrupted_writers [g, pos, n_forward, d_model]: the corrupted runs of g tasks
    whose rows make up the batch in g equal runs (task 0's rows, then task 1's, ...; g = 1 for one
    task); or ``WriterDifferences`` (a learned mask's differentiable run), which holds the
    corrupted outputs already (corrupted_writers None). A reader's input becomes

        x + sum_f weights[f] (corrupted_f - current_f)

    computed with matrix products over the writers, which lie writer-major ([batch, n_forward,
    pos, d_model], or a [pos * d_model] row per writer) so each reader's sum reads one contiguous
    block per row and no transposed copy of the writers is made per reader (that copy was most of
    an evaluation's time). A layer's q, k and v readers get their patches from one product.
    Readers whose weights are all zero in every circuit of the batch get no hook (their input
    stays clean).
    """
    batch = weights.shape[0]
    differences = isinstance(current, WriterDifferences)
    if differences:  # a learned mask's run: the differences are the writers' rows already
        groups, positions, corrupted = 1, current.corrupted.shape[1], None
    else:
        groups, positions = corrupted_writers.shape[0], corrupted_writers.shape[1]
        corrupted = corrupted_writers.transpose(1, 2).contiguous()  # [g, n_forward, pos, d_model]
    if batch % groups:
        raise ValueError(f"{batch} circuits cannot be split evenly over {groups} tasks.")
    per_group = batch // groups
    width = positions * spec.d_model
    # readers with a nonzero weight in any circuit of the batch, read off in one transfer
    active = (weights != 0).any(dim=1).any(dim=0).tolist()  # [n_backward]

    def moved(upstream: int, readers: slice) -> torch.Tensor:
        """sum_f w[b, f, r] (corrupted_f - current_f) for every row b and reader r: one product
        with each row's task's corrupted run, one with the row's own current run (or one with
        the learned run's differences).
        # [batch, n_readers, pos, d_model]"""
        share = weights[:, :upstream, readers]  # [b, up, r]
        n = share.shape[2]
        if differences:  # [b, r, up] @ [b, up, pos d]: the rows hold corrupted - current
            into = torch.bmm(share.transpose(1, 2), current.upstream(upstream))
            return into.view(batch, n, positions, spec.d_model)
        grouped = (
            share.reshape(groups, per_group, upstream, n)
            .transpose(2, 3)
            .reshape(groups, per_group * n, upstream)
        )
        into = torch.bmm(grouped, corrupted[:, :upstream].reshape(groups, upstream, width))  # [g, k r, pos d]
        into = into.reshape(batch, n, width)
        now = current.major(upstream).reshape(batch, upstream, width)  # [b, up, pos d]
        into = torch.baddbmm(into, share.transpose(1, 2), now, alpha=-1)
        return into.view(batch, n, positions, spec.d_model)

    def head_patch(x, hook, layer: int, kind: int, cache: dict):
        """A head input [b, pos, n_heads, d]; a layer's q, k and v patches come from one product."""
        if "moved" not in cache:
            readers = slice(spec.head_backward(layer, "q").start, spec.head_backward(layer, "v").stop)
            cache["moved"] = moved(spec.upstream_of_heads(layer), readers)  # [b, 3 n_heads, pos, d]
        part = cache["moved"][:, kind * spec.n_heads : (kind + 1) * spec.n_heads]  # [b, n_heads, pos, d]
        cache["used"] = cache.get("used", 0) + 1
        if cache["used"] == len(QKV):
            del cache["moved"]
        return x + part.transpose(1, 2)

    def single_patch(x, hook, upstream: int, reader: int):
        """An MLP input or the logits' residual: [b, pos, d]."""
        return x + moved(upstream, slice(reader, reader + 1))[:, 0]

    hooks: list[Hook] = []
    for layer in range(spec.n_layers):
        heads = range(spec.head_backward(layer, "q").start, spec.head_backward(layer, "v").stop)
        if any(active[reader] for reader in heads):
            cache: dict = {}
            for kind, qkv in enumerate(QKV):
                hooks.append(
                    (
                        f"blocks.{layer}.hook_{qkv}_input",
                        lambda x, hook, layer=layer, kind=kind, cache=cache: head_patch(
                            x, hook, layer, kind, cache
                        ),
                    )
                )
        mlp = spec.mlp_backward(layer)
        if active[mlp]:  # otherwise every circuit keeps all of this reader's edges: its input stays clean
            upstream = spec.upstream_of_mlp(layer)
            hooks.append(
                (
                    f"blocks.{layer}.hook_mlp_in",
                    lambda x, hook, up=upstream, r=mlp: single_patch(x, hook, up, r),
                )
            )
    if active[spec.logits_backward]:
        hooks.append(
            (
                f"blocks.{spec.n_layers - 1}.hook_resid_post",
                lambda x, hook: single_patch(x, hook, spec.n_forward, spec.logits_backward),
            )
        )
    return hooks


@torch.no_grad()
def patched_metrics(
    model,
    spec: GraphSpec,
    prepared: PreparedTask,
    corrupted_writers: torch.Tensor,
    removed: torch.Tensor,
    tokens: torch.Tensor | None = None,
    metric: Metric | None = None,
    prefix: int = 0,
) -> torch.Tensor:
    """Metric of the clean run with the edges in ``removed`` carrying corrupted activations.

    corrupted_writers: [1, pos, n_forward, d_model]; removed: [batch, n_forward, n_backward] bool,
    one circuit's complement per batch element. A reader's input becomes its current input plus,
    for each removed edge, (corrupted - current) output of the edge's source. Returns [batch].
    A batch of several tasks (a dataset's prompts, all of one length) gives g tasks' corrupted
    writers [g, pos, n_forward, d_model], the batch being g equal runs of rows (task 0's, then
    task 1's, ...), each row's clean ``tokens`` [batch, pos] and ``metric`` (``rows_metric``).
    ``prefix``: leading positions that run once, unpatched (``shared_prefix`` of the tasks).
    """
    batch = removed.shape[0]
    device = model_device(model)
    if tokens is None:
        tokens = prepared.clean_tokens.to(device).expand(batch, -1)
    tokens = tokens.to(device)
    dtype = model_dtype(model)
    positions = tokens.shape[1] - prefix
    current = WriterBuffer(spec, batch, positions, dtype, device, writer_major=True)  # [b, fwd, pos, d]
    corrupted_writers = corrupted_writers[:, prefix:].to(device=device, dtype=dtype)
    weights = removed.to(device=device, dtype=dtype)
    hooks = writer_hooks(model, spec, current) + patch_hooks(spec, corrupted_writers, weights, current)
    residual = final_residual(model, tokens, hooks, prefix)
    return metric(residual) if metric is not None else metric_from_residual(model, prepared, residual)


def unchanged_prefix(prepared: PreparedTask) -> int:
    """How many leading positions no circuit can change: those before the first token where the
    clean and corrupted prompts differ (always leaving the last position to run).

    Causal attention makes every writer's output there the same in both runs, so an edge's
    (corrupted - current) difference is 0 at those positions whatever the mask.
    """
    differ = (prepared.clean_tokens[0] != prepared.corrupted_tokens[0]).nonzero()  # [k, 1]
    first = int(differ[0, 0]) if differ.numel() else prepared.n_positions
    return min(first, prepared.n_positions - 1)


def _cached_key_heads(model) -> int:
    """Heads per position in a layer's cached keys: every query head's own when grouped-query
    attention runs ungrouped (as circuitviz loads models), else the key-value heads."""
    cfg = model.cfg
    if cfg.n_key_value_heads is None or getattr(cfg, "ungroup_grouped_query_attention", False):
        return int(cfg.n_heads)
    return int(cfg.n_key_value_heads)


def _run_continuing(model, tokens: torch.Tensor, caches: list, mask: torch.Tensor) -> torch.Tensor:
    """The blocks' residual for ``tokens`` continuing the positions held in ``caches`` (one
    TransformerLens cache entry per layer), embedded as ``input_to_embed`` does but without its
    cache check, which expects key-value heads where an ungrouped model caches query heads. Not
    for shortformer models (``shared_prefix`` gives them none).

    tokens: [batch, new]; mask: [batch, cached + new], all ones. Returns [batch, new, d_model].
    """
    offset = int(caches[0].past_keys.shape[1])
    if model.cfg.use_hook_tokens:
        tokens = model.hook_tokens(tokens)
    embed = model.hook_embed(model.embed(tokens))  # [batch, new, d_model]
    residual, _ = model.get_residual(embed, offset, attention_mask=mask, tokens=tokens)
    return model(
        residual,
        start_at_layer=0,
        stop_at_layer=model.cfg.n_layers,
        past_kv_cache=caches,
        attention_mask=mask,
    )


@torch.no_grad()
def _prefix_caches(model, tokens: torch.Tensor) -> list:
    """The keys and values of each row's first positions, frozen, for runs that continue them.

    tokens: [batch, prefix]. Each distinct row runs once (a batch of IG steps or circuits holds
    a few tasks' prompts many times); a batch of one prompt gets expanded views, no copies.
    """
    from transformer_lens.cache.key_value_cache_entry import TransformerLensKeyValueCacheEntry

    cfg = model.cfg
    distinct, inverse = torch.unique(tokens, dim=0, return_inverse=True)  # [g, prefix], [batch]
    shape = (len(distinct), 0, _cached_key_heads(model), cfg.d_head)
    empty = torch.zeros(shape, device=tokens.device, dtype=model_dtype(model))
    caches = [TransformerLensKeyValueCacheEntry(empty, empty) for _ in range(cfg.n_layers)]
    with hooked_run(model, []):
        _run_continuing(model, distinct, caches, torch.ones_like(distinct))

    def rows(cached: torch.Tensor) -> torch.Tensor:  # [g, prefix, heads, d_head] -> [batch, ...]
        return cached.expand(len(inverse), -1, -1, -1) if len(distinct) == 1 else cached[inverse]

    return [
        TransformerLensKeyValueCacheEntry(rows(entry.past_keys), rows(entry.past_values), frozen=True)
        for entry in caches
    ]


def shared_prefix(model, tasks: Sequence[PreparedTask]) -> int:
    """How many leading positions a batched run of ``tasks`` may run once, unhooked and without
    gradients: the shortest of their ``unchanged_prefix`` (0 for shortformer models, which add
    positions inside attention, where a continued run would skip them).

    There the clean and corrupted runs agree, so every writer's corrupted-minus-clean difference
    is 0: no edge changes anything there when patched, no edge score takes anything from there,
    and (attention being causal) nothing at a later position reads a gradient or a patch from
    there. Skipping them changes no score and no metric, only the time.
    """
    if not tasks or model.cfg.positional_embedding_type == "shortformer":
        return 0
    return min(unchanged_prefix(task) for task in tasks)


def masked_residual(
    model,
    spec: GraphSpec,
    prepared: PreparedTask,
    corrupted_writers: torch.Tensor,
    keep: torch.Tensor,
) -> torch.Tensor:
    """Final residual of the clean run under continuous circuits, differentiable in ``keep``.

    keep: [batch, n_forward, n_backward], each edge's kept share in [0, 1] (off-graph entries are
    ignored): the relaxation of ``patched_metrics``, which it equals at 0/1 masks (within float
    rounding: it contracts all positions at once, ``patch_hooks``). Every writer's output stays
    in the autograd graph (``WriterDifferences``), so the gradient includes what a mask changes
    downstream. The positions no mask can change (``unchanged_prefix``) run once, without
    gradients, and the batch continues from their keys and values: a corruption late in a long
    prompt makes each step that much cheaper. Returns [batch, d_model] (``metric_from_residual``
    reads the metric).
    """
    batch = keep.shape[0]
    device = model_device(model)
    dtype = model_dtype(model)
    prefix = shared_prefix(model, [prepared])
    edge_mask = spec.tensors(device).edge_mask
    weights = (1 - keep.to(device=device, dtype=dtype)) * edge_mask  # [batch, n_forward, n_backward]
    # [1, pos - prefix, n_forward, d_model]: the positions that run
    current = WriterDifferences(corrupted_writers[:, prefix:].to(device=device, dtype=dtype))
    hooks = writer_hooks(model, spec, current)
    hooks += patch_hooks(spec, None, weights, current)
    tokens = prepared.clean_tokens.to(device).expand(batch, -1)  # [batch, pos]
    with torch.enable_grad():
        return final_residual(model, tokens, hooks, prefix)


def _node_hook(spec: GraphSpec, node: int) -> tuple[str, int | None]:
    """Where one head or MLP writes before anything downstream of it: (hook name, head or None)."""
    for layer in range(spec.n_layers):
        heads = spec.head_forward(layer)
        if heads.start <= node < heads.stop:
            return f"blocks.{layer}.attn.hook_z", node - heads.start
        if node == spec.mlp_forward(layer):
            return f"blocks.{layer}.hook_mlp_out", None
    raise ValueError(f"Writer {node} is not a head or an MLP; only those can be patched alone.")


@torch.no_grad()
def node_patched_metrics(model, spec: GraphSpec, prepared: PreparedTask, nodes) -> torch.Tensor:
    """Metric of the clean run with one head or MLP switched to its corrupted-run output, per node.

    The model computes everything else itself: a head is replaced at its z (before the output
    projection and any post-attention norm, which then renormalises the layer's sum as it would),
    an MLP at its output. This is the effect of patching that node alone, measured without the
    graph's edge decomposition. nodes: writer indices (heads and MLPs); one batch element each,
    chunked to the device's memory. Returns [len(nodes)] on the model's device.
    """
    nodes = [int(node) for node in nodes]
    places = [_node_hook(spec, node) for node in nodes]
    device = model_device(model)
    corrupted: dict[str, torch.Tensor] = {}

    def keep(x, hook):
        corrupted[hook.name] = x.detach()

    names = sorted({name for name, _ in places})
    with hooked_run(model, [(name, keep) for name in names]):
        model(prepared.corrupted_tokens.to(device), stop_at_layer=model.cfg.n_layers)
    results: list[torch.Tensor] = []

    def compute(rows: slice) -> torch.Tensor:
        chosen = places[rows]
        tokens = prepared.clean_tokens.to(device).expand(len(chosen), -1)

        def replace(x, hook):
            x = x.clone()
            for row, (name, head) in enumerate(chosen):
                if name != hook.name:
                    continue
                if head is None:
                    x[row] = corrupted[name][0]  # [pos, d_model]
                else:
                    x[row, :, head] = corrupted[name][0, :, head]  # [pos, d_head]
            return x

        hooks = [(name, replace) for name in sorted({name for name, _ in chosen})]
        return metric_from_residual(model, prepared, final_residual(model, tokens, hooks))

    run_in_chunks(
        model,
        "evaluate",
        len(nodes),
        prepared.n_positions,
        evaluation_bytes_per_position(spec, next(model.parameters()).element_size()),
        compute,
        lambda rows, values: results.append(values),
    )
    if not results:
        return torch.zeros(0, device=device)
    return torch.cat(results)


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
    return model_device(model).type != "cpu"


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
        self, model, spec: GraphSpec, values: dict[str, torch.Tensor], grads: dict[str, torch.Tensor]
    ):
        self.model = model
        self.spec = spec
        self.values = values  # {hook name: activation}: each layer's attention input
        self.grads = grads  # {hook name: gradient of the summed metric there}

    @property
    def logits(self) -> torch.Tensor:
        """Gradient at the final residual stream (the ``logits`` reader).  # [batch, pos, d_model]"""
        return self.grads[f"blocks.{self.spec.n_layers - 1}.hook_resid_post"]

    def layer(self, layer: int) -> torch.Tensor:
        """One layer's reader gradients side by side, in backward-index order: each head's q, k
        and v input, then the MLP.  # [batch, pos, 3 n_heads + 1, d_model]
        """
        mlp = self.grads[f"blocks.{layer}.hook_mlp_in"][:, :, None]  # [batch, pos, 1, d_model]
        if f"blocks.{layer}.hook_q_input" in self.grads:  # split inputs: read directly
            heads = [self.grads[f"blocks.{layer}.hook_{kind}_input"] for kind in QKV]
            return torch.cat([*heads, mlp], dim=2)
        attention = self.model.blocks[layer].attn
        parts = []
        for kind, weight in (("q", attention.W_Q), ("k", attention.W_K), ("v", attention.W_V)):
            projected = self.grads[f"blocks.{layer}.attn.hook_{kind}"]  # [batch, pos, H, d_head]
            parts.append(torch.einsum("bphe,hde->bphd", projected, weight))
        cotangents = torch.cat(parts, dim=2)  # [batch, pos, 3H, d_model]
        per_head = _norm_vjp(self.model, layer, self.values[f"blocks.{layer}.hook_resid_pre"], cotangents)
        return torch.cat([per_head.to(mlp.dtype), mlp], dim=2)


def _norm_vjp(model, layer: int, x: torch.Tensor, cotangents: torch.Tensor) -> torch.Tensor:
    """J_norm(x)^T c for many cotangents c of the norm in front of a layer's attention.

    x: [batch, pos, d_model]; cotangents: [batch, pos, n, d_model]. Returns [batch, pos, n, d_model].
    Models whose attention reads the residual unnormalised (OLMo-2's post-norm) pass c through.
    """
    from transformer_lens.components.transformer_block import POST_NORM_ARCHITECTURES

    if model.cfg.original_architecture in POST_NORM_ARCHITECTURES:
        return cotangents
    _, vjp = torch.func.vjp(model.blocks[layer].ln1, x.detach())
    return torch.vmap(lambda cotangent: vjp(cotangent)[0], in_dims=2, out_dims=2)(cotangents)


@contextmanager
def _attention_inputs(model, shared: bool) -> Iterator[None]:
    """Run with one attention input per layer (``shared``) or one per head (see ``ReaderGradients``).

    The caller holds the model's lock, so no other run sees the setting; it is restored on exit.
    """
    before = model.cfg.use_split_qkv_input
    model.cfg.use_split_qkv_input = not shared
    try:
        yield
    finally:
        model.cfg.use_split_qkv_input = before


def reader_gradients(
    model,
    spec: GraphSpec,
    prepared: PreparedTask,
    batch: int,
    input_replacement: Callable[[torch.Tensor], torch.Tensor] | None = None,
    extra_hooks: list[Hook] | None = None,
    tokens: torch.Tensor | None = None,
    metric: Metric | None = None,
    prefix: int = 0,
) -> tuple[ReaderGradients, torch.Tensor]:
    """Gradients of the summed metric with respect to every reader's input, on the clean prompt.

    ``input_replacement`` maps the clean embedding [batch, pos, d_model] to what block 0 should
    see (EAP-IG's interpolated inputs). Parameters need no gradient: the embedding is made a
    leaf that requires one, so only activation gradients are computed. ``tokens`` [batch, pos]
    runs other prompts of the task's length instead (Best-of-N's paraphrases in one batch; the
    metric still reads the task's answer and foils, unless ``metric`` (``rows_metric``) scores
    each row with its own task's, as a batch of a dataset's prompts does). ``extra_hooks`` may replace what writers
    add (EAP-IG activations); every head still reads the residual stream unpatched. ``prefix``
    leading positions run once without gradients (``shared_prefix``): the gradients, and what
    ``input_replacement`` maps, cover the positions after them.
    Returns (the gradients, read out per layer; metrics [batch]).
    """
    device = model_device(model)
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

    shared = shared_attention_inputs(model)
    hooks: list[Hook] = [("blocks.0.hook_resid_pre", leaf_input)]
    hooks += extra_hooks or []
    if shared:
        for layer in range(spec.n_layers):
            hooks.append((f"blocks.{layer}.hook_resid_pre", keep_value))
            hooks += [(f"blocks.{layer}.attn.hook_{kind}", capture) for kind in QKV]
            hooks.append((f"blocks.{layer}.hook_mlp_in", capture))
        hooks.append((f"blocks.{spec.n_layers - 1}.hook_resid_post", capture))
    else:
        hooks += [(name, capture) for name, _, _ in reader_hook_points(spec)]
    with model_lock(model), _attention_inputs(model, shared), torch.enable_grad():
        residual = final_residual(model, tokens, hooks, prefix)
        metrics = metric(residual) if metric is not None else metric_from_residual(model, prepared, residual)
        names = list(captured)
        grads = torch.autograd.grad(metrics.sum(), [captured[name] for name in names], allow_unused=True)
    gradients = {
        name: (grad if grad is not None else torch.zeros_like(captured[name]))
        for name, grad in zip(names, grads)
    }
    return ReaderGradients(model, spec, values, gradients), metrics.detach()


# ----- working memory of the batched passes (chunks.py cuts them to fit) ----------------------
# bytes one sequence of a forward/backward pass keeps per position and layer, per unit of the
# model's width (q/k/v inputs per head, attention, MLP hidden), in float32. On the CPU, measured
# on Gemma-3-270M (resident memory of a 20- and a 60-sequence pass, the gradients kept: 13.5-15)
# with headroom; on an accelerator a cautious first guess that the first chunk's real peak
# replaces (chunks.py). The CPU figure decides how many sequences share a pass there, and fewer
# than about 30 sequences of 16 tokens a pass made EAP-IG up to 10 % slower.
_BACKWARD_BYTES_PER_UNIT = {"cpu": 16.0, "accelerator": 40.0}
# bytes one patched circuit keeps per position and writer, per unit of d_model, in float32: the
# current-writers buffer and the patch differences, with headroom
_EVALUATION_BYTES_PER_UNIT = 16


def gradient_bytes_per_position(model, n_positions: int) -> float:
    """Estimated working memory of one sequence's gradient pass, per prompt position (bytes)."""
    cfg = model.cfg
    width = 4 * cfg.n_heads * cfg.d_model + (cfg.d_mlp or 4 * cfg.d_model) + cfg.n_heads * n_positions
    parameter = next(model.parameters())
    per_unit = _BACKWARD_BYTES_PER_UNIT["cpu" if parameter.device.type == "cpu" else "accelerator"]
    return cfg.n_layers * width * per_unit * parameter.element_size() / 4


def evaluation_bytes_per_position(spec: GraphSpec, element_size: int = 4) -> float:
    """Estimated working memory of one circuit's patched run, per prompt position (bytes)."""
    return spec.n_forward * max(spec.d_model, 1) * _EVALUATION_BYTES_PER_UNIT * element_size / 4


def score_dtype(dtype: torch.dtype) -> torch.dtype:
    """The precision edge scores accumulate in: float32 at least (bfloat16 models included)."""
    return torch.promote_types(dtype, torch.float32)


def accumulate_scores(
    spec: GraphSpec,
    scores: torch.Tensor,
    gradients: ReaderGradients,
    differences: torch.Tensor,
    owner: torch.Tensor | None = None,
) -> None:
    """scores[u, v] += sum over batch and positions of differences[u] . gradient[v].

    differences: [1 or n, pos, n_forward, d_model] (corrupted minus clean writer outputs). With
    ``owner`` [batch] (values 0..n-1), ``scores`` is [n, n_forward, n_backward] and batch element
    b adds to ``scores[owner[b]]`` with ``differences[owner[b]]`` (Best-of-N's pairs in one
    pass). Without it ``scores`` is [n_forward, n_backward] and ``differences`` is shared (batch
    1) or given per batch element. One contraction per layer covers all its readers, formed in
    ``scores``' precision.
    """
    dtype = scores.dtype
    width = 3 * spec.n_heads + 1
    groups = "g" if owner is not None else ""

    def reduce(gradient: torch.Tensor) -> torch.Tensor:
        """The batch summed down to what ``differences`` holds: [1, n or batch, pos, ...]."""
        gradient = gradient.to(dtype)
        if owner is not None:
            summed = torch.zeros((scores.shape[0], *gradient.shape[1:]), dtype=dtype, device=gradient.device)
            return summed.index_add_(0, owner, gradient)
        return gradient.sum(0, keepdim=True) if differences.shape[0] == 1 else gradient

    for layer in range(spec.n_layers):
        upstream = spec.upstream_of_mlp(layer)
        readers = slice(layer * width, (layer + 1) * width)
        gradient = reduce(gradients.layer(layer))  # [g, pos, 3H+1, d_model]
        delta = differences[:, :, :upstream].to(dtype)  # [g, pos, upstream, d_model]
        part = torch.einsum(f"gpfd,gprd->{groups}fr", delta, gradient)
        # a layer's own heads feed its MLP but not its own queries, keys and values
        part[..., spec.upstream_of_heads(layer) :, : 3 * spec.n_heads] = 0
        scores[..., :upstream, readers] += part
    gradient = reduce(gradients.logits)  # [g, pos, d_model]
    scores[..., :, spec.logits_backward] += torch.einsum(
        f"gpfd,gpd->{groups}f", differences.to(dtype), gradient
    )


def gradient_scores(
    model,
    spec: GraphSpec,
    n_items: int,
    n_positions: int,
    batch_pass: Callable[[slice], tuple[ReaderGradients, torch.Tensor, torch.Tensor | None, slice | None]],
    n_groups: int | None = None,
    progress: Callable[[str, float], None] | None = None,
) -> torch.Tensor:
    """Edge scores summed over ``n_items`` gradient sequences, in chunks that fit the device.

    ``batch_pass(rows)`` runs the sequences ``rows`` and returns (their gradients, the
    differences they multiply, an owner per sequence or None, the groups those owners index).
    Returns [n_forward, n_backward], or [n_groups, n_forward, n_backward] with owners, on the
    model's device in the precision scores accumulate in.
    """
    dtype, device = score_dtype(model_dtype(model)), model_device(model)
    graph = (spec.n_forward, spec.n_backward)
    scores = torch.zeros((*(() if n_groups is None else (n_groups,)), *graph), dtype=dtype, device=device)

    def compute(rows: slice):
        gradients, differences, owner, groups = batch_pass(rows)
        if owner is None:
            part = torch.zeros(graph, dtype=dtype, device=device)
        else:
            part = torch.zeros((groups.stop - groups.start, *graph), dtype=dtype, device=device)
        accumulate_scores(spec, part, gradients, differences, owner=owner)
        return groups, part

    def commit(rows: slice, result) -> None:
        groups, part = result
        (scores if groups is None else scores[groups]).add_(part)
        if progress:
            progress("score", rows.stop / n_items)

    run_in_chunks(
        model,
        "gradient",
        n_items,
        n_positions,
        gradient_bytes_per_position(model, n_positions),
        compute,
        commit,
    )
    return scores


def batched_gradient_scores(
    model,
    spec: GraphSpec,
    tasks: Sequence[PreparedTask],
    clean_writers: torch.Tensor,
    corrupted_writers: torch.Tensor,
    steps: int | None,
    progress: Callable[[str, float], None] | None = None,
) -> torch.Tensor:
    """EAP-IG (inputs) scores of several tasks of one prompt length, their steps in shared passes.

    Row j is what the registered ``eap-ig`` computes for ``tasks[j]`` alone (tested): the
    gradient at k/m of the way from the corrupted to the clean embedding, k = 1..m, averaged,
    times the corrupted-minus-clean writer outputs; ``steps`` None gives EAP (the gradient at
    the clean input itself). The leading positions where the batch's clean and corrupted prompts
    agree run once, without gradients (``shared_prefix``). A batch holds the steps of several tasks, each scored with its own
    answer and foils (Best-of-N's paraphrase pairs, a dataset's prompts); their gradients are
    summed per task and contracted with each task's differences in one product per layer.
    clean_writers, corrupted_writers: [n_tasks, pos, n_forward, d_model].
    Returns [n_tasks, n_forward, n_backward] on the model's device.
    """
    tasks = list(tasks)
    device = model_device(model)
    differences = corrupted_writers - clean_writers  # [n, pos, n_forward, d_model]
    clean_input, corrupted_input = clean_writers[:, :, 0], corrupted_writers[:, :, 0]  # [n, pos, d_model]
    tokens = torch.cat([t.clean_tokens for t in tasks]).to(device)  # [n, pos]
    n_steps = int(steps) if steps else 1
    jobs = [(j, k) for j in range(len(tasks)) for k in range(1, n_steps + 1)]

    def batch_pass(rows: slice):
        batch = jobs[rows]
        owners = [j for j, _ in batch]  # a batch's tasks are contiguous: jobs go task by task
        lowest, highest = owners[0], owners[-1]
        members = slice(lowest, highest + 1)
        prefix = shared_prefix(model, tasks[members])  # positions with no difference run once
        owner = torch.tensor(owners, device=device)
        interpolate = None
        if steps:
            alpha = torch.tensor([k / n_steps for _, k in batch], dtype=clean_input.dtype, device=device)
            alpha = alpha[:, None, None]  # [b, 1, 1]
            start_value = corrupted_input[owner, prefix:]  # [b, pos - prefix, d_model]
            end_value = clean_input[owner, prefix:]

            def interpolate(x):
                return start_value + alpha * (end_value - start_value)  # [b, pos - prefix, d_model]

        metric = rows_metric(model, tasks, owner)
        gradients, _ = reader_gradients(
            model, spec, tasks[0], len(batch), interpolate, tokens=tokens[owner], metric=metric, prefix=prefix
        )
        return gradients, differences[members, prefix:], owner - lowest, members

    scores = gradient_scores(
        model, spec, len(jobs), tasks[0].n_positions, batch_pass, n_groups=len(tasks), progress=progress
    )
    return scores / n_steps


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
