"""The downloads of a result: the circuit as JSON (in the EAP-IG library's format), graph HTML, edges and curve as CSV, PNG, SVG."""

from __future__ import annotations

import json
import shutil

import streamlit as st

from .. import render
from ..core.results import eap_graph_json


def _browser_for_images() -> bool:
    """Whether kaleido (plotly's image export) and a Chrome/Chromium to drive are both here."""
    try:
        import kaleido  # noqa: F401
    except ImportError:
        return False
    names = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
    return any(shutil.which(name) for name in names)


def downloads(result, budget: int, drawing, key: str, point=None, mask=None, view=None) -> None:
    """Circuit JSON (EAP-IG format; with ``mask``, the edited circuit, and ``view``: the pins,
    groups, edit and clicked node), graph HTML, curve PNG/SVG/HTML/CSV and edges CSV."""
    stem = f"circuit-{result.method}-{budget}"
    curves = {result.method: result.curve}
    point = point or result.point(budget)

    def figure():
        return render.curve_figure(
            curves, result.graph.n_edges, current_budget=budget, marker_value=point.ndf if point else None
        )

    # one row that wraps: in four fixed columns a narrow page cut the longer labels to "Circuit JSON (…"
    row = st.container(horizontal=True, key=f"{key}.downloads")
    row.download_button(
        # the format is the EAP-IG library's, whatever method found the circuit: a label naming
        # EAP-IG alone read, under an Edge Pruning circuit, as if EAP-IG had found it
        "Circuit (JSON)",
        data=lambda: json.dumps(circuit_json(result, budget, mask, view)),
        file_name=f"{stem}.json",
        mime="application/json",
        key=f"{key}.json",
        help=(
            f"This {result.method} circuit in the EAP-IG library's graph format (each edge's score and "
            "whether it is in the circuit), readable by `circuitviz evaluate --circuit`"
        ),
    )
    row.download_button(
        "Graph (HTML)", data=drawing.html, file_name=f"{stem}.html", mime="text/html", key=f"{key}.html"
    )
    row.download_button(
        "Edges (CSV)",
        data=lambda: render.edges_csv(result.graph, result.scores, result.circuit(budget)),
        file_name=f"{stem}-edges.csv",
        mime="text/csv",
        key=f"{key}.edges",
    )
    row.download_button(
        "Curve (CSV)",
        data=render.curves_csv(curves, result.graph.n_edges),
        file_name=f"ndf-curve-{result.method}.csv",
        mime="text/csv",
        key=f"{key}.curvecsv",
    )
    row.download_button(
        "Curve (interactive HTML)",
        data=lambda: render.figure_html(figure()),
        file_name=f"ndf-curve-{result.method}.html",
        mime="text/html",
        key=f"{key}.curvehtml",
    )
    if _browser_for_images():
        for kind, mime in (("png", "image/png"), ("svg", "image/svg+xml")):
            row.download_button(
                f"Curve ({kind.upper()})",
                data=lambda kind=kind: render.figure_image(figure(), kind) or b"",
                file_name=f"ndf-curve-{result.method}.{kind}",
                mime=mime,
                key=f"{key}.{kind}",
            )
    else:
        st.caption(
            "PNG/SVG export needs kaleido and Chrome or Chromium; use the chart's camera icon, "
            "or the HTML/CSV downloads."
        )


def circuit_json(result, budget: int, mask=None, view=None) -> dict:
    """EAP-IG JSON of the circuit shown (for iBoN/BoN-CSM at a new budget: that circuit; with
    ``mask``: the edited circuit, whose ``in_graph`` edges ``circuitviz evaluate --circuit``
    measures; ``view``: the saved view under ``"view"``)."""
    evaluated = result.point(budget) is not None and mask is None
    data = result.to_eap_json(budget if evaluated else None)
    if not evaluated:
        data.update(
            eap_graph_json(result.graph, result.scores, result.circuit(budget) if mask is None else mask)
        )
        data["budget"] = int(budget)
    if view:
        data["view"] = view
    return data
