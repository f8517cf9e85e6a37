"""The app's one state: every session value as a typed field, its URL mirror, how a widget binds
to it, and how a task opens in Explore from any page.

No other module of the app touches ``st.session_state``: a page reads and writes ``session.prompt``,
``session.results`` ... (``Field``: a session key with its default and, for the view's fields, its
query parameter and how it reads from URL text), binds a widget with ``bind``, and opens a task
with ``open_task``. A widget's own key (a settings form's field, a data editor) goes through
``widget_value`` / ``set_widget_value``.

The view's fields (model, prompt, corrupted prompt, answer, foil, method, budget, and the method's
settings and budgets) are mirrored to the URL's query parameters, each on the pages that read it
(``Field.pages``; the model, device and task on every page's). On a session's first run the
URL wins: its values seed the widgets before they are created. Values are plain strings in the
URL; nothing read from the URL is ever run or rendered unescaped.

Every page reads and writes the same fields, so the prompt, answer, foil, corrupted prompt, the
chosen budget and the results computed for this prompt (by any page) follow the user from page
to page. ``inputs_for`` remembers which prompt the answer, foil and corrupted prompt belong to:
a new prompt resets them (and the results and budget) instead of leaving stale values. How the
results are kept and found again is ``kept_results``'s.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from typing import Any

import streamlit as st

from .link_values import (
    FLAG,
    INDEX,
    INTEGER,
    NAMES,
    SETTINGS,
    SHARE,
    SWITCH,
    TEXT,
    parsed_link_value,
    repeated_link_value,
    unreadable_link_value,
)
from .pagelist import switch_to


class Field:
    """One session value: its key, its default, and (for the view) its URL parameter and kind.

    Read and written as an attribute of ``session`` (``session.prompt = ...``); ``del`` forgets it.
    A mutable default (the results' dict) is stored on first read, so the reader may change it.
    """

    def __init__(self, key: str, default: Any = None, url: str | None = None, kind: str = TEXT, pages=None):
        self.key, self.default, self.url, self.kind = key, default, url, kind
        self.pages = pages  # the pages that read it, whose URL holds it (None: every page's)

    def __set_name__(self, owner, name: str) -> None:
        self.name = name

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        if isinstance(self.default, (dict, list)):
            return st.session_state.setdefault(self.key, type(self.default)())
        return st.session_state.get(self.key, self.default)

    def __set__(self, instance, value) -> None:
        st.session_state[self.key] = value

    def __delete__(self, instance) -> None:
        st.session_state.pop(self.key, None)

    def parsed(self, text: str):
        """A URL parameter's value as the state holds it, or None when it does not read as one."""
        return parsed_link_value(self.kind, text)

    def read_on(self, page: str | None) -> bool:
        """Whether page ``page`` (``pagelist``'s name; None: not known) reads this field."""
        return page is None or self.pages is None or page in self.pages


class Session:
    """Every value a session keeps, by name. The view's fields name their URL parameter."""

    # the view, mirrored in the URL: the app-wide fields (model, device, the task) on every page's,
    # the others (``pages``: pagelist's names) only on the pages that read them
    model = Field("model", url="model")
    device = Field("device", url="device")
    model_typed = Field("model.typed", "")  # the sidebar's free model id, as typed (not yet loaded)
    free_model = Field("model.free")  # a hub id or local folder the user chose to load (ui/sidebar)
    prompt = Field("prompt", url="prompt")
    corrupted = Field("corrupted", url="corrupted")
    answer = Field("answer", url="answer")
    foil = Field("foil", url="foil")
    metric = Field("metric", url="metric")
    method = Field("method", url="method", pages=("explore", "steer"))
    budget = Field("budget", url="budget", kind=INTEGER, pages=("explore", "compare", "paraphrases", "steer"))
    # whose the budget is: (model id, result mark) a slider was moved for by hand (mark None: a
    # Compare slider, every result of that model), LINK for a link's budget, None: an opening view
    budget_chosen = Field("budget.chosen")
    budget_link = Field("budget.link")  # the budget a link named, said where a slider lacks it
    # the position view's unit budget slider
    units = Field("budget.units", url="units", kind=INTEGER, pages=("explore", "steer"))
    budgets = Field("budgets", url="budgets", pages=("explore", "compare", "steer"))
    settings = Field("settings", url="settings", kind=SETTINGS, pages=("explore", "compare", "steer"))
    compare_chosen = Field("compare.chosen", url="compare", kind=NAMES, pages=("compare",))
    bon_method = Field("bon.method", url="bon_method", pages=("paraphrases",))
    bon_budgets = Field("bon.budgets", url="bon_budgets", pages=("paraphrases",))
    # the default text each budgets box was last given: while the box still holds it, a model of
    # another size gets its own default (ui/budget_box.budgets_for_graph)
    budgets_default = Field("budgets.default")
    bon_budgets_default = Field("bon.budgets.default")
    bon_settings = Field("bon.settings", url="bon_settings", kind=SETTINGS, pages=("paraphrases",))
    signals_settings = Field("signals.settings", url="acc_settings", kind=SETTINGS, pages=("signals",))
    # the decision Signals shows
    signals_decision = Field("signals.decision", url="decision", kind=INDEX, pages=("signals",))
    # the graph's view as JSON (ui/instrument), and "1" while demo mode is on (ui/demo)
    instrument_view = Field("instrument.view", url="view", pages=("explore", "gallery"))
    demo = Field("demo", url="demo", kind=SWITCH, pages=("explore", "gallery"))
    # the result view's toggles on Explore and Compare's held-out one (``link_choices``: by the widget's key)
    explore_faded = Field("explore.faded.on", False, url="grey", kind=FLAG, pages=("explore",))
    explore_sae = Field("explore.sae.on", False, url="sae_labels", kind=FLAG, pages=("explore",))
    feature_names = Field("explore.names.on", False, url="feature_names", kind=FLAG, pages=("explore",))
    compare_held_out = Field("compare.transfer.on", False, url="held_out", kind=FLAG, pages=("compare",))
    page = Field("app.page")  # the page this script run shows (pagelist's name), set by the navigation
    # what depends on the prompt
    inputs_for = Field("inputs_for")  # the prompt the answer, foil and corrupted prompt were set for
    results = Field("results", {})  # {method: CircuitResult} computed for the current prompt, by any page
    result_requests = Field("results.requests", {})  # {method: the request key its kept result answers}
    corrupted_note = Field("corrupted_note")  # where the corrupted prompt came from
    corrupted_proposed = Field("corrupted_proposed")  # the corrupted prompt the note is about
    corrupted_answer = Field("corrupted_answer")  # the answer it was proposed for (None: an opened task's)
    corrupted_foil = Field("corrupted_foil")  # the foil it was measured against
    # the corrupted box shown for a method that needs none (None: not chosen for this prompt), and
    # the method a link or an opened task gave its corrupted prompt with (ui/corrupted_box)
    corrupted_own = Field("corrupted.own", url="own_corrupted", kind=FLAG, pages=("explore", "signals"))
    corrupted_came_with = Field("corrupted.came_with")
    foil_note = Field("foil_note")
    foil_proposed = Field("foil_proposed")  # the foil the note is about
    more_foils = Field("more_foils", ())  # an opened task's foils after the first (the box holds one)
    proposed_spelling = Field("inputs.proposed", {})  # {"prompt", role: (proposed, box's text)}: ui/spelling
    autorun = Field("explore.autorun", False)  # an opened task runs when Explore opens
    pending_open = Field("_pending_open")  # a task to open at the top of the next script run
    url_seeded = Field("_view_seeded_from_url", False)
    mmlu_note = Field("mmlu.note")
    mmlu_prompt = Field("mmlu.prompt")  # the prompt the MMLU picker made
    mmlu_choice = Field("mmlu.choice")  # (row, this click) of "Use this question", until it opens
    # a page's own values
    dataset_source = Field("dataset.source")
    dataset_opened = Field("dataset.opened", 0)  # rows opened: the table's key, so a row is clicked afresh
    # the atlas shown (its picker's ``dataset.source``), its method, budget, consensus share, score and
    # the Prompts tab's "only the prompts the check refuses"
    dataset_atlas = Field("dataset.atlas", url="atlas", pages=("dataset",))
    dataset_method = Field("dataset.method", url="dataset_method", pages=("dataset",))
    dataset_budget = Field("dataset.budget.shown", url="dataset_budget", kind=INTEGER, pages=("dataset",))
    dataset_consensus = Field("dataset.consensus", url="consensus", kind=SHARE, pages=("dataset",))
    dataset_consensus_for = Field("dataset.consensus.for")  # the atlas its view was set on (None: a link's)
    dataset_score = Field("dataset.score.shown", "ndf", url="score", pages=("dataset",))
    dataset_refused = Field("dataset.refused.on", False, url="refused", kind=FLAG, pages=("dataset",))
    # the tab open (``link_choices.DATASET_TABS``' name) and the count of clusters (None: auto)
    dataset_tab = Field("dataset.tab.open", "curves", url="tab", pages=("dataset",))
    dataset_clusters = Field("dataset.k.chosen", url="clusters", kind=INTEGER, pages=("dataset",))
    dataset_batch = Field("dataset.yours.chosen", url="batch", pages=("dataset",))  # your batch's folder name
    # the Gallery's example (its segmented control's, ``gallery.slug``), and the example's budget shown
    gallery_slug = Field("gallery.example", url="example", pages=("gallery",))
    gallery_budget = Field("gallery.budget", url="example_budget", kind=INTEGER, pages=("gallery",))
    bon_intersection = Field("bon.intersection", "none", url="highlight", pages=("paraphrases",))  # its bar
    bon_intersection_clicked = Field("bon.intersection.clicked")
    signals_method = Field("signals.method")  # the registered method the Signals page explains
    steer_labels = Field("steer.llm")  # the background LLM labeller of the Steer page
    steer_features = Field("steer.features.chosen", url="zero", kind=NAMES, pages=("steer",))  # L6/123, ...
    # the nodes typed where no circuit is
    steer_nodes = Field("steer.nodes.typed", "a3.h0, m5, m9, m14", url="nodes", pages=("steer",))
    steer_source = Field("steer.source.chosen", "embedded", url="sae", pages=("steer",))  # the SAEs' source
    steer_release = Field("steer.release.chosen", url="sae_release", pages=("steer",))  # a hub SAE's
    steer_sae_id = Field("steer.sae_id.chosen", url="sae_id", pages=("steer",))
    steer_hub_loaded = Field("steer.hub.loaded")  # (release, id) its Load press loaded
    steer_folder = Field("steer.folder.typed")  # a local SAE folder typed: kept across pages, never in a link
    steer_outcome = Field("steer.outcome")  # (what was zeroed, on what; the zeroing's figures): the last


session = Session()
VIEW_FIELDS: list[Field] = [f for f in vars(Session).values() if isinstance(f, Field) and f.url]
VIEW_KEYS = {f.key: f.url for f in VIEW_FIELDS}  # session key -> query parameter
UNSAID = {f.key: f.default for f in VIEW_FIELDS if f.default is not None}  # a default stays out of the URL
# a method's settings -> the field naming its method (Signals' settings belong to its page's method)
SETTINGS_OF: dict[str, str | None] = {
    "settings": "method",
    "bon.settings": "bon.method",
    "signals.settings": None,
}


# ----- values a widget keeps under its own key --------------------------------------------------
def widget_value(key: str, default=None):
    """The value a widget of key ``key`` holds (``default`` before it was drawn)."""
    return st.session_state.get(key, default)


def set_widget_value(key: str, value) -> None:
    """Give the widget of key ``key`` its value (from a callback, or before the widget is drawn)."""
    st.session_state[key] = value


def has_widget_value(key: str) -> bool:
    return key in st.session_state


def forget_widget_value(key: str) -> None:
    st.session_state.pop(key, None)


# ----- the URL ---------------------------------------------------------------------------------
def seed_from_url() -> None:
    """Copy the URL's view parameters into the session, once per session."""
    if session.url_seeded:
        return
    session.url_seeded = True
    for found in VIEW_FIELDS:
        if found.url in st.query_params:
            text = st.query_params[found.url]  # the last, when the link gives it more than once
            repeated = repeated_link_value(found.url, st.query_params.get_all(found.url))
            if repeated:
                st.warning(repeated)
            value = found.parsed(text)
            if value is not None:
                st.session_state[found.key] = value
                if found.kind == SETTINGS:  # the form names those its method does not have
                    st.session_state[f"{found.key}.link"] = dict(value)
                if found is Session.budget:  # a link's budget is chosen, for the first result shown
                    session.budget_chosen, session.budget_link = LINK, value
            elif text:  # a link's value that does not read as one: said, not dropped silently
                st.warning(unreadable_link_value(found.url, found.kind, text))
    if session.corrupted and Session.corrupted_own.url not in st.query_params:  # from before the switch:
        session.corrupted_came_with = session.method or True  # its run used it (True: any method's)
    for settings_key, method_key in SETTINGS_OF.items():
        if settings_key in st.session_state:  # the URL's settings belong to the URL's method
            st.session_state[f"{settings_key}.method"] = (
                st.session_state.get(method_key) if method_key else None
            )


def begin() -> None:
    """The top of every script run, before any widget: the URL's values on a session's first
    run, then a task another page opened (``open_task``)."""
    seed_from_url()
    apply_pending_open()


def _url_text(value) -> str:
    if isinstance(value, bool):  # a toggle (FLAG)
        return "1" if value else "0"
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    if isinstance(value, (list, tuple)):
        return ",".join(str(part) for part in value)
    return str(value)


def page_keys(page: str | None = None) -> list[str]:
    """The session keys of the URL fields page ``page`` reads (by default the page this run shows,
    ``session.page``; every field where it is not known: a page run alone, outside the app)."""
    page = page or session.page
    return [found.key for found in VIEW_FIELDS if found.read_on(page)]


def url_params(keys=None, as_given: bool = False, page: str | None = None) -> dict:
    """{query parameter: text} of the view's values that are set, of the fields page ``page`` (by
    default this run's) reads; ``as_given``: the URL's own parameters instead, each with every
    value the link gives it (``/explore`` forwards them)."""
    if as_given:
        return {name: st.query_params.get_all(name) for name in st.query_params}
    found, own = {}, page_keys(page)
    for key in keys or own:
        value = st.session_state.get(key)
        if key not in own or value in (None, "", {}, []) or value == UNSAID.get(key):
            continue
        found[VIEW_KEYS[key]] = _url_text(value)
    return found


def write_to_url(keys=None) -> None:
    """Mirror the view's current values (those set in the session) into the URL: ``keys``, else
    every field this page reads. Another page's fields leave the URL (their values stay in the
    session, for when that page opens again): a link copied here names this page's view alone.

    Pages call it before anything that may stop or block the script (a run, ``st.stop``), so the
    URL names the view while it is on screen, a run in flight included. The whole query string
    is sent every time, in one message, even when the server's copy already holds it: the browser
    ignores a query string equal to its own, and one that a page switch left behind (the browser's
    URL without a parameter the server believes it shows) is put right by the next script run."""
    wanted, own = url_params(keys), page_keys()
    query = st.query_params.to_dict()
    for key, parameter in VIEW_KEYS.items():
        if key not in own or (key in (keys or own) and parameter not in wanted):
            query.pop(parameter, None)
    query.update(wanted)
    st.query_params.from_dict(query)


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


def link_settings_once(settings_key: str, method: str) -> dict:
    """A link's settings when they are ``method``'s, the first time a form asks (it names the rest)."""
    given = st.session_state.pop(f"{settings_key}.link", None) or {}
    return dict(given) if st.session_state.get(f"{settings_key}.method") in (None, method) else {}


def own_settings(method: str) -> dict:
    """The settings last set for ``method`` on Explore in this session, else none (its defaults):
    what a one-click run of that method starts from, never another method's fields of the same
    name (EAP-IG's 20 IG steps are not paraphrase pruning's warm start's 5)."""
    return dict(_by_method(Session.settings.key).get(method) or {})


def remember_settings(settings_key: str, method: str, values: dict) -> None:
    """The form's values become the method's settings: the URL's, and what every page starts from."""
    _by_method(settings_key)[method] = dict(values)
    st.session_state[settings_key] = dict(values)
    st.session_state[f"{settings_key}.method"] = method


# ----- widgets bound to the shared state --------------------------------------------------------
def _widget_key(key: str) -> str:
    return f"w.{key}"


def bind(
    widget: Callable,
    label: str,
    key: str,
    default=None,
    *,
    widget_key: str | None = None,
    shown: Callable | None = None,
    **options,
):
    """The one way a widget shows and sets a shared value (``key``: a ``Session`` field's key).

    Streamlit forgets a widget's state when a page without it runs, and a widget of the same key
    on another page (or another key: the Steer page's own boxes) is a new widget: the widget is
    handed the shared value whenever that changed elsewhere (another page, the URL, an opened
    task), else keeps its own. What the user sets becomes the shared value.

    ``shown``: maps the shared value to the one the widget can show (a slider over some budgets
    shows the nearest); then only a move of the widget sets the shared value, so a page whose
    options differ leaves the other pages' value as it was.
    """
    wkey = widget_key or _widget_key(key)
    synced = f"{wkey}.synced"
    shared = st.session_state.get(key)
    shared = default if shared is None else shared
    showing = shown(shared) if shown is not None else shared
    if wkey not in st.session_state or st.session_state.get(synced) != showing:
        if wkey in st.session_state:  # handed a value set elsewhere: a stale echo may follow
            st.session_state[f"{wkey}.handed"] = (showing, st.session_state[wkey], time.monotonic())
        st.session_state[wkey] = showing
    elif _stale_echo(wkey, showing):
        st.session_state[wkey] = showing
    else:  # the same key on another page is another widget: hand it its own value explicitly
        st.session_state[wkey] = st.session_state[wkey]
    value = widget(label, key=wkey, **options)
    st.session_state[synced] = value
    if shown is None or value != showing or st.session_state.get(key) is None:
        st.session_state[key] = value
    return value


def coming_value(key: str, widget_key: str | None = None):
    """The shared value ``key`` as this run will hold it once its widget is drawn: what the user
    just typed into the widget (not yet copied by ``bind``), else the shared value. For what a
    page draws above the widget (the answer's pills above the answer box)."""
    wkey = widget_key or _widget_key(key)
    if wkey in st.session_state and st.session_state[wkey] != st.session_state.get(f"{wkey}.synced"):
        return st.session_state[wkey]
    return st.session_state.get(key)


# how long after a widget was handed a value its old value coming back is taken for a stale echo
ECHO_S = 5.0


def _stale_echo(wkey: str, showing) -> bool:
    """Whether the widget's value is a stale echo of the value it had before it was last handed
    ``showing`` (the first run after the hand-off only, within ``ECHO_S`` seconds).

    The browser sends every widget's value with each rerun it asks for. A rerun asked for while
    the run that handed a widget a new value (a task opened from a callback: the MMLU picker's
    "Use this question") was on its way (another click, a drawing asking for its script) carries
    the value the box showed before, and Streamlit gives the browser's value precedence: the
    opened prompt would silently turn back into the old one. The old value coming back on the
    very next run is taken for that echo and the handed value is kept; the check is one-shot, so a
    user who really types the old value back has it from the next run on."""
    handed = st.session_state.pop(f"{wkey}.handed", None)
    if handed is None:
        return False
    given, before, at = handed
    return (
        given == showing
        and before != given
        and st.session_state.get(wkey) == before
        and time.monotonic() - at < ECHO_S
    )


def value(key: str, default=None):
    """A shared value by its key (a page's ``key`` argument: "method" or "bon.method" ...)."""
    found = st.session_state.get(key)
    return default if found is None else found


def set_value(key: str, value) -> None:
    """Set a shared value (a ``Session`` field's key); a widget bound to it shows it next."""
    st.session_state[key] = value


def nearest(options, wanted: int) -> int:
    """The option nearest ``wanted`` on a log scale (budgets span decades)."""
    return min(options, key=lambda b: abs(math.log(max(b, 1)) - math.log(max(wanted, 1))))


def budget_select(label: str, key: str, options: list[int], fallback: int, chosen_for=None) -> int:
    """The slider over ``options`` for the shared budget ``key``: it shows the option nearest the
    shared budget (``fallback`` when there is none yet), and only a move of it sets the budget.

    A move is the user's choice (``budget_chosen``): for ``chosen_for`` (a result's model and mark,
    ``result_view.open_budget``), by default for every result of the session's model (Compare's)."""
    shared = value(key)
    before = nearest(options, shared if isinstance(shared, int) else fallback)
    moved = bind(
        st.select_slider,
        label,
        key,
        shown=lambda shared: nearest(options, shared if isinstance(shared, int) else fallback),
        options=options,
        format_func=lambda b: f"{b:,}",
    )
    if key == Session.budget.key and moved != before:
        session.budget_chosen = chosen_for or (session.model, None)
    return int(moved)


LINK = "link"  # ``budget_chosen`` of a budget a link named: the user's, for the first result shown


# ----- what depends on the prompt ------------------------------------------------------------------
INPUTS_FOR = Session.inputs_for.key


def inputs_belong_to(prompt: str) -> bool:
    """Whether the answer, foil and corrupted prompt in the state were set for ``prompt``.

    A session opened from a URL (or a gallery example) brings its own values: the first prompt
    seen adopts them rather than proposing new ones (any of the three given: the inputs propose
    only those it left out).
    """
    if INPUTS_FOR not in st.session_state:
        given = any(value is not None for value in (session.answer, session.foil, session.corrupted))
        session.inputs_for = prompt if given else None
    return session.inputs_for == prompt


def adopt_prompt(prompt: str, values: dict) -> None:
    """A new prompt: set what depends on it (answer, foil, corrupted prompt...) and drop the
    results and the budget that belonged to the old one (a session's first prompt had none: a
    link's budget stays, when the link left the prompt's inputs to be proposed)."""
    first = session.inputs_for is None
    for key, value in values.items():
        set_value(key, value)
    session.inputs_for = prompt
    del session.corrupted_answer  # set again where the corrupted prompt is proposed for an answer
    session.results = {}
    session.result_requests = {}
    if not first:
        del session.budget
        del session.budget_chosen
        del session.corrupted_own, session.corrupted_came_with


# ----- opening a task in Explore from any page ----------------------------------------------------
def open_task(
    task: dict,
    *,
    model: str | None = None,
    method: str | None = None,
    settings: dict | None = None,
    budgets: str | None = None,
    corrupted_note: str | None = None,
    foil_note: str | None = None,
    run: bool = True,
    switch: bool = True,
    budget: int | None = None,
    **extra,
) -> None:
    """Open ``task`` (clean, corrupted, answer, foils, metric) in Explore: from the Gallery, a
    Dataset row, the MMLU picker, an opened file. Nothing is set now (a widget of this run may
    already hold a value): the task waits in the session and ``begin`` sets every value at the
    top of the next script run, before any widget exists. ``run``: Explore runs it on opening;
    ``switch``: go to Explore now (inside the app's navigation); ``budget``: the budget to show
    (the Dataset row's), chosen for the first result as a link's is, else the result's own
    opening; ``extra``: other fields to set (``mmlu_prompt``, ``mmlu_note``)."""
    session.pending_open = {
        "task": dict(task),
        "model": model,
        "method": method,
        "settings": settings,
        "budgets": budgets,
        "corrupted_note": corrupted_note,
        "foil_note": foil_note,
        "run": run,
        "budget": budget,
        "extra": extra,
    }
    if switch:
        switch_to("explore", url_params(page="explore"))


def open_is_waiting() -> bool:
    """Whether a task ``open_task`` left waits for the next run's ``begin`` (one opened after this
    run's top, by a callback or a run stopped for this one)."""
    return bool(session.pending_open)


def apply_pending_open() -> None:
    """Set every value of a task ``open_task`` left waiting (called before any widget exists)."""
    pending = session.pending_open
    if not pending:
        return
    del session.pending_open
    del session.instrument_view  # an opened task starts with its own graph view (no other's card)
    task = pending["task"]
    for field, value in (
        (Session.model, pending["model"]),
        (Session.method, pending["method"]),
        (Session.budgets, pending["budgets"]),
        (Session.metric, task.get("metric") or "logit_diff"),
    ):
        if value is not None:
            set_value(field.key, value)
    if pending["settings"] is not None:  # the form of the task's method starts from these
        method = pending["method"] or session.method
        session.settings = dict(pending["settings"])
        st.session_state[f"{Session.settings.key}.method"] = method
        _by_method(Session.settings.key)[method] = dict(pending["settings"])
    foils = list(task.get("foils") or [])
    # the prompt with its own answer, foil and corrupted prompt: Explore proposes none of its own,
    # and the old prompt's results and budget are dropped
    adopt_prompt(
        task["clean"],
        {
            Session.prompt.key: task["clean"],
            Session.answer.key: task["answer"],
            Session.foil.key: foils[0] if foils else "",
            Session.corrupted.key: task.get("corrupted") or "",
        },
    )
    if pending.get("budget") is not None:  # after adopt_prompt, which drops the old prompt's
        session.budget, session.budget_chosen = int(pending["budget"]), LINK
    session.corrupted_note = pending["corrupted_note"]
    session.corrupted_proposed = task.get("corrupted") or ""
    del session.corrupted_own  # in use for the method it came with, hidden for others (ui/corrupted_box)
    session.corrupted_came_with = (pending["method"] or session.method) if task.get("corrupted") else None
    session.foil_note = pending["foil_note"]
    del session.foil_proposed
    session.more_foils = tuple(foil for foil in foils[1:] if foil != task["answer"])
    if session.more_foils:  # the task's metric is against every foil: said, never dropped
        every = ", ".join(repr(foil) for foil in (foils[0], *session.more_foils))
        session.foil_note = " ".join(
            part
            for part in (
                pending["foil_note"],
                f"This task compares the answer with {len(session.more_foils) + 1} foils ({every}); "
                "the box shows the first, and typing another foil replaces them all.",
            )
            if part
        )
        session.foil_proposed = foils[0]
    session.autorun = bool(pending["run"])
    for name, value in (pending.get("extra") or {}).items():
        setattr(session, name, value)
