"""In Chromium: a table of untrusted text drawn through ``ui.guarded_table`` has no "Download as
CSV" in its toolbar (that button writes '=HYPERLINK("http://e.vil","click")' as a live formula),
keeps its other toolbar buttons, and the app's own download beside it writes the same columns
with each formula-like text behind a leading "'". The same table drawn plainly, on the same page,
shows the grid's button: the CSS hides it only where it is meant to.

Drives tests/guarded_table_page.py, a streamlit script of its own, so no model is loaded."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from browser_page import OUTPUT, serve_app, stop_app

from circuitviz.ui.guarded_table import GRID_CSV

CHROMIUM = "/usr/bin/chromium"
playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed"),
]
PAGE = Path(__file__).parent / "guarded_table_page.py"


def _toolbar(page, index: int) -> dict[str, bool]:
    """The toolbar buttons of the page's ``index``-th table, each with whether it is drawn, once
    the pointer is over the table (the toolbar shows on hover)."""
    page.locator('[data-testid="stDataFrame"]').nth(index).hover()
    page.wait_for_timeout(500)
    buttons = page.locator('[data-testid="stDataFrame"]').nth(index).locator("button[aria-label]")
    return {
        buttons.nth(k).get_attribute("aria-label"): buttons.nth(k).is_visible()
        for k in range(buttons.count())
    }


@pytest.mark.parametrize("width", [1000, 1500])
def test_a_guarded_table_has_no_grid_csv_and_its_own_download_is_guarded(tmp_path, width):
    url, server = serve_app(tmp_path, "streamlit-guarded.log", script=PAGE)
    try:
        with playwright_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=CHROMIUM, args=["--headless", "--no-sandbox"]
            )
            page = browser.new_page(viewport={"width": width, "height": 1000}, accept_downloads=True)
            page.goto(url)
            page.wait_for_function(
                "() => document.querySelectorAll('[data-testid=\"stDataFrame\"]').length === 3"
            )
            page.wait_for_timeout(1000)
            plain, read, edit = (_toolbar(page, index) for index in range(3))
            assert plain[GRID_CSV] and plain["Search"], plain  # streamlit still draws it, under this label
            for toolbar in (read, edit):
                assert not toolbar[GRID_CSV], toolbar
                assert toolbar["Search"] and toolbar["Fullscreen"], toolbar  # the rest stay
            page.screenshot(path=str(OUTPUT / f"guarded-table-{width}.png"))
            # full screen draws the same grid and toolbar, still inside the container
            page.locator('[data-testid="stDataFrame"]').nth(1).hover()
            page.wait_for_timeout(500)
            page.locator('[data-testid="stDataFrame"]').nth(1).locator(
                'button[aria-label="Fullscreen"]'
            ).click()
            page.wait_for_timeout(500)
            full = _toolbar(page, 1)
            assert not full[GRID_CSV] and full["Close fullscreen"], full
            page.locator('button[aria-label="Close fullscreen"]').click()
            page.wait_for_timeout(500)
            with page.expect_download() as started:
                page.get_by_role("button", name="Table (CSV)").click()
            text = Path(started.value.path()).read_text(encoding="utf-8")
            browser.close()
    finally:
        stop_app(server)
    rows = list(csv.reader(io.StringIO(text, newline="")))
    assert rows == [
        ["id", "prompt", "NDF"],
        ["p0", '\'=HYPERLINK("http://e.vil","click") When Tom', "0.5"],
        ["p1", "'+1+2 @SUM(A1) When Mary", ""],
        ["p2", "plain, with a comma", "1.0"],
    ]
