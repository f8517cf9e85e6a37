"""Every stored Gallery example opens where ``render.opening_view`` says, with a sentence true of
its curve: at a circuit of NDF 0.8 or more when one of at most 200 edges exists, else at the
most faithful readable one, saying none reaches 0.8. Its index's headline is its curve's."""

from __future__ import annotations

import json

import pytest
import torch
from opening_check import check_opening

from circuitviz import render
from circuitviz.core.results import CircuitResult
from circuitviz.services.assets import gallery_dir

INDEX = json.loads((gallery_dir() / "index.json").read_text())


@pytest.mark.parametrize("entry", INDEX, ids=[e["slug"] for e in INDEX])
def test_a_stored_example_opens_faithful_or_says_none_is(entry):
    state = torch.load(gallery_dir() / f"{entry['slug']}.pt", map_location="cpu", weights_only=True)
    result = CircuitResult.from_state(state["result"])
    view = render.opening_view(result.curve, good_ndf=0.8)
    check_opening(result.curve, view)
    readable_faithful = [p for p in result.curve if 0 < p.n_edges <= 200 and p.ndf >= 0.8]
    assert view.faithful == bool(readable_faithful)
    opened = result.point(view.budget)
    headline = entry["headline"]
    assert (headline["budget"], headline["n_edges"]) == (view.budget, opened.n_edges)
    assert headline["ndf"] == pytest.approx(opened.ndf)
    assert entry["method"] == result.method and entry["budgets"] == sorted(result.budgets)
