"""The choices a link reopens that live in widgets of their own key: Explore's result-view
toggles, Compare's held-out toggle, Steer's SAE source (and a hub SAE's release and id), the
Dataset page's atlas and its view (its tab and count of clusters included).

Each has a ``state.Field`` with a URL parameter on its page. Before the widget is drawn, ``seed``
hands it the field's value when it holds none of its own: a link's first run, or the page opened
again after another (Streamlit drops a widget's value when a page without the widget runs, so a
switch to Explore and back lost it); after, ``keep`` copies what the widget shows into the field,
which the page writes to its URL. A link's value that is none of the widget's choices is said in
one sentence and the page's own shown (``link_values.link_choice_sentence``)."""

from __future__ import annotations

import streamlit as st

from . import state
from .link_values import clusters_refused, link_choice_sentence

# the toggles a link holds, by their widgets' keys: the result view's on Explore (``result_view``),
# Compare's held-out one, the Dataset page's refused prompts
TOGGLES = {
    "explore.faded": state.Session.explore_faded,
    "explore.sae": state.Session.explore_sae,
    "explore.feature_names": state.Session.feature_names,
    "compare.transfer": state.Session.compare_held_out,
    "dataset.refused": state.Session.dataset_refused,  # the Prompts tab's "only the prompts the check refuses"
}
EXPLORE_TOGGLES = [field.key for key, field in TOGGLES.items() if key.startswith("explore.")]


def seed(widget_key: str, field, options=None, default=None) -> None:
    """Before the widget of key ``widget_key`` is drawn, where it holds no value of its own: hand
    it ``field``'s value (one of ``options`` when given), else ``default`` (None: the widget's
    own). A field's value none of ``options`` is said in one sentence, once: ``keep`` then
    replaces it with what the widget shows. A value of the widget's own that ``options`` no
    longer holds (the Dataset page's budget slider, another atlas opened) becomes ``default``."""
    if state.has_widget_value(widget_key):  # its own (one no longer offered: the default)
        if options is not None and default is not None and state.widget_value(widget_key) not in options:
            state.set_widget_value(widget_key, default)
        return
    held = state.value(field.key)
    if held is not None and (options is None or held in options):
        state.set_widget_value(widget_key, held)
        return
    if held is not None:
        used = default if default is not None else next(iter(options), None)
        st.warning(link_choice_sentence(field.url, str(held), list(options), str(used)))
    if default is not None:
        state.set_widget_value(widget_key, default)


def keep(field, shown):
    """What the widget shows becomes ``field``'s value (the URL's, and what ``seed`` hands back)."""
    state.set_value(field.key, shown)
    return shown


def toggle(label: str, key: str, **options) -> bool:
    """``st.toggle``; one of ``TOGGLES`` (by its key) reopens from its field, the page's link."""
    field = TOGGLES.get(key)
    if field is None:
        return st.toggle(label, key=key, **options)
    seed(key, field)
    return bool(keep(field, st.toggle(label, key=key, **options)))


# the Dataset page's tabs: each tab's name in a link (``tab``), and its label
DATASET_TABS = {
    "curves": "Curves",
    "consensus": "Consensus circuit",
    "clusters": "Clusters",
    "prompts": "Prompts",
}


def tabs(key: str, field, labels: dict[str, str]):
    """``st.tabs`` over ``labels`` ({name in the link: label}) whose open tab is ``field``'s: the
    first is the default and stays out of the link. A tab picked reruns the page (a tab that
    tracks no state is the browser's alone: a link opened the first one, and so did a switch
    to another page and back). A link's name the page lacks is said in one sentence, and the
    first opens."""
    first = next(iter(labels))
    if not state.has_widget_value(key):
        held = state.value(field.key)
        if held is not None and held not in labels:
            st.warning(link_choice_sentence(field.url, str(held), list(labels), first))
        state.set_widget_value(key, labels.get(held, labels[first]))
    shown = st.tabs(list(labels.values()), key=key, on_change="rerun")
    open_label = state.widget_value(key)
    keep(field, next((name for name, label in labels.items() if label == open_label), first))
    return shown


def clusters(ks: list[int], n_prompts: int, budget: int):
    """The Dataset page's count of clusters ("auto", or one of ``ks``), in the link (``clusters``;
    auto, the default, stays out) and kept across a switch to another page and back. A count this
    budget does not offer (a link's, or one chosen at another budget) is said in one sentence, and
    auto is shown."""
    field, key = state.Session.dataset_clusters, f"dataset.k.{ks[-1]}"  # each range of counts its own
    if not state.has_widget_value(key):
        held = state.value(field.key)
        if held is not None and held not in ks:
            st.warning(clusters_refused(held, ks, n_prompts, budget))
        state.set_widget_value(key, held if held in ks else "auto")
    chosen = st.segmented_control("clusters", ["auto", *ks], key=key) or "auto"
    keep(field, None if chosen == "auto" else int(chosen))
    return chosen


def hub_sae(releases: dict[str, list[str]]) -> tuple[str | None, str | None]:
    """The Steer page's hub SAE: its release and id, in the link (``sae_release``, ``sae_id``) and
    kept across a switch to another page and back (until 2026-12-06 a link with ``sae=hub`` opened
    the first release's first SAE). A link's release or id the directory lacks is said in one
    sentence and the first shown; another release picked opens at its first id. The releases are
    offered in the order given (``sae_store.residual_releases``': residual-stream ones first)."""
    release_field, id_field = state.Session.steer_release, state.Session.steer_sae_id
    names = list(releases)
    before = state.value(release_field.key)
    seed("steer.release", release_field, names, next(iter(names), None))
    release = keep(release_field, st.selectbox("release", names, key="steer.release"))
    if before is not None and release != before:  # the other release's id: not one of this one's
        state.set_value(id_field.key, None)
    ids = releases.get(release, [])
    key = f"steer.sae_id.{release}"  # each release's ids their own box
    seed(key, id_field, ids, next(iter(ids), None))
    return release, keep(id_field, st.selectbox("SAE id", ids, key=key))
