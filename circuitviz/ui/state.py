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
import math

import streamlit as st

# session-state key -> query parameter; every page's view is in these
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
    "compare.chosen": "compare",
    "bon.method": "bon_method",
    "bon.budgets": "bon_budgets",
    "bon.settings": "bon_settings",
    "signals.settings": "acc_settings",
}
INTEGER_KEYS = {"budget"}
SETTINGS_KEYS = {"settings", "bon.settings", "signals.settings"}  # a method's settings, JSON in the URL
LIST_KEYS = {"compare.chosen"}  # names, comma separated in the URL
METHOD_OF = {"settings": "method", "bon.settings": "bon.method", "signals.settings": None}
_SEEDED = "_view_seeded_from_url"


def _parsed(key: str, text: str):
    """A URL parameter's value as the state holds it, or None when it does not read as one."""
    if key in INTEGER_KEYS:
        try:
            return int(text)
        except ValueError:
            return None
    if key in SETTINGS_KEYS:
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError:
            return None
        return parsed if isinstance(parsed, dict) else None
    if key in LIST_KEYS:
        return [part for part in text.split(",") if part]
    return str(text)


def seed_from_url() -> None:
    """Copy the URL's view parameters into session state, once per session."""
    if st.session_state.get(_SEEDED):
        return
    st.session_state[_SEEDED] = True
    for key, parameter in VIEW_KEYS.items():
        if parameter in st.query_params:
            value = _parsed(key, st.query_params[parameter])
            if value is not None:
                st.session_state[key] = value
    for settings_key, method_key in METHOD_OF.items():
        if settings_key in st.session_state:  # the URL's settings belong to the URL's method
            st.session_state[f"{settings_key}.method"] = (
                st.session_state.get(method_key) if method_key else "acc++"
            )


def _url_text(value) -> str:
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    if isinstance(value, (list, tuple)):
        return ",".join(str(part) for part in value)
    return str(value)


def write_to_url(keys=None) -> None:
    """Mirror the view's current values (those set in session state) into the URL.

    Pages call it before anything that may stop or block the script (a run, ``st.stop``), so the
    URL names the view while it is on screen, a run in flight included."""
    for key in keys or VIEW_KEYS:
        parameter = VIEW_KEYS[key]
        value = st.session_state.get(key)
        if value is None or value == "" or value == {} or value == []:
            if parameter in st.query_params:
                del st.query_params[parameter]
            continue
        text = _url_text(value)
        if st.query_params.get(parameter) != text:
            st.query_params[parameter] = text


# ----- a method's settings, kept per method across pages ---------------------------------------
def _by_method(settings_key: str) -> dict:
    return st.session_state.setdefault(f"{settings_key}.by_method", {})


def method_settings(settings_key: str, method: str) -> dict:
    """The settings a form of ``method`` starts from: those last set for it in this session (on
    any page), else the shared ones (the URL's, a gallery example's, another method's fields of
    the same name)."""
    kept = _by_method(settings_key).get(method)
    if kept is not None and st.session_state.get(f"{settings_key}.method") != method:
        return dict(kept)
    return dict(st.session_state.get(settings_key) or {})


def remember_settings(settings_key: str, method: str, values: dict) -> None:
    """The form's values become the method's settings: the URL's, and what every page starts from."""
    _by_method(settings_key)[method] = dict(values)
    st.session_state[settings_key] = dict(values)
    st.session_state[f"{settings_key}.method"] = method


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
    """Remember a result for every page. The first result of a prompt opens at a readable budget;
    a later one (ACC++ run on Signals, a method added on Compare) leaves the budget the user has."""
    if result is None:
        return
    from ..render import readable_budget

    results()[result.method] = result
    if result.curve and not isinstance(st.session_state.get("budget"), int):
        set_value("budget", readable_budget(result.curve))


def nearest(options, wanted: int) -> int:
    """The option nearest ``wanted`` on a log scale (budgets span decades)."""
    return min(options, key=lambda b: abs(math.log(max(b, 1)) - math.log(max(wanted, 1))))


def budget_select(label: str, key: str, options: list[int], fallback: int) -> int:
    """The slider over ``options`` for the shared budget ``key``, without overwriting it.

    It shows the option nearest the shared budget (``fallback`` when there is none yet); only a
    move of the slider sets the shared budget, so a page whose result was evaluated at other
    budgets (Paraphrases' six, Compare's common ones) leaves the other pages' budget as it was."""
    shared = st.session_state.get(key)
    shown = nearest(options, shared if isinstance(shared, int) else fallback)
    wkey = widget_key(key)
    # always handed over: the same key on another page is another widget (its label, its options),
    # which would otherwise start from its own default instead of the value this key holds
    st.session_state[wkey] = shown

    def moved() -> None:
        st.session_state[key] = st.session_state[wkey]

    value = st.select_slider(
        label, options=options, key=wkey, on_change=moved, format_func=lambda b: f"{b:,}"
    )
    if not isinstance(shared, int):
        st.session_state[key] = int(value)
    return int(value)


def result_for(method: str, model_id: str, prompt: str):
    """The kept result of ``method`` for this model and prompt, or None."""
    result = results().get(method)
    if result is None or result.model_id != model_id or result.task.clean != prompt:
        return None
    return result


def stored_result(request):
    """The stored result of exactly this ``Request`` (any session, any page, a run finished after
    a reload), kept for every page like a fresh one; None when it was never computed. Never computes."""
    from . import loaders

    found = loaders.stored_result(request)
    if found is not None:
        keep_result(found)
    return found
