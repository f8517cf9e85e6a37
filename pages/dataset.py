"""Dataset: the circuit atlas of a whole batch of prompts (``circuitviz batch``)."""

import streamlit as st

st.title("Dataset atlas")
st.caption(
    "What the circuits of a whole task have in common: faithfulness over every prompt with its "
    "95 % band, MIB's CPR and CMD, the consensus circuit (edges in many prompts' circuits) and "
    "how well it alone explains each prompt, and the prompts grouped by circuit similarity. Open "
    "a stored example or a folder written by `circuitviz batch --out FOLDER`."
)

# pandas, plotly and the atlas load after the title is on screen (first paint)
import pandas  # noqa: E402

from circuitviz.batch import atlas  # noqa: E402
from circuitviz.render import upset_figure  # noqa: E402
from circuitviz.render.atlas import (  # noqa: E402
    band_figure,
    cluster_map_figure,
    consensus_graph_html,
    similarity_figure,
)
from circuitviz.ui import dataset as ui  # noqa: E402
from circuitviz.ui import views  # noqa: E402

FOLDER = "a batch folder…"
stored = ui.stored_atlases()
choice = st.segmented_control("atlas", [*stored, FOLDER], key="dataset.source") or (
    next(iter(stored), FOLDER)
)
if choice == FOLDER:
    typed = st.text_input("batch folder", key="dataset.folder", placeholder="e.g. runs/ioi-500")
    if not typed.strip():
        st.info("Type the folder a `circuitviz batch --out FOLDER` run wrote, or pick a stored example.")
        st.stop()
    folder = typed.strip()
else:
    folder = str(stored[choice])
try:
    batch = ui.load_batch(folder)
except atlas.AtlasError as error:
    st.error(str(error))
    st.stop()
stamp, manifest = ui._stamp(batch.folder), batch.manifest
if not batch.labels:
    st.warning("This batch has no finished rows yet.")
    st.stop()

label = (
    st.selectbox("method", batch.labels, key="dataset.label") if len(batch.labels) > 1 else batch.labels[0]
)
rows = batch.rows(label, done=False).to_pandas()
done = rows[rows["status"] == "done"]
scores = ui.mib(folder, stamp, label)
columns = st.columns(4)
columns[0].metric(
    "prompts",
    f"{len(done):,}",
    f"{len(rows) - len(done):,} failed" if len(rows) > len(done) else None,
    delta_color="inverse",
)
columns[1].metric(
    "CPR (MIB)",
    f"{scores['cpr']:.3f}",
    help="area under the dataset's faithfulness over the edge fraction; higher is better",
)
columns[2].metric(
    "CMD (MIB)", f"{scores['cmd']:.3f}", help="area between the dataset's faithfulness and 1; lower is better"
)
per_prompt = scores["per_prompt"]["cpr_nfs"]
columns[3].metric(
    "CPR per prompt",
    f"{per_prompt['mean']:.3f}",
    help=f"mean of the prompts' own CPR, 95 % interval {per_prompt['low']:.3f} to {per_prompt['high']:.3f}",
)
if not scores["mib_grid"]:
    st.caption(
        "These budgets are not MIB's ten fractions of the edges (`--budgets mib`), so CPR and CMD compare only with runs on the same budgets."
    )

kept = batch.kept_budgets(label)
if not kept:
    st.warning("The table keeps no circuit of this method (rerun with a larger --keep-edges).")
    st.stop()
default_budget = min(kept, key=lambda b: abs(b - 100))
budget = st.select_slider("budget (edges)", kept, value=default_budget, key="dataset.budget")
threshold_default = float((manifest.get("consensus") or {}).get("threshold") or 0.5)
threshold = st.slider(
    "consensus: edges in at least this share of the prompts' circuits",
    0.05,
    1.0,
    threshold_default,
    0.05,
    key="dataset.threshold",
)

curves_tab, consensus_tab, clusters_tab, prompts_tab = st.tabs(
    ["Curves", "Consensus circuit", "Clusters", "Prompts"]
)
with curves_tab:
    score = st.segmented_control("score", ["ndf", "nfs"], default="ndf", key="dataset.score") or "ndf"
    series = {name: ui.bands(folder, stamp, name, score) for name in batch.labels}
    own = {name: pair[0] for name, pair in series.items()}
    together = {name: pair[1] for name, pair in series.items()} if score == "ndf" else {}
    st.plotly_chart(band_figure(own, together, score=score, current_budget=budget), key="dataset.curves")
    table = []
    for name in batch.labels:
        found = ui.mib(folder, stamp, name)
        table.append(
            {
                "method": name,
                "prompts": found["n_prompts"],
                "CPR (MIB)": found["cpr"],
                "CMD (MIB)": found["cmd"],
                "CPR per prompt": found["per_prompt"]["cpr_nfs"]["mean"],
                "CMD per prompt": found["per_prompt"]["cmd_nfs"]["mean"],
            }
        )
    st.dataframe(pandas.DataFrame(table), hide_index=True)

