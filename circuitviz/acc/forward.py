"""The one forward pass ACC++ reads, and the constants of that pass it folds into the heads.

Everything comes from a single clean run (``activations.observe``): each writer's contribution
to the residual stream, every head's attention pattern and pre-softmax scores, its value
vectors, and the per-position scales of every norm (pre-attention norm, Gemma's post-attention
norm, q/k-norms, final norm). Those scales are frozen: ACC++ explains *this* forward pass, so a
norm's division by its scale is a constant per position, and every component's share of a
query or key stays linear.

A head's output at position j is split further by the source position m it read from:
``A[j, m] * N(v_m W_O) / s_j`` (N the post-attention norm's fixed linear part, s_j its scale),
so an upstream head's signal names which of its own attention decisions carried it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..core.graph import GraphSpec
from ..engine import sites
from ..engine.capture import observe
from ..models.adapter import adapter_of
from ..models.architectures import labels, whole_vector_qk_norm
from .svd import compute_dtype, is_centring, pre_attention_norm

UNSUPPORTED_POSITIONS = {
    "alibi": "ALiBi position biases",
    "relative_positional_bias": "T5-style relative position biases",
    "shortformer": "Shortformer position embeddings added to q/k",
}


def check_supported(model) -> None:
    """Refuse, in one sentence, attention variants whose scores the bilinear form cannot express."""
    cfg = model.cfg
    kind = cfg.positional_embedding_type
    if kind in UNSUPPORTED_POSITIONS:
        raise ValueError(
            f"ACC++ cannot decompose attention with {UNSUPPORTED_POSITIONS[kind]}; "
            "choose a model with absolute or rotary positions (GPT-2, Llama, Gemma)."
        )
    if getattr(cfg, "use_attention_sinks", False) or getattr(cfg, "use_logn_attn", False):
        raise ValueError(
            "ACC++ does not support attention sinks or log-n query scaling; choose another model."
        )
    if getattr(cfg, "use_qk_norm", False) and kind != "rotary":
        raise ValueError("ACC++ supports q/k-norms only in rotary models (Gemma-3); choose another model.")
    if whole_vector_qk_norm(cfg.original_architecture):
        raise ValueError(
            f"ACC++ does not support {labels([cfg.original_architecture])}'s whole-vector q/k-norm; "
            "choose another model."
        )


class PositionOperators:
    """One layer's rotary maps R_j as ``x * cos_j + flip(x) * sin_j`` (identity without RoPE).

    cos, sin: [n, R], with the dimensions past ``rotary_dim`` passing through (cos 1, sin 0).
    The model's own ``rotate_every_two`` and cos/sin tables are used, so GPT-NeoX/GPT-J pairing
    and Gemma-3's different local/global bases come out exactly as in the forward pass.
    """

    def __init__(self, model, layer: int, n_positions: int, dtype: torch.dtype, device):
        cfg = model.cfg
        size = cfg.d_head
        self.rotary = cfg.positional_embedding_type == "rotary"
        self.cos = torch.ones(n_positions, size, dtype=dtype, device=device)
        self.sin = torch.zeros(n_positions, size, dtype=dtype, device=device)
        self._attn = adapter_of(model).attention(layer)
        self.rotary_dim = int(cfg.rotary_dim or size) if self.rotary else 0
        if self.rotary:
            cos, sin = self._attn.rotary_tables(n_positions)  # [n, rotary_dim] each
            self.cos[:, : self.rotary_dim] = cos.to(dtype)
            self.sin[:, : self.rotary_dim] = sin.to(dtype)

    def flip(self, x: torch.Tensor) -> torch.Tensor:
        """The model's pair swap on the rotary dimensions, zero elsewhere.  # [..., R]"""
        out = torch.zeros_like(x)
        if self.rotary:
            out[..., : self.rotary_dim] = self._attn.rotate_pairs(x[..., : self.rotary_dim])
        return out

    def rotate(self, x: torch.Tensor, positions: torch.Tensor | slice) -> torch.Tensor:
        """R_j x for x [..., P, R], the P axis being the positions ``positions``."""
        if not self.rotary:
            return x
        return x * self.cos[positions] + self.flip(x) * self.sin[positions]

    def weighted_sum(self, x: torch.Tensor, weights: torch.Tensor, positions: torch.Tensor | slice):
        """sum_j weights[..., j] R_j x  without rotating x once per j.

        x: [..., R]; weights: [..., P] over ``positions``. Returns [..., R].
        """
        total = weights.sum(-1, keepdim=True)
        if not self.rotary:
            return x * total
        cos = weights @ self.cos[positions]  # [..., R]
        sin = weights @ self.sin[positions]
        return x * cos + self.flip(x) * sin


