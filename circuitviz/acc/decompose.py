"""Candidate signals of one attention decision and their exact pre-softmax contributions.

For head (l, h), destination d and the row of sources j it can attend, the upstream components
are: ``input`` (the embeddings), every earlier MLP, every earlier head split by the source m it
read from (a piece of head h' at position j is ``A_h'[j, m] N(v_m W_O)``), and ``bias`` (every
constant: b_Q/b_K, the norm's bias, the attention output biases).

Two decompositions of the same score row, each exact (the contributions sum to the row):

- query side: candidate (c, k) is component c's share of the query at d along singular
  direction k, met by the whole key at each j: ``alpha_c[k] sigma_k beta[j, k] / scale``;
- key side: candidate (c, k) is c's share of the keys along direction k at every source j,
  met by the whole query: ``alpha[k] sigma_k beta_c[j, k] / scale``. A key-side candidate acts
  on every source at once, so removing it weighs s against its competitors.

Contributions are never all materialised at once: the integrated-gradient attribution of a
candidate is ``sum_j C[i, j] G[j]`` (G the path-averaged softmax gradient), which the rank
structure gives per component in one product; the vectors of the few candidates the greedy
step removes are computed on demand. ``dense_contributions`` builds the full matrix for tests.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..models.adapter import adapter_of
from .forward import ForwardPass, PositionOperators, allowed_sources
from .svd import FoldedLayer, HeadSVD, compute_dtype

# component kinds along a side's component axis: writers (input, MLPs), then bias, then head pieces
WRITER, BIAS, HEAD = "writer", "bias", "head"


@dataclass(frozen=True)
class Component:
    """One upstream component as a decision sees it."""

    kind: str  # "input", "mlp", "bias" or "head"
    name: str  # engine node name ("input", "m3", "a2.h1") or "bias"
    forward_index: int  # index on the engine's forward axis; -1 for bias
    layer: int  # -1 for input and bias
    head: int | None = None
    source: int | None = None  # for head pieces: the source position the upstream head read


class HeadTables:
    """Head-space projections of every upstream component of head (layer, head): computed once,
    reused by every decision of that head (queries and keys of all positions)."""

    def __init__(self, model, forward: ForwardPass, folded: FoldedLayer, svd: HeadSVD, layer: int, head: int):
        spec = forward.spec
        dtype = compute_dtype(model)
        device = forward.writers.device
        self.model = model
        self.forward = forward
        self.layer, self.head = layer, head
        self.a, self.b, self.sigma = svd.head(layer, head, dtype, device)
        self.degenerate = bool(svd.degenerate[layer, head])
        self.scale = adapter_of(model).attention(layer).score_scale
        cap = getattr(model.cfg, "attn_scores_soft_cap", -1.0)
        self.soft_cap = float(cap) if cap is not None and cap > 0 else None
        self.positions = PositionOperators(model, layer, forward.n_positions, dtype, device)
        # the projections zero the dimensions a q/k-norm weight kills (see svd.py)
        w_q = (folded.w_q[head] * folded.keep_q).to(device)  # [d_model, R]
        w_k = (folded.w_k[head] * folded.keep_k).to(device)
        self.b_q, self.b_k = folded.b_q[head].to(device), folded.b_k[head].to(device)

        # writers other than heads that the head reads: input and the MLPs of earlier layers
        self.writer_index = [0] + [spec.mlp_forward(lay) for lay in range(layer)]
        self.components: list[Component] = []
        for index in self.writer_index:
            name = spec.forward_names[index]
            kind = "input" if index == 0 else "mlp"
            self.components.append(Component(kind, name, index, int(spec.forward_layer[index])))
        self.components.append(Component("bias", "bias", -1, -1))
        self.n_writers = len(self.writer_index)
        self.n_upstream_layers = layer
        self.n_heads = spec.n_heads

        writers = forward.writers[:, self.writer_index]  # [n, W, d_model]
        bias = sum((forward.head_bias[lay] for lay in range(layer)), torch.zeros_like(forward.writers[:, 0]))
        self.writers_q, self.writers_k = writers @ w_q, writers @ w_k  # [n, W, R]
        self.bias_q, self.bias_k = bias @ w_q, bias @ w_k  # [n, R]
        if layer:
            outputs = torch.stack(forward.value_outputs[:layer])  # [L', H, n, d_model]
            self.heads_q, self.heads_k = outputs @ w_q, outputs @ w_k  # [L', H, n(m), R]
            patterns = torch.stack(forward.patterns[:layer])  # [L', H, n(j), n(m)]
            post = torch.stack(forward.post_scale[:layer])  # [L', n(j)]
            self.piece_weights = patterns / post[:, None, :, None]  # [L', H, j, m]
        else:
            shape = (0, spec.n_heads, forward.n_positions, w_q.shape[1])
            empty = torch.zeros(shape, device=device, dtype=dtype)
            self.heads_q, self.heads_k = empty, empty.clone()
            self.piece_weights = torch.zeros(
                0, spec.n_heads, forward.n_positions, forward.n_positions, dtype=dtype, device=device
            )
        self.pre_scale = forward.pre_scale[layer]  # [n]
        self.q_scale = forward.q_scale[layer][:, head]  # [n]
        self.k_scale = forward.k_scale[layer][:, head]

    # ----- components ---------------------------------------------------------------------------
    def n_components(self, destination: int) -> int:
        """Components of a decision at ``destination``: writers, bias, pieces (l', h', m <= d)."""
        return self.n_writers + 1 + self.n_upstream_layers * self.n_heads * (destination + 1)

    def component(self, index: int, destination: int) -> Component:
        """The component at ``index`` of a decision's component axis (head pieces are (l', h', m))."""
        if index <= self.n_writers:
            return self.components[index]
        n_pieces = destination + 1
        layer, rest = divmod(index - self.n_writers - 1, self.n_heads * n_pieces)
        head, source = divmod(rest, n_pieces)
        spec = self.forward.spec
        forward_index = spec.head_forward(layer).start + head
        return Component("head", spec.forward_names[forward_index], forward_index, layer, head, source)

    # ----- head-space parts at positions (before rotation) ------------------------------------
    def query_parts(self, position: int) -> torch.Tensor:
        """Every component's head-space share of the query at ``position`` (pieces m <= position),
        with the pre-norm scale and the q-norm scale applied, before rotation.  # [n_comp, R]
        """
        writers, bias, heads, constant, norm_scale = self._side("q")
        weights = self.piece_weights[:, :, position, : position + 1]  # [L', H, m]
        pieces = weights[..., None] * heads[:, :, : position + 1]  # [L', H, m, R]
        parts = (
            torch.cat([writers[position], bias[position][None], pieces.reshape(-1, pieces.shape[-1])])
            / self.pre_scale[position]
        )
        parts[self.n_writers] = parts[self.n_writers] + constant
        return parts / norm_scale[position]

    def _side(self, side: str):
        if side == "q":
            return self.writers_q, self.bias_q, self.heads_q, self.b_q, self.q_scale
        return self.writers_k, self.bias_k, self.heads_k, self.b_k, self.k_scale

    def full_keys(self, sources: range) -> torch.Tensor:
        """Rotated keys at every source, from the sum of all component shares.  # [n_src, R]"""
        positions = torch.arange(sources.start, sources.stop, device=self.a.device)
        weights = self.piece_weights[:, :, sources.start : sources.stop, :]  # [L', H, j, m]
        pieces = torch.einsum("lhjm,lhmr->jr", weights, self.heads_k)
        parts = (
            self.writers_k[sources.start : sources.stop].sum(1) + self.bias_k[sources.start : sources.stop]
        )
        keys = (parts + pieces) / self.pre_scale[positions][:, None] + self.b_k
        keys = keys / self.k_scale[positions][:, None]
        return self.positions.rotate(keys, positions)


