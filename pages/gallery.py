"""Gallery: ready examples stored with the project; they open without any model pass."""

import streamlit as st

from circuitviz.ui.navigation import inside_app

inside_app()  # never a page alone, outside the app (see inside_app)

st.title("Gallery")
st.caption(
    "Ready circuits of the embedded Gemma-3-270M, computed once and stored with the project: they "
    "open at once, without loading the model."
)  # re-running one live is the button below, hidden in demo mode with the sentence it needs

# torch, plotly and the engine load after the title and caption are on screen (first paint)
from circuitviz.ui import budget_box, loaders, result_view, state  # noqa: E402
from circuitviz.ui.gallery_view import (  # noqa: E402
    other_model_sentence,
    unknown_example_budget_sentence,
    unknown_example_sentence,
)

examples = loaders.gallery_index()
if not examples:
    st.warning("No examples are built; run `python scripts/build_gallery.py` once.")
    st.stop()
by_slug = {e["slug"]: e for e in examples}
# the link's example, on the session's first view of the Gallery (the link's budget is for it alone;
# later, the field holds the example chosen, and the budget field mirrors the slider)
linked = None if state.widget_value("gallery.visited") else state.session.gallery_slug
state.set_widget_value("gallery.visited", True)
if state.session.gallery_slug not in by_slug:  # none chosen yet, or a link's example the gallery lacks
    unknown = unknown_example_sentence(state.session.gallery_slug, examples)
    if unknown:
        st.info(unknown)
    state.session.gallery_slug = examples[0]["slug"]
slug = state.bind(  # the choice is the session's: a page switch and back keeps it (a widget's own is dropped)
    st.segmented_control,
    "example",
    state.Session.gallery_slug.key,
    widget_key="gallery.slug",
    options=list(by_slug),
    format_func=lambda s: by_slug[s]["title"].split(":")[0],
)
slug = slug or examples[0]["slug"]
GALLERY_URL = [state.Session.gallery_slug.key, state.Session.gallery_budget.key]
state.write_to_url([state.Session.gallery_slug.key])  # the example shown (``example``): a link reopens it
entry = by_slug[slug]
st.subheader(entry["title"])
st.write(entry["description"])
headline = entry["headline"]
from circuitviz.methods import method_traits  # noqa: E402

held_out = entry.get("held_out") or {}
carried = (
    f" On {held_out['paraphrases']} paraphrases of the prompt it never saw, the same circuit's mean NDF is "
    f"{held_out['ndf']:.2f}."
    if held_out.get("paraphrases")
    else ""
)
st.caption(
    f"Found with {method_traits(entry['method']).label}: {headline['n_edges']:,} edges (of "
    f"{result_view.graph_edge_total_from_cfg(entry)}) reach NDF {headline['ndf']:.2f} at budget "
    f"{headline['budget']:,}.{carried}"
)


with st.container(key="controls-gallery-rerun"):  # a control: hidden in demo mode (ui/demo.py)
    rerun = st.button("Re-run live on the Explore page", key="gallery.rerun")
    if other_model_sentence(state.session.model, entry["model_id"]):
        st.info(other_model_sentence(state.session.model, entry["model_id"]))
if rerun:
    state.open_task(  # the example's task, model, method, settings and budgets; Explore runs it
        entry["task"],
        model=entry["model_id"],
        method=entry["method"],
        settings=entry["config"],
        budgets=budget_box.budgets_text(entry["budgets"]),
        corrupted_note="The example's own corrupted prompt.",
    )

result, labels = loaders.gallery_example(slug)  # its notes in today's words (tests/test_gallery_words.py)
budget_key = f"gallery.{slug}.budget"
opened_at = ""
if state.value(budget_key) is None:  # the example's first view: the link's budget, else its readable one
    asked = state.session.gallery_budget if slug == linked else None  # ``example_budget``, with its example
    opening = result_view.demo_budget(result)
    if asked is not None and asked not in result.budgets:
        st.info(unknown_example_budget_sentence(asked, sorted(result.budgets), opening))
    state.set_value(budget_key, asked if asked in result.budgets else opening)
    if asked in result.budgets and asked != opening:
        opened_at = f" This link opened it at budget {asked:,}."
st.caption(
    f"Stored when the gallery was built ({result.device}); opening it runs nothing. The view opens at "
    f"the smallest budget whose circuit of at most {result_view.READABLE_EDGES} edges reaches NDF "
    f"{result_view.GOOD_NDF}, else at the most faithful such circuit.{opened_at}"
)  # it promised a sentence saying which: demo mode hides that sentence (under the slider)


def gallery_result_view() -> None:
    """The example's view, a fragment of its own; its budget goes into the URL (``example_budget``)
    as the slider moves (a slider's move reruns the fragment alone)."""
    result_view.result_view(
        result, labels=labels, key=f"gallery.{slug}", budget_key=budget_key, timings=False
    )
    state.session.gallery_budget = state.value(budget_key)
    state.write_to_url(GALLERY_URL)


st.fragment(gallery_result_view)()
