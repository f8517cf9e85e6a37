"""Dataset: the circuit atlas of a whole batch of prompts (``circuitviz batch``)."""

import streamlit as st

from circuitviz.ui.navigation import inside_app

inside_app()  # never a page alone, outside the app (see inside_app)

st.title("Dataset atlas")
st.caption(
    "What the circuits of a whole task have in common: faithfulness over every prompt with its "
    "95\u00a0% band, MIB's CPR and CMD, the consensus circuit (edges in many prompts' circuits) and "
    "how well it alone explains each prompt, and the prompts grouped by circuit similarity. Open "
    "a stored example or a folder written by `circuitviz batch --out FOLDER`, or run a batch here."
)

# pandas, plotly and the atlas load after the title is on screen (first paint)
from circuitviz.batch import atlas  # noqa: E402
from circuitviz.batch.units import counts  # noqa: E402
from circuitviz.core.text import markdown_sentence  # noqa: E402
from circuitviz.models.catalog import EMBEDDED_MODEL  # noqa: E402
from circuitviz.ui import batch_form, dataset_curves, link_choices, loaders, state  # noqa: E402
from circuitviz.ui import batch_runner as runs  # noqa: E402
from circuitviz.ui import dataset as ui  # noqa: E402
from circuitviz.ui.state import Session, session  # noqa: E402

FOLDER = "a batch folder…"
runs.apply_pending()  # a run asked to open (its end, or "so far"): before the picker is drawn
stored = ui.stored_atlases()
yours = runs.your_batches()  # the batches run from this page that have rows, newest first
typed_folders = loaders.browser_paths_allowed()  # off on a shared server: only the stored atlases
options = [*stored, *([runs.YOURS] if yours else []), runs.RUN, *([FOLDER] if typed_folders else [])]
first = next(iter(stored), runs.RUN)
link_choices.seed("dataset.source", Session.dataset_atlas, options, first)  # the link's (``atlas``), or kept
if session.dataset_source not in options:  # the atlas open is the one the picker shows
    session.dataset_source = next(iter(stored), runs.RUN)
choice = st.segmented_control("atlas", options, key="dataset.source") or next(iter(stored), runs.RUN)
link_choices.keep(Session.dataset_atlas, choice)
if choice != runs.YOURS:  # the batch of "your batches" open: out of another atlas's link
    del session.dataset_batch
state.write_to_url()  # the atlas (``atlas``) and its view: the branches below may stop the page
if not typed_folders:
    st.caption(
        markdown_sentence(
            loaders.no_browser_paths(
                f"the stored atlases are here, and a batch runs from 'run a batch…' (at most {runs.SHARED_MAX_PROMPTS} prompts) "
                "or with `circuitviz batch`"
            )
        )
    )
job = runs.running()
if job is not None:  # on every view of the page: it runs on whatever the picker shows
    runs.watch(job, opens=choice == runs.RUN)
if choice == runs.RUN:
    newest = runs.latest()
    if job is None and newest is not None:
        runs.last_run_note(newest, opened=False)
    runs.empty_runs(shown=newest if job is None else None)  # the others with no row: each deletable
    batch_form.form(session.model or EMBEDDED_MODEL, session.device or "auto")
    st.stop()
if choice == FOLDER:
    typed = st.text_input("batch folder", key="dataset.folder", placeholder="e.g. runs/ioi-500")
    if not typed.strip():
        st.info("Type the folder a `circuitviz batch --out FOLDER` run wrote, or pick a stored example.")
        st.stop()
    folder = typed.strip()
elif choice == runs.YOURS:
    folder = runs.pick_yours(yours)
else:
    folder = str(stored[choice])
try:
    batch = ui.load_batch(folder)
except atlas.AtlasError as error:
    st.error(markdown_sentence(str(error)))  # names the typed folder: shown as typed
    st.stop()
st.caption(markdown_sentence(ui.model_line(batch.manifest, session.model or EMBEDDED_MODEL)))
for note in batch.notes:  # damaged rows left out: named, never dropped silently
    st.warning(markdown_sentence(note))
stamp = ui._stamp(batch.folder)
if not batch.labels or not batch.rows().num_rows:
    st.warning("This batch has no finished prompt yet.")
    st.stop()

labels = [name for name in batch.labels if batch.rows(name).num_rows]
if session.dataset_consensus_for not in (None, str(batch.folder)):  # the view another atlas's, not a link's
    # its method, budget, share and count of clusters: kept, they were said to be "the link's" values
    # this atlas lacks (2026-12-07: "The link's dataset_method 'eap-ig (ig_steps=20)' is not one of
    # this page's choices" after another batch was opened, no link in sight)
    del session.dataset_method, session.dataset_budget, session.dataset_consensus, session.dataset_clusters
link_choices.seed("dataset.label", Session.dataset_method, labels)
label = st.selectbox("method", labels, key="dataset.label") if len(labels) > 1 else labels[0]
link_choices.keep(Session.dataset_method, label)
if not dataset_curves.headline(batch, label, folder, stamp):
    st.stop()
kept = batch.kept_budgets(label)
if not kept:
    st.warning("The table keeps no circuit of this method (rerun with a larger --keep-edges).")
    st.stop()
link_choices.seed("dataset.budget", Session.dataset_budget, kept, min(kept, key=lambda b: abs(b - 100)))
budget = st.select_slider(
    f"budget ({counts(batch, label)})",
    kept,
    # '1034' stood at its end beside the curve's 10,342, nothing saying why it stopped there
    format_func=lambda b: f"{b:,}",
    help=dataset_curves.kept_budgets_help(batch, label, kept),
    key="dataset.budget",
)
link_choices.keep(Session.dataset_budget, budget)
# per atlas: each opens at the share its batch measured (a batch run here at 60 % opened at the
# 50 % a stored atlas had left in the slider, its measured consensus a click away), or the link's
measured = float((batch.manifest.get("consensus") or {}).get("threshold") or 0.5)
shares = [round(0.05 * step, 2) for step in range(1, 21)]
link_choices.seed(f"dataset.threshold.{batch.folder}", Session.dataset_consensus, shares, measured)
threshold = st.slider(
    "consensus: edges in at least this share of the prompts' circuits",
    0.05,
    1.0,
    step=0.05,
    key=f"dataset.threshold.{batch.folder}",
)
session.dataset_consensus, session.dataset_consensus_for = round(threshold, 2), str(batch.folder)

# the tab open (``tab``): in the link, and kept across a switch to another page and back
curves_tab, consensus_tab, clusters_tab, prompts_tab = link_choices.tabs(
    "dataset.tab", Session.dataset_tab, link_choices.DATASET_TABS
)
view = ui.circuits_view(folder, stamp, label, budget, threshold)
with curves_tab:
    dataset_curves.curves(batch, folder, stamp, budget)
with consensus_tab:
    ui.consensus(batch, label, folder, stamp, budget, threshold, view)
with clusters_tab:
    found = ui.clusters(batch, label, folder, stamp, budget, threshold, len(view["sizes"]))
with prompts_tab:
    # run only while open (st.tabs' lazy execution, the tab being tracked): the table's rows, their
    # styling and its CSV were half of every tab click's rerun, for a table out of sight; the other
    # tabs stay drawn, their charts kept in the browser (redrawn, a plot costs more than the grid)
    if prompts_tab.open is not False:
        ui.prompts(batch, label, budget, threshold, view, found)
state.write_to_url()  # the view's choices, the score chosen in the Curves tab included
