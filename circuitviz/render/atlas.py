"""The circuit atlas drawn: curves with their bands, the consensus graph, the cluster map.

Plain data in (the atlas's dicts and arrays), plotly figures and HTML out; nothing here touches
a model. Prompt text shown on hover is escaped: it is the user's text.
"""

from __future__ import annotations

import html
import math
from collections.abc import Collection, Mapping, Sequence

import numpy
import plotly.graph_objects as go
import torch

from ..core.graph import GraphSpec
from .curves import FOOT_LEGEND, SERIES_COLOURS, log_ticks
from .graph_html import GraphDrawing, circuit_graph_html

SCORE_NAMES = {"ndf": "NDF", "nfs": "NFS"}


def _rgba(colour: str, alpha: float) -> str:
    colour = colour.lstrip("#")
    red, green, blue = (int(colour[i : i + 2], 16) for i in (0, 2, 4))
    return f"rgba({red},{green},{blue},{alpha})"


def _interval(band: Mapping) -> str:
    """The hover's words for a point's interval and its count of prompts."""
    if band["n"] < 2:
        return f"{band['n']} prompt: no interval"
    return f"95% interval {band['low']:.3f} to {band['high']:.3f}, {band['n']:,} prompts"


def _band(figure: go.Figure, label: str, bands: Sequence[Mapping], x: list, colour: str) -> None:
    """The 95 % interval of a series' mean, filled between its limits."""
    figure.add_trace(
        go.Scatter(
            x=x + x[::-1],
            y=[b["high"] for b in bands] + [b["low"] for b in bands][::-1],
            fill="toself",
            fillcolor=_rgba(colour, 0.18),
            mode="lines",  # plotly's default under 20 points, lines+markers, marked the band's limits unnamed
            line={"width": 0},
            hoverinfo="skip",
            name=html.escape(f"{label}: 95% interval of the mean"),
        )
    )


def _axis_title(series: Mapping, over_positions: Collection[str]) -> str:
    """The budget axis's title: what the drawn series' budgets count."""
    units = [label in over_positions for label in series]
    if all(units) and units:
        return "(edge, position) unit budget (log scale)"
    if any(units):
        return "budget: edges, or (edge, position) units for a series over positions (log scale)"
    return "edge budget (log scale)"


# the band chart's plot on a 1,000 px page (572 px in Chromium since the page's side margins
# shrink there to 24 px; 462 px with Streamlit's 80 px, when the stored IOI atlas's 2,068 and 5,171
# lost their ticks): its ticks are spaced for it
BAND_PLOT_PX = 570


def band_figure(
    series: Mapping[str, Sequence[Mapping]],
    consensus: Mapping[str, Sequence[Mapping]] | None = None,
    *,
    score: str = "ndf",
    current_budget: int | None = None,
    height: int = 400,
    over_positions: Collection[str] = (),
) -> go.Figure:
    """Mean faithfulness over the dataset against the budget (log x), one line per method with
    its 95 % band; each method's consensus circuit, evaluated on every prompt, dashed.
    ``over_positions``: the series whose budgets count (edge, position) units, said so in their
    hover and in the axis's title (a unit budget read 'budget 5,000 edges')."""
    figure = go.Figure()
    name = SCORE_NAMES.get(score, score)
    for index, (label, bands) in enumerate(series.items()):
        colour = SERIES_COLOURS[index % len(SERIES_COLOURS)]
        bands = [b for b in bands if not math.isnan(b["mean"])]
        if not bands:
            continue
        x = [max(b["budget"], 1) for b in bands]
        counts = "units" if label in over_positions else "edges"
        # one prompt has no interval (the atlas gives its mean as both limits): a band of no width
        # was named in the legend, and the hover read '95% interval 0.247 to 0.247, 1 prompts'
        if any(b["n"] >= 2 for b in bands):
            _band(figure, label, bands, x, colour)
        figure.add_trace(
            go.Scatter(
                x=x,
                y=[b["mean"] for b in bands],
                mode="lines+markers",
                name=html.escape(label),
                line={"color": colour, "width": 2.5},
                # the label is a value the template reads, never part of the template: plotly fills
                # in '%{y}' written in a template (a batch folder's settings could hold it), not in a value
                customdata=[[_interval(b), html.escape(label)] for b in bands],
                hovertemplate=(
                    f"%{{customdata[1]}}<br>budget %{{x:,}} {counts}<br>mean {name} %{{y:.3f}} (%{{customdata[0]}})"
                    "<extra></extra>"
                ),
            )
        )
        for band_list in [(consensus or {}).get(label) or []]:
            points = [b for b in band_list if not math.isnan(b["mean"])]
            if points:
                figure.add_trace(
                    go.Scatter(
                        x=[max(b["budget"], 1) for b in points],
                        y=[b["mean"] for b in points],
                        mode="lines+markers",
                        name=html.escape(f"{label}: one consensus circuit"),
                        line={"color": colour, "width": 2, "dash": "dash"},
                        marker={"symbol": "diamond"},
                        customdata=[[b["n_edges"], b["threshold"]] for b in points],
                        hovertemplate=(
                            "consensus circuit (edges in ≥ %{customdata[1]:.0%} of circuits)<br>"
                            f"budget %{{x:,}} {counts}: %{{customdata[0]:,}} edges<br>mean {name} on every prompt %{{y:.3f}}"
                            "<extra></extra>"
                        ),
                    )
                )
    if current_budget is not None:
        figure.add_vline(x=max(int(current_budget), 1), line={"color": "#555", "dash": "dot", "width": 1.5})
    budgets = [max(b["budget"], 1) for bands in series.values() for b in bands]
    # the axis spans 0 to 1 at least, as Explore's curve does: left to itself it zoomed onto the
    # figures, and a curve near 0 (an MMLU question's mean NDF of 5e-7) was ticked '0, 100n, 500n'
    # over the full height, as if it rose to something
    drawn = [value for trace in figure.data for value in (trace.y or ()) if not math.isnan(value)]
    low, high = min([0.0, *drawn]), max([1.0, *drawn])
    pad = 0.04 * (high - low)
    named = sum(1 for trace in figure.data if trace.name)
    figure.update_layout(
        # the legend's rows under the plot take height of their own (four methods' twelve entries,
        # at y -0.2 inside 400 px, lay over the axis title and scrolled at 1,000 px)
        height=height + 18 * named,
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        xaxis={
            "type": "log",
            "title": _axis_title(series, over_positions),
            # every budget with a point ticked where its label has room, the slider's budget (the
            # dotted line) first, as Explore's curve is: at the powers of ten alone a chart of 10 to
            # 500 read '10, 100' and MMLU's first point, at 21, had no tick
            **log_ticks(budgets, [] if current_budget is None else [current_budget], plot_px=BAND_PLOT_PX),
        },
        yaxis={"title": f"mean {name} over the prompts", "range": [low - pad, high + pad]},
        # at the figure's foot, below the axis title, as Explore's curve has it
        legend=FOOT_LEGEND,
    )
    return figure


