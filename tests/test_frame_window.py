"""A drawing taller than the window is held to the window's height, so both of its ends (the
embeddings at the bottom, the answer's logit at the top) are in sight at once; "full size" gives
it the height its labels want. SmolLM2-135M's 167-edge IOI circuit (EAP-IG, budget 200, names in
words and captions) drew a 1,484 px frame at 1,500 and 2,000 px: in a 1,200 px window the
embeddings sat 1,505 px down the page with the frame's top at the window's (Chromium,
2026-12-06). Held to the window, the same circuit with captions was drawn at 7.8, 8.5 and 8.9 px
at 1,000, 1,500 and 2,000 px: a frame that holding draws under ``HELD_LABEL_PX`` opens at its full
height ("fit the window" holds it). Checked on ``standalone_page``, which draws with the page's
own script."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import pytest

from circuitviz.render.vis import (
    HELD_LABEL_PX,
    READABLE_LABEL_PX,
    SMALL_HINT,
    SMALL_HINT_TALL,
    SMALL_HINT_WINDOW,
    TALLEST_FRAME,
    WINDOW_MARGIN,
    VisGraph,
    hint_text,
    standalone_page,
)

CHROMIUM = "/usr/bin/chromium"

# the frame's height, the "full size" button's text and whether it shows, the line above the frame,
# and where the top and bottom nodes are drawn (px from the frame's top)
STATE = """() => { const frame = document.getElementById('mynetwork'), button = document.getElementById('cv-size');
  const hint = document.getElementById('cv-hint'), box = frame.getBoundingClientRect();
  const y = (id) => network.canvasToDOM(network.getPosition(id)).y;
  const px = network.getScale() * 22;
  const above = box.top - document.body.getBoundingClientRect().top;  // the key and the buttons
  return {px: px, height: box.height, room: window.innerHeight - above, button: button.style.display !== 'none' ? button.textContent : null,
          hint: hint.style.display !== 'none' ? hint.textContent : null, top: y('n0'), bottom: y('n' + (network.body.data.nodes.length - 1))}; }"""


def _tall(rows: int = 30, spacing: float = 100.0) -> VisGraph:
    """``rows`` rows of boxes ``spacing`` apart (30 at 100: drawn 12 px high only in a frame far
    taller than a window, 8 px held to it)."""
    nodes = [
        {
            "id": f"n{row}",
            "label": f"layer {row}",
            "x": 0.0,
            "y": -spacing * row,
            "font": {"size": 22},
            "shape": "box",
        }
        for row in range(rows)
    ]
    return VisGraph(nodes, [])


@contextmanager
def _opened(graph: VisGraph, path: Path):
    """Chromium at 1,000 x 1,200 px on ``graph``'s standalone page (written to ``path``), drawn."""
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed")
    playwright_api = pytest.importorskip("playwright.sync_api")
    path.write_text(standalone_page(graph), encoding="utf-8")
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1000, "height": 1200})
            page.goto(path.as_uri())
            page.wait_for_timeout(800)
            yield page
        finally:
            browser.close()


@pytest.mark.browser
def test_a_tall_drawing_held_to_the_window_at_small_labels_opens_at_full_size(tmp_path):
    graph = _tall()
    assert graph.max_height() == TALLEST_FRAME  # the height its labels want: more than any window here
    seen = {}
    with _opened(graph, tmp_path / "tall.html") as page:
        seen["opened"] = page.evaluate(STATE)
        page.click("#cv-size")  # "fit the window"
        page.wait_for_timeout(800)
        seen["held"] = page.evaluate(STATE)
        page.set_viewport_size({"width": 1000, "height": 900})  # a lower window: the frame follows
        page.wait_for_timeout(800)
        seen["lower"] = page.evaluate(STATE)
        page.click("#cv-size")  # "full size"
        page.wait_for_timeout(800)
        seen["full"] = page.evaluate(STATE)
        page.click("#cv-size")
        page.wait_for_timeout(800)
        seen["back"] = page.evaluate(STATE)
    opened, held, lower, full, back = (seen[k] for k in ("opened", "held", "lower", "full", "back"))
    # held to the window its labels would be 8 px: it opens at its greatest height (10.9 px)
    assert opened["height"] == pytest.approx(TALLEST_FRAME, abs=1) and opened["px"] > held["px"] + 2
    assert opened["button"] == "fit the window" and opened["hint"] is None
    assert held["height"] == pytest.approx(held["room"] - WINDOW_MARGIN, abs=1) and held["room"] > 1100
    assert 0 < held["bottom"] < held["top"] < held["height"]  # both ends inside the frame
    assert held["button"] == "full size" and held["px"] < HELD_LABEL_PX
    assert held["hint"] == hint_text(SMALL_HINT_WINDOW, [held["px"]] * 30)  # "drawn at 8.1 px ..."
    # the user's choice stands in a window of another height
    assert lower["height"] == pytest.approx(lower["room"] - WINDOW_MARGIN, abs=1) and lower["room"] < 900
    assert full["height"] == pytest.approx(TALLEST_FRAME, abs=1) and full["button"] == "fit the window"
    # at its greatest height: "widen" would not help
    assert full["hint"] in (None, hint_text(SMALL_HINT_TALL, [full["px"]] * 30))
    assert back["height"] == pytest.approx(lower["height"], abs=1) and back["button"] == "full size"


@pytest.mark.browser
def test_a_drawing_the_window_holds_at_readable_labels_stays_held(tmp_path):
    """20 rows that want a frame a little taller than the window: held, their labels are drawn at
    ``HELD_LABEL_PX`` or more, so both ends stay in sight and "full size" is offered."""
    graph = _tall(20, 104.0)
    with _opened(graph, tmp_path / "held.html") as page:
        state = page.evaluate(STATE)
    assert state["height"] == pytest.approx(state["room"] - WINDOW_MARGIN, abs=1)
    assert state["height"] < graph.max_height()  # held, not at its full height
    assert HELD_LABEL_PX <= state["px"] < READABLE_LABEL_PX and state["button"] == "full size"


@pytest.mark.browser
def test_a_drawing_the_window_holds_whole_has_no_full_size_button(tmp_path):
    nodes = [{"id": f"n{row}", "label": "a", "x": 0.0, "y": -80.0 * row, "shape": "box"} for row in range(3)]
    with _opened(VisGraph(nodes, []), tmp_path / "short.html") as page:
        assert page.evaluate("() => document.getElementById('cv-size').style.display") == "none"


@pytest.mark.browser
def test_the_line_above_the_frame_counts_the_labels_too_small_to_be_drawn(tmp_path):
    """vis-network leaves out a label under 4 px: the line says how many, and at what size the
    others are drawn (it said "small" with no figure)."""
    nodes = [
        {
            "id": f"n{i}",
            "label": "h1",
            "x": 60.0 * i,
            "y": 0.0,
            "font": {"size": 40 if i % 2 else 20},
            "shape": "box",
        }
        for i in range(150)
    ]
    with _opened(VisGraph(nodes, [], kind="positions"), tmp_path / "wide.html") as page:
        scale = page.evaluate("() => network.getScale()")
        text = page.locator("#cv-hint").inner_text()
    sizes = [float(node["font"]["size"]) * scale for node in nodes]
    assert min(sizes) < 4 <= max(sizes)  # the 20-unit labels left out, the 40-unit ones drawn
    assert text == hint_text(SMALL_HINT, sizes) and "; 75 of 150 are too small to be drawn" in text
