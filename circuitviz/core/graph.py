"""The computational graph of a transformer, named and indexed exactly as the public EAP-IG library.

Writers ("forward" nodes) put something into the residual stream: ``input``, every attention
head ``a{l}.h{h}`` and every MLP ``m{l}``. Readers ("backward" nodes) take something out:
each head's query, key and value input separately, every MLP, and ``logits``. An edge joins a
writer to a later reader. Scores and membership live in dense ``[n_forward, n_backward]``
tensors; edge names are derived views onto them, so selection and evaluation never loop over
Python objects.

Index layout (shared with EAP-IG, so circuits round-trip):
- forward: ``input`` = 0; head ``a{l}.h{h}`` = 1 + l(H+1) + h; MLP ``m{l}`` = 1 + l(H+1) + H.
- backward: head input ``a{l}.h{h}<q|k|v>`` = l(3H+1) + {0,1,2}H + h; MLP ``m{l}`` = l(3H+1) + 3H;
  ``logits`` = L(3H+1).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

import torch

from .graph_shape import edge_count, n_readers, n_writers
from .text import shown

QKV = ("q", "k", "v")
EDGE_KINDS = ("q", "k", "v", "mlp", "logits")
_HEAD_RE = re.compile(r"^a(\d+)\.h(\d+)$")
_MLP_RE = re.compile(r"^m(\d+)$")
_EDGE_RE = re.compile(r"^(.+)->([^<>]+)(?:<([qkv])>)?$")


class GraphError(ValueError):
    """A circuit names something the model's graph does not have; the message says what."""


@dataclass(frozen=True)
class GraphTensors:
    """A graph's index tensors on one device (``GraphSpec.tensors``); read-only by convention."""

    edge_mask: torch.Tensor  # [n_forward, n_backward] bool
    edge_index: tuple[torch.Tensor, torch.Tensor]  # (forward, backward) of every edge, [n_edges] each
    flat_edge_index: torch.Tensor  # forward * n_backward + backward of every edge, [n_edges]
    reader_node: torch.Tensor  # [n_backward] node each reader belongs to (logits = n_forward)