def consensus_graph_html(
    spec: GraphSpec, frequency: numpy.ndarray, edges: Sequence[int], *, title: str = "", max_edges: int = 1500
) -> GraphDrawing:
    """The consensus circuit: its edges drawn with width (and score) = the share of prompts whose
    circuit holds the edge."""
    forward, backward = spec.edge_index
    share = torch.zeros(spec.n_forward, spec.n_backward, device="cpu")  # drawings are made on the CPU
    share[forward, backward] = torch.as_tensor(numpy.asarray(frequency, dtype=numpy.float32))
    mask = torch.zeros(spec.n_forward, spec.n_backward, dtype=torch.bool, device="cpu")
    index = torch.as_tensor(numpy.asarray(edges, dtype=numpy.int64))
    mask[forward[index], backward[index]] = True
    return circuit_graph_html(
        spec,
        share,
        mask,
        title=title,
        max_edges=max_edges,
        width_key="the share of prompts whose circuit holds the edge",
    )


def cluster_map_figure(
    coords: numpy.ndarray, labels: numpy.ndarray, hover: Sequence[str], *, height: int = 420
) -> go.Figure:
    """Every prompt as a point, close to prompts with similar circuits, coloured by cluster."""
    figure = go.Figure()
    for cluster in sorted(set(int(c) for c in labels)):
        inside = numpy.flatnonzero(labels == cluster)
        figure.add_trace(
            go.Scattergl(
                x=coords[inside, 0],
                y=coords[inside, 1],
                mode="markers",
                name=f"cluster {cluster} ({inside.size})",
                marker={"color": SERIES_COLOURS[cluster % len(SERIES_COLOURS)], "size": 7, "opacity": 0.8},
                text=[html.escape(hover[i]) for i in inside],
                hovertemplate="%{text}<extra></extra>",
            )
        )
    figure.update_layout(
        height=height,
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        xaxis={"showticklabels": False, "title": "circuit map (Jaccard distance, MDS)"},
        yaxis={"showticklabels": False},
        legend={"orientation": "h", "y": -0.1},
    )
    return figure


def similarity_figure(similarity: numpy.ndarray, *, height: int = 320) -> go.Figure:
    """Mean Jaccard similarity of circuits within (diagonal) and between clusters."""
    # short tick labels, every one shown, and cell text of a readable size: at 1,000 px the axis
    # named clusters 0, 2 and 4 only and the figures were a few pixels high (an audit)
    names = [str(c) for c in range(similarity.shape[0])]
    figure = go.Figure(
        go.Heatmap(
            z=similarity,
            x=names,
            y=names,
            zmin=0,
            zmax=1,
            colorscale="Blues",
            # ".34" rather than "0.34": three clusters' cells are about 21 px wide beside the map at 1,000 px
            text=[["—" if v != v else f"{v:.2f}".removeprefix("0") for v in row] for row in similarity],
            texttemplate="%{text}",
            textfont={"size": 11},
            hovertemplate="cluster %{y} vs cluster %{x}: mean Jaccard %{z:.3f}<extra></extra>",
        )
    )
    every = {"type": "category", "tickmode": "array", "tickvals": names, "title": {"text": "cluster"}}
    figure.update_layout(
        height=height,
        margin={"l": 10, "r": 10, "t": 84, "b": 10},
        xaxis=every,
        yaxis={**every, "autorange": "reversed"},
        title={
            "text": "circuits' mean Jaccard<br>similarity (diagonal: two<br>prompts of one cluster)",
            "font": {"size": 13},
        },
    )
    figure.update_traces(colorbar={"title": {"text": "Jaccard"}})
    return figure