@dataclass
class ForwardPass:
    """What one clean run of a prompt gives ACC++ (all on the model's device, compute dtype).

    writers: [n, n_forward, d_model] each writer's residual contribution (engine convention);
    patterns, scores: per layer [n_heads, n, n] (scores as hook_attn_scores: scaled, capped,
    masked with -inf); value_outputs: per layer [n_heads, n, d_model], N(v_m W_O) per source m;
    head_bias: per layer [n, d_model], what the layer's attention adds besides its heads'
    value pieces (b_O and the post-norm's bias through the frozen norm);
    post_scale, pre_scale: per layer [n]; q_scale, k_scale: per layer [n, n_heads];
    final_scale: [n] (the final norm's); residual: [n, d_model] after the last block.
    """

    tokens: torch.Tensor
    spec: GraphSpec
    writers: torch.Tensor
    patterns: list[torch.Tensor]
    scores: list[torch.Tensor]
    value_outputs: list[torch.Tensor]
    head_bias: list[torch.Tensor]
    post_scale: list[torch.Tensor]
    pre_scale: list[torch.Tensor]
    q_scale: list[torch.Tensor]
    k_scale: list[torch.Tensor]
    final_scale: torch.Tensor
    residual: torch.Tensor

    @property
    def n_positions(self) -> int:
        return int(self.tokens.shape[1])

    def head_pieces(self, layer: int, position: int) -> torch.Tensor:
        """Every head of ``layer`` at ``position`` split by source.  # [n_heads, n, d_model]"""
        weights = self.patterns[layer][:, position, :] / self.post_scale[layer][position]  # [H, n]
        return weights[..., None] * self.value_outputs[layer]

    def piece_error(self) -> float:
        """max |sum of a layer's head pieces + its bias - the heads' writer outputs| (a self-check)."""
        worst = 0.0
        for layer in range(self.spec.n_layers):
            heads = self.writers[:, self.spec.head_forward(layer)].sum(1)  # [n, d_model]
            pieces = torch.einsum("hjm,hmd->jd", self.patterns[layer], self.value_outputs[layer])
            pieces = pieces / self.post_scale[layer][:, None] + self.head_bias[layer]
            worst = max(worst, float((pieces - heads).abs().max()))
        return worst


def _post_norm_linear(norm, y: torch.Tensor, dtype) -> torch.Tensor:
    """The post-attention norm's fixed linear part (centring, weight) without its scale or bias."""
    if is_centring(norm):
        y = y - y.mean(-1, keepdim=True)
    weight = getattr(norm, "w", None)
    return y * weight.detach().to(y.device, dtype) if weight is not None else y


def hook_names(model) -> list[str]:
    """The activations ACC++ reads, beyond every writer's output."""
    names = []
    for layer in range(model.cfg.n_layers):
        names += [
            sites.attention_pattern(layer),
            sites.attention_scores(layer),
            sites.head_projection(layer, "v"),
        ]
        if pre_attention_norm(model, layer) is not None:
            names.append(sites.norm_scale(layer, "ln1"))
        norm, norm_name = adapter_of(model).attention_post_norm(layer)
        if norm is not None:
            names.append(sites.norm_scale(layer, norm_name))
        if getattr(model.cfg, "use_qk_norm", False):
            names += [sites.norm_scale(layer, "attn.q_norm"), sites.norm_scale(layer, "attn.k_norm")]
    return names