@dataclass(frozen=True)
class GraphSpec:
    """The shape of a model's graph: all that is needed to name and index its nodes and edges.

    Its own tensors (``edge_mask``, ``edge_index``, ...) live on the CPU; code that meets data on
    another device asks ``tensors(device)`` for the same tensors there.
    """

    n_layers: int
    n_heads: int
    parallel_attn_mlp: bool = False
    d_model: int = 0

    @classmethod
    def from_model(cls, model) -> GraphSpec:
        """Read the shape off a HookedTransformer (or anything with a TransformerLens-like cfg)."""
        cfg = model.cfg
        if getattr(cfg, "attn_only", False):
            raise GraphError("Attention-only models have no MLP nodes; circuitviz needs MLPs.")
        return cls(
            n_layers=int(cfg.n_layers),
            n_heads=int(cfg.n_heads),
            parallel_attn_mlp=bool(getattr(cfg, "parallel_attn_mlp", False)),
            d_model=int(cfg.d_model),
        )

    @classmethod
    def from_cfg_dict(cls, cfg: dict) -> GraphSpec:
        """Read the shape off EAP-IG's JSON ``cfg`` block."""
        try:
            return cls(
                n_layers=int(cfg["n_layers"]),
                n_heads=int(cfg["n_heads"]),
                parallel_attn_mlp=bool(cfg.get("parallel_attn_mlp", False)),
                d_model=int(cfg.get("d_model", 0)),
            )
        except (KeyError, TypeError, ValueError, OverflowError, AttributeError) as error:
            raise GraphError(
                f"The circuit's 'cfg' needs n_layers and n_heads as integers ({str(error)[:80]})."
            ) from None

    def to_cfg_dict(self) -> dict:
        return {
            "n_layers": self.n_layers,
            "n_heads": self.n_heads,
            "parallel_attn_mlp": self.parallel_attn_mlp,
            "d_model": self.d_model,
        }

    # ----- sizes -----------------------------------------------------------------------------
    @property
    def n_forward(self) -> int:
        return n_writers(self.n_layers, self.n_heads)

    @property
    def n_backward(self) -> int:
        return n_readers(self.n_layers, self.n_heads)

    @property
    def n_edges(self) -> int:
        """``graph_shape.edge_count``: the edges ``edge_mask`` holds, counted without building it."""
        return edge_count(self.n_layers, self.n_heads, self.parallel_attn_mlp)

    # ----- indices ---------------------------------------------------------------------------
    def head_forward(self, layer: int) -> slice:
        start = 1 + layer * (self.n_heads + 1)
        return slice(start, start + self.n_heads)

    def mlp_forward(self, layer: int) -> int:
        return 1 + layer * (self.n_heads + 1) + self.n_heads

    def head_backward(self, layer: int, qkv: str) -> slice:
        start = layer * (3 * self.n_heads + 1) + QKV.index(qkv) * self.n_heads
        return slice(start, start + self.n_heads)

    def mlp_backward(self, layer: int) -> int:
        return layer * (3 * self.n_heads + 1) + 3 * self.n_heads

    @property
    def logits_backward(self) -> int:
        return self.n_backward - 1

    def upstream_of_heads(self, layer: int) -> int:
        """Number of writers (a prefix of the forward axis) that a head of ``layer`` reads."""
        return 1 + layer * (self.n_heads + 1)

    def upstream_of_mlp(self, layer: int) -> int:
        """Number of writers an MLP of ``layer`` reads (its own layer's heads unless parallel)."""
        extra = 0 if self.parallel_attn_mlp else self.n_heads
        return 1 + layer * (self.n_heads + 1) + extra

    # ----- names -----------------------------------------------------------------------------
    @cached_property
    def forward_names(self) -> tuple[str, ...]:
        names = ["input"]
        for layer in range(self.n_layers):
            names += [f"a{layer}.h{head}" for head in range(self.n_heads)]
            names.append(f"m{layer}")
        return tuple(names)

    @cached_property
    def backward_names(self) -> tuple[str, ...]:
        """Reader names; head readers carry their input kind as EAP-IG's edges do (``a0.h1<q>``)."""
        names = []
        for layer in range(self.n_layers):
            for qkv in QKV:
                names += [f"a{layer}.h{head}<{qkv}>" for head in range(self.n_heads)]
            names.append(f"m{layer}")
        names.append("logits")
        return tuple(names)

    @cached_property
    def node_names(self) -> tuple[str, ...]:
        """Every node once: the writers, then ``logits``."""
        return self.forward_names + ("logits",)

    @cached_property
    def forward_layer(self) -> torch.Tensor:
        """Layer of each writer; ``input`` is layer -1.  # [n_forward]"""
        layers = [-1]
        for layer in range(self.n_layers):
            layers += [layer] * (self.n_heads + 1)
        return torch.tensor(layers, device="cpu")

    @cached_property
    def backward_kind(self) -> tuple[str, ...]:
        """Kind of each reader: q, k, v, mlp or logits."""
        kinds = []
        for _ in range(self.n_layers):
            for qkv in QKV:
                kinds += [qkv] * self.n_heads
            kinds.append("mlp")
        kinds.append("logits")
        return tuple(kinds)

    @cached_property
    def backward_to_forward(self) -> torch.Tensor:
        """For each reader, the writer index of its own node (``logits``: -1).  # [n_backward]"""
        index = []
        for layer in range(self.n_layers):
            heads = self.head_forward(layer)
            for _ in QKV:
                index += list(range(heads.start, heads.stop))
            index.append(self.mlp_forward(layer))
        index.append(-1)
        return torch.tensor(index, device="cpu")

    @cached_property
    def edge_mask(self) -> torch.Tensor:
        """Which (writer, reader) pairs are edges of the model.  # [n_forward, n_backward] bool"""
        mask = torch.zeros(self.n_forward, self.n_backward, dtype=torch.bool, device="cpu")
        for layer in range(self.n_layers):
            for qkv in QKV:
                mask[: self.upstream_of_heads(layer), self.head_backward(layer, qkv)] = True
            mask[: self.upstream_of_mlp(layer), self.mlp_backward(layer)] = True
        mask[:, self.logits_backward] = True
        return mask

    @cached_property
    def edge_index(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(forward, backward) indices of every edge, in row-major order."""
        forward, backward = self.edge_mask.nonzero(as_tuple=True)
        return forward, backward

    @cached_property
    def node_levels(self) -> tuple[tuple[int, int], ...]:
        """Node index ranges in reading order: input, each layer's heads, its MLP, logits.

        Node indices are writer indices, with ``logits`` as ``n_forward``. A node reads only
        from earlier levels, so reachability can be settled one level at a time.
        """
        levels = [(0, 1)]
        for layer in range(self.n_layers):
            heads = self.head_forward(layer)
            mlp = self.mlp_forward(layer)
            levels += [(heads.start, heads.stop), (mlp, mlp + 1)]
        levels.append((self.n_forward, self.n_forward + 1))
        return tuple(levels)

    def tensors(self, device: torch.device | str | None = None) -> GraphTensors:
        """The graph's index tensors on ``device`` (default CPU), made once per device."""
        device = torch.device(device if device is not None else "cpu")
        cache = self.__dict__.setdefault("_device_tensors", {})
        key = str(device)
        if key not in cache:
            forward, backward = self.edge_index
            owner = self.backward_to_forward
            cache[key] = GraphTensors(
                edge_mask=self.edge_mask.to(device),
                edge_index=(forward.to(device), backward.to(device)),
                flat_edge_index=(forward * self.n_backward + backward).to(device),
                reader_node=torch.where(owner < 0, torch.full_like(owner, self.n_forward), owner).to(device),
            )
        return cache[key]

    @cached_property
    def edge_names(self) -> tuple[str, ...]:
        """EAP-IG edge names (``input->a2.h0<q>``, ``a0.h1->m3``) in the order of ``edge_index``."""
        forward, backward = self.edge_index
        fwd_names, bwd_names = self.forward_names, self.backward_names
        return tuple(f"{fwd_names[f]}->{bwd_names[b]}" for f, b in zip(forward.tolist(), backward.tolist()))

    @cached_property
    def _edge_lookup(self) -> dict[str, tuple[int, int]]:
        forward, backward = self.edge_index
        return dict(zip(self.edge_names, zip(forward.tolist(), backward.tolist())))

    def edge_position(self, name: str) -> tuple[int, int]:
        """(forward, backward) index of an edge name; GraphError with the reason when it is not one."""
        position = self._edge_lookup.get(name.strip())
        if position is not None:
            return position
        match = _EDGE_RE.match(name.strip())
        edge = shown(name.strip(), 60)  # a pasted blob is quoted briefly, with its length
        if not match:
            raise GraphError(f"{edge} is not an edge name; edges look like 'input->a2.h0<q>' or 'a0.h1->m3'.")
        source, target, qkv = match.groups()
        if source not in self.forward_names:
            raise GraphError(f"Edge {edge}: this model has no node {shown(source, 30)}.")
        if target != "logits" and target not in self.forward_names:
            raise GraphError(f"Edge {edge}: this model has no node {shown(target, 30)}.")
        if _HEAD_RE.match(target) and not qkv:
            raise GraphError(f"Edge {edge}: edges into a head need <q>, <k> or <v> after its name.")
        if qkv and not _HEAD_RE.match(target):
            raise GraphError(f"Edge {edge}: only attention heads have <q>, <k> and <v> inputs.")
        raise GraphError(f"Edge {edge}: {target!r} does not read from {source!r} in this model.")

    def mask_from_edge_names(self, names) -> torch.Tensor:
        """Membership tensor from edge names, on the CPU.  # [n_forward, n_backward] bool"""
        mask = torch.zeros(self.n_forward, self.n_backward, dtype=torch.bool, device="cpu")
        for name in names:
            mask[self.edge_position(name)] = True
        return mask

    def edge_names_of(self, mask: torch.Tensor) -> list[str]:
        """Names of the edges set in a membership tensor, in graph order."""
        flat = mask[self.edge_index]
        return [name for name, keep in zip(self.edge_names, flat.tolist()) if keep]

    def node_names_of(self, mask: torch.Tensor) -> set[str]:
        """The nodes a circuit draws: every source and target of its edges (a head's q, k and v
        inputs are the head), ``input`` and ``logits`` included. mask: [n_forward, n_backward]."""
        mask = mask.bool() & self.tensors(mask.device).edge_mask
        sources = mask.any(1).nonzero()[:, 0].tolist()
        targets = mask.any(0).nonzero()[:, 0].tolist()
        names = {self.forward_names[f] for f in sources}
        names |= {self.backward_names[b].split("<")[0] for b in targets}
        return names

    def node_layer(self, name: str) -> int:
        """Layer of a node name for layout: input -1, logits n_layers."""
        if name == "input":
            return -1
        if name == "logits":
            return self.n_layers
        match = _HEAD_RE.match(name) or _MLP_RE.match(name)
        if not match:
            raise GraphError(f"{shown(name, 30)} is not a node name.")
        return int(match.group(1))


# ----- selection ----------------------------------------------------------------------------
def top_n(spec: GraphSpec, scores: torch.Tensor, n: int, absolute: bool = True) -> torch.Tensor:
    """The N edges with the largest (absolute) score; ties broken by graph order.

    ``scores``: [n_forward, n_backward] (or [..., n_forward, n_backward] for a batch).
    Returns a membership mask of the same shape, on the scores' device. N is clipped to the
    edge count, never padded.
    """
    return top_n_at_budgets(spec, scores, [n], absolute).squeeze(-3)


def edge_ranks(spec: GraphSpec, scores: torch.Tensor, absolute: bool = True) -> torch.Tensor:
    """Each edge's place in the order of decreasing (absolute) score, ties in graph order.

    scores: [..., n_forward, n_backward]. Returns [..., n_edges] int64 on the scores' device
    (0 = the best edge), in ``spec.edge_index`` order. One stable sort serves every budget.
    """
    forward, backward = spec.tensors(scores.device).edge_index
    values = scores[..., forward, backward]  # [..., n_edges]
    values = values.abs() if absolute else values
    order = torch.sort(values, dim=-1, descending=True, stable=True).indices
    ranks = torch.empty_like(order)
    positions = torch.arange(order.shape[-1], device=order.device).expand_as(order)
    return ranks.scatter_(-1, order, positions)


def top_n_at_budgets(spec: GraphSpec, scores: torch.Tensor, budgets, absolute: bool = True) -> torch.Tensor:
    """Top-N masks of one score matrix (or a batch of them) at every budget, from one sort.

    scores: [..., n_forward, n_backward]. Returns [..., n_budgets, n_forward, n_backward] bool on
    the scores' device; the budget axis sits just before the graph axes.
    """
    device = scores.device
    ranks = edge_ranks(spec, scores, absolute)  # [..., n_edges]
    counts = torch.tensor(
        [max(0, min(int(n), spec.n_edges)) for n in budgets], dtype=ranks.dtype, device=device
    )
    chosen = ranks.unsqueeze(-2) < counts[:, None]  # [..., n_budgets, n_edges]
    masks = torch.zeros(
        (*chosen.shape[:-1], spec.n_forward * spec.n_backward), dtype=torch.bool, device=device
    )
    flat_index = spec.tensors(device).flat_edge_index
    masks[..., flat_index] = chosen
    return masks.view(*chosen.shape[:-1], spec.n_forward, spec.n_backward)


def prune(spec: GraphSpec, mask: torch.Tensor) -> torch.Tensor:
    """Drop edges that lie on no path from ``input`` to ``logits`` within the circuit.

    A node is alive when it is reached from ``input`` and reaches ``logits`` through kept edges.
    mask: [..., n_forward, n_backward] bool, any number of circuits at once, on any device.
    Reachability is settled level by level (input, a layer's heads, its MLP, ..., logits): a
    node only reads from earlier levels, so one sweep each way costs 2 x (2L + 2) batched steps.
    """
    tensors = spec.tensors(mask.device)
    shape = mask.shape
    mask = (mask.bool() & tensors.edge_mask).reshape(-1, spec.n_forward, spec.n_backward)
    n_nodes = spec.n_forward + 1  # writers, then logits
    # node -> node adjacency: writer f feeds node owner(reader) when any of its edges is kept
    adjacency = torch.zeros(mask.shape[0], spec.n_forward, n_nodes, dtype=torch.int32, device=mask.device)
    adjacency.index_add_(2, tensors.reader_node, mask.to(torch.int32))
    adjacency = adjacency > 0  # [batch, n_forward, n_nodes]

    reached = torch.zeros(mask.shape[0], n_nodes, dtype=torch.bool, device=mask.device)
    reached[:, 0] = True
    for start, stop in spec.node_levels[1:]:
        reached[:, start:stop] = (adjacency[:, :start, start:stop] & reached[:, :start, None]).any(1)
    reaches = torch.zeros_like(reached)
    reaches[:, spec.n_forward] = True
    for start, stop in reversed(spec.node_levels[:-1]):
        reaches[:, start:stop] = (adjacency[:, start:stop, stop:] & reaches[:, None, stop:]).any(2)
    alive = reached & reaches  # [batch, n_nodes]
    kept = mask & alive[:, : spec.n_forward, None] & alive[:, tensors.reader_node][:, None, :]
    return kept.view(shape)
