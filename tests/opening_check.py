"""The opening view's sentence checked against the curve it was written from: every figure it
states is read back off the curve, and every claim it makes (smallest, most faithful, none) is
checked over the curve's points. Used by tests/test_app_state.py and tests/test_gallery_opening.py."""

from __future__ import annotations

import re


def _get(point, name: str) -> float:
    return float(point[name] if isinstance(point, dict) else getattr(point, name))


def check_opening(curve, view, max_edges: int = 200, good_ndf: float = 0.8) -> None:
    points = sorted(curve, key=lambda p: _get(p, "budget"))
    opened = next(p for p in points if int(_get(p, "budget")) == view.budget)
    readable = [p for p in points if 0 < _get(p, "n_edges") <= max_edges]
    stated = re.search(r"opened at ([\d,]+) edges", view.reason, re.IGNORECASE)
    assert stated and int(stated.group(1).replace(",", "")) == int(_get(opened, "n_edges")), view.reason
    ndf = re.search(r"\(NDF (\d\.\d\d)\)", view.reason)
    assert ndf and float(ndf.group(1)) == round(_get(opened, "ndf"), 2), view.reason
    if view.faithful:
        assert view.reason.startswith("Opened at") and "smallest budget whose circuit reaches" in view.reason
        assert _get(opened, "ndf") >= good_ndf and _get(opened, "n_edges") <= max_edges
        smaller = [p for p in readable if _get(p, "budget") < view.budget]
        assert all(_get(p, "ndf") < good_ndf for p in smaller), "a smaller readable circuit is faithful"
        return
    assert f"No circuit of at most {max_edges} edges reaches NDF {good_ndf}" in view.reason
    assert all(_get(p, "ndf") < good_ndf for p in readable), "a readable circuit is faithful"
    faithful = [p for p in points if _get(p, "ndf") >= good_ndf]
    if faithful:
        assert f"the smallest that does keeps {int(_get(faithful[0], 'n_edges')):,} edges" in view.reason
    else:
        largest = int(max(_get(p, "n_edges") for p in points))
        assert f"none of the budgets run does, up to {largest:,} edges" in view.reason
    if "keep no edge" in view.reason:  # no readable circuit has an edge: the first one drawn
        assert not readable and "the smallest budget whose circuit has edges" in view.reason
        before = [p for p in points if _get(p, "budget") < view.budget]
        assert before and all(_get(p, "n_edges") == 0 for p in before), "a smaller circuit has edges"
        return
    if "none of them is faithful at all" in view.reason:  # every readable circuit at NDF 0.00
        assert all(_get(p, "ndf") < 0.005 for p in readable), "a readable circuit is faithful"
        assert view.budget == int(_get(readable[0], "budget")), "not the smallest readable circuit"
        return
    assert "the most faithful circuit of at most" in view.reason
    assert all(_get(p, "ndf") <= _get(opened, "ndf") for p in readable), "a readable circuit is more faithful"
