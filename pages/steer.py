"""Steer: the SAE features a circuit's nodes drive, what they mean, and what zeroing them does."""

import html

import streamlit as st

from circuitviz.ui import run

st.title("Steer with SAE features")
st.caption(
    "Each circuit node is labelled with the SAE features it writes on this prompt (their top "
    "contexts in the training corpus, the token marked, and the tokens they promote). Pick "
    "features, zero them, and compare the answer's metric with zeroing as many random features."
)

model_id = st.session_state.get("model") or "gemma-3-270m"
model = run.load_model_or_stop(model_id, st.session_state.get("device", "auto"))

from circuitviz.labels import sae as sae_labels  # noqa: E402  (after the model: torch is loaded)
from circuitviz.labels.llm import BackgroundLabels, LLMLabeler, llm_status  # noqa: E402
from circuitviz.labels.steer import circuit_nodes, steer  # noqa: E402
from circuitviz.tasks import PromptTask, TaskError  # noqa: E402

source = st.radio("SAEs", ["embedded", "local folder", "hub"], horizontal=True, key="steer.source")
try:
    if source == "embedded":
        saes = sae_labels.load_embedded_saes(model, model_id)
    elif source == "local folder":
        folder = st.text_input(
            "Folder written by sae-lens (cfg.json + sae_weights.safetensors)", key="steer.folder"
        )
        saes = [sae_labels.load_local_sae(folder, model)] if folder else st.stop()
    else:
        reason = sae_labels.hub_unavailable_reason()
        if reason:
            st.info(reason)
            st.stop()
        releases = sae_labels.hub_releases(model_id)
        release = st.selectbox("release", sorted(releases))
        sae_id = st.selectbox("SAE id", releases.get(release, []))
        saes = [sae_labels.load_hub_sae(release, sae_id, model)] if st.button("Load") else st.stop()
except sae_labels.SaeUnavailable as error:
    st.error(str(error))
    st.stop()
st.caption("Loaded: " + "; ".join(html.escape(sae.name) for sae in saes))

result = st.session_state.get("explore.result")
task = result.task if result is not None else None
columns = st.columns([3, 1, 1])
prompt = columns[0].text_input("Prompt", task.clean if task else "The nurse said that", key="steer.prompt")
answer = columns[1].text_input("answer", task.answer if task else " she", key="steer.answer")
foil = columns[2].text_input("foil", task.foils[0] if task and task.foils else " he", key="steer.foil")
# every result has a curve; only methods that choose their own circuits (Best-of-N) fill .circuits
budgets = sorted(set(result.budgets) | set(result.circuits)) if result is not None else []
if result is not None and result.task.clean == prompt and budgets:
    budget = st.session_state.get("budget")
    budget = budget if budget in budgets else max(budgets)
    nodes = circuit_nodes(result.graph, result.circuit(budget))
    st.caption(f"Nodes of the Explore circuit at {budget:,} edges.")
else:
    nodes = [
        n.strip()
        for n in st.text_input("Nodes", "a3.h0, m5, m9, m14", key="steer.nodes").split(",")
        if n.strip()
    ]

try:
    with st.spinner("Labelling nodes with SAE features…"):
        labels = sae_labels.circuit_node_features(model, prompt, nodes, saes, top_k=5)
except sae_labels.SaeUnavailable as error:
    st.error(str(error))
    st.stop()

options = {}
for node, entry in labels.items():
    with st.expander(f"{node}" + ("" if entry["sae"] else " — no SAE"), expanded=False):
        if entry["sae"] is None:
            st.write(entry["reason"])
        for feature in entry["features"]:
            key = (entry["sae_layer"], feature["feature"])
            options[key] = f"{node}: {feature['label']}"
            st.markdown(
                f"**{html.escape(feature['label'])}** — share {feature['share']:.2f} at "
                f"`{html.escape(repr(feature['token']))}`"
            )
            for context in feature["contexts"]:
                st.markdown("&emsp;" + sae_labels.context_html(context), unsafe_allow_html=True)

chosen = st.multiselect(
    "Features to zero", list(options), format_func=lambda key: options[key], key="steer.features"
)
if st.button("Zero them", type="primary", disabled=not chosen, key="steer.zero"):
    try:
        outcome = steer(model, PromptTask(prompt, "", answer, (foil,)), chosen, saes, n_random=5)
    except (TaskError, sae_labels.SaeUnavailable) as error:
        st.error(str(error))
    else:
        metrics = st.columns(3)
        metrics[0].metric("metric before", f"{outcome['before']['metric']:.3f}")
        metrics[1].metric("after zeroing", f"{outcome['after']['metric']:.3f}", f"{outcome['change']:+.3f}")
        metrics[2].metric(
            f"{len(chosen)} random features",
            f"{outcome['random']['mean_metric']:.3f}",
            f"{outcome['random']['mean_change']:+.3f}",
        )
        rows = zip(outcome["before"]["top_tokens"], outcome["after"]["top_tokens"])
        st.table([{"before": f"{b[0]!r} {b[1]:.3f}", "after": f"{a[0]!r} {a[1]:.3f}"} for b, a in rows])

enabled, sentence = llm_status()
st.caption(sentence)
if enabled and options and st.button("Describe the features with the LLM"):
    jobs = st.session_state.setdefault("steer.llm", BackgroundLabels(LLMLabeler()))
    by_layer = {sae.layer: sae for sae in saes}
    for layer, feature in options:
        description = sae_labels.feature_description(model, by_layer[layer], feature, n_contexts=10)
        jobs.submit(f"{layer}/{feature}", description)
if "steer.llm" in st.session_state:
    jobs = st.session_state["steer.llm"]
    done, total = jobs.progress
    st.progress(done / max(total, 1), text=f"LLM labels: {done} of {total} (refresh to update)")
    for key, label in jobs.results().items():
        st.text(f"{key}: {label.get('description') or label.get('error')}")
