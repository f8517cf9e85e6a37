"""``ModelAdapter`` for a TransformerLens ``TransformerBridge`` (see ``bridge.py``).

The bridge in compatibility mode fires the classic hook names on the ``transformers`` model's
own forward pass, so the engine's hooks work unchanged. What differs is answered here:

- runs to the final residual stop at the final norm's input (the bridge's ``stop_at_layer`` stops
  only before a block), by the bridge's own stop exception raised from a hook;
- continued runs read the ``transformers`` key/value cache of the prefix (a ``DynamicCache``,
  sliding-window layers included), copied per run so the frozen prefix is never extended;
- norms are read through ``BridgeNorm``: the effective weight (Gemma multiplies by 1 + weight),
  bias and epsilon, applied by the ``transformers`` module itself so no bridge hook fires;
- attention weights come from the bridge's [n_heads, d_model, d_head] views, missing biases as
  zeros, rotary tables as the model applies them (captured from ``hook_cos``/``hook_sin``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cached_property

import torch

from circuitviz.models.architectures import norms_after_writers
from circuitviz.models.attention_parts import AttentionParts
from circuitviz.models.base_adapter import Hook, ModelAdapter


def is_bridge(model) -> bool:
    """Whether ``model`` is a TransformerBridge (checked without importing TransformerLens)."""
    return type(model).__module__.startswith("transformer_lens.model_bridge")


class BridgeNorm:
    """A bridge norm as circuitviz reads one: ``w``, ``b``, ``eps``, and a call that applies the
    ``transformers`` module (no bridge hook fires)."""

    def __init__(self, module):
        self.module = module
        self.inner = getattr(module, "original_component", None) or module

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x)

    @property
    def w(self) -> torch.Tensor | None:
        weight = getattr(self.inner, "weight", None)
        if weight is None:
            return None
        if type(self.inner).__name__.startswith("Gemma"):  # x / rms(x) * (1 + weight)
            return 1.0 + weight
        return weight

    @property
    def b(self) -> torch.Tensor | None:
        return getattr(self.inner, "bias", None)

    @property
    def eps(self) -> float:
        for name in ("eps", "variance_epsilon", "variance_eps"):
            value = getattr(self.inner, name, None)
            if isinstance(value, float):
                return value
        return 1e-6


class BridgeLayerNorm(BridgeNorm):
    """A centring norm (``is_centring`` reads the class name)."""


class BridgeRMSNorm(BridgeNorm):
    """A norm that only scales."""


def bridge_norm(module) -> BridgeNorm:
    inner = getattr(module, "original_component", None) or module
    centring = isinstance(inner, torch.nn.LayerNorm) or "LayerNorm" in type(inner).__name__
    return BridgeLayerNorm(module) if centring else BridgeRMSNorm(module)


class BridgeAttentionParts(AttentionParts):
    """One bridge layer's attention under ``AttentionParts``'s names."""

    def __init__(self, module, adapter: BridgeAdapter, layer: int):
        super().__init__(module)
        self._adapter, self._layer = adapter, layer

    def _zeros(self, *shape) -> torch.Tensor:
        weight = self._module.W_Q
        return torch.zeros(shape, device=weight.device, dtype=weight.dtype)

    def _bias(self, name: str, *shape) -> torch.Tensor:
        value = getattr(self._module, name)
        return value if value is not None else self._zeros(*shape)

    cfg = property(lambda self: self._adapter.cfg)
    b_Q = property(lambda self: self._bias("b_Q", self.cfg.n_heads, self.cfg.d_head))
    b_K = property(lambda self: self._bias("b_K", self.cfg.n_heads, self.cfg.d_head))
    b_O = property(lambda self: self._bias("b_O", self.cfg.d_model))
    q_norm = property(
        lambda self: bridge_norm(self._module.q_norm) if hasattr(self._module, "q_norm") else None
    )
    k_norm = property(
        lambda self: bridge_norm(self._module.k_norm) if hasattr(self._module, "k_norm") else None
    )

    @property
    def score_scale(self) -> float:
        """Scores are q.k / this: ``transformers``' ``scaling``; Falcon's attention keeps it as
        ``inv_norm_factor`` (1 / sqrt(d_head), what the bridge's attention scales by)."""
        scaling = getattr(self._hf, "scaling", None)
        return 1.0 / float(scaling if scaling is not None else self._hf.inv_norm_factor)

    local = property(lambda self: getattr(self._hf, "sliding_window", None) is not None)

    @property
    def _hf(self):
        return self._module.original_component

    @property
    def stored_keys(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self._module.W_K, self.b_K

    def rotary_tables(self, n_positions: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self._adapter.rotary_tables(self._layer, n_positions)

    def rotate_pairs(self, x: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2  # transformers' rotate_half: (x1, x2) -> (-x2, x1)
        return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class _Prefix:
    """The key/value cache of a batch's first positions and the row each batch row reads."""

    def __init__(self, cache, inverse: torch.Tensor, n_distinct: int, length: int):
        self.cache, self.inverse, self.n_distinct, self.length = cache, inverse, n_distinct, length

    def rows(self, cached: torch.Tensor) -> torch.Tensor:
        """[g, heads, prefix, d_head] -> [batch, heads, prefix, d_head]."""
        if self.n_distinct == 1:
            return cached.expand(len(self.inverse), -1, -1, -1)
        return cached[self.inverse.to(cached.device)]

    def for_run(self):
        """A fresh cache holding the prefix for every batch row; extending it leaves this one as is."""
        cache = copy.copy(self.cache)
        cache.layers = []
        for layer in self.cache.layers:
            copied = copy.copy(layer)
            copied.keys, copied.values = self.rows(layer.keys), self.rows(layer.values)
            cache.layers.append(copied)
        return cache


class BridgeAdapter(ModelAdapter):
    """The adapter of a TransformerBridge in compatibility mode (module docstring)."""

    packs_prefix_trees = False  # its attention is the wrapped model's own: no packed passes
    starts_at_layer = False  # the bridge runs from the embedding only: layer starts run whole passes

    @property
    def rotary(self) -> bool:
        return self.cfg.positional_embedding_type == "rotary"

    @cached_property
    def positions_inside_attention(self) -> bool:
        """Whether a run must see every position: a model whose attention keeps no ``transformers``
        key/value cache (MPT's, in transformers 5) cannot be continued from a prefix, so the
        engine runs its prompts whole (checked once, on a two-token run)."""
        tokens = torch.zeros((1, 2), dtype=torch.long, device=self.device)
        kept = self.prefix_caches(tokens).cache
        layers = getattr(kept, "layers", None) or []
        return len(layers) < self.cfg.n_layers or any(
            getattr(layer, "keys", None) is None for layer in layers
        )

    @property
    def reads_unnormalised_residual(self) -> bool:
        return norms_after_writers(getattr(self.cfg, "architecture", ""))

    # ----- runs --------------------------------------------------------------------------------
    @contextmanager
    def hooked(self, fwd_hooks: list[Hook]) -> Iterator[None]:
        """``ModelAdapter.hooked``, each hook seeing the name it was added under: the bridge calls
        a hook added at an alias (``blocks.1.hook_resid_post``) with its canonical hook point
        (``blocks.1.hook_out``), and callers key what they capture by ``hook.name``.

        Hooks go straight onto the hook points (found once, ``_hook_points``), removed on exit by a
        level of their own: the bridge's ``hooks()`` context rebuilds its alias map for every
        hook it adds, 42 % of an EAP-IG run's time on a tiny Llama.

        ``hook_mlp_in`` is handed a copy of the residual stream, as HookedTransformer hands it:
        the bridge hooks the very tensor the residual connection carries on, so a gradient
        taken there (EAP's at an MLP's input) would include every later reader's, not only the
        MLP's (EAP scores into MLPs were off by up to 100 % of the largest score on SmolLM2).
        """
        with self.lock, self.tokenizer_lock, self._added(fwd_hooks):
            yield

    @cached_property
    def _hook_points(self) -> dict:
        """{hook name, aliases included: its hook point}, read once."""
        return dict(self.model.hook_dict)

    def _hook_function(self, name: str, function: Callable) -> Callable:
        return _named(name, function, self._copied_points)

    @cached_property
    def _copied_points(self) -> frozenset[int]:
        """The hook points whose value is the residual stream itself rather than a copy."""
        return frozenset(
            id(block.hook_mlp_in) for block in self.model.blocks if hasattr(block, "hook_mlp_in")
        )

    def _to_final_residual(self, tokens: torch.Tensor, **kwargs) -> torch.Tensor:
        """Run until the final norm's input and return it (the residual after every block)."""
        from transformer_lens.model_bridge.exceptions import StopAtLayerException

        def stop(x, hook):
            raise StopAtLayerException(x)

        point = self.model.ln_final.hook_in
        with self._added([(point.name, stop)]):
            # back on the tokens' device: a split model's last block may sit on another
            return self.model(tokens, **kwargs).to(tokens.device)

    def blocks(self, tokens: torch.Tensor, stop_at_layer: int | None = None) -> torch.Tensor:
        if stop_at_layer is not None and stop_at_layer < self.cfg.n_layers:
            return self.model(tokens, stop_at_layer=stop_at_layer).to(tokens.device)
        return self._to_final_residual(tokens)

    def logits(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.model(tokens).to(tokens.device)

    @contextmanager
    def _cache_handed_to_attention(self) -> Iterator[None]:
        """Hand each attention bridge the cache ``transformers`` passes it.

        ``transformers`` 5.x passes the key/value cache to attention as ``cache``; the bridge's
        re-implemented attention (TransformerLens 3.9) reads ``past_key_values`` or
        ``layer_past`` only, and without this would attend to the new positions alone.
        """

        def hand_over(module, args, kwargs):
            if kwargs.get("cache") is not None and kwargs.get("past_key_values") is None:
                kwargs["past_key_values"] = kwargs["cache"]
            return args, kwargs

        handles = [
            block.attn.register_forward_pre_hook(hand_over, with_kwargs=True) for block in self.model.blocks
        ]
        try:
            yield
        finally:
            for handle in handles:
                handle.remove()

    @torch.no_grad()
    def prefix_caches(self, tokens: torch.Tensor) -> _Prefix:
        """The ``transformers`` key/value cache of each distinct row's first positions."""
        from transformers import DynamicCache

        distinct, inverse = torch.unique(tokens, dim=0, return_inverse=True)  # [g, prefix], [batch]
        cache = DynamicCache(config=self.model.original_model.config)
        with self.hooked([]), self._cache_handed_to_attention():
            self._to_final_residual(distinct, cache=cache, use_cache=True)
        return _Prefix(cache, inverse, len(distinct), int(tokens.shape[1]))

    def prefix_rows(self, caches: _Prefix, inverse: torch.Tensor) -> _Prefix:
        """The cache ``prefix_caches`` made of distinct rows, for a batch whose row b continues
        distinct row ``inverse[b]``."""
        return _Prefix(caches.cache, inverse, caches.n_distinct, caches.length)

    def continuing(self, tokens: torch.Tensor, caches: _Prefix, mask: torch.Tensor) -> torch.Tensor:
        """The residual after every block for ``tokens`` continuing ``caches`` (``prefix_caches``).
        Call inside ``hooked``.  tokens: [batch, new] -> [batch, new, d_model]."""
        with self._cache_handed_to_attention():
            return self._to_final_residual(tokens, cache=caches.for_run(), use_cache=True)

    # ----- the pieces the engine computes with ----------------------------------------------------
    @property
    def unembedding(self) -> tuple[torch.Tensor, torch.Tensor]:
        W_U = self.model.unembed.W_U  # [d_model, d_vocab]
        bias = getattr(self.model.unembed.original_component, "bias", None)
        if bias is None:
            bias = torch.zeros(W_U.shape[1], device=W_U.device, dtype=W_U.dtype)
        return W_U, bias

    def unembed(self, residual: torch.Tensor, ids: torch.Tensor | None = None) -> torch.Tensor:
        x = residual[:, None, :]  # [batch, 1, d_model]
        norm = self.final_norm
        if norm is not None:
            x = norm(x.to(self.device_of_module(norm.inner))).to(residual.device)
        return self.logits_of_normed(x[:, 0], ids)

    @property
    def final_norm(self):
        module = getattr(self.model, "ln_final", None)
        return bridge_norm(module) if module is not None else None

    def attention(self, layer: int) -> BridgeAttentionParts:
        return BridgeAttentionParts(self.model.blocks[layer].attn, self, layer)

    def pre_attention_norm(self, layer: int):
        if self.reads_unnormalised_residual or self.cfg.normalization_type is None:
            return None
        return bridge_norm(self.model.blocks[layer].ln1)

    def head_results(self, layer: int, z: torch.Tensor) -> torch.Tensor:
        # on the layer's device and back (a split model's layers sit on several)
        return head_results(self.attention(layer), z.to(self.layer_device(layer))).to(z.device)

    def attention_post_norm(self, layer: int):
        block = self.model.blocks[layer]
        if hasattr(block, "ln1_post"):
            return bridge_norm(block.ln1_post), "ln1_post"
        if self.reads_unnormalised_residual:
            return bridge_norm(block.ln1), "ln1"
        return None, None

    def qkv_weights(self, layer: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        attention = self.model.blocks[layer].attn
        return attention.W_Q, attention.W_K, attention.W_V

    def attention_norm_vjp(self, layer: int, x: torch.Tensor, cotangents: torch.Tensor) -> torch.Tensor:
        if self.reads_unnormalised_residual:
            return cotangents
        _, vjp = torch.func.vjp(self.pre_attention_norm(layer), x.detach())
        return torch.vmap(lambda cotangent: vjp(cotangent)[0], in_dims=2, out_dims=2)(cotangents)

    def has_hook(self, name: str) -> bool:
        return name in self._hook_points

    def mlp_activation(self, layer: int):
        """(the MLP's activation function, whether it is gated), read off the transformers MLP."""
        mlp = self.model.blocks[layer].mlp.original_component
        names = ("act_fn", "activation_fn", "act", "activation")
        act = next((getattr(mlp, name) for name in names if getattr(mlp, name, None) is not None), None)
        if act is None:
            raise ValueError("This model's MLP activation could not be read; relevance rules need it.")
        return act, bool(self.cfg.gated_mlp)

    def head_queries_keys(self, layer: int, inputs: torch.Tensor, kind: str) -> torch.Tensor:
        """``ModelAdapter.head_queries_keys`` through the bridge: the projection, any q/k-norm,
        and transformers' rotation with the layer's own tables.
        inputs: [n, pos, d_model] -> [n, pos, n_heads, d_head]"""
        parts = self.attention(layer)
        norm = self.pre_attention_norm(layer)
        home, inputs = inputs.device, inputs.to(self.layer_device(layer))  # a split model's layer
        x = inputs if norm is None else norm(inputs)
        weight, bias = (parts.W_Q, parts.b_Q) if kind == "q" else (parts.W_K, parts.b_K)
        out = torch.einsum("npd,hde->nphe", x, weight) + bias
        qk_norm = parts.q_norm if kind == "q" else parts.k_norm
        if qk_norm is not None:
            out = qk_norm(out)
        if self.rotary:
            cos, sin = self.rotary_tables(layer, out.shape[1])  # [pos, rotary_dim]
            width = cos.shape[-1]
            rotated = out[..., :width] * cos[:, None] + parts.rotate_pairs(out[..., :width]) * sin[:, None]
            out = torch.cat([rotated, out[..., width:]], dim=-1)
        return out.to(home)

    def split_attention_inputs(self, split: bool, grouped: bool = False):
        return _SplitInputs(self, split)  # ``grouped``: the bridge keeps its own key/value layout

    def rotary_tables(self, layer: int, n_positions: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The cos and sin a layer rotates its first ``n_positions`` with (1 and 0 where it rotates
        nothing).  # [n, rotary_dim] each"""
        attention = self.model.blocks[layer].attn
        tables: dict[str, torch.Tensor] = {}

        def keep(x, hook):
            tables[hook.name] = x.detach()

        names = [attention.hook_cos.name, attention.hook_sin.name]
        tokens = torch.zeros((1, n_positions), dtype=torch.long, device=self.device)
        with torch.no_grad(), self.hooked([(name, keep) for name in names]):
            self.blocks(tokens, stop_at_layer=layer + 1)
        if len(tables) < len(names):  # a layer handed no rotation (Cohere 2's global layers)
            width, like = int(self.cfg.rotary_dim or self.cfg.d_head), attention.W_Q
            cos = torch.ones((n_positions, width), dtype=like.dtype, device=like.device)
            return cos, torch.zeros((n_positions, width), dtype=like.dtype, device=like.device)
        cos, sin = (tables[name].reshape(-1, tables[name].shape[-1])[-n_positions:] for name in names)
        return cos, sin


class _Renamed:
    """A hook point seen under another name (every other attribute is the hook point's)."""

    def __init__(self, point, name: str):
        self._point, self.name = point, name

    def __getattr__(self, attribute):
        return getattr(self._point, attribute)


def _named(name: str, function: Callable, copied: frozenset[int]) -> Callable:
    """``function`` called with the name it was added under, on a copy at ``copied`` points."""

    def call(x, hook):
        if id(hook) in copied:
            x = x.clone()
            result = function(x, hook=hook if hook.name == name else _Renamed(hook, name))
            return x if result is None else result
        return function(x, hook=hook if hook.name == name else _Renamed(hook, name))

    return call


class _SplitInputs:
    """``split_attention_inputs`` for the bridge: its own setter, restored on exit."""

    def __init__(self, adapter: BridgeAdapter, split: bool):
        self.adapter, self.split = adapter, split

    def __enter__(self):
        self.adapter.lock.acquire()
        self.before = bool(self.adapter.cfg.use_split_qkv_input)
        self.adapter.model.set_use_split_qkv_input(self.split)
        return self

    def __exit__(self, *exc):
        try:
            self.adapter.model.set_use_split_qkv_input(self.before)
        finally:
            self.adapter.lock.release()
        return False


def head_results(attention: AttentionParts, z: torch.Tensor) -> torch.Tensor:
    """Each head's output from its z, the output bias shared out evenly.
    z: [batch, pos, n_heads, d_head] -> [batch, pos, n_heads, d_model]"""
    return torch.einsum("bphd,hdm->bphm", z, attention.W_O) + attention.b_O / z.shape[2]
