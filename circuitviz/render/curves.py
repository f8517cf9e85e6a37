"""Faithfulness-versus-budget curves as plotly figures, CSV and standalone HTML.

Curves arrive as plain points (``CurvePoint`` or dicts with budget, n_edges, metric, nfs, ndf),
one list per method or candidate, so the same figure serves one result, a comparison of
methods, and Best-of-N candidates.
"""

from __future__ import annotations

import csv
import html
import io
import math
import unicodedata
from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from .graph_html import KIND_COLOURS

# a legend in rows at the figure's foot, below the x axis's title (the figure's height leaves it room)
FOOT_LEGEND = dict(orientation="h", yref="container", y=0, yanchor="bottom", x=0, xanchor="left")
# a palette that stays distinguishable for colour-blind readers (Okabe-Ito, minus yellow)
SERIES_COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")
# the shared budget's line where no point on it is labelled (Compare): no curve's colour (it was
# the logits' orange, the second curve's own, and unnamed: CD-T's curve and the budget read as one)
BUDGET_LINE_COLOUR = "#7F7F7F"
SCORE_NAMES = {"ndf": "NDF", "nfs": "NFS", "metric": "L(C(q))"}


def _value(point, name: str) -> float:
    value = point[name] if isinstance(point, Mapping) else getattr(point, name)
    return math.nan if value is None else float(value)


def curve_figure(
    curves: Mapping[str, Sequence],
    total_edges: int,
    *,
    score: str = "ndf",
    current_budget: int | None = None,
    marker_value: float | None = None,
    title: str = "",
    height: int = 380,
    grid: Sequence[int] | None = None,
) -> go.Figure:
    """NDF (or NFS) against the number of edges kept, one line per curve, log-scaled x.

    ``current_budget``: a vertical marker at that budget; ``marker_value`` a point on it (the
    faithfulness of the circuit now drawn), labelled with its value. ``grid``: the budgets a
    curve is expected at (default: the first curve's); a curve evaluated at fewer has its line
    broken at each one it misses, so no line is drawn through a budget nobody evaluated.
    """
    figure = go.Figure()
    named_budgets = [] if current_budget is None else [int(current_budget)]
    first = next(iter(curves.values()), [])
    grid = sorted({float(b) for b in grid} if grid is not None else {_value(p, "budget") for p in first})
    shown = sorted({_value(p, "budget") for points in curves.values() for p in points} | set(grid))
    for index, (name, points) in enumerate(curves.items()):
        budgets, values, customdata = _with_gaps(points, grid, score, total_edges)
        figure.add_trace(
            go.Scatter(
                x=[None if b is None else max(b, 1) for b in budgets],
                y=values,
                mode="lines+markers",
                connectgaps=False,
                name=str(name),
                line={"color": SERIES_COLOURS[index % len(SERIES_COLOURS)], "width": 2.5},
                marker={"size": 7},
                customdata=customdata,
                meta=_label(name),  # a value the template reads, never part of it
                hovertemplate=(
                    "%{meta}<br>budget %{x:,} edges"
                    f"<br>kept after pruning %{{customdata[0]:,}}"
                    f" (%{{customdata[1]:.2f}}%)<br>{SCORE_NAMES.get(score, score)} %{{y:.3f}}<extra></extra>"
                ),
            )
        )
    y_range = [-0.03, 1.08] if score == "ndf" else None
    if current_budget is not None:
        if marker_value is None:  # several curves and no point labelled (Compare): named, in grey
            figure.add_vline(
                x=max(int(current_budget), 1), line={"color": BUDGET_LINE_COLOUR, "dash": "dot", "width": 2}
            )
            x = math.log10(max(int(current_budget), 1))
            ends = [math.log10(max(b, 1)) for b in (shown[0], shown[-1])] if shown else [x, x]
            figure.add_annotation(  # beside the line's top, inside the plot (the log axis: log10 of x)
                x=x,
                xref="x",
                xanchor="left" if x <= sum(ends) / 2 else "right",  # on the side with room for it
                y=1,
                yref="y domain",
                yanchor="top",
                text=f"budget {int(current_budget):,}",
                font={"color": BUDGET_LINE_COLOUR},
                showarrow=False,
            )
        else:
            figure.add_vline(
                x=max(int(current_budget), 1),
                line={"color": KIND_COLOURS["logits"], "dash": "dot", "width": 2},
            )
        if marker_value is not None and not math.isnan(marker_value):
            lines = [(list(trace.x), list(trace.y)) for trace in figure.data]
            marker, lifted = _marker(int(current_budget), marker_value, shown, first, score, lines, y_range)
            figure.add_trace(marker)
            if lifted:
                figure.add_annotation(**lifted)
    # NDF is min(deviation / corruption's, 1) taken from 1: a circuit deviating more than the
    # corruption scores 0, so the axis says so where a reader looks
    label = "NDF (clipped at 0)" if score == "ndf" else SCORE_NAMES.get(score, score)
    title_lines = title.count("<br>") + 1 if title else 0
    figure.update_layout(
        # a title of several lines (``image_title``) at the top left: the margin holds it
        title={
            "text": title,
            "x": 0,
            "xanchor": "left",
            "xref": "container",
            "y": 1,
            "yanchor": "top",
            "yref": "container",
            "pad": {"l": 14, "t": 12},
            "font": {"size": 14},
        }
        if title
        else None,
        height=height,
        # without a title, 30 px: the mode bar (25 px, at the top right) stays off the plot
        margin={**PLOT_MARGINS, "t": 30 + 20 * title_lines + (6 if title else 0), "b": 50},
        # the marker's budget ticked: the sentences beside the chart name it ("0.85 at 30")
        xaxis={
            "title": "edge budget (log scale)",
            "type": "log",
            **log_ticks(shown, named_budgets, plot_px=NARROW_PLOT_PX),
        },
        yaxis={"title": label, "range": y_range} if score == "ndf" else {"title": label},
        # under the plot, at the figure's foot (the bottom margin grows to hold its rows): above the
        # plot it shared a row with plotly's mode bar at the top right, and at 1,000 px they met
        legend=FOOT_LEGEND,
        hovermode="closest",
        template="plotly_white",
    )
    return figure


