"""The position-resolved circuit graph: nodes are (component, position), units are (edge, position).

Today's graph merges every token position into one node per head or MLP: an edge u -> v is
writer u's output, at every position, as reader v takes it in. Here that edge is split by
position: the unit (u, v, p) is u's output at position p as v reads it at position p. Its score
is the position term of today's score,

    score(u, v, p) = (z'_u[p] - z_u[p]) . dL/d(input of v)[p],   score(u, v) = sum_p score(u, v, p),

and a circuit keeps or removes units (patching one unit replaces only that position's share of
the reader's input). Tensors carry the position axis last: scores and circuits are
``[..., n_forward, n_backward, pos]`` beside today's ``[..., n_forward, n_backward]``.

Which node a unit feeds depends on the reader's kind:

- a query, an MLP input or the logits at position p feed the reader's own node at p;
- a key or value at position p (the *source*) feeds the head's output at every position d >= p
  (attention is causal): the head moves what it read at p to the destinations d that attend to
  p. Drawing splits such a unit over the destinations by the head's attention pattern
  (``positions.view``); pruning lets it feed whichever of them stays in the circuit.

The logits read the last position only, so the units of logits edges at other positions are not
units of the graph (``unit_mask``). Selection (``top_units``) sorts every unit once, like
``graph.top_n_at_budgets``; ``prune_units`` settles reachability level by level as ``graph.prune``
does, with the position axis carried along (cumulative OR over positions for keys and values).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..core.graph import GraphSpec

CAUSAL_KINDS = ("k", "v")


def unit_mask(spec: GraphSpec, n_positions: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Which (writer, reader, position) triples are units of the graph.

    Every edge at every position, except the logits' edges away from the last position (the
    metric reads the final residual at the last position only).  # [n_forward, n_backward, pos] bool
    """
    tensors = spec.tensors(device)
    mask = tensors.edge_mask[:, :, None].expand(-1, -1, n_positions).clone()
    mask[:, spec.logits_backward, :-1] = False
    return mask


def causal_readers(spec: GraphSpec, device: torch.device | str | None = None) -> torch.Tensor:
    """Which readers take their input at a source position (keys and values).  # [n_backward] bool"""
    kinds = [kind in CAUSAL_KINDS for kind in spec.backward_kind]
    return torch.tensor(kinds, dtype=torch.bool, device=device if device is not None else "cpu")


def n_units(spec: GraphSpec, n_positions: int) -> int:
    """How many units the position graph has: every edge at every position, less the logits'
    edges away from the last position."""
    return spec.n_edges * n_positions - spec.n_forward * (n_positions - 1)


def summed_over_positions(position_scores: torch.Tensor) -> torch.Tensor:
    """Today's edge scores from position-resolved ones.  # [..., n_forward, n_backward]"""
    return position_scores.sum(-1)


def any_position(position_mask: torch.Tensor) -> torch.Tensor:
    """The edges a position circuit uses at some position.  # [..., n_forward, n_backward] bool"""
    return position_mask.any(-1)


def unit_ranks(spec: GraphSpec, position_scores: torch.Tensor, absolute: bool = True) -> torch.Tensor:
    """Each unit's place in decreasing (absolute) score order, ties in (edge, position) order.

    position_scores: [..., n_forward, n_backward, pos]. Returns [..., n_units] int64 (0 = the
    strongest), units in ``unit_index`` order, from one stable sort.
    """
    flat = unit_index(spec, position_scores.shape[-1], position_scores.device)
    values = position_scores.flatten(-3)[..., flat]  # [..., n_units]
    values = values.abs() if absolute else values
    order = torch.sort(values, dim=-1, descending=True, stable=True).indices
    ranks = torch.empty_like(order)
    places = torch.arange(order.shape[-1], device=order.device).expand_as(order)
    return ranks.scatter_(-1, order, places)


