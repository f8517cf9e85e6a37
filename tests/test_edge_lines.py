"""An edge that runs behind a node two or more rows up is routed round it. The curves tried were
vis-network's curvedCW/CCW and cubicBezier: from a box's centre, with a box in line one or two
rows up and a row of heads between, none of them cleared it (the Gallery's factual circuit at
budget 50, where the page opens it: m3 -> a12.h1 ran behind a11.h1 and read as its edge).
vis-network's other quadratic curves go through a via point on a line (``routing.LINES``: the
start's row, the start's column, the end's column) and take any roundness, so the via point may
stand beyond either node: the curve leaves its node sideways and bends up, round the box.

Checked on the drawings' own data and, in Chromium, on the via point vis-network draws."""

from __future__ import annotations

from pathlib import Path

import pytest

from circuitviz import render
from circuitviz.render import routing
from circuitviz.render.routing import LINE_ROUNDNESS, LINES, OVERSHOOT, edge_points, hidden_edges, via_point

SLUGS = ("ioi", "factual", "arithmetic", "multiple-choice", "gender-bias")


def _vis_via(start, end, kind: str, r: float) -> tuple[float, float]:
    """vis-network 9.1.2's ``BezierEdgeStatic._getViaCoordinates`` for ``kind``, as written there."""
    (fx, fy), (tx, ty) = start, end
    o, h = abs(fx - tx), abs(fy - ty)
    if kind == "horizontal":
        u = (1 - r) * o
        return tx + (-u if fx < tx else u), fy
    if kind == "vertical":
        f = (1 - r) * h
        return fx, ty + (-f if fy < ty else f)
    d, c = (1 - r) * o, (1 - r) * h  # straightCross
    if o <= h:
        return tx, ty + (-c if fy < ty else c)
    return tx + (-d if fx < tx else d), ty


def test_a_via_point_on_a_line_is_the_one_vis_network_draws():
    pairs = [((0.0, 0.0), (120.0, -300.0)), ((50.0, -80.0), (-200.0, -90.0)), ((10.0, -400.0), (0.0, 0.0))]
    assert set(LINES) == {"horizontal", "vertical", "straightCross"}
    assert min(LINE_ROUNDNESS) < 0 and max(LINE_ROUNDNESS) > 1 and 0 not in LINE_ROUNDNESS
    for start, end in pairs:
        for kind in LINES:
            for r in (-1.5, 0.3, 1.0, 2.4):
                got = via_point(start, end, {"type": kind, "roundness": r})
                assert got == pytest.approx(_vis_via(start, end, kind, r)), (start, end, kind, r)


def _hidden(lines: tuple, monkeypatch) -> tuple[int, list]:
    """(edges hidden behind a box, over the Gallery's circuits at the budget the page opens each at
    and at 20, 50 and 100, names and names in words; the edges drawn through a via point on a
    line, with their two nodes' places), ``LINES`` as given."""
    from browser_page import gallery_result, readable

    monkeypatch.setattr(routing, "LINES", lines)
    hidden, bent = 0, []
    for slug in SLUGS:
        result = gallery_result(slug)
        for budget in sorted({readable(result), 20, 50, 100}):
            for words in (False, True):
                graph = render.result_graph_html(result, budget, words=words).vis
                hidden += len({edge for edge, _ in hidden_edges(graph.nodes, graph.edges)})
                where = {node["id"]: (node["x"], node["y"]) for node in graph.nodes}
                bent += [
                    (where[edge["from"]], where[edge["to"]], edge["smooth"])
                    for edge in graph.edges
                    if isinstance(edge["smooth"], dict) and edge["smooth"].get("type") in LINES
                ]
    return hidden, bent


def test_an_edge_behind_a_node_rows_up_is_routed_round_it(monkeypatch):
    """The Gallery's five circuits (Gemma-3-270M) at the budgets the page opens them at and at 20,
    50 and 100 (742 edges, drawn with names and with names in words): 42 ran behind a box (11
    with names, 31 in words), 28 then (5 and 23), none of those the factual circuit's where the
    page opens it; 27 with S curves up to roundness 3 (``CUBIC``; 41 without the lines); a curve
    through a via point on a line
    reaches no further than ``OVERSHOOT`` past its nodes' rows (past them, m1 -> a12.h0 went over
    its target's row and came back down behind the logits)."""
    from browser_page import gallery_result

    before, _ = _hidden((), monkeypatch)
    now, bent = _hidden(LINES, monkeypatch)
    assert now <= 27 < 41 <= before and bent, (before, now)
    for start, end, smooth in bent:
        ys = edge_points(start, end, smooth, samples=200)[:, 1]
        assert (
            min(start[1], end[1]) - OVERSHOOT - 1e-6 <= ys.min()
            and ys.max() <= max(start[1], end[1]) + OVERSHOOT + 1e-6
        )
    graph = render.result_graph_html(gallery_result("factual"), 50).vis
    assert not [edge for edge, _ in hidden_edges(graph.nodes, graph.edges) if edge == "m3->a12.h1<v>"]
    monkeypatch.setattr(routing, "LINES", ())
    graph = render.result_graph_html(gallery_result("factual"), 50).vis
    assert ("m3->a12.h1<v>", "a11.h1") in hidden_edges(graph.nodes, graph.edges)


@pytest.mark.browser
def test_vis_network_draws_a_line_curve_through_the_via_point_computed_here(tmp_path):
    """In Chromium each edge the Gallery's arithmetic circuit (budget 100, names in words) draws
    through a via point on a line, roundness past 1 too, has the via point ``via_point`` gives
    (from vis-network's own node places: it keeps whole layout units)."""
    from browser_page import gallery_result

    if not Path("/usr/bin/chromium").exists():
        pytest.skip("Debian's chromium is not installed")
    playwright_api = pytest.importorskip("playwright.sync_api")
    drawing = render.result_graph_html(gallery_result("arithmetic"), 100, words=True)
    bent = [
        e for e in drawing.vis.edges if isinstance(e["smooth"], dict) and e["smooth"].get("type") in LINES
    ]
    assert any(e["smooth"]["roundness"] > 1 for e in bent)
    page_path = tmp_path / "graph.html"
    page_path.write_text(drawing.html, encoding="utf-8")
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path="/usr/bin/chromium", args=["--headless", "--no-sandbox"]
        )
        try:
            page = browser.new_page(viewport={"width": 1000, "height": 1100})
            page.goto(page_path.as_uri())
            page.wait_for_timeout(800)
            drawn = page.evaluate(
                """(ids) => ids.map(id => { const edge = network.body.edges[id];
                   const via = edge.edgeType._getViaCoordinates();
                   return [[edge.from.x, edge.from.y], [edge.to.x, edge.to.y], [via.x, via.y]]; })""",
                [e["id"] for e in bent],
            )
        finally:
            browser.close()
    for edge, (start, end, via) in zip(bent, drawn):
        assert via_point(start, end, edge["smooth"]) == pytest.approx(via), edge["id"]
