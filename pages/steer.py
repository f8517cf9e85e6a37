"""Steer: the SAE features a circuit's nodes drive, what they mean, and what zeroing them does."""

import streamlit as st

from circuitviz.core.text import markdown_sentence, markdown_text
from circuitviz.ui.navigation import inside_app

inside_app()  # never a page alone, outside the app (see inside_app)

st.title("Steer with SAE features")
st.caption(
    "Each node of the circuit (the one computed for this prompt, at the budget chosen) is labelled "
    "with the SAE features it writes on this prompt: their top contexts in the training corpus and "
    "the tokens they promote. Pick features, zero them, and compare the change of the answer's "
    "metric with zeroing as many random features."
)

from circuitviz.ui import kept_results, link_choices, loaders, run, state, steer  # noqa: E402
from circuitviz.ui.sidebar import model_choice  # noqa: E402

model_id, device = model_choice()
loaders.model_future(model_id, device)  # the model starts loading now, in the background
model = run.load_model_or_stop(model_id, device)

from circuitviz import render  # noqa: E402  (after the model: torch is loaded)
from circuitviz.core.tasks import PromptTask, TaskError  # noqa: E402
from circuitviz.labels import sae_features as sae_labels  # noqa: E402
from circuitviz.labels.llm import BackgroundLabels, LLMLabeler, llm_status  # noqa: E402
from circuitviz.labels.steer import steer as zero_features  # noqa: E402
from circuitviz.methods.registry import method_traits  # noqa: E402
from circuitviz.services import sae_store  # noqa: E402

typed_folders = loaders.browser_paths_allowed()  # off on a shared server: no SAE folder typed here
sources = ["embedded", "local folder", "hub"] if typed_folders else ["embedded", "hub"]
link_choices.seed("steer.source", state.Session.steer_source, sources)  # the link's (``sae``), or kept
source = st.radio("SAEs", sources, horizontal=True, key="steer.source")
link_choices.keep(state.Session.steer_source, source)
if source != "hub":  # a hub SAE's release and id: out of another source's link
    del state.session.steer_release, state.session.steer_sae_id
state.write_to_url()  # the source chosen: the branches below may stop the page
try:
    if source == "embedded":
        saes = sae_labels.load_embedded_saes(model, model_id)
    elif source == "local folder":
        folder = state.bind(  # kept when another page opens (a page switch and back emptied it)
            st.text_input,
            "Folder written by sae-lens (cfg.json + sae_weights.safetensors)",
            state.Session.steer_folder.key,
            "",
            widget_key="steer.folder",
        )
        saes = [sae_labels.load_local_sae(folder, model)] if folder else st.stop()
    else:
        ships = bool(sae_store.embedded_sae_folders(model_id))  # 'embedded' is a way only where SAEs ship
        others = [other for other in sources if other not in ("hub", *(() if ships else ("embedded",)))]
        # the residual-stream releases first, the default among them; those on attention or MLP
        # outputs out (the box opened on gemma-scope-2-270m-pt-att, which Load refused once downloaded)
        releases, left_out = sae_store.residual_releases(sae_store.hub_releases(model_id))
        if not releases:  # two empty boxes, and Load tried to fetch 'None/None'
            sentence = steer.no_hub_saes_sentence(model_id, others, left_out)
            st.info(markdown_sentence(sentence))  # a typed model id: escaped
            st.stop()
        offline = sae_store.hub_unavailable_reason() is not None
        if offline:  # those an earlier download left in the Hugging Face cache only
            cached = sae_store.cached_hub_saes(releases)
            if not cached:  # the ways out this page offers (a shared server: no folder); escaped
                st.info(markdown_sentence(steer.hub_off_sentence(model_id, others)))
                st.stop()
            st.caption(markdown_sentence(steer.cached_hub_caption(cached, releases, model_id)))
            releases = cached
        release, sae_id = link_choices.hub_sae(releases)  # the link's (``sae_release``, ``sae_id``), or kept
        if left_out:
            st.caption(markdown_sentence(steer.left_out_releases_sentence(left_out)))
        state.write_to_url()  # the SAE chosen: the page stops until Load is pressed
        # a press is one run's: the SAE it loaded stays while its release and id do
        if st.button("Load", key="steer.hub.load"):
            state.session.steer_hub_loaded = (release, sae_id)
        if state.session.steer_hub_loaded != (release, sae_id):
            st.stop()
        # a download the first time (seconds to minutes, nothing on screen said so): the time it has
        # taken beside the spinner; a failure names the page's other sources as well
        with st.spinner(steer.hub_loading_words(release, sae_id, offline), show_time=True):
            try:
                saes = [sae_labels.load_hub_sae(release, sae_id, model)]
            except sae_store.SaeUnavailable as error:
                raise sae_store.SaeUnavailable(steer.hub_way_out(str(error), others)) from None