def _with_gaps(points: Sequence, grid: Sequence[float], score: str, total_edges: int):
    """(budgets, values, hover data) of one curve with a gap (None) at every budget of ``grid``
    between its first and last that it was not evaluated at: a line is drawn only between
    budgets next to each other that were both evaluated, never straight through a missing one."""
    by_budget = {_value(p, "budget"): p for p in points}
    if not by_budget:
        return [], [], []
    low, high = min(by_budget), max(by_budget)
    budgets, values, customdata = [], [], []
    for budget in sorted({b for b in grid if low <= b <= high} | set(by_budget)):
        point = by_budget.get(budget)
        if point is None:
            budgets.append(None)
            values.append(None)
            customdata.append((None, None))
            continue
        kept = _value(point, "n_edges")
        budgets.append(budget)
        values.append(_value(point, score))
        customdata.append((kept, 100 * kept / total_edges if total_edges else math.nan))
    return budgets, values, customdata


def _marker(
    budget: int,
    value: float,
    grid: Sequence[float],
    curve: Sequence = (),
    score: str = "ndf",
    lines: Sequence = (),
    y_range: Sequence[float] | None = None,
) -> tuple[go.Scatter, dict | None]:
    """The point of the circuit shown now, its label ('0.41 at 200') beside it and off every line;
    and, where no place beside the marker is clear, the label as an annotation further off.

    The label's side is first chosen by the curve's slope (``_label_sides``); then each of the six
    places beside the marker is tried, in that order, at the plot sizes the figure is shown at
    (``LABEL_PLOT_SIZES``), and the first whose box crosses no line (``lines``: the drawn traces'
    x and y, None at a gap) and stays inside the plot is taken: at a V where NDF drops to 0 then
    rises ('0.00 at 200' of EAP-IG's default run), above-right sat on the rising line. Where every
    one of them crosses a line (the floor of a narrow V), the label is lifted 40 px or more off,
    on a white ground, a thin line leading to the marker (``LIFTED``)."""
    text = f"{value:.2f} at {budget:,}"
    places = _label_sides(budget, value, grid, curve, score)
    ranges = _plot_ranges(grid, lines, value, y_range)
    lifted = None
    if ranges is not None:

        def clashes(place):
            return _label_clashes(place, budget, value, text, lines, *ranges)

        places = sorted(places, key=clashes)
        if clashes(places[0]):
            best = min(LIFTED, key=clashes)
            if clashes(best) < clashes(places[0]):
                lifted = _lifted_label(budget, value, text, best)
    scatter = go.Scatter(
        x=[max(budget, 1)],
        y=[value],
        mode="markers" if lifted else "markers+text",
        marker={"size": 14, "color": KIND_COLOURS["logits"], "symbol": "diamond"},
        text=[text],
        textposition=None if lifted else places[0],
        # a halo in the background's colour: a grid line or another curve under it never cuts a digit
        textfont={"shadow": "auto"},
        cliponaxis=False,
        name="shown now",
        hovertemplate="shown now: %{y:.3f} at budget %{x:,}<extra></extra>",
    )
    return scatter, lifted


