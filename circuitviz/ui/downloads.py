"""The downloads of a result: the circuit as JSON (in the EAP-IG library's format), graph HTML, edges and curve as CSV, PNG, SVG."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import unicodedata

import streamlit as st

from .. import render
from ..core.results import eap_graph_json, json_safe
from ..details.base import found_edges
from ..methods.registry import method_traits
from ..models.catalog import looks_like_path
from ..render.curves import image_title

PROMPT_SLUG = 32  # characters of the prompt a file name carries; its hash tells prompts apart
MODEL_SLUG = 40
NAME_LIMIT = 160  # a file name's length at most (file systems take 255 bytes)


def _browser_for_images() -> bool:
    """Whether kaleido (plotly's image export) and a Chrome/Chromium to drive are both here."""
    try:
        import kaleido  # noqa: F401
    except ImportError:
        return False
    names = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
    return any(shutil.which(name) for name in names)


def run_hash(result) -> str:
    """8 hex digits of a hash of the whole run: the task (prompt, corrupted prompt, answer, foils,
    metric), the model, the method and its settings. Two runs that differ anywhere (prompts a
    slug cannot tell apart, or the same prompt with other settings) get other names."""
    run = {
        "task": result.task.to_dict(),
        "model": str(result.model_id),
        "method": str(result.method),
        "settings": getattr(result, "config", None) or {},
    }
    text = json.dumps(run, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]


def slug(text: str, limit: int, keep: str = "", fallback: str = "x") -> str:
    """``text`` as a safe piece of a file name: ASCII letters, digits, '-' and the characters of
    ``keep`` (accents dropped, every other run of characters one '-'), at most ``limit``
    characters, cut at a word where it can be; ``fallback`` where nothing is left (a prompt of
    emoji, punctuation or another script only)."""
    text = unicodedata.normalize("NFKD", str(text)).encode("ascii", "ignore").decode("ascii")
    text = re.sub(f"[^A-Za-z0-9{re.escape(keep)}]+", "-", text)
    text = re.sub(r"\.{2,}", ".", text).strip("-._")
    if len(text) > limit:
        cut = text[: limit + 1]
        text = cut[: cut.rfind("-")] if "-" in cut[limit // 2 :] else text[:limit]
        text = text.strip("-._")
    return text or fallback


METHOD_SLUG = 24


def file_name(result, kind: str, ext: str, budget: int | None = None, method_limit: int = METHOD_SLUG) -> str:
    """The one name of every download of ``result``: what it holds (``kind``: circuit, graph,
    edges, curve), the method, the budget (of a file whose content depends on it; None: all
    budgets), the model, the prompt's first words and a hash of the whole run (``run_hash``), e.g.
    ``circuit_<method>_budget-200_gpt2_when-mary-and-john-went-to-the_3fa2c1d9.json``.
    Only [A-Za-z0-9._-], never a path, at most ``NAME_LIMIT`` characters, for any prompt."""
    model = str(result.model_id)
    if looks_like_path(model):  # a folder of the server's disk: its last part names it
        model = re.split(r"[\\/]", model.rstrip("/\\"))[-1] or "model"
    parts = [
        slug(kind, 20, fallback="file"),
        slug(result.method, method_limit, keep=".", fallback="method"),
        *([f"budget-{int(budget)}"] if budget is not None else []),
        slug(model.replace("/", "_"), MODEL_SLUG, keep="._", fallback="model"),
        slug(result.task.clean, PROMPT_SLUG, fallback="prompt").lower(),
        run_hash(result),
    ]
    name = "_".join(parts)
    extension = slug(ext, 8, fallback="bin")
    return f"{name[: NAME_LIMIT - len(extension) - 1]}.{extension}"


def curve_title(result) -> str:
    """The downloaded curve's title: the model, the method and the prompt (plain text)."""
    label = method_traits(result.method).label
    method = result.method if label == result.method else f"{label} [{result.method}]"
    return image_title(result.model_id, method, result.task.clean)


def downloads(
    result, budget: int, drawing, key: str, point=None, mask=None, view=None, edited_point=None
) -> None:
    """Circuit JSON (EAP-IG format; with ``mask``, the edited circuit, and ``view``: the pins,
    groups, edit and clicked node), graph HTML, curve PNG/SVG/HTML/CSV and edges CSV. Each file
    is named by ``file_name``; the curve's figures carry a title (``curve_title``): the page's
    own chart has none, the task's lines above it say the same. With ``mask`` the circuit's files
    (JSON, graph, edges) hold the edited circuit and their names say ``-edited`` (the edges CSV
    held the method's 82 edges beside an edited 5-edge JSON); the curve's are the method's.
    ``edited_point``: the edited circuit's measured figures, for the JSON's ``edited`` block."""
    curves = {result.method: result.curve}
    point = point or result.point(budget)

    def name(kind: str, ext: str, at_budget: bool = True) -> str:
        return file_name(result, kind, ext, budget if at_budget else None)

    edited = "" if mask is None else "-edited"  # the circuit's files: the edited circuit's

    def figure():
        return render.curve_figure(
            curves,
            result.graph.n_edges,
            current_budget=budget,
            marker_value=point.ndf if point else None,
            title=curve_title(result),
        )

    # one row that wraps: in four fixed columns a narrow page cut the longer labels to "Circuit JSON (…"
    row = st.container(horizontal=True, key=f"{key}.downloads")
    row.download_button(
        # the format is the EAP-IG library's, whatever method found the circuit: a label naming
        # EAP-IG alone read, under an Edge Pruning circuit, as if EAP-IG had found it
        "Circuit (JSON)",
        data=lambda: json.dumps(circuit_json(result, budget, mask, view, edited_point)),
        file_name=name("circuit" + edited, "json"),
        mime="application/json",
        key=f"{key}.json",
        on_click="ignore",  # no rerun: a rerun drops the other buttons' files (a quick second click got none)
        help=(
            f"This {result.method} circuit in the EAP-IG library's graph format (each edge's score and "
            "whether it is in the circuit), readable by `circuitviz evaluate --circuit`"
        ),
    )
    row.download_button(
        "Graph (HTML)",
        data=drawing.html,
        file_name=name("graph" + edited, "html"),
        mime="text/html",
        key=f"{key}.html",
        on_click="ignore",
    )
    row.download_button(
        "Edges (CSV)",
        data=lambda: render.edges_csv(
            result.graph,
            result.scores,
            result.circuit(budget) if mask is None else mask,
            found_edges(result),  # ACC++: which edges it found, which are its completion
        ),
        file_name=name("edges" + edited, "csv"),
        mime="text/csv",
        key=f"{key}.edges",
        on_click="ignore",
    )
    row.download_button(
        "Curve (CSV)",  # every budget's point: the name carries no budget
        data=render.curves_csv(curves, result.graph.n_edges),
        file_name=name("curve", "csv", at_budget=False),
        mime="text/csv",
        key=f"{key}.curvecsv",
        on_click="ignore",
    )
    row.download_button(  # the figures mark the budget shown now: their names carry it
        "Curve (interactive HTML)",
        data=lambda: render.figure_html(figure()),
        file_name=name("curve", "html"),
        mime="text/html",
        key=f"{key}.curvehtml",
        on_click="ignore",
    )
    if _browser_for_images():
        for kind, mime in (("png", "image/png"), ("svg", "image/svg+xml")):
            row.download_button(
                f"Curve ({kind.upper()})",
                data=lambda kind=kind: render.figure_image(figure(), kind) or b"",
                file_name=name("curve", kind),
                mime=mime,
                key=f"{key}.{kind}",
                on_click="ignore",
            )
    else:
        st.caption(
            "PNG/SVG export needs kaleido and Chrome or Chromium; use the chart's camera icon, "
            "or the HTML/CSV downloads."
        )


def circuit_json(result, budget: int, mask=None, view=None, edited_point=None) -> dict:
    """EAP-IG JSON of the circuit shown (for iBoN/BoN-CSM at a new budget: that circuit; with
    ``mask``: the edited circuit, whose ``in_graph`` edges ``circuitviz evaluate --circuit``
    measures, with its own figures under ``"edited"`` (``edited_point``, when it was measured):
    the file's curve, summary, circuits and transfer stay the method's, and a reader of the
    summary alone took the method's NDF for the edit's; ``view``: the saved view under ``"view"``)."""
    evaluated = result.point(budget) is not None and mask is None
    data = result.to_eap_json(budget if evaluated else None, method_traits(result.method).score_meaning)
    if not evaluated:
        data.update(
            eap_graph_json(result.graph, result.scores, result.circuit(budget) if mask is None else mask)
        )
        data["budget"] = int(budget)
    if mask is not None:
        measured = edited_point is not None
        data["edited"] = json_safe(
            {
                "n_edges": int(mask.sum()),
                "from_budget": int(budget),
                "ndf": float(edited_point.ndf) if measured else None,
                "necessity": float(edited_point.necessity) if measured else None,
                "note": (
                    "in_graph marks the edited circuit, whose own figures these are"
                    + ("" if measured else " (not measured: no model was loaded)")
                    + "; curve, summary, circuits and transfer are the method's unedited circuits'"
                ),
            }
        )
    if view:
        data["view"] = view
    return data
