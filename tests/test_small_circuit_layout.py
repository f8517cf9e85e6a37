"""A small circuit of a model with many heads per layer is drawn at a readable size: SmolLM2-135M's
circuits of 7 to 12 nodes spanned all ten columns of a layer row (heads 0 to 8, the MLP) in three
or four rows, and their labels were fitted at 4.1 px in a 1,000 px window and 7.8 px at 1,500 px
(measured in Chromium, 2026-12-06). The fit is worked out here as the page does it (``cvFit``,
``cvHeight``): the frame's height from its width, then the largest zoom that shows every box,
no larger than the labels' cap."""

from __future__ import annotations

import pytest
import torch

from circuitviz import render
from circuitviz.core.graph import GraphSpec, top_n
from circuitviz.render.graph_html import node_position, packed_columns
from circuitviz.render.layout import HEAD_STAGGER
from circuitviz.render.vis import MAX_FRAME_HEIGHT, MIN_FRAME_HEIGHT, READABLE_LABEL_PX, overlapping

SMOLLM = GraphSpec(n_layers=30, n_heads=9)
GEMMA = GraphSpec(n_layers=18, n_heads=4)
# the canvas Explore leaves a graph in a window 1,000, 1,500 and 2,000 px wide (read in Chromium)
FRAMES = (538, 1038, 1538)
# the EAP-IG circuit of SmolLM2-135M's IOI prompt at budget 20 (9 edges, 7 nodes), its captions
SMALL = [
    "input->m0",
    "m0->a23.h3<v>",
    "a23.h3->logits",
    "a23.h3->a29.h0<v>",
    "a23.h3->a29.h1<v>",
    "a29.h0->logits",
    "a29.h1->logits",
    "m0->a24.h4<v>",
    "a24.h4->logits",
]
CAPTIONS = {
    "a23.h3": "↓' John'",
    "a29.h0": "↓' Mary'",
    "a29.h1": "↑' Mary'",
    "a24.h4": "↓' Mary'",
    "m0": "+5.3",
}


def fitted_label_px(graph, frame_width: float) -> float:
    """The smallest label's size in px when ``graph`` is fitted to a frame ``frame_width`` wide, as
    the page fits it: the frame's height from its width (``cvHeight``), the zoom that shows every
    node's box, capped so that no label is drawn larger than ``MAX_LABEL_PX``."""
    data = graph.to_data()
    drawn = min(frame_width, data["widest"])
    height = min(data["max_height"], max(MIN_FRAME_HEIGHT, data["aspect"] * drawn + 30))
    left, top, right, bottom = graph.bounds()
    scale = min(frame_width / (right - left), height / (bottom - top), data["max_scale"])
    fonts = [float(node.get("font", {}).get("size", 14)) for node in graph.nodes]
    return min(fonts) * scale