def unit_index(spec: GraphSpec, n_positions: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Flat index (into [n_forward * n_backward * pos]) of every unit, in graph order.  # [n_units]"""
    return unit_mask(spec, n_positions, device).flatten().nonzero()[:, 0]


def top_units(
    spec: GraphSpec, position_scores: torch.Tensor, budgets: Sequence[int], absolute: bool = True
) -> torch.Tensor:
    """The N strongest units at every budget, from one sort.

    position_scores: [..., n_forward, n_backward, pos]. Returns [..., n_budgets, n_forward,
    n_backward, pos] bool on the scores' device; N is clipped to the number of units.
    """
    n_positions = position_scores.shape[-1]
    device = position_scores.device
    ranks = unit_ranks(spec, position_scores, absolute)  # [..., n_units]
    total = ranks.shape[-1]
    counts = torch.tensor([max(0, min(int(n), total)) for n in budgets], dtype=ranks.dtype, device=device)
    chosen = ranks.unsqueeze(-2) < counts[:, None]  # [..., n_budgets, n_units]
    size = spec.n_forward * spec.n_backward * n_positions
    masks = torch.zeros((*chosen.shape[:-1], size), dtype=torch.bool, device=device)
    masks[..., unit_index(spec, n_positions, device)] = chosen
    return masks.view(*chosen.shape[:-1], spec.n_forward, spec.n_backward, n_positions)


def _suffix_any(values: torch.Tensor) -> torch.Tensor:
    """values[..., p] OR any later position.  # same shape, bool"""
    return values.flip(-1).cummax(-1).values.flip(-1)


def _prefix_any(values: torch.Tensor) -> torch.Tensor:
    """values[..., p] OR any earlier position.  # same shape, bool"""
    return values.cummax(-1).values


def node_adjacency(spec: GraphSpec, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Which writer at a position feeds which node, through the circuit's units.

    mask: [batch, n_forward, n_backward, pos] bool. Returns (same, causal), each [batch,
    n_forward, n_nodes, pos] bool with nodes = writers then logits: ``same[b, f, n, p]`` when a
    kept query, MLP or logits unit joins (f, p) to (n, p); ``causal[b, f, n, p]`` when a kept key
    or value unit at source position p joins f to head n (feeding n at every d >= p).
    """
    tensors = spec.tensors(mask.device)
    causal = causal_readers(spec, mask.device)  # [n_backward]
    n_nodes = spec.n_forward + 1
    batch, _, _, n_positions = mask.shape
    result = []
    for chosen in (~causal, causal):
        part = (mask & chosen[None, None, :, None]).to(torch.int32)
        shape = (batch, spec.n_forward, n_nodes, n_positions)
        summed = torch.zeros(shape, dtype=torch.int32, device=mask.device)
        summed.index_add_(2, tensors.reader_node, part)
        result.append(summed > 0)
    return result[0], result[1]


def alive_nodes(spec: GraphSpec, mask: torch.Tensor) -> torch.Tensor:
    """Nodes (component, position) on a path from an embedding to the logits within the circuit.

    mask: [batch, n_forward, n_backward, pos] bool (units only). Returns [batch, n_nodes, pos]
    bool (nodes = writers, then the logits). A node is reached when a kept unit joins a reached
    node to it (for keys and values: from a reached writer at a source position at or before
    it); it reaches the logits when a kept unit joins it to a node that does (for keys and
    values: to the head at some destination at or after the source). One sweep each way over
    the levels (input, each layer's heads, its MLP, ..., logits), every position at once.
    """
    same, causal = node_adjacency(spec, mask)
    batch, n_positions = mask.shape[0], mask.shape[-1]
    n_nodes = spec.n_forward + 1
    reached = torch.zeros(batch, n_nodes, n_positions, dtype=torch.bool, device=mask.device)
    reached[:, 0] = True  # every position's embedding
    for start, stop in spec.node_levels[1:]:
        upstream = reached[:, :start, None, :]  # [batch, start, 1, pos]
        direct = (same[:, :start, start:stop] & upstream).any(1)  # [batch, k, pos]
        moved = _prefix_any((causal[:, :start, start:stop] & upstream).any(1))
        reached[:, start:stop] = direct | moved
    reaches = torch.zeros_like(reached)
    reaches[:, spec.n_forward, -1] = True  # the logits at the last position
    for start, stop in reversed(spec.node_levels[:-1]):
        later = reaches[:, None, stop:, :]  # [batch, 1, later nodes, pos]
        direct = (same[:, start:stop, stop:] & later).any(2)
        moved = (causal[:, start:stop, stop:] & _suffix_any(later)).any(2)
        reaches[:, start:stop] = direct | moved
    return reached & reaches


def prune_units(spec: GraphSpec, mask: torch.Tensor) -> torch.Tensor:
    """Drop the units that lie on no path from an embedding to the logits within the circuit.

    mask: [..., n_forward, n_backward, pos] bool, any number of circuits at once. A unit stays
    when its writer (at its position) is alive and it feeds an alive node: the reader's node at
    the same position, or, for keys and values, the head at some destination at or after it.
    """
    shape = mask.shape
    n_positions = shape[-1]
    tensors = spec.tensors(mask.device)
    units = unit_mask(spec, n_positions, mask.device)
    flat = (mask.bool() & units).reshape(-1, spec.n_forward, spec.n_backward, n_positions)
    alive = alive_nodes(spec, flat)  # [batch, n_nodes, pos]
    source_alive = alive[:, : spec.n_forward, None, :]  # [batch, n_forward, 1, pos]
    target_alive = alive[:, tensors.reader_node]  # [batch, n_backward, pos]
    causal = causal_readers(spec, mask.device)[None, :, None]  # [1, n_backward, 1]
    feeds = torch.where(causal, _suffix_any(target_alive), target_alive)  # [batch, n_backward, pos]
    kept = flat & source_alive & feeds[:, None]
    return kept.view(shape)


def units_at_budgets(
    spec: GraphSpec, position_scores: torch.Tensor, budgets: Sequence[int], prune_dead: bool = True
) -> torch.Tensor:
    """Top-N position circuits of one score tensor at every budget, pruned.

    position_scores: [n_forward, n_backward, pos]. Returns [n_budgets, n_forward, n_backward, pos] bool.
    """
    n_positions = position_scores.shape[-1]
    if not len(budgets):
        shape = (0, spec.n_forward, spec.n_backward, n_positions)
        return torch.zeros(shape, dtype=torch.bool, device=position_scores.device)
    masks = top_units(spec, position_scores, budgets)
    return prune_units(spec, masks) if prune_dead else masks


def node_counts(spec: GraphSpec, mask: torch.Tensor) -> torch.Tensor:
    """How many (component, position) nodes each circuit draws, embeddings and logits included:
    the nodes on a path from an embedding to the logits (``alive_nodes``).

    mask: [..., n_forward, n_backward, pos] bool.  # [...] int64
    """
    shape = mask.shape[:-3]
    flat = mask.reshape(-1, *mask.shape[-3:]).bool() & unit_mask(spec, mask.shape[-1], mask.device)
    return alive_nodes(spec, flat).flatten(1).sum(1).view(shape)
