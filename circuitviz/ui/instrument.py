"""The circuit as an instrument: the drawing with the clicked node's card beside it, edits
measured live on the real model, pins, groups, names in words, all of it in the URL.

The view's state (``InstrumentState``: clicked node, pins, groups, the edit and its history,
names in words) is kept per result in session state and mirrored to the URL's ``view``
parameter (JSON), so a fresh browser opened on the URL reproduces it; what it reads from the
URL or a file is checked (``edit.read_edit``, ``render.groups.check_groups``) and what it drops
is said in one sentence. An edit's NDF and necessity come from ``edit.measure``: one batched
call of the shared evaluator, the task's clean and corrupted runs kept, exactly the numbers
``circuitviz evaluate --circuit`` prints for the edited circuit's edge list.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

import streamlit as st

from ..core.text import counted, markdown_text
from ..measure.edit import CircuitEdit, edited_mask, measure, read_edit
from ..render import circuit_edges
from ..render.cards import absent_card
from ..render.groups import (
    PROPOSAL_RULE,
    check_groups,
    group_edges,
    groups_text,
    parse_groups_text,
    propose_groups,
)
from . import loaders
from . import state as ui_state
from .graph_view import show_graph
from .node_card import card_extras, drawing_cards

MAX_URL_TEXT = 20_000
# under an edit the page's curve is still the method's: its marker ("shown now") is not the edit
EDITED_CURVE = (
    'The faithfulness curve below and its "shown now" marker are the method\'s circuits at each '
    "budget, not this edit, whose figures are in the graph's title and above."
)
MAX_PINS = 200


@dataclass
class InstrumentState:
    clicked: str = ""
    pins: list[str] = field(default_factory=list)
    groups: dict[str, list[str]] = field(default_factory=dict)
    edit: CircuitEdit = field(default_factory=CircuitEdit)
    history: list[CircuitEdit] = field(default_factory=list)
    words: bool = False

    def to_dict(self) -> dict:
        return {
            "clicked": self.clicked,
            "pins": self.pins,
            "groups": self.groups,
            "edit": self.edit.to_dict(),
            "words": self.words,
        }


def read_state(data, spec, node_ids: set[str]) -> tuple[InstrumentState, list[str]]:
    """An ``InstrumentState`` from untrusted ``data`` (a URL's or a file's), and the sentences
    saying what was left out."""
    problems: list[str] = []
    if not isinstance(data, dict):
        return InstrumentState(), (["The view in the link is not readable; it was left out."] if data else [])
    read = read_edit(data.get("edit"), spec)
    if read.problem:
        problems.append(read.problem)
    groups, sentence = check_groups(data.get("groups") or {}, set(spec.node_names) | node_ids)
    if sentence:
        problems.append(sentence)
    pins = data.get("pins") or []
    if not isinstance(pins, list) or len(pins) > MAX_PINS:
        problems.append(f"The pinned nodes are not a list of at most {MAX_PINS}; they were left out.")
        pins = []
    known = set(spec.node_names) | node_ids
    unknown = [p for p in pins if not isinstance(p, str) or p not in known]  # a list is no node's name
    if unknown:
        were = "was" if len(unknown) == 1 else "were"
        problems.append(f"{counted(len(unknown), 'pinned node')} this circuit does not have {were} left out.")
    clicked = data.get("clicked") or ""
    if not isinstance(clicked, str) or (
        clicked
        and clicked not in known
        and not clicked.startswith("group:")
        and not (clicked.startswith("edge:") and clicked[5:].split("#")[0] in spec.edge_names)
    ):  # an edge's card is "edge:<its name>" (until 2026-12-06 a link with one open lost it)
        problems.append("The clicked node or edge in the link is not in this circuit; no card is open.")
        clicked = ""
    state = InstrumentState(
        clicked=clicked,
        pins=list(dict.fromkeys(p for p in pins if isinstance(p, str) and p in known)),  # each once
        groups=groups,
        edit=read.edit,
        words=bool(data.get("words")),
    )
    return state, problems


def _rerun() -> None:
    """Rerun this view alone when it is a fragment (Explore, Gallery), else the page."""
    try:
        st.rerun(scope="fragment")
    except st.errors.StreamlitAPIException:
        st.rerun()


def _rerun_view() -> None:
    """Rerun the whole page after a change the rest of the view shows (an edit, a pin, a group):
    the graph and its card are a fragment of their own, so a fragment rerun would leave the
    edited figures, the pins' line and the downloads as they were."""
    st.rerun(scope="app")


