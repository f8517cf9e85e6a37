"""Compare's methods stand side by side only in columns wide enough for their drawings' labels to
be read: SmolLM2-135M's 30-row circuits (EAP and EAP-IG on the IOI prompt, budget 200, with
captions) were drawn at 8.8 px in the two 512 px columns of a 1,500 px window (Chromium,
2026-12-07), where one column each draws them at 11.9 px. A column is at least as wide as the
frame that draws the widest drawing's labels at ``HELD_LABEL_PX`` (``compare.column_px``)."""

from __future__ import annotations

from types import SimpleNamespace

from test_small_circuit_layout import CAPTIONS, GEMMA, SMOLLM, _scores

from circuitviz import render
from circuitviz.core.graph import top_n
from circuitviz.render.vis import FIT_SHARE, HELD_LABEL_PX, MIN_FRAME_HEIGHT, framed_alike
from circuitviz.ui.compare import MIN_COLUMN_PX, column_px, columns_css


def _side_by_side(spec, edges: int) -> dict:
    """Two circuits of ``spec`` (the strongest ``edges`` of two random scores) drawn alike, as
    Compare draws them: one layout for the nodes of both, fitted to one box."""
    circuits = [(scores, top_n(spec, scores, edges)) for scores in (_scores(spec, 0), _scores(spec, 1))]
    placed = {name for _, mask in circuits for name in render.circuit_graph_html(spec, *_plain(mask)).nodes}
    graphs = [
        render.circuit_graph_html(
            spec, scores, mask, captions=CAPTIONS, layers=list(range(spec.n_layers)), placed=sorted(placed)
        ).vis
        for scores, mask in circuits
    ]
    return {f"method {i}": SimpleNamespace(vis=graph) for i, graph in enumerate(framed_alike(graphs))}


def _plain(mask):
    return _scores(SMOLLM if mask.shape[0] == SMOLLM.n_forward else GEMMA, 0), mask


def boxed_px(graph, width: float) -> float:
    """The labels' size in px where the page fits ``graph`` (drawn alike: its box shared) to a
    frame ``width`` px wide at the height it opens at (``cvFullHeight``, ``cvFit``)."""
    data = graph.to_data()
    height = min(data["max_height"], max(MIN_FRAME_HEIGHT, data["aspect"] * min(width, data["widest"]) + 30))
    left, top, right, bottom = graph.bounds()
    scale = min(FIT_SHARE * min((width - 2) / (right - left), height / (bottom - top)), data["max_scale"])
    return scale * max(float(node["font"]["size"]) for node in graph.nodes)


def test_tall_drawings_get_columns_wide_enough_for_readable_labels():
    drawings = _side_by_side(SMOLLM, 100)
    width = column_px(drawings)
    assert width > 512  # two columns of a 1,500 px window: one column each there
    for drawing in drawings.values():
        assert boxed_px(drawing.vis, 512) < HELD_LABEL_PX  # as they were drawn side by side
        # as large as any width draws them, up to HELD_LABEL_PX
        assert boxed_px(drawing.vis, width) >= min(HELD_LABEL_PX, boxed_px(drawing.vis, 4000)) - 0.1
        assert boxed_px(drawing.vis, width - 40) < boxed_px(drawing.vis, width)  # no wider than that
    assert f"minmax(min(100%, {width}px), 1fr)" in columns_css(width)


def test_small_drawings_keep_the_narrowest_column():
    assert column_px(_side_by_side(GEMMA, 10)) == MIN_COLUMN_PX
    assert column_px({}) == MIN_COLUMN_PX
