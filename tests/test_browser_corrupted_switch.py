"""The corrupted box of a method that needs none, in Chromium (issue 33): picking flow routes,
CD-T or ACC++ on Explore hides the box at once and says what the figures use instead; the switch
shows it with its text; a method that needs one shows the text as it was. Seen at 1,000, 1,500
and 2,000 px (the screenshots go to the browser tests' output folder).

Slow: loads the embedded Gemma-3-270M in the app (nothing is run)."""

from __future__ import annotations

import urllib.parse
from pathlib import Path

import pytest
from browser_page import (
    CHROMIUM,
    OUTPUT,
    button_ready,
    choose,
    chromium_on_app,
    input_value,
    settled,
    wait_for,
)
from explore_session import LINK
from fresh_cache import fresh_cache

from circuitviz.methods import method_traits
from circuitviz.ui.corrupted_box import OWN_CORRUPTED, hidden_sentence

WAIT_MS = 15 * 60 * 1000
BOX = "Corrupted prompt (the key fact or name replaced; same number of tokens)"


@pytest.mark.browser
@pytest.mark.embedded
@pytest.mark.slow
def test_the_switch_hides_and_shows_the_corrupted_box(tmp_path_factory):
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed")
    pytest.importorskip("playwright.sync_api")
    link = {key: value for key, value in LINK.items() if key != "budgets"}
    cache = fresh_cache(tmp_path_factory.mktemp("cache"))
    with chromium_on_app(cache, "streamlit-corrupted-switch.log") as (url, browser):
        for width in (1000, 1500, 2000):
            page = browser.new_page(viewport={"width": width, "height": 1100})
            page.goto(f"{url}/?{urllib.parse.urlencode({**link, 'method': 'eap-ig'})}")
            wait_for(page, button_ready("Run"), WAIT_MS)
            settled(page)
            box = page.get_by_label(BOX, exact=True)
            assert input_value(page, BOX) == LINK["corrupted"]
            for method in ("flow-routes", "cd-t", "acc++"):
                choose(page, "method", method)
                assert box.count() == 0, (width, method)
                page.get_by_text(hidden_sentence(method_traits(method)), exact=True).wait_for()
            page.screenshot(path=str(OUTPUT / f"corrupted-hidden-{width}.png"))
            page.get_by_text(OWN_CORRUPTED, exact=True).click()
            settled(page)
            assert input_value(page, BOX) == LINK["corrupted"]
            page.screenshot(path=str(OUTPUT / f"corrupted-shown-{width}.png"))
            page.get_by_text(OWN_CORRUPTED, exact=True).click()
            settled(page)
            assert box.count() == 0 and "own_corrupted=0" in page.url
            choose(page, "method", "eap-ig")
            assert input_value(page, BOX) == LINK["corrupted"]  # nothing lost
            page.close()