def _state_key(key: str) -> str:
    return f"{key}.instrument"


def load_state(key: str, spec, node_ids: set[str]) -> InstrumentState:
    """This view's state: kept in the session, else read once from the URL (saying what it dropped)."""
    name = _state_key(key)
    if not ui_state.has_widget_value(name):
        text = ui_state.session.instrument_view or ""  # the URL's on a session's first run
        data = None
        problems: list[str] = []
        if text:
            if len(text) > MAX_URL_TEXT:
                problems.append("The view in the link is too long to read; it was left out.")
            else:
                try:
                    data = json.loads(text)
                except (ValueError, RecursionError):  # a number of 5,000 digits is a ValueError
                    problems.append("The view in the link is not readable; it was left out.")
        state, more = read_state(data, spec, node_ids)
        ui_state.set_widget_value(name, state)
        ui_state.set_widget_value(f"{name}.problems", problems + more)
    for sentence in ui_state.widget_value(f"{name}.problems") or []:
        st.info(markdown_text(sentence))  # quotes the link's names: a group's markdown was a live link
    ui_state.forget_widget_value(f"{name}.problems")
    return ui_state.widget_value(name)


def save_state(key: str, state: InstrumentState) -> None:
    ui_state.set_widget_value(_state_key(key), state)
    if state.to_dict() == InstrumentState().to_dict():
        del ui_state.session.instrument_view
    else:
        ui_state.session.instrument_view = json.dumps(state.to_dict(), separators=(",", ":"))
    ui_state.write_to_url([ui_state.Session.instrument_view.key])


@st.cache_data(show_spinner=False, max_entries=64)
def _measured(_model, _task, model_key: str, task_key: str, edges: tuple[str, ...], _mask):
    """(baseline, point) of one edited circuit, cached by its edge list."""
    return measure(_model, _task, _mask)


def _edited_point(result, model, mask):
    """The edited circuit's ``CurvePoint`` on the model (measured once per edge list)."""
    edges = tuple(result.graph.edge_names_of(mask))
    with st.spinner("Measuring the edited circuit on the model…"):
        _, point = _measured(
            model, result.task, loaders.model_key(model), json.dumps(result.task.to_dict()), edges, mask
        )
    return point


def _measure_line(point, point_before) -> None:
    """The edited circuit's NDF and necessity beside the method's own."""
    columns = st.columns(3)
    before_ndf = point_before.ndf if point_before is not None else None
    columns[0].metric(
        "edited NDF",
        f"{point.ndf:.3f}",
        delta=None if before_ndf is None else f"{point.ndf - before_ndf:+.3f}",
        help="NDF of the edited circuit on the model (circuitviz evaluate --circuit gives the same)",
    )
    necessity = "-" if math.isnan(point.necessity) else f"{point.necessity:.3f}"
    columns[1].metric("edited necessity", necessity)
    columns[2].metric("edited edges", f"{point.n_edges:,}")


