"""The Paraphrases page's UpSet plot in Chromium: one click on a bar selects its intersection,
the first bar and every bar after it (a second bar took two clicks: the chart drawn after a
click was not yet highlighted, and the highlighted one that followed was a new chart to
streamlit, which dropped the click it carried).

Drives ``ui.paraphrase_view.shared_edges`` itself, in a streamlit script of its own
(tests/upset_page.py) over fixed candidate circuits, so no model is loaded.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from browser_page import OUTPUT, serve_app, settled, stop_app

from circuitviz.render import exclusive_intersections

CHROMIUM = "/usr/bin/chromium"
playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed"),
]
SETS = {
    "prompt": [f"e{i:02d}" for i in range(0, 30)],
    "p1": [f"e{i:02d}" for i in range(10, 40)],
    "p2": [f"e{i:02d}" for i in range(20, 45)],
    "p3": [f"e{i:02d}" for i in range(5, 25)],
}
PICKER = "highlight the edges of one intersection in the graph (or click its bar above)"


def _steady_box(locator) -> dict:
    """The element's box once two looks 0.5 s apart agree (plotly lays a chart out again when its
    frame settles; a click at a stale place would hit another bar)."""
    box = locator.bounding_box()
    for _ in range(20):
        locator.page.wait_for_timeout(500)
        again = locator.bounding_box()
        if again == box:
            return box
        box = again
    raise AssertionError(f"the bar kept moving: {box}")


HOVERED = """bar => [...document.querySelectorAll('.js-plotly-plot')].some(
    chart => (chart._hoverdata || []).some(point => point.curveNumber === 0 && point.pointNumber === bar)
)"""


def _point_at(page, bar: int) -> tuple[float, float]:
    """The pointer on bar ``bar``'s centre, once the chart says it hovers that bar. Plotly's click
    reports the point it last hovered, and on a busy machine the hover of the pointer's last move
    can come after the click: the click then selected the bar the pointer passed over before."""
    for _ in range(10):
        box = _steady_box(page.locator(".js-plotly-plot .barlayer .point path").nth(bar))
        x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
        page.mouse.move(x, y - 3, steps=5)
        page.mouse.move(x, y, steps=2)
        try:
            page.wait_for_function(HOVERED, arg=bar, timeout=5_000)
            return x, y
        except playwright_api.TimeoutError:
            continue
    raise AssertionError(f"the chart never hovered bar {bar} under the pointer")


def test_one_click_on_an_upset_bar_selects_it(tmp_path, monkeypatch):
    shown = exclusive_intersections({name: set(edges) for name, edges in SETS.items()})
    assert len(shown) >= 3 and shown[0].size == shown[1].size  # two bars alike: only the label tells
    monkeypatch.setenv("UPSET_TEST_SETS", json.dumps(SETS))
    url, server = serve_app(tmp_path, "streamlit-upset.log", script=Path(__file__).parent / "upset_page.py")
    try:
        with playwright_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=CHROMIUM, args=["--headless", "--no-sandbox"]
            )
            page = browser.new_page(viewport={"width": 1500, "height": 1000})
            page.goto(url)
            page.locator(".js-plotly-plot .barlayer").first.wait_for(timeout=120_000)
            settled(page)
            picker = page.get_by_role("combobox", name=PICKER)
            assert picker.input_value() == "none"
            for step, bar in enumerate((0, 1, 2, 0)):  # the first click, then other bars straight after
                page.mouse.click(*_point_at(page, bar))
                settled(page)
                item = shown[bar]
                # on a busy machine the rerun the click starts can end after the page looks settled:
                # wait for the picker to say this bar (a click that selected another bar, or none,
                # still fails here, after 30 s)
                playwright_api.expect(picker).to_have_value(
                    f"{item.label} ({item.size} edges)", timeout=30_000
                )
                settled(page)
                page.screenshot(path=str(OUTPUT / f"upset-click-{step}.png"))
                lit = page.get_by_text("lit up:").inner_text().removeprefix("lit up:").split()
                assert sorted(lit) == sorted(item.edges), f"bar {bar}"
                colours = page.evaluate(
                    "() => [...document.querySelectorAll('.js-plotly-plot .barlayer')[0]"
                    ".querySelectorAll('.point path')].map(p => getComputedStyle(p).fill)"
                )
                highlighted = [i for i, colour in enumerate(colours) if colour == "rgb(213, 94, 0)"]
                assert highlighted == [bar], colours  # the clicked bar, drawn in the highlight colour
            browser.close()
    finally:
        stop_app(server)