# where a label off the marker's side may go: its centre's offset from the marker, in px (up positive)
LIFTED = tuple(
    sorted(
        (
            (x, y)
            for y in (44, -44, 70, -70, 100, -100, 130)
            for x in (0, -30, 30, -60, 60, -100, 100, -150, 150)
        ),
        key=lambda centre: abs(centre[0]) + abs(centre[1]),
    )
)


def _lifted_label(budget: int, value: float, text: str, centre: tuple[float, float]) -> dict:
    """An annotation of ``text`` centred ``centre`` px off the marker (plotly's ay points down)."""
    return {
        "x": math.log10(max(budget, 1)),  # an annotation on a log axis is placed by log10
        "y": value,
        "text": text,
        "ax": centre[0],
        "ay": -centre[1],
        "showarrow": True,
        "arrowhead": 0,
        "arrowwidth": 1,
        "arrowcolor": KIND_COLOURS["logits"],
        "bgcolor": "rgba(255,255,255,0.92)",
        "bordercolor": KIND_COLOURS["logits"],
        "borderwidth": 1,
        "borderpad": 2,
        "font": {"size": LABEL_FONT_PX},
    }


def _label_sides(budget: int, value: float, grid: Sequence[float], curve: Sequence, score: str) -> list[str]:
    """The places beside the marker in the order they are tried: first the side that keeps the
    label inside the plot, below the line on the right where the curve rises after the marker and
    above it where it falls; on the left, above where the curve rises into the marker and below
    where it falls into it; never past the plot's floor or ceiling. Then the other height, the
    other side, and beside the marker in the middle."""
    low, high = (min(grid), max(grid)) if grid else (budget, budget)
    span = math.log10(max(high, 1)) - math.log10(max(low, 1))
    at = (math.log10(max(budget, 1)) - math.log10(max(low, 1))) / span if span > 0 else 0.5
    side = "right" if at < 0.5 else "left"
    values = sorted(
        (_value(p, "budget"), _value(p, score)) for p in curve if not math.isnan(_value(p, score))
    )
    here = next((v for b, v in values if b == budget), value)  # the line's own point at the marker
    if side == "right":  # the line leaves the marker towards the next budget
        following = next((v for b, v in values if b > budget), None)
        falls = following is not None and following < here
        vertical = "top" if value < 0.15 or (falls and value <= 0.85) else "bottom"
    else:  # the line reaches the marker from the budget before
        before = next((v for b, v in reversed(values) if b < budget), None)
        falls_in = before is not None and before > here
        vertical = "bottom" if value > 0.85 or (falls_in and value >= 0.15) else "top"
    other = "bottom" if vertical == "top" else "top"
    across = "left" if side == "right" else "right"
    return [
        f"{vertical} {side}",
        f"{other} {side}",
        f"{vertical} {across}",
        f"{other} {across}",
        f"middle {side}",
        f"middle {across}",
    ]


