"""Faithfulness-versus-budget curves as plotly figures, CSV and standalone HTML.

Curves arrive as plain points (``CurvePoint`` or dicts with budget, n_edges, metric, nfs, ndf),
one list per method or candidate, so the same figure serves one result, a comparison of
methods, and Best-of-N candidates.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from .graph_html import KIND_COLOURS

# a palette that stays distinguishable for colour-blind readers (Okabe-Ito, minus yellow)
SERIES_COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")
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
) -> go.Figure:
    """NDF (or NFS) against the number of edges kept, one line per curve, log-scaled x.

    ``current_budget``: a vertical marker at that budget; ``marker_value`` a point on it (the
    faithfulness of the circuit now drawn), labelled with its value.
    """
    figure = go.Figure()
    for index, (name, points) in enumerate(curves.items()):
        points = sorted(points, key=lambda p: _value(p, "budget"))
        budgets = [_value(p, "budget") for p in points]
        kept = [_value(p, "n_edges") for p in points]
        values = [_value(p, score) for p in points]
        share = [100 * k / total_edges if total_edges else math.nan for k in kept]
        figure.add_trace(
            go.Scatter(
                x=[max(b, 1) for b in budgets],
                y=values,
                mode="lines+markers",
                name=str(name),
                line={"color": SERIES_COLOURS[index % len(SERIES_COLOURS)], "width": 2.5},
                marker={"size": 7},
                customdata=list(zip(kept, share)),
                hovertemplate=(
                    f"{_plain(name)}<br>budget %{{x:,}} edges<br>kept after pruning %{{customdata[0]:,}}"
                    f" (%{{customdata[1]:.2f}}%)<br>{SCORE_NAMES.get(score, score)} %{{y:.3f}}<extra></extra>"
                ),
            )
        )
    if current_budget is not None:
        figure.add_vline(
            x=max(int(current_budget), 1),
            line={"color": KIND_COLOURS["logits"], "dash": "dot", "width": 2},
        )
        if marker_value is not None and not math.isnan(marker_value):
            figure.add_trace(
                go.Scatter(
                    x=[max(int(current_budget), 1)],
                    y=[marker_value],
                    mode="markers+text",
                    marker={"size": 14, "color": KIND_COLOURS["logits"], "symbol": "diamond"},
                    text=[f"{marker_value:.2f} at {int(current_budget):,}"],
                    textposition="top left",
                    name="shown now",
                    hovertemplate="shown now: %{y:.3f} at %{x:,} edges<extra></extra>",
                )
            )
    label = SCORE_NAMES.get(score, score)
    figure.update_layout(
        title={"text": title} if title else None,
        height=height,
        margin={"l": 60, "r": 20, "t": 40 if title else 20, "b": 50},
        xaxis={"title": "edge budget (log scale)", "type": "log"},
        yaxis={"title": label, "range": [-0.03, 1.05]} if score == "ndf" else {"title": label},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0},
        hovermode="closest",
        template="plotly_white",
    )
    return figure


def readable_budget(curve: Sequence, max_edges: int = 500, good_ndf: float = 0.8) -> int:
    """A budget worth showing first: the smallest whose circuit reaches ``good_ndf`` within
    ``max_edges`` edges (a graph people can read), else the most faithful within that size."""
    small = [p for p in curve if _value(p, "n_edges") <= max_edges] or list(curve)
    good = [p for p in small if _value(p, "ndf") >= good_ndf]
    if good:
        return int(min(_value(p, "budget") for p in good))
    best = max(small, key=lambda p: (_value(p, "ndf"), -_value(p, "budget")))
    return int(_value(best, "budget"))


def curve_dips(curve: Sequence, min_drop: float = 0.1) -> list[tuple[int, float, int, float]]:
    """Where a curve falls as the budget grows: (smaller budget, its NDF, larger budget, its
    lower NDF) for each point at least ``min_drop`` below the best NDF of any smaller budget."""
    points = sorted(curve, key=lambda p: _value(p, "budget"))
    dips = []
    best = None
    for point in points:
        value = _value(point, "ndf")
        if math.isnan(value):
            continue
        if best is not None and value <= _value(best, "ndf") - min_drop:
            dips.append(
                (int(_value(best, "budget")), _value(best, "ndf"), int(_value(point, "budget")), value)
            )
        if best is None or value > _value(best, "ndf"):
            best = point
    return dips


def _plain(text: object) -> str:
    """Plotly hover templates treat %{...} specially and render a little HTML: neutralise both."""
    import html

    return html.escape(str(text)).replace("%", "%%").replace("{", "(").replace("}", ")")


def curves_csv(curves: Mapping[str, Sequence], total_edges: int) -> str:
    """One row per (curve, point): name, budget, edges kept, share, L(C(q)), NFS, NDF."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["curve", "budget", "edges_kept", "percent_of_edges", "metric", "nfs", "ndf"])
    for name, points in curves.items():
        for point in sorted(points, key=lambda p: _value(p, "budget")):
            kept = _value(point, "n_edges")
            writer.writerow(
                [
                    name,
                    int(_value(point, "budget")),
                    int(kept),
                    f"{100 * kept / total_edges:.4f}" if total_edges else "",
                    f"{_value(point, 'metric'):.6g}",
                    f"{_value(point, 'nfs'):.6g}",
                    f"{_value(point, 'ndf'):.6g}",
                ]
            )
    return buffer.getvalue()


def figure_html(figure: go.Figure) -> str:
    """A standalone interactive page of a figure, plotly.js inline (works offline)."""
    return figure.to_html(include_plotlyjs=True, full_html=True)


def figure_image(figure: go.Figure, image_format: str = "png") -> bytes | None:
    """PNG or SVG bytes through kaleido, or None when kaleido or a Chrome/Chromium is missing."""
    try:
        return figure.to_image(
            format=image_format, width=900, height=450, scale=2 if image_format == "png" else 1
        )
    except Exception:  # kaleido absent, or it found no browser to render with
        return None


def candidate_figure(rows: Sequence[Mapping], budget: int, height: int = 330) -> go.Figure:
    """Each Best-of-N candidate's NDF on the original prompt at ``budget``, the winner marked.

    ``rows``: {name, ndf, winner} per candidate (``ui.bon.candidate_ndf``)."""
    figure = go.Figure(
        go.Bar(
            x=[_plain(row["name"]) for row in rows],
            y=[row["ndf"] for row in rows],
            marker_color=[SERIES_COLOURS[1] if row["winner"] else SERIES_COLOURS[0] for row in rows],
            text=[("winner · " if row["winner"] else "") + f"{row['ndf']:.2f}" for row in rows],
            textposition="outside",
            hovertemplate="%{x}: NDF %{y:.3f}<extra></extra>",
        )
    )
    figure.update_layout(
        title=f"each candidate's NDF on the original prompt at {int(budget):,} edges",
        yaxis={"title": "NDF", "range": [0, 1.15]},
        height=height,
        margin={"l": 60, "r": 20, "t": 50, "b": 40},
        template="plotly_white",
    )
    return figure