except sae_store.NoSaesShip:  # a state of the model, not a fault: an info with the ways to SAEs
    others = tuple(other for other in sources if other != "embedded")
    st.info(markdown_sentence(sae_labels.no_saes_sentence(model_id, others)))  # a typed model id: escaped
    st.stop()
except sae_store.SaeUnavailable as error:
    del state.session.steer_hub_loaded  # a failed Load waits for another press (each rerun retried it)
    st.error(markdown_sentence(str(error)))  # may quote the user's text: escaped
    st.stop()
st.text("Loaded: " + "; ".join(sae.name for sae in saes))

columns = st.columns([3, 1, 1])
example = steer.example_defaults()  # the page's own example only where no prompt was chosen
with columns[0]:
    prompt = steer.shared_text_input("Prompt", "prompt", "steer.prompt", default=example["prompt"])
with columns[1]:
    answer = steer.shared_text_input("answer", "answer", "steer.answer", default=example["answer"])
with columns[2]:
    foil = steer.shared_text_input("foil", "foil", "steer.foil", default=example["foil"])
task = PromptTask(prompt, "", answer, (foil,) if foil else (), "logit_diff" if foil else "logprob")
problem = steer.task_problem(model, task)  # an empty prompt, an answer of several tokens...: said now
if problem is not None:
    st.error(markdown_sentence(problem))  # may quote the user's text: escaped
    if not prompt.strip():  # nothing to label either
        state.write_to_url()
        st.stop()
unknown_method = steer.link_method_sentence()  # a link's method the app lacks: said, and the default used
if unknown_method:
    st.warning(unknown_method)
result = kept_results.result_for(state.session.method, model_id, prompt)
result = result or next(  # any kept circuit of this prompt on this model (another model's nodes differ)
    (r for r in kept_results.results().values() if r.task.clean == prompt and r.model_id == model_id), None
)
result = result or steer.stored_circuit(model, model_id, prompt, answer, foil)  # a link opened anew
example_nodes = False  # the Nodes box's own example, labelled as though they were a circuit's
if result is not None:
    nodes, budget, total = steer.circuit_at_budget(result)
    st.caption(
        markdown_text(  # the note may quote the user's answer and foil: escaped
            f"The {len(nodes)} strongest of the {total} nodes of the circuit at "
            f"{steer.budget_words(result, budget)} found by {method_traits(result.method).label} (the budget "
            f"chosen on Explore, Compare or Paraphrases; change it there).{steer.other_task_note(result.task, answer, foil)}"
        )
    )
else:
    # a link opened after a code change finds none stored: said, and run
    st.caption(steer.no_circuit_sentence())
    if st.button("Compute it on Explore", key="steer.explore"):
        steer.compute_on_explore(model, prompt, answer, foil)
    nodes_field = state.Session.steer_nodes  # in the link (``nodes``) unless the example's own
    typed = state.bind(st.text_input, "Nodes", nodes_field.key, nodes_field.default, widget_key="steer.nodes")
    nodes = [n.strip() for n in typed.split(",") if n.strip()]
    example_nodes = nodes == [n.strip() for n in nodes_field.default.split(",")]
    if not nodes:  # an empty box labelled nothing and said nothing
        st.info("Type at least one node to label, e.g. a3.h0, m5.")
        state.write_to_url()
        st.stop()

try:
    with st.spinner("Labelling nodes with SAE features…"):
        labels = sae_labels.circuit_node_features(model, prompt, nodes, saes, top_k=3)
except sae_store.SaeUnavailable as error:
    st.error(markdown_sentence(str(error)))  # may quote the user's text: escaped
    state.write_to_url()  # the nodes typed: the URL names them before the page stops
    st.stop()