# the curve's plot area in a 1,000 px window, the narrowest Explore and Compare draw it: the page's
# 652 px (less the sidebar's 300 and ui.navigation's 24 px margins), less the 10 px Streamlit keeps
# beside a chart and the figure's side margins. Ticks were spaced for 450 px, from before the
# margins shrank: 552 px in Chromium on 2026-12-07 (940 at 1,500 px, 1,440 at 2,000)
PLOT_MARGINS, NARROW_PAGE_PX, CHART_INSET_PX = {"l": 60, "r": 30}, 652, 10
NARROW_PLOT_PX = NARROW_PAGE_PX - CHART_INSET_PX - PLOT_MARGINS["l"] - PLOT_MARGINS["r"]
# plot areas (width, height in px) a label must clear lines at: a 1,000 px page's, a 1,500 px one's, the PNG's
LABEL_PLOT_SIZES = ((NARROW_PLOT_PX, 290), (940, 300), (810, 330))
LABEL_FONT_PX, LABEL_CHAR_PX, MARKER_GAP_PX = 12, 7.2, 14 / 2 / 0.8 + 1  # plotly's gap beside a marker


def _plot_ranges(grid: Sequence[float], lines: Sequence, value: float, y_range):
    """(x range in log10, y range) of the plot, as plotly draws them, or None without budgets."""
    if not grid:
        return None
    x_range = log_ticks(grid)["range"]
    if y_range is None:  # plotly's autorange: the data's span and a little
        ys = [y for _, trace_y in lines for y in trace_y if y is not None and not math.isnan(y)] + [value]
        pad = 0.06 * ((max(ys) - min(ys)) or 1.0)
        y_range = [min(ys) - pad, max(ys) + pad]
    return x_range, list(y_range)


def _label_clashes(place, budget, value, text, lines, x_range, y_range) -> int:
    """How often the label at ``place`` leaves the plot (counted heavily) or crosses a line, over
    the plot sizes of ``LABEL_PLOT_SIZES``."""
    width, height = LABEL_CHAR_PX * len(text), LABEL_FONT_PX + 2
    if isinstance(place, str):  # a textposition: plotly sets the text a gap off the marker
        vertical, side = place.split()
        left = MARKER_GAP_PX if side == "right" else -MARKER_GAP_PX - width
        bottom = {"top": MARKER_GAP_PX, "bottom": -MARKER_GAP_PX - height}.get(vertical, -height / 2)
    else:  # a lifted label's centre
        left, bottom = place[0] - width / 2 - 3, place[1] - height / 2 - 3
        width, height = width + 6, height + 6  # its border and padding
    clashes = 0
    for plot_w, plot_h in LABEL_PLOT_SIZES:

        def px(x, y, plot_w=plot_w, plot_h=plot_h):
            u = (math.log10(max(x, 1)) - x_range[0]) / (x_range[1] - x_range[0]) * plot_w
            return u, (y - y_range[0]) / (y_range[1] - y_range[0]) * plot_h

        mx, my = px(budget, value)
        box = (mx + left - 2, my + bottom - 2, mx + left + width + 2, my + bottom + height + 2)
        if box[0] < 0 or box[2] > plot_w + 28 or box[1] < 0 or box[3] > plot_h:  # the right margin is 30 px
            clashes += 100
        for xs, ys in lines:
            drawn = [None if x is None or y is None or math.isnan(y) else px(x, y) for x, y in zip(xs, ys)]
            for a, b in zip(drawn, drawn[1:]):
                clashes += a is not None and b is not None and _crosses(a, b, box)
            for here in drawn:  # a point of a line, its marker 7 px across
                clashes += here is not None and _crosses(here, here, box)
    return clashes


def _crosses(a, b, box) -> bool:
    """Whether the segment from ``a`` to ``b`` meets the box (Liang-Barsky clipping)."""
    (x0, y0), (x1, y1) = a, b
    dx, dy = x1 - x0, y1 - y0
    low, high = 0.0, 1.0
    for p, q in ((-dx, x0 - box[0]), (dx, box[2] - x0), (-dy, y0 - box[1]), (dy, box[3] - y0)):
        if p == 0:
            if q < 0:
                return False
            continue
        t = q / p
        if p < 0:
            low = max(low, t)
        else:
            high = min(high, t)
        if low > high:
            return False
    return True