def _scores(spec: GraphSpec, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator(device="cpu").manual_seed(seed)
    return torch.randn(spec.n_forward, spec.n_backward, generator=generator, device="cpu") * spec.edge_mask


def test_a_small_smollm_circuit_is_readable_at_every_width():
    drawing = render.circuit_graph_html(
        SMOLLM, _scores(SMOLLM), SMOLLM.mask_from_edge_names(SMALL), captions=CAPTIONS
    )
    sizes = [fitted_label_px(drawing.vis, width) for width in FRAMES]
    # before: 4.1, 7.9 and 11.6 px (every head column and the MLP's, columns 18 characters wide)
    assert min(sizes) >= 12, sizes
    assert overlapping(drawing.vis.nodes) == []


@pytest.mark.parametrize("spec", [SMOLLM, GEMMA], ids=["smollm2", "gemma3"])
@pytest.mark.parametrize("edges", [5, 10])
def test_small_circuits_of_both_models_are_readable(spec, edges):
    """Circuits of the strongest 5 or 10 edges of random scores (11 to 22 nodes, spread over up to
    14 layers) on both embedded models' graphs: no label under 13 px at any width, the 538 px a
    1,000 px window leaves included (a drawing of 14 rows fills the frame's greatest height)."""
    for seed in range(5):
        scores = _scores(spec, seed)
        drawing = render.circuit_graph_html(spec, scores, top_n(spec, scores, edges), captions=CAPTIONS)
        sizes = [fitted_label_px(drawing.vis, width) for width in FRAMES]
        assert min(sizes) >= 13, (seed, len(drawing.nodes), sizes)
        assert overlapping(drawing.vis.nodes) == []


@pytest.mark.parametrize("edges", [50, 200, 1500])
def test_large_circuits_are_not_drawn_smaller_than_before(edges):
    """A 50-, 200- or 1,500-edge circuit packs its heads the same way: its labels are no smaller
    than on every head's own column, and no two boxes overlap."""
    scores = _scores(SMOLLM, 3)
    mask = top_n(SMOLLM, scores, edges)
    packed = render.circuit_graph_html(SMOLLM, scores, mask, captions=CAPTIONS)
    spread = render.circuit_graph_html(SMOLLM, scores, mask, captions=CAPTIONS, placed=SMOLLM.node_names)
    assert overlapping(packed.vis.nodes) == []
    for width in FRAMES:
        assert fitted_label_px(packed.vis, width) >= fitted_label_px(spread.vis, width) - 1e-9


def test_a_tall_circuit_with_captions_is_drawn_at_a_readable_size():
    """A circuit of every one of SmolLM2-135M's 30 layers, names with captions (two lines a row):
    its frame grew to 900 px at most, fitted to its height, and its labels were drawn at 7.9 px at
    every width (the 167-edge IOI circuit at budget 200, 2026-12-06). The frame grows until its
    labels are drawn at ``READABLE_LABEL_PX`` (the page scrolls past it)."""
    chain = ["input->m0", *[f"m{layer}->m{layer + 1}" for layer in range(29)], "m29->logits"]
    captions = {f"m{layer}": "+5.3" for layer in range(30)}
    drawing = render.circuit_graph_html(
        SMOLLM, _scores(SMOLLM), SMOLLM.mask_from_edge_names(chain), captions=captions
    )
    assert drawing.vis.aspect() * FRAMES[0] > MAX_FRAME_HEIGHT  # taller than the frame was allowed
    sizes = [fitted_label_px(drawing.vis, width) for width in FRAMES]
    assert min(sizes) >= READABLE_LABEL_PX, sizes
    assert drawing.vis.to_data()["max_height"] > MAX_FRAME_HEIGHT


def test_a_short_circuit_keeps_the_frames_greatest_height():
    drawing = render.circuit_graph_html(
        SMOLLM, _scores(SMOLLM), SMOLLM.mask_from_edge_names(SMALL), captions=CAPTIONS
    )
    assert drawing.vis.to_data()["max_height"] == MAX_FRAME_HEIGHT


def test_heads_keep_their_order_and_side():
    """Within a row the heads stay in order, the MLP after them; a row's lone head leans to the
    side its index has (head 0 on the left, head 8 on the right)."""
    names = ["a3.h0", "a3.h4", "a3.h8", "a5.h8", "a6.h0", "a7.h5", "m3", "m7"]
    columns = packed_columns(SMOLLM, names)
    assert columns.count == 3
    assert [columns.slot[n] for n in ("a3.h0", "a3.h4", "a3.h8")] == [0, 1, 2]
    assert columns.slot["a5.h8"] == 2 and columns.slot["a6.h0"] == 0 and columns.slot["a7.h5"] == 1
    x = {name: node_position(SMOLLM, name, [3, 5, 6, 7], 100, 80, columns)[0] for name in names}
    # the MLPs after the heads, every other row's staggered right (m7's is the fourth row)
    assert x["a3.h0"] < x["a3.h4"] < x["a3.h8"] < x["m3"] < x["m7"]


def test_every_head_drawn_keeps_each_at_its_index():
    """The model's every node drawn (``show_faded``) or a layout given its layers (Compare's, which
    also passes the nodes of every circuit drawn): each head at its own index, as before."""
    scores = _scores(GEMMA)
    mask = top_n(GEMMA, scores, 10)
    faded = render.circuit_graph_html(GEMMA, scores, mask, show_faded=True)
    column = faded.grid[0]
    for node in faded.vis.nodes:  # every other row half a column left (``layout.HEAD_STAGGER``)
        if node["id"].startswith("a"):
            layer, head = (int(part) for part in node["id"][1:].split(".h"))
            assert node["x"] == pytest.approx((head - HEAD_STAGGER * (layer % 2)) * column)
    columns = packed_columns(GEMMA, GEMMA.node_names)
    assert columns.count == GEMMA.n_heads
    assert all(columns.slot[f"a{layer}.h{h}"] == h for layer in range(18) for h in range(4))