def final_norm_scale(model, residual: torch.Tensor) -> torch.Tensor:
    """The final norm's scale at each position of ``residual`` [n, d_model].  # [n]

    Computed, not hooked: the runs stop before the final norm (they never need the logits of
    every position). Same formula as TransformerLens's LayerNorm/RMSNorm.
    """
    norm = adapter_of(model).final_norm
    if norm is None:
        return torch.ones(residual.shape[0], dtype=residual.dtype, device=residual.device)
    if is_centring(norm):
        residual = residual - residual.mean(-1, keepdim=True)
    eps = float(getattr(norm, "eps", model.cfg.eps))
    return (residual.pow(2).mean(-1) + eps).sqrt()


@torch.no_grad()
def run_forward(model, tokens: torch.Tensor) -> ForwardPass:
    """One clean forward pass of ``tokens`` [1, n], kept as ACC++ needs it."""
    check_supported(model)
    cfg = model.cfg
    spec = adapter_of(model).spec
    dtype = compute_dtype(model)
    writers, captured, residual = observe(model, spec, tokens, hook_names(model))
    n = int(tokens.shape[1])
    device = writers.device
    ones = torch.ones(n, dtype=dtype, device=device)

    def scale(name: str, heads: int | None = None) -> torch.Tensor:
        if name not in captured:
            return ones if heads is None else torch.ones(n, heads, dtype=dtype, device=device)
        value = captured[name].to(dtype)
        if heads is None:  # [1, n, 1] or [1, n, n_heads, 1] (split q/k/v inputs: equal per head)
            return value.reshape(1, n, -1)[0, :, 0]
        return value.reshape(n, heads)  # q/k-norm scales: [n * n_heads, 1], position-major

    patterns, scores, value_outputs, head_bias = [], [], [], []
    post_scale, pre_scale, q_scale, k_scale = [], [], [], []
    for layer in range(cfg.n_layers):
        attn = adapter_of(model).attention(layer)
        patterns.append(captured[sites.attention_pattern(layer)][0].to(dtype))
        scores.append(captured[sites.attention_scores(layer)][0].to(dtype))
        values = captured[sites.head_projection(layer, "v")][0].to(dtype)  # [n, H, R]
        outputs = torch.einsum("mhr,hrd->hmd", values, attn.W_O.detach().to(device, dtype))  # [H, n, d_model]
        norm, norm_name = adapter_of(model).attention_post_norm(layer)
        b_o = attn.b_O.detach().to(device, dtype)  # a split model's layer may sit elsewhere
        if norm is None:
            post = ones
            bias = b_o.expand(n, -1)
        else:
            post = scale(sites.norm_scale(layer, norm_name))
            outputs = _post_norm_linear(norm, outputs, dtype)
            bias = _post_norm_linear(norm, b_o, dtype)[None, :] / post[:, None]
            norm_bias = getattr(norm, "b", None)
            if norm_bias is not None:
                bias = bias + norm_bias.detach().to(device, dtype)
        value_outputs.append(outputs)
        head_bias.append(bias.contiguous())
        post_scale.append(post)
        pre_scale.append(scale(sites.norm_scale(layer, "ln1")))
        q_scale.append(scale(sites.norm_scale(layer, "attn.q_norm"), cfg.n_heads))
        k_scale.append(scale(sites.norm_scale(layer, "attn.k_norm"), cfg.n_heads))
    return ForwardPass(
        tokens=tokens,
        spec=spec,
        writers=writers[0].to(dtype),
        patterns=patterns,
        scores=scores,
        value_outputs=value_outputs,
        head_bias=head_bias,
        post_scale=post_scale,
        pre_scale=pre_scale,
        q_scale=q_scale,
        k_scale=k_scale,
        final_scale=final_norm_scale(model, residual[0].to(dtype)),
        residual=residual[0].to(dtype),
    )


def allowed_sources(model, layer: int, destination: int) -> range:
    """The source positions a head of ``layer`` can attend from ``destination`` (causal, window)."""
    low = 0
    if adapter_of(model).attention(layer).local and isinstance(model.cfg.window_size, int):
        low = max(0, destination - model.cfg.window_size + 1)
    return range(low, destination + 1)
