"""The Gallery's faithfulness curves had their first tick at 100 while the sentences beside them
named budget 30 (IOI: "reach NDF 0.85 at budget 30", the marker's "0.85 at 30") or 20 (multiple
choice): the marker's budget is ticked now, written in full, and a power of ten too close to it to
be read beside it gives way."""

from __future__ import annotations

from circuitviz import render
from circuitviz.entry.budgets import default_budgets
from circuitviz.render.curves import NARROW_PLOT_PX

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
    # every budget with a point is ticked (below), the marker's among them; 1k and 500, 2k and 5k,
    # between 200 and 10,342, fill the gap, and 10k, 0.015 decades from the whole graph's '10,342',
    # gives way
    for budget in (20, 30, 100, 10_342):
        assert _shown(_curve(budget).layout.xaxis) == [
            *("20", "30", "50", "100", "200", "500", "1k", "2k", "5k", "10,342")
        ]
    # where labels are crowded, the marker's budget is kept before its neighbours
    crowded = [20 + 20 * i for i in range(12)]
    assert "120" in render.log_ticks(crowded, [120], plot_px=450)["ticktext"]  # a narrow plot
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
    another's at a 1,000 px page's plot (552 px): SmolLM2's 100k beside its whole graph's 123,211."""
    budgets = default_budgets(123_211)
    points = [{"budget": b, "n_edges": b, "ndf": 0.5, "nfs": 0.5, "metric": 0.5} for b in budgets]
    axis = render.curve_figure({"eap": points, "eap-ig": points}, 123_211, current_budget=200).layout.xaxis
    assert _shown(axis) == [
        *("20", "50", "100", "200", "500", "1k", "2k", "5k", "10k", "20k", "50k", "123,211")
    ]
    assert _labels_apart(axis, NARROW_PLOT_PX)
    for total in (10_342, 32_491, 4_000, 2_000_000):
        grid = default_budgets(total)
        points = [{"budget": b, "n_edges": b, "ndf": 0.5, "nfs": 0.5, "metric": 0.5} for b in grid]
        axis = render.curve_figure({"eap": points}, total).layout.xaxis
        assert _labels_apart(axis, NARROW_PLOT_PX), total
        assert {"20", "50"} <= set(_shown(axis)), total


def test_the_ticks_are_spaced_for_the_plot_a_1000_px_window_draws():
    """The ticks were spaced for a 450 px plot, but since the page's margins shrank a 1,000 px
    window draws Explore's and Compare's curves 552 px wide (Chromium): the rule's width is the
    page's at 1,000 px (less the sidebar and the margins ``ui.navigation`` gives it) less the 10 px
    Streamlit keeps beside a chart and the figure's own margins, so it follows them."""
    from circuitviz.ui.navigation import page_margin_px

    sidebar = 300  # Streamlit's, open
    figure = render.curve_figure({"eap": [{"budget": 20, "n_edges": 20, "ndf": 0.5}]}, 100)
    margins = figure.layout.margin.l + figure.layout.margin.r
    assert NARROW_PLOT_PX == 1000 - sidebar - 2 * page_margin_px(1000) - 10 - margins == 552


def test_the_ticks_leave_no_gap_a_label_would_fit():
    """At 1,500 and 2,000 px SmolLM2's curve left 2k to 10k and 20k to 123,211 bare (250 px each,
    no budget in between): the powers of ten's 2 and 5 times fill a gap too, where the ticks either
    side are over ``FILL_GAP_PX`` apart at the narrowest plot and their labels have room. No budget,
    power of ten, or 2 and 5 times one in such a gap, that would fit is left out."""
    from math import floor, log10

    for total in (123_211, 10_342, 32_491, 4_000, 2_000_000, 300):
        grid = default_budgets(total)
        ticks = render.log_ticks(grid, [200], plot_px=NARROW_PLOT_PX)
        low, high = ticks["range"]
        per_decade = NARROW_PLOT_PX / (high - low)
        kept = ticks["tickvals"]
        candidates = {*grid, *(m * 10**p for p in range(floor(low), floor(high) + 1) for m in (1, 2, 5))}
        for value in sorted(v for v in candidates if min(grid) <= v <= max(grid) and v not in kept):
            text = render.curves._tick_label(value)
            room = [
                abs(log10(value) - log10(other)) * per_decade
                - (len(text) + len(render.curves._tick_label(other))) * 7.2 / 2
                for other in kept
            ]
            below, above = max(k for k in kept if k < value), min(k for k in kept if k > value)
            in_a_gap = log10(above / below) * per_decade > render.curves.FILL_GAP_PX
            if value not in grid and str(value).strip("0") in ("2", "5"):
                assert not in_a_gap or min(room) < render.curves.TICK_GAP_PX, (total, value, ticks)
            else:
                assert min(room) < render.curves.TICK_GAP_PX, (total, value, ticks["ticktext"])


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