BUDGET_TICKS = 8  # budgets spanning less than two powers of ten tick at each budget, up to this many
NAMED_TICK_GAP = 0.12  # a power of ten nearer a named budget than this (in decades) gives way to it


def log_ticks(grid: Sequence[float], named: Sequence[float] = (), plot_px: float | None = None) -> dict:
    """Ticks at the powers of ten the budgets span, written 10, 100, 1k, 10k (plotly's own log
    ticks read '2, 5, 100, 2, 5, 1000'). Where fewer than two powers of ten fall inside the
    budgets' span (20 to 200 showed one tick, '100'), at the budgets themselves (at most
    ``BUDGET_TICKS``; else their ends), written in full.

    ``named``: budgets a sentence beside the chart names (the marker's "0.85 at 30"), each ticked
    too, written in full, a power of ten that close to one left out so their labels do not meet:
    the Gallery's curves, whose examples open at budget 20, 30 or 50, had their first tick at 100.

    ``plot_px``: the narrowest the plot is drawn (px); every budget of ``grid`` is ticked whose
    label has room there (``every_budget_ticks``)."""
    ticks = _log_ticks(grid)
    if ticks and plot_px:
        return every_budget_ticks(ticks, grid, named, plot_px)
    if not ticks or not named:
        return ticks
    low, high = ticks["range"]
    extra = sorted({max(int(round(b)), 1) for b in named if low <= math.log10(max(b, 1)) <= high})
    extra = [b for b in extra if b not in ticks["tickvals"]]
    if not extra:
        return ticks
    kept = [
        (value, text)
        for value, text in zip(ticks["tickvals"], ticks["ticktext"])
        if all(abs(math.log10(value) - math.log10(b)) >= NAMED_TICK_GAP for b in extra)
    ]
    merged = sorted(kept + [(b, f"{b:,}") for b in extra])
    return {**ticks, "tickvals": [v for v, _ in merged], "ticktext": [t for _, t in merged]}


TICK_GAP_PX = 12  # the least room between two tick labels
FILL_GAP_PX = 80  # a 2 or 5 times a power of ten is ticked only inside a wider gap between ticks


def every_budget_ticks(ticks: dict, grid: Sequence[float], named: Sequence[float], plot_px: float) -> dict:
    """Ticks at the budgets the curves have points at: Compare's and Explore's curves ticked only
    100, 200, 1k and 10k, and their points at 20 and 50 had none. Labels are kept in this order
    while each has room beside those kept at ``plot_px`` (a 1,000 px page's plot): ``named``, the
    first and last budgets, the others smallest first (a graph of 2M edges: 20 and 50 before 100),
    then the powers of ten between budgets (1k between 200 and 10,342), then their 2 and 5 times
    where the ticks either side are over ``FILL_GAP_PX`` apart (SmolLM2's curves left 2k to 10k and
    20k to 123,211 bare, 250 px each at 2,000 px; MMLU's 134 and 310 are near enough)."""
    low, high = ticks["range"]
    per_decade = plot_px / (high - low)
    budgets = sorted({max(int(round(b)), 1) for b in grid if low <= math.log10(max(b, 1)) <= high})
    marked = sorted({max(int(round(b)), 1) for b in named if low <= math.log10(max(b, 1)) <= high})
    powers = [10**p for p in range(math.ceil(low), math.floor(high) + 1)]
    between = [m * 10**p for p in range(math.floor(low), math.ceil(high)) for m in (2, 5)]
    between = [v for v in between if budgets and budgets[0] < v < budgets[-1]]
    fillers = set(between) - {*budgets, *marked, *powers}
    order = [*marked, *budgets[:1], *budgets[-1:], *budgets, *powers, *between]
    kept: list[int] = []
    for value in dict.fromkeys(order):
        room = [
            abs(math.log10(value) - math.log10(other)) * per_decade
            - (len(_tick_label(value)) + len(_tick_label(other))) * LABEL_CHAR_PX / 2
            for other in kept
        ]
        if value in fillers:  # only inside a gap over FILL_GAP_PX between the ticks either side
            sides = [
                max((k for k in kept if k < value), default=value),
                min((k for k in kept if k > value), default=value),
            ]
            room.append(math.log10(sides[1] / sides[0]) * per_decade - FILL_GAP_PX + TICK_GAP_PX)
        if all(gap >= TICK_GAP_PX for gap in room):
            kept.append(value)
    kept.sort()
    return {**ticks, "tickvals": kept, "ticktext": [_tick_label(value) for value in kept]}


