"""Where the layered drawing puts each node (``render.graph_html``): the embeddings at the bottom,
one row per layer going up (its heads in order, then its MLP a little higher), the answer's logit
at the top; computed, so two circuits drawn with the same layers and columns put a node in the
same place."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..core.graph import GraphSpec

MIN_COLUMN_SPACING = 120
ROW_SPACING = 80
MLP_DROP = 0.35  # the MLP sits a little above its heads (it reads them), so head -> MLP edges are short
MLP_GAP = 0.25  # of a column: extra room between the last head and the MLP
# of a column: every other row's MLP sits this far right, so an edge up the MLP column passes the
# MLP between (m1 -> m3 ran behind m2; no curve from a box's centre clears a box right above it)
MLP_STAGGER = 0.75
# of a column: a row whose heads would stand right over the row below's sits this far left, so no
# head has a head of the next row right above it: an edge out of a3.h1 went up behind a4.h1 (the
# gap between their boxes shorter than a label) and read as a4.h1's own; it now leaves through
# the gap between two boxes above
HEAD_STAGGER = 0.5
LOGITS_DROP = 0.3  # the logit sits clear of the last layer's MLP
_HEAD_NAME = re.compile(r"^a(\d+)\.h(\d+)$")


def _column_of(spec: GraphSpec, name: str) -> int:
    """A node's column in its layer row: its head index, the MLP after the heads."""
    match = _HEAD_NAME.match(name)
    return int(match.group(2)) if match else spec.n_heads


@dataclass(frozen=True)
class Columns:
    """Where a layer row's heads go: ``slot`` {head node: its column}, ``count`` head columns (the
    MLP after them), ``shift`` {layer: how far left of its columns the row's heads stand, in
    columns}. ``None`` in ``node_position``: every head at its own index (the model's ``n_heads``
    columns, what drawing every node of the model needs), every other row ``HEAD_STAGGER`` left."""

    slot: Mapping[str, int]
    count: int
    shift: Mapping[int, float] = field(default_factory=dict)


def packed_columns(spec: GraphSpec, names: Iterable[str]) -> Columns:
    """The head columns of a drawing of ``names``: as many as its fullest layer row needs, each
    row's heads in order, each as near the column its index would have across that many (head 0
    on the left, the last on the right) as the row's others leave it. A circuit of a few heads
    of SmolLM2-135M's nine per layer spanned all ten columns (heads 0 to 8 and the MLP) in three
    rows: its labels were fitted at 7.8 px in a 1,500 px window. Every head of a layer drawn:
    each at its own index, as ``node_position`` without columns. A row with a head in the column
    of one of the row below stands ``HEAD_STAGGER`` left of it (where the row below does not)."""
    rows: dict[int, list[int]] = {}
    for name in names:
        match = _HEAD_NAME.match(name)
        if match:
            rows.setdefault(int(match.group(1)), []).append(int(match.group(2)))
    count = max((len(set(heads)) for heads in rows.values()), default=1)
    slot: dict[str, int] = {}
    for layer, heads in rows.items():
        heads = sorted(set(heads))
        spread = (count - 1) / (spec.n_heads - 1) if spec.n_heads > 1 else 0.0
        wanted = [round(head * spread) for head in heads]
        places: list[int] = []
        for i, want in enumerate(wanted):  # in order, each right of the last, leaving room for the rest
            low = places[-1] + 1 if places else 0
            places.append(min(max(want, low), count - (len(heads) - i)))
        for head, place in zip(heads, places):
            slot[f"a{layer}.h{head}"] = place
    shift: dict[int, float] = {}
    below: set[float] = set()  # where the heads of the row below stand, in columns
    for layer in sorted({spec.node_layer(name) for name in names if name not in ("input", "logits")}):
        here = {slot[f"a{layer}.h{head}"] for head in rows.get(layer, ())}
        shift[layer] = HEAD_STAGGER if here & below else 0.0  # a shifted row below: none under it
        below = {place - shift[layer] for place in here}
    return Columns(slot, count, shift)


def node_position(
    spec: GraphSpec,
    name: str,
    layers: list[int] | None = None,
    column_width: float | None = None,
    row_height: float | None = None,
    columns: Columns | None = None,
) -> tuple[float, float]:
    """(x, y) of a node in the field's layered layout (vis-network's y grows downwards): the
    embeddings at the bottom, one row per layer of ``layers`` (default: all) going up, the logit
    at the top; within a row the heads in order (a row over heads in its columns ``HEAD_STAGGER``
    of a column left, ``Columns.shift``), then the MLP a little higher (it reads the attention's output; every other row's
    ``MLP_STAGGER`` further right). ``columns``: the heads' columns (``packed_columns``; default: each head
    at its index). The same for every circuit drawn with the same ``layers``, widths and columns.
    """
    rows = list(range(spec.n_layers)) if layers is None else sorted(layers)
    column_width = column_width or MIN_COLUMN_SPACING
    row_height = row_height or ROW_SPACING
    count = spec.n_heads if columns is None else columns.count
    centre = count / 2 * column_width
    if name == "input":
        return centre, 0.0
    if name == "logits":
        return centre, -float((len(rows) + 1 + LOGITS_DROP) * row_height)
    layer = spec.node_layer(name)
    row = rows.index(layer) if layer in rows else sum(1 for r in rows if r < layer)
    y = -float((row + 1) * row_height)
    column = _column_of(spec, name)
    if column == spec.n_heads:  # the MLP, after the heads, every other row's a little right
        x = (count + MLP_GAP + (MLP_STAGGER if row % 2 else 0.0)) * column_width
        return float(x), y - MLP_DROP * row_height
    if columns is None:  # every head at its index: every other row's left
        return float((column - (HEAD_STAGGER if row % 2 else 0.0)) * column_width), y
    x = columns.slot.get(name, min(column, count - 1)) - columns.shift.get(layer, 0.0)
    return float(x * column_width), y


def drawn_layers(spec: GraphSpec, node_names) -> list[int]:
    """The layers that hold at least one of ``node_names`` (rows of a compact layout)."""
    layers = {spec.node_layer(name) for name in node_names if name not in ("input", "logits")}
    return sorted(layers)