def instrument_view(
    result, budget: int, draw, labels=None, model=None, key: str = "explore", point=None, result_key: str = ""
):
    """The drawing (``draw(mask, groups, words, edited)`` -> GraphDrawing; ``edited``: None, or
    ``{"ndf": ...}`` when ``mask`` is the user's edit, whose title then says so) with its card,
    edits and groups; ``result_key`` names the result (another result opens its own fresh view).
    Returns (drawing, the edited mask or None, the saved view, the edited circuit's measured
    ``CurvePoint`` or None)."""
    spec = result.graph
    base = result.circuit(budget)
    owner, current = f"{key}.instrument.result", result_key
    if ui_state.widget_value(owner) not in (None, current):  # another result: its own fresh view
        save_state(key, InstrumentState())
        ui_state.forget_widget_value(f"{key}.groups_text")
    ui_state.set_widget_value(owner, current)
    state = load_state(key, spec, set())
    mask = edited_mask(spec, base, state.edit) if not state.edit.is_empty() else base
    words = st.toggle("node names in words", value=state.words, key=f"{key}.words")
    if words != state.words:
        state.words = words
    # the edited circuit is measured before it is drawn: the drawing's title gives its figures
    measured = None if state.edit.is_empty() or model is None else _edited_point(result, model, mask)
    edited = None if state.edit.is_empty() else {"ndf": None if measured is None else measured.ndf}
    drawing = draw(mask, state.groups, words, edited)
    # the graph and the card rerun alone on a click (a fragment): a click whose card's figures are
    # cached does no model work and redraws nothing else of the page
    st.fragment(_graph_and_card)(result, drawing, labels, model, key)
    state = load_state(key, spec, set())
    _controls(result, state, mask, measured, point, key)
    save_state(key, state)
    return drawing, (None if state.edit.is_empty() else mask), state.to_dict(), measured


def _graph_and_card(result, drawing, labels, model, key) -> None:
    """The drawing with the clicked node's card beside it (drawn by the browser at the click, from
    the cards sent with the drawing), and under it what the card's node needs Python for: remove
    or restore it, its SAE features, ACC++'s trace. A plain click, a move along the card's edges or
    closing it reruns this fragment alone (to keep the view); a pin reruns the page (the pins'
    line shows it)."""
    state = load_state(key, result.graph, set())

    def opened(click: dict) -> None:  # before the rerun the click causes: that rerun keeps the card
        if not click.get("pin"):
            kind = click.get("kind")
            state.clicked = (
                click["id"] if kind == "node" else ("edge:" + click["id"] if kind == "edge" else "")
            )
            save_state(key, state)

    edges = group_edges(drawing.edges, state.groups) if state.groups else drawing.edges
    cards = drawing_cards(drawing, edges, labels)
    if (
        cards is not None
        and state.clicked in state.edit.removed_nodes
        and state.clicked not in cards["nodes"]
    ):
        cards["nodes"][state.clicked] = absent_card(state.clicked, "removed from the circuit by your edit")
    clicked = show_graph(
        drawing,
        key=f"{key}.graph",
        selected=[state.clicked, *state.pins],
        on_click=opened,
        cards=cards,
        opened=state.clicked,
    )
    if clicked is not None and clicked.get("kind") == "node" and clicked.get("pin"):
        node = clicked["id"]
        state.pins = [p for p in state.pins if p != node] if node in state.pins else [*state.pins, node]
        save_state(key, state)
        _rerun_view()
    if state.clicked:
        _card(result, state, model, key)


def _card(result, state, model, key) -> None:
    """What the open card's node or edge needs Python for, under the graph."""
    if state.clicked.startswith("edge:"):
        name = state.clicked[5:].split("#")[0]
        if name in result.graph.edge_names and st.button(f"remove this edge ({name})", key=f"{key}.rm_edge"):
            _apply(state, state.edit.with_edge_removed(name), key)
        return
    node = state.clicked
    members = state.groups.get(node[6:], []) if node.startswith("group:") else [node]
    removable = [m for m in members if m in result.graph.node_names and m not in ("input", "logits")]
    if removable:
        removed = all(m in state.edit.removed_nodes for m in removable)
        label = "restore" if removed else "remove"
        named = f"this group ({node[6:]})" if node.startswith("group:") else f"this node ({node})"
        if st.button(
            f"{label} {named}",
            key=f"{key}.rm_node",
            help=f"{label} {named} and measure the edited circuit on the model",
        ):
            edit = state.edit
            for member in removable:
                edit = edit.with_node_restored(member) if removed else edit.with_node_removed(member)
            _apply(state, edit, key)
    card_extras(node, model, result, key=f"{key}.card")


