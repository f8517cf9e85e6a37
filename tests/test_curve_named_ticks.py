"""The Gallery's faithfulness curves had their first tick at 100 while the sentences beside them
named budget 30 (IOI: "reach NDF 0.85 at budget 30", the marker's "0.85 at 30") or 20 (multiple
choice): the marker's budget is ticked now, written in full, and a power of ten too close to it to
be read beside it gives way."""

from __future__ import annotations

from circuitviz import render
from circuitviz.entry.budgets import default_budgets

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
    # every budget with a point is ticked (below), the marker's among them; 1k, between 200 and
    # 10,342, fills the gap, and 10k, 0.015 decades from the whole graph's '10,342', gives way
    for budget in (20, 30, 100, 10_342):
        assert _shown(_curve(budget).layout.xaxis) == ["20", "30", "50", "100", "200", "1k", "10,342"]
    # where labels are crowded, the marker's budget is kept before its neighbours
    crowded = [20 + 20 * i for i in range(12)]
    assert "120" in render.log_ticks(crowded, [120], plot_px=450)["ticktext"]
    assert "120" not in render.log_ticks(crowded, plot_px=450)["ticktext"]


def _labels_apart(axis, plot_px: float) -> bool:
    """Whether no two tick labels meet on a plot ``plot_px`` wide (7.2 px a character)."""
    from math import log10

    low, high = axis.range
    at = [
        ((log10(v) - low) / (high - low) * plot_px, len(t) * 7.2)
        for v, t in zip(axis.tickvals, axis.ticktext)
    ]
    return all(b[0] - a[0] >= (a[1] + b[1]) / 2 + 6 for a, b in zip(at, at[1:]))


def test_every_budget_with_a_point_is_ticked_where_its_label_has_room():
    """Compare's and Explore's curves ticked only 100, 200, 1k and 10k: SmolLM2's points at budgets
    20 and 50 had no tick. Each budget is ticked now, a label given way only where it would meet
    another's at a 1,000 px page's plot (450 px): SmolLM2's 100k beside its whole graph's 123,211."""
    budgets = default_budgets(123_211)
    points = [{"budget": b, "n_edges": b, "ndf": 0.5, "nfs": 0.5, "metric": 0.5} for b in budgets]
    axis = render.curve_figure({"eap": points, "eap-ig": points}, 123_211, current_budget=200).layout.xaxis
    assert _shown(axis) == ["20", "50", "100", "200", "500", "1k", "2k", "10k", "20k", "123,211"]
    assert _labels_apart(axis, 450)
    for total in (10_342, 32_491, 4_000, 2_000_000):
        grid = default_budgets(total)
        points = [{"budget": b, "n_edges": b, "ndf": 0.5, "nfs": 0.5, "metric": 0.5} for b in grid]
        axis = render.curve_figure({"eap": points}, total).layout.xaxis
        assert _labels_apart(axis, 450), total
        assert {"20", "50"} <= set(_shown(axis)), total


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