def _tick_label(value: int) -> str:
    """20, 500, 1k, 20k, 1M; a budget that is no round thousand in full (10,342)."""
    for size, suffix in ((1_000_000, "M"), (1_000, "k")):
        if value >= size and value % size == 0:
            return f"{value // size:,}{suffix}"
    return f"{value:,}"


def _log_ticks(grid: Sequence[float]) -> dict:
    if not grid:
        return {}
    smallest, largest = max(min(grid), 1), max(max(grid), 1)
    low = math.floor(math.log10(smallest))
    high = math.ceil(math.log10(largest))
    values = [10**power for power in range(low, high + 1)]
    span = [math.log10(smallest) - 0.08, math.log10(largest) + 0.08]  # the ends' ticks show
    if sum(smallest <= value <= largest for value in values) >= 2:
        text = [_short_count(v) for v in values]
    else:
        budgets = sorted({max(int(round(b)), 1) for b in grid})
        if len(budgets) > BUDGET_TICKS:
            inside = [v for v in values if smallest <= v <= largest]
            budgets = sorted({budgets[0], budgets[-1], *inside})
        values, text = budgets, [f"{v:,}" for v in budgets]
    return {"tickvals": values, "ticktext": text, "range": span, "minor": {"showgrid": False}}


def _short_count(value: int) -> str:
    """10, 100, 1k, 10k, 100k, 1M."""
    for size, suffix in ((1_000_000, "M"), (1_000, "k")):
        if value >= size:
            return f"{value // size:,}{suffix}"
    return f"{value:,}"


def _label(text: object) -> str:
    """A name as plotly draws it in a label or a hover: its little HTML escaped. Given as a value
    (a trace's ``meta``, a bar's category), never written into a hover template, where plotly
    fills in ``%{...}``: the name once went into the template with '%' doubled and braces made
    parentheses, so a curve named '100% {q}' read '100%% (q)'."""
    return html.escape(str(text))


CURVE_COLUMNS = (
    "curve", "budget", "edges_kept", "percent_of_edges", "metric", "nfs", "ndf", "necessity", "completeness"
)  # fmt: skip