def _apply(state: InstrumentState, edit: CircuitEdit, key: str) -> None:
    state.history = [*state.history, state.edit]
    state.edit = edit
    save_state(key, state)
    _rerun_view()


def _controls(result, state, mask, measured, point, key) -> None:
    """Pins, the keep-only subgraph, undo and back, the edit's measure (``measured``: the edited
    circuit's point, None without a model), groups."""
    if state.pins:
        st.caption("pinned (Ctrl-click a node to pin or unpin it): " + ", ".join(state.pins))
    row = st.container(horizontal=True, key=f"{key}.edit-buttons")  # wraps on a narrow page
    if state.pins and row.button("keep only the pinned nodes", key=f"{key}.keep"):
        _apply(state, state.edit.keeping_only(state.pins), key)
    if state.history and row.button("undo", key=f"{key}.undo"):
        state.edit = state.history[-1]
        state.history = state.history[:-1]
        save_state(key, state)
        _rerun()
    if not state.edit.is_empty() and row.button("back to the method's circuit", key=f"{key}.back"):
        _apply(state, CircuitEdit(), key)
    if state.pins and row.button("clear pins", key=f"{key}.unpin"):
        state.pins = []
        save_state(key, state)
        _rerun()
    if not state.edit.is_empty():
        st.caption(markdown_text(edit_words(state.edit)))  # edge names hold '<' and '>'
        if measured is not None:
            _measure_line(measured, point)
        else:
            st.caption("Load the model (Explore) to measure the edited circuit.")
        st.caption(EDITED_CURVE)
    _groups(result, state, mask, key)


def edit_words(edit: CircuitEdit) -> str:
    """The edit in words, each of its parts that is present and no other: 'edited: removed m3,
    input->a1.h0<q>; added back m0->m1; kept only m3, a12.h2 (with the embeddings and the logits)'
    (its caption read 'edited: ; kept only ...' when nothing was removed)."""
    parts = []
    removed = [*edit.removed_nodes, *edit.removed_edges]
    if removed:
        parts.append("removed " + ", ".join(removed))
    if edit.restored_edges:
        parts.append("added back " + ", ".join(edit.restored_edges))
    if edit.keep_only:
        parts.append(f"kept only {', '.join(edit.keep_only)} (with the embeddings and the logits)")
    return "edited: " + "; ".join(parts) if parts else "not edited"


def _groups(result, state, mask, key) -> None:
    with st.expander("Groups (supernodes): name nodes that work together"):
        if state.pins and st.button("group the pinned nodes", key=f"{key}.group_pins"):
            name = f"group {len(state.groups) + 1}"
            state.groups = {**state.groups, name: list(state.pins)}
            state.pins = []
            save_state(key, state)
            _rerun()
        if st.button("propose a grouping", key=f"{key}.propose"):
            proposal = propose_groups(circuit_edges(result.graph, result.scores, mask), result.graph.n_layers)
            ui_state.set_widget_value(f"{key}.groups_text", groups_text(proposal))
        st.caption(PROPOSAL_RULE)
        text_key = f"{key}.groups_text"
        if not ui_state.has_widget_value(text_key):
            ui_state.set_widget_value(text_key, groups_text(state.groups))
        text = st.text_area("groups (one a line: name: node, node)", key=text_key, height=120)
        note_key = f"{key}.groups_note"  # kept past the rerun that draws the groups
        if st.button("apply the groups", key=f"{key}.apply_groups"):
            known = set(result.graph.node_names)
            parsed, unread = parse_groups_text(text)
            groups, sentence = check_groups(parsed, known, unread)
            ui_state.set_value(note_key, sentence)
            state.groups = groups
            save_state(key, state)
            _rerun()
        if ui_state.value(note_key):
            st.info(markdown_text(ui_state.value(note_key)))  # group names are the user's text