@dataclass
class Decision:
    """One attention decision (head, destination d, source s) decomposed on both sides."""

    tables: HeadTables
    destination: int
    source: int
    sources: range
    alpha_parts: torch.Tensor  # [n_comp, R] query-side coordinates of each component
    alpha: torch.Tensor  # [R] the whole query's coordinates
    beta: torch.Tensor  # [n_src, R] the whole keys' coordinates
    row: torch.Tensor  # [n_src] pre-softmax (pre-cap) scores from the decomposition
    model_row: torch.Tensor  # [n_src] the model's own hook_attn_scores row
    _key_cache: dict = field(default_factory=dict)

    @property
    def n_sources(self) -> int:
        return len(self.sources)

    @property
    def source_index(self) -> int:
        return self.source - self.sources.start

    @property
    def n_components(self) -> int:
        return self.alpha_parts.shape[0]

    def capped(self, row: torch.Tensor) -> torch.Tensor:
        cap = self.tables.soft_cap
        return row if cap is None else cap * torch.tanh(row / cap)

    def decomposition_error(self) -> float:
        """max |capped(decomposed row) - hook_attn_scores row| / max(1, |row|)."""
        difference = (self.capped(self.row) - self.model_row).abs()
        return float((difference / self.model_row.abs().clamp(min=1.0)).max())

    def component(self, index: int) -> Component:
        return self.tables.component(index, self.destination)

    # ----- per-candidate contribution vectors ---------------------------------------------------
    def query_vectors(self, component: int) -> torch.Tensor:
        """Contributions of query candidates (component, k) for every k.  # [R, n_src]"""
        t = self.tables
        return (self.alpha_parts[component] * t.sigma)[:, None] * self.beta.T / t.scale

    def _rotated_key_parts(self, component: int) -> torch.Tensor:
        """Component's rotated share of the key at every source, before the basis B.  # [n_src, R]"""
        t = self.tables
        positions = torch.arange(self.sources.start, self.sources.stop, device=t.a.device)
        divisor = (t.pre_scale[positions] * t.k_scale[positions])[:, None]
        if component < t.n_writers:
            parts = t.writers_k[positions, component] / divisor
        elif component == t.n_writers:
            parts = (t.bias_k[positions] / t.pre_scale[positions][:, None] + t.b_k) / t.k_scale[positions][
                :, None
            ]
        else:
            piece = self.component(component)
            weights = t.piece_weights[piece.layer, piece.head, positions, piece.source]  # [n_src]
            parts = weights[:, None] * t.heads_k[piece.layer, piece.head, piece.source][None, :] / divisor
        return t.positions.rotate(parts, positions)

    def key_parts(self, component: int) -> torch.Tensor:
        """Component's key-side coordinates at every source.  # [n_src, R]"""
        cached = self._key_cache.get(component)
        if cached is None:
            cached = self._rotated_key_parts(component) @ self.tables.b
            self._key_cache[component] = cached
        return cached

    def key_column(self, component: int, direction: int) -> torch.Tensor:
        """Component's key coordinate along one direction at every source.  # [n_src]"""
        if component in self._key_cache:
            return self._key_cache[component][:, direction]
        return self._rotated_key_parts(component) @ self.tables.b[:, direction]

    def key_vectors(self, component: int) -> torch.Tensor:
        """Contributions of key candidates (component, k) for every k.  # [R, n_src]"""
        t = self.tables
        return (self.alpha * t.sigma)[:, None] * self.key_parts(component).T / t.scale

    def vectors(self, side: str, component: int) -> torch.Tensor:
        return self.query_vectors(component) if side == "q" else self.key_vectors(component)

    # ----- attribution products -----------------------------------------------------------------
    def query_attribution(self, gradient: torch.Tensor) -> torch.Tensor:
        """sum_j C[(c, k), j] gradient[j] for every query candidate.  # [n_comp, R]"""
        t = self.tables
        return self.alpha_parts * (t.sigma * (gradient @ self.beta) / t.scale)

    def key_attribution(self, gradient: torch.Tensor) -> torch.Tensor:
        """sum_j C[(c, k), j] gradient[j] for every key candidate.  # [n_comp, R]

        Head pieces use the rotary maps' linearity: sum_j g_j w_j R_j kappa needs only the
        g- and w-weighted cos/sin tables, never kappa rotated to every position.
        """
        t = self.tables
        start, stop = self.sources.start, self.sources.stop
        positions = torch.arange(start, stop, device=t.a.device)
        divisor = t.pre_scale[positions] * t.k_scale[positions]  # [n_src]
        weighted = gradient / divisor  # [n_src]
        # writers and bias: rotate each position's share, then weight
        writers = t.writers_k[positions]  # [n_src, W, R]
        bias = t.bias_k[positions] + (t.b_k * t.pre_scale[positions][:, None])  # [n_src, R]
        others = torch.cat([writers, bias[:, None]], dim=1)  # [n_src, W+1, R]
        rotated = t.positions.rotate(others.transpose(0, 1), positions)  # [W+1, n_src, R]
        other_sums = torch.einsum("j,cjr->cr", weighted, rotated)  # [W+1, R]
        # head pieces (l', h', m <= d): weights w[j] = A[j, m] / post_j, kappa = heads_k[l', h', m]
        pieces = self.destination + 1
        weights = t.piece_weights[:, :, start:stop, :pieces] * weighted[None, None, :, None]  # [L',H,j,m]
        kappa = t.heads_k[:, :, :pieces]  # [L', H, m, R]
        head_sums = t.positions.weighted_sum(kappa, weights.transpose(-1, -2), positions)  # [L', H, m, R]
        sums = torch.cat([other_sums, head_sums.reshape(-1, kappa.shape[-1])])
        return (sums @ t.b) * (self.alpha * t.sigma / t.scale)

    def attribution_products(self, side: str, gradient: torch.Tensor) -> torch.Tensor:
        return self.query_attribution(gradient) if side == "q" else self.key_attribution(gradient)

    def dense_contributions(self, side: str) -> torch.Tensor:
        """Every candidate's contribution vector.  # [n_comp * R, n_src] (row c * R + k)

        Memory grows with components x R x sources: for tests and small prompts only.
        """
        rows = [self.vectors(side, c) for c in range(self.n_components)]
        return torch.cat(rows)


def decompose(tables: HeadTables, destination: int, source: int) -> Decision:
    """Both decompositions of head (tables.layer, tables.head)'s scores at ``destination``."""
    model, forward = tables.model, tables.forward
    sources = allowed_sources(model, tables.layer, destination)
    if source not in sources:
        raise ValueError(f"position {source} is not a source that position {destination} can attend")
    parts = tables.query_parts(destination)  # [n_comp, R] pre-rotation
    position = torch.tensor([destination], device=parts.device)
    rotated = tables.positions.rotate(parts[:, None, :], position)[:, 0]  # [n_comp, R]
    alpha_parts = rotated @ tables.a
    alpha = alpha_parts.sum(0)
    beta = tables.full_keys(sources) @ tables.b  # [n_src, R]
    row = (beta @ (alpha * tables.sigma)) / tables.scale
    model_row = forward.scores[tables.layer][tables.head, destination, sources.start : sources.stop]
    return Decision(
        tables=tables,
        destination=destination,
        source=source,
        sources=sources,
        alpha_parts=alpha_parts,
        alpha=alpha,
        beta=beta,
        row=row,
        model_row=model_row,
    )