view = ui.circuits_view(folder, stamp, label, budget, threshold)
consensus = view["consensus"]
spec = batch.spec
with consensus_tab:
    evaluated = {b["budget"]: b for b in ui.bands(folder, stamp, label, "ndf")[1]}
    point = evaluated.get(budget)
    same = point is not None and abs(point["threshold"] - threshold) < 1e-9
    st.write(
        f"**{len(consensus):,} edges** are in at least {threshold:.0%} of the {len(view['sizes']):,} prompts' "
        f"circuits at {budget:,} edges; a prompt's circuit shares {view['jaccard'].mean():.2f} of its edges "
        "with it on average (Jaccard)."
    )
    if same:
        st.write(
            f"Alone, this circuit reaches a mean NDF of **{point['mean']:.3f}** on every prompt (95 % interval "
            f"{point['low']:.3f} to {point['high']:.3f}), against {point['own_mean']:.3f} for each prompt's own circuit."
        )
    elif point is not None:
        st.caption(
            f"The batch evaluated the consensus at {point['threshold']:.0%}; set the share to that to see its NDF."
        )
    if len(consensus):
        drawing = consensus_graph_html(
            spec,
            view["frequency"],
            consensus,
            title=f"consensus at {budget:,} edges: width = share of prompts holding the edge",
        )
        views.show_graph(drawing)
    names = spec.edge_names
    order = view["frequency"].argsort()[::-1][:50]
    st.dataframe(
        pandas.DataFrame(
            {
                "edge": [names[i] for i in order],
                "share of prompts": view["frequency"][order],
                "stability": view["stability"][order],
                "in consensus": [bool(view["frequency"][i] >= threshold - 1e-12) for i in order],
            }
        ),
        hide_index=True,
        column_config={
            "stability": st.column_config.NumberColumn(
                help="how often the edge stays in the consensus when the prompts are resampled"
            )
        },
    )

with clusters_tab:
    chosen_k = (
        st.segmented_control("clusters", ["auto", 2, 3, 4, 5, 6], default="auto", key="dataset.k") or "auto"
    )
    found = ui.clusters_view(
        folder, stamp, label, budget, threshold, None if chosen_k == "auto" else int(chosen_k)
    )
    st.caption(
        f"{found['k']} clusters (silhouette {found['silhouette']:.2f}; above ~0.25 the groups are distinct) of "
        f"{', '.join(map(str, found['sizes']))} prompts, by the Jaccard similarity of their circuits at {budget:,} edges."
    )
    by_index = done.set_index("task_index")
    hover = [
        f"{by_index.loc[i, 'task_id']}: {by_index.loc[i, 'clean']} → {by_index.loc[i, 'answer']}"
        for i in found["task_index"]
    ]
    left, right = st.columns([3, 2])
    left.plotly_chart(cluster_map_figure(found["coords"], found["labels"], hover), key="dataset.map")
    right.plotly_chart(similarity_figure(found["similarity"]), key="dataset.similarity")
    sets = {f"cluster {c}": {names[e] for e in edges} for c, edges in enumerate(found["consensus"])}
    if len(sets) > 1:
        st.caption("Edges of each cluster's consensus circuit, and which clusters share them:")
        figure, _ = upset_figure(sets)
        st.plotly_chart(figure, key="dataset.upset")

with prompts_tab:
    position = list(done["budgets"].iloc[0]).index(budget)
    table = pandas.DataFrame(
        {
            "id": done["task_id"],
            "family": done["family"],
            "prompt": done["clean"],
            "answer": done["answer"],
            "NDF": done["ndf"].map(lambda v: v[position]),
            "edges kept": done["edges_kept"].map(lambda v: v[position]),
            "CPR": done["cpr_nfs"],
        }
    )
    cluster_of = dict(zip(found["task_index"].tolist(), found["labels"].tolist()))
    share_of = dict(zip(view["task_index"].tolist(), view["jaccard"].tolist()))
    table["cluster"] = [cluster_of.get(i) for i in done["task_index"]]
    table["Jaccard to consensus"] = [share_of.get(i) for i in done["task_index"]]
    st.caption(
        f"Click a row to open that prompt in Explore (with {label} and the batch's budgets). Sort by any column."
    )
    picked = st.dataframe(
        table,
        hide_index=True,
        on_select="rerun",
        selection_mode="single-row",
        key=f"dataset.prompts.{st.session_state.get('dataset.opened', 0)}",
    )
    selected = picked.selection.rows if picked is not None else []
    if selected:
        row = done.iloc[selected[0]].to_dict()
        ui.open_in_explore(row, manifest)
        st.session_state["dataset.opened"] = st.session_state.get("dataset.opened", 0) + 1
        st.switch_page("pages/explore.py")
    failed = rows[rows["status"] == "failed"]
    if len(failed):
        with st.expander(f"{len(failed)} prompts failed"):
            st.dataframe(
                failed[["task_id", "clean", "error"]],
                hide_index=True,
            )
