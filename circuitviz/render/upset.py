"""UpSet plots: which edges several circuits share, as exclusive intersections (plotly).

An UpSet plot replaces a Venn diagram when there are more than three sets: one bar per
combination of sets, counting the edges that are in exactly those sets; a dot matrix below says
which sets a bar combines. Used for Best-of-N candidates and for method comparisons.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import plotly.graph_objects as go
from plotly.subplots import make_subplots

BAR_COLOUR = "#0072B2"
DOT_ON = "#222222"
DOT_OFF = "#dddddd"
UPSET_BARS = 20  # the most bars a figure draws (the largest intersections)


@dataclass(frozen=True)
class Intersection:
    """Edges that are in exactly ``members`` (and in no other set)."""

    members: tuple[str, ...]
    edges: frozenset[str]

    @property
    def label(self) -> str:
        return " & ".join(self.members)

    @property
    def size(self) -> int:
        return len(self.edges)


def exclusive_intersections(sets: Mapping[str, set[str]]) -> list[Intersection]:
    """Every non-empty exclusive intersection, largest first (then by number of members)."""
    names = list(sets)
    membership: dict[str, tuple[str, ...]] = {}
    for edge in set().union(*sets.values()) if sets else set():
        membership[edge] = tuple(name for name in names if edge in sets[name])
    groups: dict[tuple[str, ...], set[str]] = {}
    for edge, members in membership.items():
        groups.setdefault(members, set()).add(edge)
    found = [Intersection(members, frozenset(edges)) for members, edges in groups.items()]
    found.sort(key=lambda item: (-item.size, -len(item.members), [names.index(m) for m in item.members]))
    return found


def cut_sentence(sets: Mapping[str, set[str]], max_bars: int = UPSET_BARS, what: str = "circuit") -> str:
    """What an UpSet of ``sets`` leaves out when it draws only its ``max_bars`` largest
    intersections ('' when it draws them all): six Best-of-N candidates of SmolLM2-135M made 41
    bars, and the plot showed 20 with nothing saying the rest, or the edges in them, were not
    there (an audit). ``what``: the sets' noun ("candidate")."""
    found = exclusive_intersections(sets)
    if len(found) <= max_bars:
        return ""
    drawn, rest = found[:max_bars], found[max_bars:]
    sizes = sorted({item.size for item in rest})
    held = (
        f"{sizes[0]:,} edge{'s' if sizes[0] != 1 else ''} each"
        if len(sizes) == 1
        else (f"{sizes[0]:,} to {sizes[-1]:,} edges each")
    )
    total = sum(item.size for item in found)
    return (
        f"The plot draws the {max_bars} largest of the {len(found)} intersections, holding "
        f"{sum(item.size for item in drawn):,} of the {total:,} edges in any {what}; the other "
        f"{len(rest)} hold {held}."
    )


def shared_by_all(sets: Mapping[str, set[str]]) -> set[str]:
    """Edges in every set (the core subcircuit)."""
    values = list(sets.values())
    return set.intersection(*values) if values else set()


def upset_figure(
    sets: Mapping[str, set[str]],
    *,
    max_bars: int = UPSET_BARS,
    selected: tuple[str, ...] | None = None,
    height: int = 460,
) -> tuple[go.Figure, list[Intersection]]:
    """The UpSet figure of ``sets`` and the intersections it draws (at most ``max_bars``).

    ``selected``: the members of one intersection to draw in a highlight colour.
    """
    names = list(sets)
    shown = exclusive_intersections(sets)[:max_bars]
    figure = make_subplots(
        rows=2,
        cols=2,
        column_widths=[0.22, 0.78],
        row_heights=[0.62, 0.38],
        shared_xaxes=True,
        shared_yaxes=True,
        horizontal_spacing=0.02,
        vertical_spacing=0.03,
        specs=[[None, {"type": "xy"}], [{"type": "xy"}, {"type": "xy"}]],
    )
    columns = list(range(len(shown)))
    colours = ["#D55E00" if selected and item.members == tuple(selected) else BAR_COLOUR for item in shown]
    figure.add_trace(
        go.Bar(
            x=columns,
            y=[item.size for item in shown],
            marker_color=colours,
            text=[item.size for item in shown],
            textposition="outside",
            constraintext="none",  # plotly shrank '113' over a narrow bar to an unreadable size
            cliponaxis=False,
            customdata=[item.label for item in shown],
            hovertemplate="%{customdata}<br>%{y} edges in exactly these circuits<extra></extra>",
            showlegend=False,
        ),
        row=1,
        col=2,
    )
    rows = list(range(len(names)))
    for column, item in enumerate(shown):
        on = [row for row, name in enumerate(names) if name in item.members]
        off = [row for row, name in enumerate(names) if name not in item.members]
        figure.add_trace(
            go.Scatter(
                x=[column] * len(off),
                y=off,
                mode="markers",
                marker={"size": 11, "color": DOT_OFF},
                hoverinfo="skip",
                showlegend=False,
            ),
            row=2,
            col=2,
        )
        figure.add_trace(
            go.Scatter(
                x=[column] * len(on),
                y=on,
                mode="markers+lines",
                marker={"size": 11, "color": colours[column] if selected else DOT_ON},
                line={"color": colours[column] if selected else DOT_ON, "width": 2},
                hovertext=item.label,
                hoverinfo="text",
                showlegend=False,
            ),
            row=2,
            col=2,
        )
    figure.add_trace(
        go.Bar(
            x=[len(sets[name]) for name in names],
            y=rows,
            orientation="h",
            marker_color="#7f7f7f",
            hovertemplate="%{x} edges<extra></extra>",
            showlegend=False,
        ),
        row=2,
        col=1,
    )
    # each set's size beside its name: written on its bar, ten sets' bars are too thin to read it
    sized = [f"{name} ({len(sets[name]):,})" for name in names]
    figure.update_xaxes(autorange="reversed", title_text="set size", row=2, col=1)
    figure.update_yaxes(tickmode="array", tickvals=rows, ticktext=sized, row=2, col=1, autorange="reversed")
    figure.update_yaxes(showticklabels=False, row=2, col=2, autorange="reversed")
    figure.update_xaxes(showticklabels=False, row=2, col=2)
    figure.update_xaxes(showticklabels=False, row=1, col=2)
    figure.update_yaxes(title_text="edges", row=1, col=2)
    figure.update_layout(
        height=height, margin={"l": 10, "r": 10, "t": 20, "b": 40}, template="plotly_white", bargap=0.35
    )
    return figure, shown
