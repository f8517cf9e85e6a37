"""Gallery: ready examples stored with the project; they open without any model pass."""

import streamlit as st

st.title("Gallery")
st.caption(
    "Ready circuits of the embedded Gemma-3-270M, computed once with EAP-IG (20 steps) and stored "
    "with the project: they open at once, without loading the model. Each can be re-run live."
)

# torch, plotly and the engine load after the title and caption are on screen (first paint)
from circuitviz.ui import inputs, loaders, result_view, state  # noqa: E402

examples = loaders.gallery_index()
if not examples:
    st.warning("No examples are built; run `python scripts/build_gallery.py` once.")
    st.stop()
by_slug = {e["slug"]: e for e in examples}
if st.session_state.get("gallery.slug") not in by_slug:
    st.session_state["gallery.slug"] = examples[0]["slug"]
slug = st.segmented_control(
    "example", list(by_slug), key="gallery.slug", format_func=lambda s: by_slug[s]["title"].split(":")[0]
)
slug = slug or examples[0]["slug"]
entry = by_slug[slug]
st.subheader(entry["title"])
st.write(entry["description"])
headline = entry["headline"]
st.caption(
    f"{headline['n_edges']:,} edges (of {result_view.graph_edge_total_from_cfg(entry)}) reach NDF "
    f"{headline['ndf']:.2f} at budget {headline['budget']:,}."
)


def rerun_live():
    task = entry["task"]
    for key, value in {
        "model": entry["model_id"],
        "prompt": task["clean"],
        "corrupted": task["corrupted"],
        "answer": task["answer"],
        "foil": (task["foils"] or [""])[0],
        "metric": task.get("metric", "logit_diff"),
        "method": entry["method"],
        "budgets": inputs.budgets_text(entry["budgets"]),
    }.items():
        state.set_value(key, value)
    st.session_state[state.INPUTS_FOR] = task["clean"]  # these values belong to this prompt
    st.session_state[state.RESULTS] = {}
    st.session_state["corrupted_note"] = "The example's own corrupted prompt."
    st.session_state["settings"] = entry["config"]
    st.session_state["explore.autorun"] = True


if st.button("Re-run live on the Explore page", on_click=rerun_live, key="gallery.rerun"):
    st.switch_page("pages/explore.py")

result, labels = loaders.gallery_example(slug)
if st.session_state.get(f"gallery.{slug}.budget") is None:
    state.set_value(f"gallery.{slug}.budget", result_view.demo_budget(result))
st.caption(
    f"Stored when the gallery was built ({result.device}); opening it runs nothing. The view opens at "
    f"the smallest budget whose circuit reaches NDF {result_view.GOOD_NDF} (or the most faithful small one)."
)
st.fragment(result_view.result_view)(
    result, labels=labels, key=f"gallery.{slug}", budget_key=f"gallery.{slug}.budget", timings=False
)