def curves_csv(curves: Mapping[str, Sequence], total_edges: int, kept: str = "edges") -> str:
    """One row per (curve, point): name, budget, edges kept, share, L(C(q)), NFS, NDF, necessity,
    completeness. Each figure as the JSON download stores it (the shortest text that reads back
    as the same float); an empty cell where a point has none (NaN: necessity or completeness not
    measured), never 'nan'. ``kept``: what a budget counts, edges or (edge, position) "units"
    (with ``total_edges`` then the graph's units), named in the two columns that count it."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow([*CURVE_COLUMNS[:2], f"{kept}_kept", f"percent_of_{kept}", *CURVE_COLUMNS[4:]])
    for name, points in curves.items():
        for point in sorted(points, key=lambda p: _value(p, "budget")):
            kept = _value(point, "n_edges")
            writer.writerow(
                [
                    name,
                    int(_value(point, "budget")),
                    int(kept),
                    f"{100 * kept / total_edges:.4f}" if total_edges else "",
                    *(_cell(point, column) for column in CURVE_COLUMNS[4:]),
                ]
            )
    return buffer.getvalue()


def _cell(point, name: str) -> str:
    """A figure of a point as CSV text: repr (exact), or empty where it is missing or NaN."""
    has = name in point if isinstance(point, Mapping) else hasattr(point, name)
    value = _value(point, name) if has else math.nan
    return "" if math.isnan(value) else repr(value)


TITLE_COLUMNS = 64  # a prompt longer than this (wide characters count two) is shortened in a title


def plain_title_text(text: object) -> str:
    """User text as plotly shows it literally in a title or label: one line, no control or
    direction characters (U+202E would turn the rest of the title round), '<b>' and '&' escaped as
    entities (plotly renders a little HTML), and '$' written as an entity (text between two '$'
    is typeset as LaTeX where MathJax is loaded)."""
    text = " ".join(str(text).split())
    text = "".join(c for c in text if unicodedata.category(c) not in ("Cc", "Cf", "Cs", "Co", "Cn"))
    return html.escape(text, quote=False).replace("$", "&#36;")


def shortened(text: str, columns: int = TITLE_COLUMNS) -> tuple[str, bool]:
    """(``text`` cut to ``columns`` display columns, an ellipsis ending it where cut; whether cut)."""
    width = 0
    for index, char in enumerate(text):
        width += 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
        if width > columns - 1 and index < len(text) - 1:
            return text[:index].rstrip() + "\u2026", True
    return text, False


def image_title(model_id: str, method: str, prompt: str, what: str = "NDF against edge budget") -> str:
    """A downloaded figure's title: what it plots, the method and the model, then the prompt (its
    user text shown literally, never as markup; shortened with an ellipsis when long, and said to
    be)."""
    clean = " ".join("".join(c for c in str(prompt) if unicodedata.category(c)[0] != "C").split())
    short, cut = shortened(clean)
    said = f" (shortened from {len(clean):,} characters)" if cut else ""
    return (
        f"{plain_title_text(what)}: {plain_title_text(method)} on {plain_title_text(model_id)}"
        f"<br>prompt \u201c{plain_title_text(short)}\u201d{said}"
    )


def figure_html(figure: go.Figure) -> str:
    """A standalone interactive page of a figure, plotly.js inline (works offline)."""
    return figure.to_html(include_plotlyjs=True, full_html=True)


def figure_image(figure: go.Figure, image_format: str = "png") -> bytes | None:
    """PNG or SVG bytes through kaleido, or None when kaleido or a Chrome/Chromium is missing.
    Tried twice: on a loaded machine kaleido's browser once failed to answer in time (the suite's
    SVG test, at load average 4-5), and the download then was an empty file."""
    for _ in range(2):
        try:
            return figure.to_image(
                format=image_format, width=900, height=450, scale=2 if image_format == "png" else 1
            )
        except Exception:  # kaleido absent, no browser to render with, or one that did not answer
            continue
    return None


def candidate_figure(rows: Sequence[Mapping], budget: int, height: int = 330) -> go.Figure:
    """Each Best-of-N candidate's NDF on the original prompt at ``budget``, the winner marked.

    ``rows``: {name, ndf, winner} per candidate (``ui.bon.candidate_ndf``)."""
    figure = go.Figure(
        go.Bar(
            x=[_label(row["name"]) for row in rows],
            y=[row["ndf"] for row in rows],
            marker_color=[SERIES_COLOURS[1] if row["winner"] else SERIES_COLOURS[0] for row in rows],
            text=[f"{row['ndf']:.2f}" for row in rows],
            textposition="outside",
            constraintext="none",  # plotly shrank a label wider than its bar to an unreadable size
            cliponaxis=False,
            hovertemplate="%{x}: NDF %{y:.3f}<extra></extra>",
        )
    )
    # the winner is named under its bar: 'winner · 0.60' above a bar 30 px wide shrank to 4 px type
    figure.update_xaxes(
        tickmode="array",
        tickvals=[_label(row["name"]) for row in rows],
        ticktext=[_label(row["name"]) + ("<br><b>winner</b>" if row["winner"] else "") for row in rows],
    )
    figure.update_layout(
        title=f"each candidate's NDF on the original prompt at budget {int(budget):,}",
        yaxis={"title": "NDF", "range": [0, 1.15]},
        height=height,
        margin={"l": 60, "r": 20, "t": 50, "b": 40},
        template="plotly_white",
    )
    return figure