rows = steer.feature_table(steer.feature_rows(labels, nodes))  # text that wraps: nothing runs past the edge
if example_nodes:  # the table said nothing of it: read as a circuit's nodes
    st.caption(
        "Example nodes (the Nodes box's own), not a circuit's: type yours, or compute the circuit above."
    )
if steer.scroll_note(rows):  # a long table scrolls in its frame: said above it, as it opens
    st.caption(steer.scroll_note(rows))
with st.container(key=steer.FEATURE_TABLE_KEY):
    st.html(steer.FEATURE_TABLE_STYLE)
    st.table(rows, hide_index=True, height=steer.feature_table_height(rows))
    st.caption(markdown_text(steer.FEATURE_TABLE_NOTE))  # what the grid said on its columns' hovers

options = steer.feature_options(labels)
# The button sits beside the picker, level with its box's top. A picker that has the focus grows a line
# for typing and gives it back when a click elsewhere takes the focus: a button below it would move
# up between the press and the release, and a user's first click on it would be lost.
picker_column, button_column = st.columns([3, 1], vertical_alignment="top")
st.html(steer.WRAP_CHOSEN)  # every chosen feature in view, not a row scrolled sideways
with picker_column:
    chosen, unknown_features = steer.chosen_features(options)  # the link's (``zero``) on a first draw
with button_column:
    st.space("small")  # the height of the picker's label: the button level with the picker's box
    zero_clicked = st.button(
        "Zero them", type="primary", disabled=not chosen or problem is not None, key="steer.zero"
    )
if unknown_features:
    st.info(unknown_features)
SHOWN_CONTEXTS = 3  # the chosen features whose top contexts are quoted below the picker
for layer, feature in chosen[:SHOWN_CONTEXTS]:  # what the chosen features fired on, as marked text
    by_layer = {sae.layer: sae for sae in saes}
    description = sae_labels.feature_description(model, by_layer[layer], feature, n_contexts=3)
    st.markdown(
        f"**L{layer}/{feature}** fired on: "
        + " · ".join(
            render.context_html(steer.readable_context(context)) for context in description["contexts"]
        ),
        unsafe_allow_html=True,
    )
if len(chosen) > SHOWN_CONTEXTS:  # the others are named, never dropped silently
    rest = ", ".join(f"L{layer}/{feature}" for layer, feature in chosen[SHOWN_CONTEXTS:])
    st.caption(f"Also chosen (what each does is in the table above): {rest}.")
if problem is None:
    st.caption(markdown_text(f"The metric: {steer.metric_sentence(task)}."))  # quotes the answer and foil
# the figures stay while what was zeroed, and on what, stands (another click or page emptied them)
zeroing = (model_id, device, prompt, answer, foil, tuple(chosen), tuple(sae.name for sae in saes))
if zero_clicked and problem is None:
    try:
        state.session.steer_outcome = (zeroing, zero_features(model, task, chosen, saes, n_random=5))
    except (TaskError, sae_store.SaeUnavailable) as error:
        st.error(markdown_sentence(str(error)))  # may quote the user's text: escaped
kept = state.session.steer_outcome
if problem is None and kept is not None and kept[0] == zeroing:
    st.table(steer.outcome_rows(kept[1], task, len(chosen)), hide_index=True)  # names the metric
    st.table(steer.top_token_rows(kept[1]), hide_index=True)

enabled, sentence = llm_status()
st.caption(sentence)
if enabled and options and st.button("Describe the features with the LLM"):
    if state.session.steer_labels is None:
        state.session.steer_labels = BackgroundLabels(LLMLabeler())
    jobs = state.session.steer_labels
    by_layer = {sae.layer: sae for sae in saes}
    for layer, feature in options:
        jobs.submit(
            f"{layer}/{feature}",
            sae_labels.feature_description(model, by_layer[layer], feature, n_contexts=10),
        )
if state.session.steer_labels is not None:
    jobs = state.session.steer_labels
    done, total = jobs.progress
    st.progress(done / max(total, 1), text=f"LLM labels: {done} of {total} (refresh to update)")
    for key, label in jobs.results().items():
        st.text(steer.readable(f"{key}: {label.get('description') or label.get('error')}"))
state.write_to_url()
