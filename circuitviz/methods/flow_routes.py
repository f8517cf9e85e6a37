"""Information flow routes (Ferrando and Voita 2024): a circuit from one forward pass of the clean
prompt, by proximity, with no corrupted prompt and no gradient (docs/methods.md).

A vector that is a sum of parts, y = sum_k z_k, gives part k the share

    share_k = max(0, ||y||_1 - ||y - z_k||_1) / sum_j max(0, ||y||_1 - ||y - z_j||_1)

(how much closer y is to the origin than y without z_k, in L1; a part pointing away from the sum
gets nothing). On the engine's graph two kinds of sum occur, at each token position:
- a reader's input is the sum of its upstream writers' outputs (the residual stream before its
  layer): the token-level edge (u, p) -> (v, p) has u's share of v's input at position p;
- a head's output at position i is the sum over source positions j of ``A_ij x (value_j W_O)``
  (its attention weight times its value projected out, through Gemma's post-attention norm with
  the norm's scale at i, as the engine defines a head's output): (head<v>, j) -> (head, i) has
  source j's share of it. As in the paper, attention weights are taken as given: queries and keys
  carry nothing (the ``queries_keys`` setting instead routes a head's importance to its query at
  i and to its key at every j it attends to with weight at least the threshold).

Routes: from the prediction (the logits reader at the last position) backwards, a token-level
edge is on a route when its share is at least the threshold and its target is on a route. Its own
circuit is the engine edges with a token-level edge on a route, pruned (the paper's graph).

Scores, for budgets: a complete route from the input to the prediction carries the product of the
shares along it (the part of the prediction's input that flows along it); an engine edge scores
its strongest route's product at any position (0 off the routes). Every edge of that route scores
at least as much, so the top N edges are whole routes and pruning keeps them (the summed shares
ranked before 2026-12-03 left no route at 0.5-2 % of the embedded Gemma's edges).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..core.graph import GraphSpec, prune
from ..core.tasks import PreparedTask, str_tokens
from ..details.own_circuit import OwnCircuitDetails
from ..engine import sites
from ..engine.capture import observe
from ..models.adapter import adapter_of
from .base import PREPARE_PASSES, Cost, RunContext, ScoringMethod, curve_passes
from .registry import register
from .settings import check_settings, setting

SCORES_NOTE = (
    "an edge's score is the product of the proximity shares along the strongest route from the input "
    "through it to the prediction, every share at least the threshold (0 off the routes), so the top "
    "N edges are whole routes"
)
NO_CORRUPTION_NOTE = (
    "No corrupted prompt: the method needs none, but the faithfulness curve patches every edge outside a "
    "circuit to a corrupted run; it used a neutral prompt (every token after the first replaced by the "
    "padding token). Give a corrupted prompt to measure against your own corruption."
)
# what the form says where the corrupted box hides (the registry's ``without_corrupted``)
NEUTRAL_PROMPT = "this prompt with every token after the first replaced by the padding token"
WITHOUT_CORRUPTED = (
    "Without one, NDF, necessity and the faithfulness curve use a neutral prompt as the corrupted "
    f"run ({NEUTRAL_PROMPT})."
)


@dataclass(frozen=True)
class FlowRoutesConfig:
    """The threshold of the routes, and whether queries and keys carry importance."""

    threshold: float = setting(
        0.04,
        "a token-level edge is on a route when its proximity share is at least this (the paper's tau).",
        low=0.0,
        high=1.0,
    )
    queries_keys: bool = setting(
        False,
        "also route a head's importance to its query and keys (the paper: values only).",
    )

    def __post_init__(self):
        check_settings(self)  # every bound its fields declare


def proximity_shares(parts: torch.Tensor, total: torch.Tensor) -> torch.Tensor:
    """Each part's proximity share of ``total`` (the module docstring's formula).

    parts [..., n, d], total [..., d] -> [..., n], each row summing to 1 (0 where no part is near)."""
    closer = total.abs().sum(-1, keepdim=True) - (total[..., None, :] - parts).abs().sum(-1)
    closer = closer.clamp_min(0.0)
    mass = closer.sum(-1, keepdim=True)
    return torch.where(
        mass > 0, closer / mass.clamp_min(torch.finfo(closer.dtype).tiny), torch.zeros_like(closer)
    )


def _post_norm(norm, parts: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """The layer's post-attention norm applied linearly to parts [b, i, n, d] with the scale of the
    whole sum at i frozen (scale [b, i, 1]); biases belong to no source and are left out."""
    if norm is None:
        return parts
    if "LayerNorm" in type(norm).__name__:
        parts = parts - parts.mean(-1, keepdim=True)
    parts = parts / scale[:, :, None, :]
    weight = getattr(norm, "w", None)
    # the norm's weight on the parts' device (a split model's layer may sit on another)
    return parts * weight.to(parts.device) if weight is not None else parts


@torch.no_grad()
def value_shares(model, spec: GraphSpec, layer: int, captured: dict) -> torch.Tensor:
    """Each head's source shares: [n_heads, i, j] (source j's share of the head's output at i)."""
    adapter = adapter_of(model)
    pattern = captured[sites.attention_pattern(layer)][0]  # [H, i, j]
    values = captured[sites.head_projection(layer, "v")]  # [1, j, H or groups, d_head]
    if values.shape[2] != spec.n_heads:  # grouped values: head h reads group h // size
        values = values.repeat_interleave(spec.n_heads // values.shape[2], dim=2)
    # each value projected out by its head's W_O (the adapter adds the output bias's share, which
    # belongs to no source: taken off again)
    projected = (adapter.head_results(layer, values) - adapter.head_results(layer, torch.zeros_like(values)))[
        0
    ]
    parts = pattern[..., None] * projected.permute(1, 0, 2)[:, None]  # [H, i, j, d_model]
    norm, name = adapter.attention_post_norm(layer)
    if norm is not None:
        scale = captured[sites.norm_scale(layer, name)]  # [1, i, 1]
        heads, positions = parts.shape[0], parts.shape[1]
        flat = parts.permute(1, 0, 2, 3).reshape(1, positions, heads * positions, -1)  # [1, i, H*j, d]
        parts = _post_norm(norm, flat, scale).reshape(positions, heads, positions, -1).permute(1, 0, 2, 3)
    return proximity_shares(parts, parts.sum(2))


@torch.no_grad()
def route_scores(model, spec: GraphSpec, tokens: torch.Tensor, tau: float, queries_keys: bool = False):
    """(engine edge scores [n_forward, n_backward] on the model's device, token-level reach of
    every reader [n_backward, pos] bool) of the routes from the last position at threshold ``tau``."""
    scores, reach, _ = route_graph(model, spec, tokens, tau, queries_keys)
    return scores, reach


@torch.no_grad()
def route_graph(model, spec: GraphSpec, tokens: torch.Tensor, tau: float, queries_keys: bool = False):
    """The routes at ``tau`` (``route_scores``' two tensors) and every engine edge's route strength
    [n_forward, n_backward] from the same pass (0 off the routes).

    A route from the input to the prediction carries the product of the shares along it (the part
    of the prediction's input that flows along it, as attention rollout reads attention); an
    edge's strength is that of the strongest complete route through it at any position: the
    strongest path's product from the input to its writer, times its share, times the strongest
    path's product from its reader to the prediction (each settled like the routes, with (max, x)
    in place of (or, and)). Every edge on that route is at least as strong, so the top N edges by
    strength are whole routes from the input to the prediction; the top N of the summed shares
    were not (on the embedded Gemma no route survived pruning at 0.5-2 % of the edges)."""
    adapter = adapter_of(model)
    hooks = []
    for layer in range(spec.n_layers):
        hooks += [sites.attention_pattern(layer), sites.head_projection(layer, "v")]
        norm, name = adapter.attention_post_norm(layer)
        if norm is not None:
            hooks.append(sites.norm_scale(layer, name))
    writers, captured, _ = observe(model, spec, tokens, hooks)
    writers = writers[0]  # [pos, n_forward, d_model]
    n_positions = writers.shape[0]
    device = writers.device
    scores = torch.zeros(spec.n_forward, spec.n_backward, dtype=writers.dtype, device=device)
    reader_reach = torch.zeros(spec.n_backward, n_positions, dtype=torch.bool, device=device)
    writer_reach = torch.zeros(spec.n_forward, n_positions, dtype=torch.bool, device=device)
    # the strongest route's product of shares from each reader / writer at each position onwards
    reader_down = torch.zeros(spec.n_backward, n_positions, dtype=writers.dtype, device=device)
    writer_down = torch.zeros(spec.n_forward, n_positions, dtype=writers.dtype, device=device)
    shares_of: dict[int, torch.Tensor] = {}  # upstream count -> [pos, count] shares of the residual
    # per layer, what a head's output at i takes from each kind of input at j: [H, i, j] for v and
    # k, None for q (its own position, whole)
    sources: dict[int, dict[str, torch.Tensor | None]] = {}

    def residual_shares(upstream: int) -> torch.Tensor:
        if upstream not in shares_of:
            parts = writers[:, :upstream]  # [pos, upstream, d_model]
            shares_of[upstream] = proximity_shares(parts, parts.sum(1))
        return shares_of[upstream]

    def feed(readers: Sequence[int], upstream: int) -> None:
        """Score the edges into ``readers`` (sharing their upstream writers) and reach their writers."""
        shares = residual_shares(upstream)  # [pos, upstream]
        strong = shares >= tau
        for reader in readers:
            on_route = reader_reach[reader][:, None] & strong  # [pos, upstream]
            scores[:upstream, reader] = (shares * on_route).sum(0)
            writer_reach[:upstream] |= on_route.t()
            down = shares * strong * reader_down[reader][:, None]  # [pos, upstream]
            torch.maximum(writer_down[:upstream], down.t(), out=writer_down[:upstream])

    def spread(taken: torch.Tensor, down: torch.Tensor) -> torch.Tensor:
        """[H, i, j] a head's output at i takes from j, [H, i] its strength -> [H, j] its sources'."""
        return (taken * down[:, :, None]).amax(1)

    reader_reach[spec.logits_backward, -1] = True
    reader_down[spec.logits_backward, -1] = 1.0
    feed([spec.logits_backward], spec.n_forward)
    for layer in reversed(range(spec.n_layers)):
        mlp = spec.mlp_forward(layer)
        reader_reach[spec.mlp_backward(layer)] = writer_reach[mlp]
        reader_down[spec.mlp_backward(layer)] = writer_down[mlp]
        feed([spec.mlp_backward(layer)], spec.upstream_of_mlp(layer))
        shares = value_shares(model, spec, layer, captured)  # [H, i, j]
        heads = spec.head_forward(layer)
        reached = writer_reach[heads]  # [H, i]
        value_route = (reached[:, :, None] & (shares >= tau)).any(1)  # [H, j]
        reader_reach[spec.head_backward(layer, "v")] = value_route
        sources[layer] = {"v": shares * (shares >= tau)}
        reader_down[spec.head_backward(layer, "v")] = spread(sources[layer]["v"], writer_down[heads])
        if queries_keys:
            pattern = captured[sites.attention_pattern(layer)][0].to(writers.dtype)  # [H, i, j]
            reader_reach[spec.head_backward(layer, "q")] = reached
            reader_reach[spec.head_backward(layer, "k")] = (reached[:, :, None] & (pattern >= tau)).any(1)
            sources[layer].update(q=None, k=pattern * (pattern >= tau))
            reader_down[spec.head_backward(layer, "q")] = writer_down[heads]
            reader_down[spec.head_backward(layer, "k")] = spread(sources[layer]["k"], writer_down[heads])
        feed(_readers_of(spec, layer, sources[layer]), spec.upstream_of_heads(layer))
    return scores, reader_reach, route_strengths(spec, tau, writers, shares_of, sources, reader_down)


def route_strengths(spec: GraphSpec, tau: float, writers, shares_of: dict, sources: dict, reader_down):
    """Every engine edge's strongest complete route (``route_graph``): the strongest product from
    the input to each writer, settled forwards, joined to each reader's strongest product onwards."""
    device, dtype = writers.device, writers.dtype
    writer_up = torch.zeros(spec.n_forward, writers.shape[0], dtype=dtype, device=device)
    writer_up[0] = 1.0  # the input: every route starts there
    strengths = torch.zeros(spec.n_forward, spec.n_backward, dtype=dtype, device=device)

    def join(readers: slice | list[int], upstream: int) -> torch.Tensor:
        """Score the edges into ``readers`` and return their inputs' strongest product [pos]."""
        shares = shares_of[upstream]
        carried = writer_up[:upstream].t() * shares * (shares >= tau)  # [pos, upstream]
        down = reader_down[readers]  # [readers, pos]
        strengths[:upstream, readers] = (carried.t()[:, None, :] * down[None]).amax(-1)
        return carried.amax(1)

    for layer in range(spec.n_layers):
        heads = spec.head_forward(layer)
        up = join(_readers_of(spec, layer, sources[layer]), spec.upstream_of_heads(layer))  # [pos]
        best = torch.zeros(spec.n_heads, writers.shape[0], dtype=dtype, device=device)  # [H, i]
        for taken in sources[layer].values():
            reached = up[None].expand(spec.n_heads, -1) if taken is None else (taken * up[None, None]).amax(2)
            best = torch.maximum(best, reached)
        writer_up[heads] = best
        writer_up[spec.mlp_forward(layer)] = join([spec.mlp_backward(layer)], spec.upstream_of_mlp(layer))
    join([spec.logits_backward], spec.n_forward)
    return strengths


def _readers_of(spec: GraphSpec, layer: int, kinds) -> list[int]:
    """The backward indices of a layer's head inputs of the given kinds."""
    readers: list[int] = []
    for kind in kinds:
        index = spec.head_backward(layer, kind)
        readers += list(range(index.start, index.stop))
    return readers


# the observed pass (every writer and the attention patterns kept) and the shares, in plain passes:
# a set-up, and the residual stream's shares, which compare each reader group's upstream writers at
# every position (``share_rows``): work per plain pass that grows with the writers over the layers'
# width, as a patched pass's mixing does. Measured 4.1-6.1 on Gemma-3-270M (1,729 rows over 18
# layers of 640) and 5.5-8.0 on SmolLM2-135M (9,331 over 30 of 576) at 15 tokens, one thread (the
# plain pass, compute-bound, and the shares, memory-bound, move apart with the load); the means of
# two sessions, 5.1 and 6.7, fix the two figures below. Counted 6.5 on both before (session 47),
# 3 before that
OBSERVED_SET_UP = 4.5
SHARE_PASSES = 99.0
OBSERVED_PASSES = 5.1  # a graph whose shape is not known: Gemma-3-270M's


def share_rows(spec) -> int:
    """The writers the residual stream's shares compare at a position, over every reader group: each
    layer's heads' and MLP's upstream writers, and the logits' (all of them)."""
    layers = range(int(spec.n_layers))
    return (
        sum(spec.upstream_of_heads(layer) + spec.upstream_of_mlp(layer) for layer in layers) + spec.n_forward
    )


def observed_passes(spec=None) -> float:
    """Flow routes' observed pass and shares in plain passes: ``OBSERVED_SET_UP`` and the shares'
    work over a plain pass's, ``SHARE_PASSES`` x rows / (24 x layers x width) (a plain pass's
    multiply-adds a position, 12 x width^2 a layer, over the rows' width each): Gemma-3-270M 5.1,
    SmolLM2-135M 6.7. Prompts longer than about 25 tokens cost more on SmolLM2-135M (a head's
    value shares grow with the positions squared): 14.5-19 at 39-47 tokens, not counted."""
    n_layers = int(getattr(spec, "n_layers", 0) or 0)
    width = int(getattr(spec, "d_model", 0) or 0)
    if n_layers <= 0 or width <= 0:
        return OBSERVED_PASSES
    return OBSERVED_SET_UP + SHARE_PASSES * share_rows(spec) / (24.0 * n_layers * width)


@register
class FlowRoutes(ScoringMethod):
    name = "flow-routes"
    label = "Information flow routes"
    summary = (
        "Routes from the prediction backwards by proximity shares in one forward pass of the clean "
        "prompt: no corrupted prompt, no gradient."
    )
    score_meaning = SCORES_NOTE.removeprefix("an edge's score is ")
    Config = FlowRoutesConfig
    Details = OwnCircuitDetails
    needs_corrupted = False
    without_corrupted = WITHOUT_CORRUPTED
    scores_estimate_metric = False  # proximity shares, not changes of the metric

    def estimate(self, config, spec, n_tokens, n_budgets) -> Cost:
        # the observed pass and the shares (``observed_passes``), then the clean and corrupted runs
        # and the curve
        return Cost(
            passes=observed_passes(spec) + PREPARE_PASSES + curve_passes(n_budgets, spec),
            prompt_passes=PREPARE_PASSES,
        )

    def score(self, ctx: RunContext, config) -> torch.Tensor:
        return self.score_with_details(ctx, config)[0]

    def score_with_details(self, ctx: RunContext, config):
        spec = ctx.spec
        prepared = ctx.prepared(need_corrupted=False)
        with ctx.timed("routes_s"):
            scores, reach, strengths = route_graph(
                ctx.model, spec, prepared.clean_tokens, float(config.threshold), bool(config.queries_keys)
            )
        circuit = prune(spec, (scores > 0).cpu() & spec.edge_mask)
        details = OwnCircuitDetails(
            method=self.name,
            threshold=float(config.threshold),
            circuit_edges=spec.edge_names_of(circuit),
            counts={
                "token_readers_on_routes": int(reach.sum()),
                "edges_on_routes": int(((scores > 0).cpu() & spec.edge_mask).sum()),
            },
            scores_note=SCORES_NOTE,
            notes=[
                "the faithfulness curve patches to the task's corrupted prompt; the routes did not use it"
                if ctx.task.corrupted
                else NO_CORRUPTION_NOTE
            ],
        )
        return strengths, details

    def run_batch(self, contexts, config, budgets, progress=None):
        """Tasks with a corrupted prompt are measured against it; one without against the neutral
        prompt (``neutral_task``): the routes never read either."""
        use_neutral_corruption(contexts)
        return super().run_batch(contexts, config, budgets, progress)


def use_neutral_corruption(contexts) -> None:
    """Give every context whose task has no corrupted prompt the neutral one (``neutral_task``),
    for a method that needs none: its faithfulness curve still patches to a corrupted run."""
    for ctx in contexts:
        if not ctx.task.corrupted and True not in ctx._prepared:
            ctx._prepared[True] = neutral_task(ctx.model, ctx.prepared(need_corrupted=False))
            ctx.check_meaningful = False  # the check judges a user's corruption; none was given


def neutral_task(model, prepared: PreparedTask) -> PreparedTask:
    """The task with a neutral corrupted prompt, for the faithfulness curve of a task given none:
    every token after the first replaced by the tokenizer's padding token (its beginning-of-text
    token where it has none), so patched edges carry what the model computes with the prompt's
    content erased."""
    adapter = adapter_of(model)
    token = adapter.pad_token_id if adapter.pad_token_id is not None else adapter.bos_token_id
    tokens = prepared.clean_tokens.clone()
    tokens[:, 1:] = int(token if token is not None else 0)
    return dataclasses.replace(
        prepared, corrupted_tokens=tokens, corrupted_str_tokens=str_tokens(model, tokens[0].tolist())
    )
