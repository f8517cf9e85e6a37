"""Steer's feature table scrolls inside its frame past 12 rows: the 12 strongest nodes' features
filled 34 rows on "The nurse said that" (EAP-IG, budget 200, Gemma-3-270M) in a frame of about 9
wrapped rows, the last cut mid-line, nothing saying 25 more were a scroll away (Chromium, 1,000 px).
A sentence above the table says so now; a table shown whole gets none."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")

from circuitviz.ui import steer  # noqa: E402


def _rows(n: int, nodes: int) -> list[dict]:
    return [{"node": f"a{i % nodes}.h0", "feature": f"L3/{i}"} for i in range(n)]


def test_a_table_that_scrolls_says_how_many_rows_it_holds():
    rows = _rows(33, 12)
    assert steer.feature_table_height(rows) != "content"
    assert steer.scroll_note(rows) == (
        "The table holds 33 rows, the features of 12 nodes: scroll inside it for the rest."
    )


def test_a_table_shown_whole_says_nothing_of_scrolling():
    assert steer.scroll_note(_rows(steer.SCROLL_ROWS, 4)) == ""
