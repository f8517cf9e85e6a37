"""The Gallery's faithfulness curves had their first tick at 100 while the sentences beside them
named budget 30 (IOI: "reach NDF 0.85 at budget 30", the marker's "0.85 at 30") or 20 (multiple
choice): the marker's budget is ticked now, written in full, and a power of ten too close to it to
be read beside it gives way."""

from __future__ import annotations

from circuitviz import render

GALLERY_BUDGETS = (20, 30, 50, 100, 200, 10_342)  # every Gallery example's


def _curve(budget: int):
    points = [{"budget": b, "n_edges": b, "ndf": 0.5, "nfs": 0.5, "metric": 0.5} for b in GALLERY_BUDGETS]
    return render.curve_figure({"edge-pruning": points}, 10_342, current_budget=budget, marker_value=0.5)


def _shown(axis) -> list[str]:
    """The tick labels inside the axis's range (plotly draws no tick outside it)."""
    low, high = axis.range
    from math import log10

    return [text for value, text in zip(axis.tickvals, axis.ticktext) if low <= log10(value) <= high]


def test_the_markers_budget_is_ticked():
    assert _shown(_curve(30).layout.xaxis) == ["30", "100", "1k", "10k"]
    assert _shown(_curve(20).layout.xaxis) == ["20", "100", "1k", "10k"]
    assert _shown(_curve(100).layout.xaxis) == ["100", "1k", "10k"]  # a power of ten: as it was
    # the whole graph: 10k, 0.015 decades away, would sit under '10,342'
    assert _shown(_curve(10_342).layout.xaxis) == ["100", "1k", "10,342"]


def test_without_a_marker_the_ticks_are_the_powers_of_ten():
    assert render.log_ticks(list(GALLERY_BUDGETS))["ticktext"] == ["10", "100", "1k", "10k", "100k"]
    assert render.log_ticks(list(GALLERY_BUDGETS), [30])["ticktext"] == [
        "10",
        "30",
        "100",
        "1k",
        "10k",
        "100k",
    ]
