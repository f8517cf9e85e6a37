"""Demo mode: what a stakeholder reads in ten seconds. A switch (mirrored in the URL as
``demo=1``) hides the page's controls and shows the prompt as a sentence, the circuit fitted to
the screen with its groups' names (the user's, else the proposed grouping) and its strongest
paths in colour, its faithfulness in one line, and "Explain this circuit" open.
"""

from __future__ import annotations

import streamlit as st

from .. import render
from ..core.text import markdown_text
from ..details.base import reference_name
from ..methods.registry import method_traits
from ..render.demo import (
    empty_sentence,
    lead_sentence,
    legend_sentence,
    path_edge_names,
    path_sentence,
    prompt_sentence,
    strongest_paths,
)
from ..render.groups import propose_groups
from . import state as ui_state
from .graph_view import show_graph

# an audience reads the graph from across a room: a small circuit may be drawn with labels up to
# this size (the page's own views stop at the page's type, ``render.vis.MAX_LABEL_PX``)
DEMO_LABEL_PX = 28
GOOD_NDF = 0.8  # the NDF at which the demo says the circuit carries the answer (result_view's)

# a page's controls stand in containers keyed ``controls-...`` (Streamlit gives a keyed container
# the class ``st-key-<key>``); they and the sidebar are hidden while the demo is on. (The selector
# was Streamlit's ``stVerticalBlockBorderWrapper``, which 1.67 no longer draws: seen in Chromium,
# every control stayed on screen.) The keyed block sits in a layout wrapper, the page's flex
# item: hidden alone, each left its wrapper and the page's gap, an 80 px blank band on Explore.
CONTROLS_KEY = "controls-"
_HIDE = (
    f"<style>[class*='st-key-{CONTROLS_KEY}'], "
    f"[data-testid='stLayoutWrapper']:has(> [class*='st-key-{CONTROLS_KEY}']), "
    "section[data-testid='stSidebar'], [data-testid='stSidebarCollapsedControl'] "
    "{ display: none !important; }</style>"
)


def demo_switch(key: str) -> bool:
    """The switch; on, the page's controls are hidden."""
    name = f"{key}.demo"
    if not ui_state.has_widget_value(name):
        ui_state.set_widget_value(name, ui_state.session.demo == "1")  # the URL's on a first run
    on = st.toggle("demo mode (the controls hidden, for an audience)", key=name)
    if on:
        ui_state.session.demo = "1"
        st.html(_HIDE)
    else:
        del ui_state.session.demo
    ui_state.write_to_url([ui_state.Session.demo.key])
    return on


def view_groups(result, key: str) -> tuple[dict, str]:
    """(the view's groups, a sentence when the view also edits the circuit, else ""): the page's
    view, else the link's (``view=``, checked and its faults said, as the page reads it). Demo mode
    read only the groups the page had saved, so a demo link naming its groups opened with the
    proposed grouping instead, unsaid (seen in Chromium on the Gallery)."""
    from .instrument import edit_words, load_state

    view = load_state(key, result.graph, set())
    if view.edit.is_empty():
        return dict(view.groups), ""
    return dict(view.groups), (
        f"Demo mode draws the method's circuit and its figures, not the view's edit ({edit_words(view.edit).removeprefix('edited: ')}): "
        "turn demo mode off to see the edit measured."
    )


def demo_view(result, budget: int, labels, key: str, graph_drawing, explain, groups=None) -> None:
    """The demo: sentence, fitted graph with groups and strongest paths, NDF, the explanation
    (``graph_drawing`` and ``explain``: the result view's; ``groups``: the view's unless given)."""
    edit_note = ""
    if groups is None:
        groups, edit_note = view_groups(result, key)
    clean = float(result.baseline.clean) if result.task.metric == "logit_diff" else None
    st.subheader(
        markdown_text(prompt_sentence(result.task, clean)), anchor=False
    )  # the user's text, as typed
    edges = render.circuit_edges(result.graph, result.scores, result.circuit(budget))
    if not edges:  # an empty frame beside "raise the budget", a control the demo hides
        st.markdown(empty_sentence(budget))
        return
    paths = strongest_paths(edges, 3)
    kind = "user" if groups else None
    if not groups:  # the proposed grouping of the nodes off the strongest paths (those stay visible)
        on_paths = {node for path in paths for edge in path for node in (edge.source, edge.target)}
        proposed = propose_groups(edges, result.graph.n_layers)
        groups = {
            name: kept
            for name, members in proposed.items()
            if len(kept := [m for m in members if m not in on_paths]) > 1
        }
        kind = "proposed" if groups else None
    point = result.point(budget)
    traits = method_traits(result.method)
    writers = any("writers" in name for name in groups or {})
    legend = legend_sentence(len(paths), traits.scores_estimate_metric, traits.label, kind, writers)
    noun = "preference" if result.task.foils else "answer"  # a logit difference: answer over foil
    lead = lead_sentence(len(edges), point.ndf if point else None, GOOD_NDF, noun, reference_name(result))
    st.markdown(f"{lead}. {legend}")
    if edit_note:
        st.caption(markdown_text(edit_note))  # the edit names the link's nodes
    drawing = graph_drawing(
        result,
        budget,
        labels=labels,
        highlight=path_edge_names(paths),
        others="colour",
        groups=groups or None,
        title="",
    )
    show_graph(drawing, key=f"{key}.demo.graph", max_label_px=DEMO_LABEL_PX)
    for path in paths:
        named = "strongest path" if traits.scores_estimate_metric else "path of highest score"
        st.caption(f"{named}: " + path_sentence(path))
    explain(result, budget, labels, expanded=True)
