"""The model adapter's HookedTransformer form (``adapter.py`` picks the adapter of a model).

The one model adapter: everything circuitviz asks of a TransformerLens model goes through it.

A ``ModelAdapter`` holds the HookedTransformer and what circuitviz keeps beside it: the lock that
serialises hooked runs, the lock that serialises tokenising, the key that names this loaded
instance in caches, its graph spec (made once) and its device and dtype. The loader makes one for
every model it loads (``load_model``); code handed a bare model (tests, scripts) gets the same
adapter back from ``adapter_of(model)``, which makes one on first use. Nothing is set on or
replaced in the model itself: the adapters live in a weak registry keyed by the model.

Every TransformerLens-specific call (tokenising, hooked forward passes, the key/value cache a
continued run reads, the unembedding, a head's output projection, the norms around attention, the
split q/k/v inputs) is a method here, so that the move from HookedTransformer to TransformerLens
4's TransformerBridge touches this package only. Hook *names* are in ``circuitviz.engine.sites``.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cached_property

import torch

from ..core.graph import GraphSpec
from .architectures import norms_after_writers, whole_vector_qk_norm
from .attention_parts import AttentionParts
from .tokens import token_text

Hook = tuple[str, Callable]


# hook levels of the adapters' own contexts, apart from TransformerLens's (which count from 0)
_LEVELS = itertools.count(1_000_000)


class KeysDone(Exception):
    """Raised inside the last block once the earlier positions' keys and values are cached
    (``ModelAdapter.from_layer`` with ``last``)."""


_UNNAMED = itertools.count(1)  # adapters of models no load named


class ModelAdapter:
    """One loaded model and what circuitviz keeps beside it (see the module's docstring)."""

    def __init__(self, model, key: str | None = None):
        # a weak reference: the registry keeps adapters in a weak dictionary keyed by the model,
        # and a value that held its key strongly kept every model ever adapted alive (on a GPU
        # server, each model a user switched away from stayed on the card)
        self._model = weakref.ref(model)
        # a number of its own, not id(model): a freed model's id is handed to the next one
        self.key = key or f"object {next(_UNNAMED)}"
        self.lock = threading.RLock()  # hooked runs, one at a time on this instance
        self.tokenizer_lock = threading.RLock()  # tokenising, one at a time (see ``to_tokens``)

    # ----- what the model is -----------------------------------------------------------------
    @property
    def model(self):
        model = self._model()
        if model is None:
            raise ReferenceError(f"the model of adapter {self.key} was freed")
        return model

    @property
    def cfg(self):
        return self.model.cfg

    @cached_property
    def spec(self) -> GraphSpec:
        """The model's graph shape, made once."""
        return GraphSpec.from_model(self.model)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype

    def device_of_module(self, module) -> torch.device:
        """The device of a module's first weight (or buffer); the model's device when it has none.

        A model split over devices (``load_model(..., device_map=...)``) has its blocks, final
        norm and unembedding on several; whatever computes with a module's weights outside the
        model's own forward moves its input there (and its result back)."""
        for tensor in module.parameters():
            return tensor.device
        for tensor in module.buffers():
            return tensor.device
        return self.device

    def layer_device(self, layer: int) -> torch.device:
        """The device block ``layer``'s weights are on (the model's one device unless split)."""
        return self.device_of_module(self.model.blocks[layer])

    @property
    def element_size(self) -> int:
        return next(self.model.parameters()).element_size()

    @property
    def n_parameters(self) -> int:
        return sum(p.numel() for p in self.model.parameters())

    @property
    def positions_inside_attention(self) -> bool:
        """Whether positions enter inside attention (shortformer), so a run continued from cached
        keys and values would skip them."""
        return self.cfg.positional_embedding_type == "shortformer"

    @property
    def attention_inputs_split(self) -> bool:
        """Whether attention runs with one private q/k/v input per head now
        (``split_attention_inputs``): the two round the keys and values differently."""
        return bool(self.cfg.use_split_qkv_input)

    @property
    def rotary(self) -> bool:
        return self.cfg.positional_embedding_type == "rotary"

    packs_prefix_trees = True  # texts can run packed as a prefix tree (``engine.packed``)

    def position_table(self) -> torch.Tensor:
        """The learned position embeddings of a ``standard`` model.  # [n_ctx, d_model]"""
        return self.model.W_pos

    # ----- tokenising --------------------------------------------------------------------------
    @property
    def tokenizer(self):
        return self.model.tokenizer

    def to_tokens(
        self, text, prepend_bos: bool | None = None, truncate: bool = True, on_device: bool = True
    ) -> torch.Tensor:
        """Token ids of ``text`` (a string or a list of them).  # [batch, pos] on the model's
        device, or on the CPU with ``on_device=False`` (a count or a check that reads them there)

        Serialised per model: TransformerLens's ``to_tokens(prepend_bos=...)`` overrides
        ``cfg.default_prepend_bos`` for the duration of the call, and the tokenizer resets its own
        truncation state, so two sessions tokenising at once could get each other's <bos> setting.
        """
        kwargs = {"truncate": truncate, "move_to_device": on_device}
        if prepend_bos is not None:
            kwargs["prepend_bos"] = prepend_bos
        with self.tokenizer_lock:
            return self.model.to_tokens(text, **kwargs)

    def token_count(self, text: str, prepend_bos: bool | None = None) -> int:
        """How many tokens ``text`` is as the model runs it (with its <bos> when it prepends one,
        unless ``prepend_bos`` says otherwise), never truncated: the one count the limits, the
        proposals, the paraphrase checks and the answer checks read. Counted on the CPU: on a GPU
        each count was a copy to the device (194 of Best-of-N's 1,078 reads on the H200)."""
        tokens = self.to_tokens(text, prepend_bos=prepend_bos, truncate=False, on_device=False)
        return int(tokens.shape[1])

    def decode(self, ids) -> str:
        return token_text(self.tokenizer, ids)  # a lone byte token as its piece ('<0xF0>')

    @property
    def bos_token_id(self) -> int | None:
        return getattr(self.tokenizer, "bos_token_id", None) if self.tokenizer is not None else None

    @property
    def pad_token_id(self) -> int | None:
        return getattr(self.tokenizer, "pad_token_id", None) if self.tokenizer is not None else None

    # ----- runs --------------------------------------------------------------------------------
    @contextmanager
    def hooked(self, fwd_hooks: list[Hook]) -> Iterator[None]:
        """Run with hooks under the model's lock; every hook is removed on exit, even on error.

        The tokenizer's lock is held too: TransformerLens's ``forward`` saves
        ``cfg.default_prepend_bos`` on entry and writes it back on exit, so a forward pass that
        ended while another thread was inside ``to_tokens(prepend_bos=False)`` put the <bos>
        setting back under it (a one-token answer came out as two tokens, 3 times in 180
        concurrent discoveries).
        """
        with self.lock, self.tokenizer_lock, self._added(fwd_hooks):
            yield

    @contextmanager
    def _added(self, fwd_hooks: list[Hook]) -> Iterator[None]:
        """The hooks put straight onto their hook points at a level of their own, and removed
        from those points alone on exit. TransformerLens's ``hooks()`` context walks every hook
        point of the model after each pass to reset it (about 640 on Gemma-3-270M): 14 % of an
        ACDC pass's CPU time, paid by every hooked run."""
        level = next(_LEVELS)
        added: dict[int, object] = {}
        try:
            for name, function in fwd_hooks:
                point = self._hook_points.get(name)
                if point is None:  # a method reading what this model lacks (an MoE's MLP neurons)
                    raise ValueError(
                        f"{self.cfg.model_name} has no hook point {name}, which this method reads; "
                        "choose another method."
                    )
                point.add_hook(self._hook_function(name, function), dir="fwd", level=level)
                added[id(point)] = point
            yield
        finally:
            for point in added.values():
                point.remove_hooks("fwd", level=level)

    @cached_property
    def _hook_points(self) -> dict:
        """{hook name: its hook point}, read once."""
        return dict(self.model.hook_dict)

    def _hook_function(self, name: str, function: Callable) -> Callable:
        """The function to add at ``name`` (the bridge wraps it)."""
        return function

    def blocks(self, tokens: torch.Tensor, stop_at_layer: int | None = None) -> torch.Tensor:
        """The residual stream after block ``stop_at_layer - 1`` (all blocks by default), at every
        position, stopping before the final norm and unembedding. Call inside ``hooked``.
        # [batch, pos, d_model]"""
        stop = self.cfg.n_layers if stop_at_layer is None else stop_at_layer
        return self.model(tokens, stop_at_layer=stop)

    def logits(self, tokens: torch.Tensor) -> torch.Tensor:
        """The model's logits at every position (a plain forward pass).  # [batch, pos, d_vocab]"""
        return self.model(tokens)

    def continuing(self, tokens: torch.Tensor, caches: list, mask: torch.Tensor) -> torch.Tensor:
        """The blocks' residual for ``tokens`` continuing the positions held in ``caches`` (one
        key/value entry per layer, from ``prefix_caches``), embedded as ``input_to_embed`` does but
        without its cache check, which expects key-value heads where an ungrouped model caches
        query heads. Not for shortformer models (``positions_inside_attention``). Call inside
        ``hooked``.

        tokens: [batch, new]; mask: [batch, cached + new], all ones. Returns [batch, new, d_model].
        """
        model = self.model
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

    @property
    def starts_at_layer(self) -> bool:
        """Whether ``from_layer`` can run the blocks from any layer on a given residual (not on
        models whose positions enter inside attention, which a mid-model start would skip)."""
        return not self.positions_inside_attention

    def from_layer(self, residual: torch.Tensor, layer: int, caches: list | None, last=None) -> torch.Tensor:
        """The residual after every block when blocks ``layer`` onwards run on ``residual``, the
        residual stream before block ``layer`` at the positions that run, continuing the positions
        held in ``caches`` (``prefix_caches`` / ``cache_rows``; None when none precede). What the
        blocks below ``layer`` would compute must be in ``residual`` and in the caches already.
        Call inside ``hooked``.  residual: [batch, new, d_model] -> [batch, new, d_model]

        ``last`` (``layer_start.LastPosition``, its hooks among the run's; only where
        ``runs_last_position_alone``): the last block runs for the last position's output only,
        and the result is [batch, 1, d_model]."""
        top = self.cfg.n_layers if last is None else self.cfg.n_layers - 1
        if layer < top:
            residual = self.model(
                residual,
                start_at_layer=layer,
                stop_at_layer=top,
                past_kv_cache=caches,
                attention_mask=self._ones(residual, caches),
            )
        if last is None:
            return residual
        return self._last_block(residual, caches, last)

    @staticmethod
    def _ones(residual: torch.Tensor, caches: list | None) -> torch.Tensor | None:
        """The attention mask of a run continuing ``caches``: all ones [batch, cached + new]
        (None without caches)."""
        if caches is None:
            return None
        shape = (residual.shape[0], int(caches[0].past_keys.shape[1]) + residual.shape[1])
        return torch.ones(shape, dtype=torch.long, device=residual.device)

    @property
    def runs_last_position_alone(self) -> bool:
        """Whether ``from_layer`` can run the last block for the last position only (rotary
        models with split query, key and value inputs: the stop after the keys are cached
        is at the rotated queries)."""
        cfg = self.cfg
        return self.starts_at_layer and self.rotary and bool(cfg.use_split_qkv_input)

    def _last_block(self, residual: torch.Tensor, caches: list | None, last) -> torch.Tensor:
        """The last block on ``residual`` [batch, new, d_model] (its input), for the last
        position: once on the earlier positions until their keys and values are cached, then on
        the last position reading them.  # [batch, 1, d_model]"""
        from transformer_lens.cache.key_value_cache_entry import TransformerLensKeyValueCacheEntry

        top = self.cfg.n_layers - 1
        block = self.model.blocks[top]
        residual = residual.to(self.layer_device(top))
        if caches is not None:
            keys, values = caches[top].past_keys, caches[top].past_values
        else:
            shape = (residual.shape[0], 0, self._cached_key_heads(), self.cfg.d_head)
            keys = values = torch.zeros(shape, dtype=residual.dtype, device=residual.device)
        cached = TransformerLensKeyValueCacheEntry(keys, values, frozen=False)  # grows by the first call
        last.keys()
        try:  # no mask: it would place the (dropped) queries; the stop comes before the keys' rotation
            block(residual[:, :-1], past_kv_cache_entry=cached)
        except KeysDone:
            pass
        else:
            raise RuntimeError("the last block ran past its keys: the stop hook is missing")
        last.last()
        mask = self._ones(residual, caches)
        return block(residual[:, -1:], past_kv_cache_entry=cached, attention_mask=mask)

    def cache_rows(self, caches_of_tasks: list[list], owner: torch.Tensor) -> list:
        """Caches for a batch whose row i continues task ``owner[i]``'s prefix: ``caches_of_tasks``
        holds each task's ``prefix_caches`` of one row (all of one prefix length). Frozen, as
        ``prefix_caches``'s are; one task's rows are expanded views, no copies."""
        from transformer_lens.cache.key_value_cache_entry import TransformerLensKeyValueCacheEntry

        def rows(parts: list[torch.Tensor]) -> torch.Tensor:  # [1, prefix, heads, d_head] each
            if len(parts) == 1:
                return parts[0].expand(len(owner), -1, -1, -1)
            return torch.cat(parts)[owner.to(parts[0].device)]

        return [
            TransformerLensKeyValueCacheEntry(
                rows([task[layer].past_keys for task in caches_of_tasks]),
                rows([task[layer].past_values for task in caches_of_tasks]),
                frozen=True,
            )
            for layer in range(len(caches_of_tasks[0]))
        ]

    def _cached_key_heads(self) -> int:
        """Heads per position in a layer's cached keys: every query head's own when grouped-query
        attention runs ungrouped (as circuitviz loads models), else the key-value heads."""
        cfg = self.cfg
        if cfg.n_key_value_heads is None or getattr(cfg, "ungroup_grouped_query_attention", False):
            return int(cfg.n_heads)
        return int(cfg.n_key_value_heads)

    @torch.no_grad()
    def prefix_caches(self, tokens: torch.Tensor) -> list:
        """The keys and values of each row's first positions, frozen, for runs that continue them.

        tokens: [batch, prefix]. Each distinct row runs once (a batch of IG steps or circuits holds
        a few tasks' prompts many times); a batch of one prompt gets expanded views, no copies.
        """
        from transformer_lens.cache.key_value_cache_entry import TransformerLensKeyValueCacheEntry

        cfg = self.cfg
        distinct, inverse = torch.unique(tokens, dim=0, return_inverse=True)  # [g, prefix], [batch]
        shape = (len(distinct), 0, self._cached_key_heads(), cfg.d_head)
        empty = torch.zeros(shape, device=tokens.device, dtype=self.dtype)
        caches = [TransformerLensKeyValueCacheEntry(empty, empty) for _ in range(cfg.n_layers)]
        with self.hooked([]):
            self.continuing(distinct, caches, torch.ones_like(distinct))

        def rows(cached: torch.Tensor) -> torch.Tensor:  # [g, prefix, heads, d_head] -> [batch, ...]
            return cached.expand(len(inverse), -1, -1, -1) if len(distinct) == 1 else cached[inverse]

        return [
            TransformerLensKeyValueCacheEntry(rows(entry.past_keys), rows(entry.past_values), frozen=True)
            for entry in caches
        ]

    def prefix_rows(self, caches: list, inverse: torch.Tensor) -> list:
        """The caches ``prefix_caches`` made of g distinct rows, for a batch whose row b continues
        distinct row ``inverse[b]`` (the same tensors ``prefix_caches`` of that batch gives)."""
        from transformer_lens.cache.key_value_cache_entry import TransformerLensKeyValueCacheEntry

        def rows(cached: torch.Tensor) -> torch.Tensor:  # [g, prefix, heads, d_head] -> [batch, ...]
            if cached.shape[0] == 1:
                return cached.expand(len(inverse), -1, -1, -1)
            return cached[inverse.to(cached.device)]

        return [
            TransformerLensKeyValueCacheEntry(rows(entry.past_keys), rows(entry.past_values), frozen=True)
            for entry in caches
        ]

    # ----- the pieces the engine computes with ----------------------------------------------------
    def unembed(self, residual: torch.Tensor, ids: torch.Tensor | None = None) -> torch.Tensor:
        """Logits from the final residual at one position: final norm, unembedding, soft-cap.

        residual: [batch, d_model]; ``ids`` restricts the unembedding to those vocabulary columns:
        [k] for every row alike, or [batch, k] for each row its own (a batch of a dataset's tasks).
        Returns [batch, k] or [batch, d_vocab].
        """
        x = residual[:, None, :]  # [batch, 1, d_model]
        if self.model.cfg.normalization_type is not None:
            x = self.model.ln_final(x)
        return self.logits_of_normed(x[:, 0], ids)

    def logits_of_normed(self, x: torch.Tensor, ids: torch.Tensor | None = None) -> torch.Tensor:
        """Logits from a final residual already through the final norm (x: [batch, d_model]):
        the unembedding (``ids`` as in ``unembed``) and the soft-cap, for every backend alike."""
        W_U, b_U = self.unembedding
        home = x.device  # a split model's unembedding may sit on another device than x
        x = x.to(W_U.device)
        ids = ids.to(W_U.device) if ids is not None else None
        if ids is None:
            logits = x @ W_U + b_U
        elif ids.dim() == 2:  # each row's own columns: [d_model, batch, k] gathered, one product a row
            logits = torch.einsum("bd,dbk->bk", x, W_U[:, ids]) + b_U[ids]
        else:
            logits = x @ W_U[:, ids] + b_U[ids]
        cap = getattr(self.cfg, "output_logits_soft_cap", None)
        if cap is not None and cap > 0:
            logits = cap * torch.tanh(logits / cap)
        return logits.to(home)

    @property
    def unembedding(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(W_U [d_model, d_vocab], b_U [d_vocab])."""
        return self.model.W_U, self.model.b_U

    @property
    def final_norm(self):
        """The norm before the unembedding (None for models without one)."""
        return self.model.ln_final if self.cfg.normalization_type is not None else None

    @property
    def final_norm_weight(self) -> torch.Tensor | None:
        """The final norm's weight (None for models without one, or a norm without weight)."""
        return getattr(self.final_norm, "w", None)

    def attention(self, layer: int) -> AttentionParts:
        """What ACC++'s folding reads of a layer's attention: its weights, q/k-norms, rotary tables."""
        return AttentionParts(self.model.blocks[layer].attn)

    def pre_attention_norm(self, layer: int):
        """The norm a layer applies to the residual before its q/k/v projections, or None (no
        norm, or a model whose norm comes after attention)."""
        if self.reads_unnormalised_residual or self.cfg.normalization_type is None:
            return None
        return self.model.blocks[layer].ln1

    def head_results(self, layer: int, z: torch.Tensor) -> torch.Tensor:
        """Each head's output from its z, with the output bias shared out evenly.

        z: [batch, pos, n_heads, d_head] -> [batch, pos, n_heads, d_model]. Computed here rather
        than read from ``hook_result``: TransformerLens builds that hook's value by broadcasting a
        [batch, pos, n_heads, d_head, d_model] product (786 MB per layer for 20 Gemma-3
        sequences), which made every run several times slower; an einsum gives the same numbers.
        """
        # on the layer's device and back (a split model's layers sit on several)
        return head_results(self.model.blocks[layer].attn, z.to(self.layer_device(layer))).to(z.device)

    def attention_post_norm(self, layer: int):
        """(the norm applied to a layer's summed attention output before the residual add, the
        name of its sub-module) or (None, None) for models without one."""
        block = self.model.blocks[layer]
        if getattr(self.cfg, "use_normalization_before_and_after", False):
            return block.ln1_post, "ln1_post"
        if self.reads_unnormalised_residual:
            return block.ln1, "ln1"
        return None, None

    @cached_property
    def post_normed_layers(self) -> tuple[bool, ...]:
        """Per layer, whether its heads' summed output passes through a norm before the residual
        add (Gemma's ``ln1_post``, OLMo-2's post-norm): there a head's share of what the layer adds
        depends on the other heads, and a reader that mixes clean and corrupted heads of the layer
        sees the norm of its own mix."""
        return tuple(self.attention_post_norm(layer)[0] is not None for layer in range(self.cfg.n_layers))

    @property
    def reads_unnormalised_residual(self) -> bool:
        """Whether attention reads the residual unnormalised, its norm coming after (OLMo-2)."""
        return norms_after_writers(self.cfg.original_architecture)

    def qkv_weights(self, layer: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """W_Q, W_K, W_V of a layer, each [n_heads, d_model, d_head]."""
        attention = self.model.blocks[layer].attn
        return attention.W_Q, attention.W_K, attention.W_V

    def attention_norm_vjp(self, layer: int, x: torch.Tensor, cotangents: torch.Tensor) -> torch.Tensor:
        """J_norm(x)^T c for many cotangents c of the norm in front of a layer's attention.

        x: [batch, pos, d_model]; cotangents: [batch, pos, n, d_model]. Returns [batch, pos, n,
        d_model]. Models whose attention reads the residual unnormalised pass c through.
        """
        if self.reads_unnormalised_residual:
            return cotangents
        _, vjp = torch.func.vjp(self.model.blocks[layer].ln1, x.detach())
        return torch.vmap(lambda cotangent: vjp(cotangent)[0], in_dims=2, out_dims=2)(cotangents)

    def has_hook(self, name: str) -> bool:
        """Whether the model has a hook point of that name (norms and MLP kinds differ by model)."""
        return name in self.model.hook_dict

    def mlp_activation(self, layer: int):
        """(the MLP's activation function, whether the MLP is gated: act(gate) * linear + b_in).

        ValueError in one sentence for an MLP whose activation is followed by a norm (SoLU)."""
        mlp = self.model.blocks[layer].mlp
        if getattr(mlp, "hook_mid", None) is not None:
            raise ValueError(
                "This model's MLP normalises after its activation (SoLU); relevance rules are not defined for it."
            )
        return mlp.act_fn, bool(self.cfg.gated_mlp)

    def attention_score_problem(self) -> str | None:
        """Why a layer's attention scores are not (query . key) / scale under a causal mask, or
        None when they are (what recomputing a patched softmax exactly needs)."""
        cfg = self.cfg
        if (getattr(cfg, "attn_scores_soft_cap", -1.0) or -1.0) > 0:
            return "its attention scores are soft-capped"
        if getattr(cfg, "use_attention_sinks", False):
            return "its attention has sink columns"
        if cfg.positional_embedding_type in ("alibi", "relative_positional_bias"):
            return f"its attention adds a {cfg.positional_embedding_type} position bias"
        if getattr(cfg, "use_logn_attn", False) or whole_vector_qk_norm(cfg.original_architecture):
            return "its queries and keys are normalised or scaled in a way this recomputation does not follow"
        return None

    def head_queries_keys(self, layer: int, inputs: torch.Tensor, kind: str) -> torch.Tensor:
        """Each head's query (``kind`` "q") or key ("k") as its attention scores read it (after any
        q/k-norm and the rotation), when every head reads ``inputs`` (the residual before the
        layer's norm). Call outside ``hooked``.
        inputs: [n, pos, d_model] -> [n, pos, n_heads, d_head]"""
        block = self.model.blocks[layer]
        attention = block.attn
        home, inputs = inputs.device, inputs.to(self.layer_device(layer))  # a split model's layer
        x = inputs if self.pre_attention_norm(layer) is None else block.ln1(inputs)
        weight, bias = (attention.W_Q, attention.b_Q) if kind == "q" else (attention.W_K, attention.b_K)
        out = torch.einsum("npd,hde->nphe", x, weight) + bias
        if self.cfg.use_qk_norm:
            out = attention._apply_qk_norm(out, attention.q_norm if kind == "q" else attention.k_norm)
        if self.cfg.positional_embedding_type == "rotary":
            out = attention.apply_rotary(out, 0)
        return out.to(home)

    @contextmanager
    def split_attention_inputs(self, split: bool, grouped: bool = False) -> Iterator[None]:
        """Run with one private q/k/v input per head (``split``) or one shared input per layer;
        ``grouped`` (shared): grouped-query keys and values made once per key/value head, not per
        query head from a repeated weight (``hook_k``/``hook_v`` then hold the key/value heads).
        The one place the model's configuration changes during a pass: the caller holds the
        model's lock (``hooked`` or ``lock``), so no other run sees the setting; restored on exit."""
        with self.lock:
            before = self.cfg.use_split_qkv_input, self.cfg.ungroup_grouped_query_attention
            self.cfg.use_split_qkv_input = split
            self.cfg.ungroup_grouped_query_attention = before[1] and (split or not grouped)
            try:
                yield
            finally:
                self.cfg.use_split_qkv_input, self.cfg.ungroup_grouped_query_attention = before


def head_results(attention, z: torch.Tensor) -> torch.Tensor:
    """``ModelAdapter.head_results`` for one attention module (tests check the decomposition with
    it).  z: [batch, pos, n_heads, d_head] -> [batch, pos, n_heads, d_model]

    The product ``torch.einsum("bphd,hdm->bphm", z, W_O)`` makes, [h, batch pos, d_head] @ W_O
    (W_O as it is laid out, as einsum passes it), on the same operands, so the same bits, without
    einsum's reshaping operators (forward and backward, 198 of a learning step's on Gemma-3-270M)."""
    weight = attention.W_O  # [n_heads, d_head, d_model]
    batch, positions, n_heads, d_head = z.shape
    flat = z.permute(2, 0, 1, 3).reshape(n_heads, batch * positions, d_head)
    out = torch.bmm(flat, weight).view(n_heads, batch, positions, -1).permute(1, 2, 0, 3)
    return out + attention.b_O / n_heads


def apply_norm(norm, y: torch.Tensor) -> torch.Tensor:
    """``norm(y)`` computed as TransformerLens's RMSNorm / LayerNorm compute it, without running
    the module (so none of its hooks fires inside a hooked run that already hooks it).

    y: [..., d_model]. Half-precision inputs are normalised in float32 and cast back before the
    weight, as the modules do."""
    dtype = y.dtype
    x = y.to(torch.float32) if dtype not in (torch.float32, torch.float64) else y
    if "LayerNorm" in type(norm).__name__:
        x = x - x.mean(-1, keepdim=True)
    scale = (x.pow(2).mean(-1, keepdim=True) + norm.eps).sqrt()
    out = (x / scale).to(dtype)
    weight = getattr(norm, "w", None)
    if weight is not None:
        out = out * weight.to(out.device)  # a split model's norm may sit on another device than y
    bias = getattr(norm, "b", None)
    if bias is not None:
        out = out + bias.to(out.device)
    return out
