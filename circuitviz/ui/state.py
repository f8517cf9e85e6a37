"""One state across pages, mirrored in the URL so a view can be shared and reloaded.

The view's fields (model, prompt, corrupted prompt, answer, foil, method, budget, and the
method's settings and budgets) live in ``st.session_state`` under ``VIEW_KEYS`` and are mirrored
to the URL's query parameters. On a session's first run the URL wins: its values seed the
widgets before they are created. Values are plain strings in the URL; nothing read from the URL
is ever run or rendered unescaped.

Every page reads and writes the same keys, so the prompt, answer, foil, corrupted prompt, the
chosen budget and the results computed for this prompt (by any page) follow the user from page
to page. ``inputs_for`` remembers which prompt the answer, foil and corrupted prompt belong to:
a new prompt resets them (and the results and budget) instead of leaving stale values.
"""

from __future__ import annotations

import json

import streamlit as st

# session-state key -> query parameter
VIEW_KEYS = {
    "model": "model",
    "device": "device",
    "prompt": "prompt",
    "corrupted": "corrupted",
    "answer": "answer",
    "foil": "foil",
    "metric": "metric",
    "method": "method",
    "budget": "budget",
    "budgets": "budgets",
    "settings": "settings",
}
_SEEDED = "_view_seeded_from_url"


def seed_from_url() -> None:
    """Copy the URL's view parameters into session state, once per session."""
    if st.session_state.get(_SEEDED):
        return
    st.session_state[_SEEDED] = True
    st.session_state["_view_from_url"] = "method" in st.query_params
    for key, parameter in VIEW_KEYS.items():
        if parameter in st.query_params:
            value = st.query_params[parameter]
            if key == "budget":
                try:
                    st.session_state[key] = int(value)
                except ValueError:
                    continue
            elif key == "settings":
                try:
                    parsed = json.loads(value)
                except json.JSONDecodeError:
                    continue
                if isinstance(parsed, dict):
                    st.session_state[key] = parsed
            else:
                st.session_state[key] = str(value)


def write_to_url(keys=None) -> None:
    """Mirror the view's current values (those set in session state) into the URL."""
    for key in keys or VIEW_KEYS:
        parameter = VIEW_KEYS[key]
        value = st.session_state.get(key)
        if value is None or value == "" or value == {}:
            if parameter in st.query_params:
                del st.query_params[parameter]
            continue
        text = json.dumps(value, sort_keys=True) if isinstance(value, dict) else str(value)
        if st.query_params.get(parameter) != text:
            st.query_params[parameter] = text


def keep(key: str, default=None):
    """Session-state value ``key``, set to ``default`` when absent (a value that outlives pages)."""
    if key not in st.session_state or st.session_state[key] is None:
        st.session_state[key] = default
    return st.session_state[key]


def widget_key(key: str) -> str:
    return f"w.{key}"


def bound(widget, label: str, key: str, default=None, **options):
    """A widget whose value lives on in session state ``key`` across pages and reruns.

    Streamlit forgets a widget's state when a page without it runs, and a widget of the same key
    on another page is a new widget; the value is kept under ``key`` (and re-assigned to the
    widget's key) and handed to the widget whichever page draws it.
    """
    wkey = widget_key(key)
    if wkey not in st.session_state:
        stored = st.session_state.get(key)
        st.session_state[wkey] = default if stored is None else stored
    else:  # the same key on another page is another widget: hand it the value explicitly
        st.session_state[wkey] = st.session_state[wkey]
    value = widget(label, key=wkey, **options)
    st.session_state[key] = value
    return value


def set_value(key: str, value) -> None:
    """Set a view value and its widget (call from a callback, or before the widget is drawn)."""
    st.session_state[key] = value
    st.session_state[widget_key(key)] = value


# ----- what depends on the prompt ------------------------------------------------------------------
INPUTS_FOR = "inputs_for"  # the prompt the answer, foil and corrupted prompt were set for
RESULTS = "results"  # {method: CircuitResult} computed for the current prompt, by any page


def inputs_belong_to(prompt: str) -> bool:
    """Whether the answer, foil and corrupted prompt in the state were set for ``prompt``.

    A session opened from a URL (or a gallery example) brings its own values: the first prompt
    seen adopts them rather than proposing new ones.
    """
    if INPUTS_FOR not in st.session_state:
        st.session_state[INPUTS_FOR] = prompt if st.session_state.get("answer") else None
    return st.session_state[INPUTS_FOR] == prompt


def adopt_prompt(prompt: str, values: dict) -> None:
    """A new prompt: set what depends on it (answer, foil, corrupted prompt...) and drop the
    results and the budget that belonged to the old one."""
    for key, value in values.items():
        set_value(key, value)
    st.session_state[INPUTS_FOR] = prompt
    st.session_state[RESULTS] = {}
    st.session_state.pop("budget", None)
    st.session_state.pop(widget_key("budget"), None)


def results() -> dict:
    """{method: result} computed for the current prompt on any page (newest per method)."""
    return st.session_state.setdefault(RESULTS, {})


def keep_result(result) -> None:
    """Remember a result for every page; a first result of a prompt opens at a readable budget."""
    if result is None:
        return
    from ..render import readable_budget

    found = results()
    fresh = result.method not in found or found[result.method] is not result
    found[result.method] = result
    if fresh and result.curve:
        set_value("budget", readable_budget(result.curve))


def result_for(method: str, model_id: str, prompt: str):
    """The kept result of ``method`` for this model and prompt, or None."""
    result = results().get(method)
    if result is None or result.model_id != model_id or result.task.clean != prompt:
        return None
    return result
