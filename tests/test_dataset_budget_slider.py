"""The Dataset page's budget slider ends at the largest budget whose circuits the batch's table keeps
(--keep-edges, 10 % of the edges by default): on the stored arithmetic atlas it ended at "1034"
while the curve above ran to 10,342, nothing saying why (Chromium, 2026-12-06). Its help says so
now, naming the curve's budgets it leaves out, and its budgets are written as the page writes
numbers."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
from ioi_batch_folder import ioi_batch  # noqa: E402
from test_dataset_page import NAMES, _dataset  # noqa: E402


def test_the_budget_slider_says_why_it_stops_short_of_the_curve(tmp_path, monkeypatch):
    folder = ioi_batch(tmp_path, monkeypatch, NAMES, ["eap-ig"], {"ig_steps": 3}, [4, 10, 25, 1500], 25)
    at = _dataset(folder)
    assert not at.exception, at.exception
    slider = at.select_slider(key="dataset.budget")
    assert slider.options == ["4", "10", "25"]
    assert slider.help == (
        "the budgets whose circuits the batch's table keeps, up to 25: the consensus, the clusters and "
        "the prompts' table need a prompt's circuit, and the batch kept none over 25 (`--keep-edges`), "
        "so the curve's larger budgets (1,500) are not offered here"
    )
