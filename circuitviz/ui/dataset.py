"""The Dataset page's pieces: open a batch folder, cache the atlas's computations, open a prompt
in Explore. The atlas itself is pure (circuitviz.batch.atlas); this module only caches and shows."""

from __future__ import annotations

import json
import os
from pathlib import Path

import streamlit as st

from ..core.text import counted, cut, markdown_sentence, markdown_text, shown
from ..models.catalog import SUPPORTED_MODELS
from . import link_choices, state
from .budget_box import budgets_text
from .dataset_rows import prompt_rows, refusal  # noqa: F401  (refusal: read here by the page's tests)
from .downloads import slug
from .guarded_table import csv_button, guarded
from .prompt_table import (
    ROW_PX,
    STYLED_ROWS,
    at_budget,
    empty_circuits,
    invisible_rows,
    prompt_columns,
    prompt_display,
    table_height,
)
from .state import session

ATLAS_ASSETS = Path(__file__).resolve().parents[2] / "assets" / "atlas"
FAILED_SHOWN = 20  # failed prompts and left-out lines whose reason is written out whole
EDGES_SHOWN = 50  # the consensus tab's edges table: the most frequent, and every consensus edge
BOUNDED = ("ndf", "necessity")  # scores in [0, 1]: their intervals are cut to it


def stored_atlases(folder: Path = ATLAS_ASSETS) -> dict[str, Path]:
    """The batch folders shipped with the project ({name: folder}), each with a manifest."""
    if not folder.exists():
        return {}
    return {path.name: path for path in sorted(folder.iterdir()) if (path / "manifest.json").exists()}


def _stamp(folder: Path) -> float:
    """When the folder's table last changed (the caches' key, so a rerun batch is read again)."""
    try:
        return os.path.getmtime(folder / "results.parquet")
    except OSError:
        return 0.0


@st.cache_resource(show_spinner="Reading the batch table…", max_entries=8)
def _load(folder: str, stamp: float):
    # here, not at the top: keeps torch out of the first paint
    from ..batch.atlas import BatchTable

    return BatchTable.load(folder)


def load_batch(folder: str | Path):
    """The batch table of a folder (AtlasError in one sentence when it is not one), named as typed:
    a Path made the typed '[a](http://x)' read 'http:/x' in the sentence."""
    typed = os.path.expanduser(str(folder))
    return _load(typed, _stamp(Path(typed)))


@st.cache_data(show_spinner=False, max_entries=64)
def short_labels(labels: list[str]) -> dict[str, str]:
    """{series label: what the page shows}: the method alone where one series has it, else the
    method and the settings its series differ in. A label holds every setting ("bon
    (anchor_budgets=[], base_method=eap-ig, cache_scores=True, ...)"): at 1,000 px the legend cut
    it before the words that tell the series from its consensus, and the table showed only it."""
    parts = {}
    for label in labels:
        method, _, rest = label.partition(" (")
        parts[label] = (method, rest.rstrip(")").split(", ") if rest else [])
    shown = {}
    for label, (method, settings) in parts.items():
        same = [other for other, (m, _) in parts.items() if m == method]
        if len(same) == 1:
            shown[label] = method
            continue
        common = set.intersection(*(set(parts[other][1]) for other in same))
        differ = [setting for setting in settings if setting not in common]
        shown[label] = f"{method} ({', '.join(differ)})" if differ else method
    return shown


@st.cache_data(show_spinner=False, max_entries=64)  # a tab click reruns the page: kept, not redone
def bands(folder: str, stamp: float, label: str, score: str) -> tuple[list, list]:
    """(the prompts' own circuits' bands, the consensus circuit's bands) of one series."""
    # here, not at the top: keeps torch out of the first paint
    from ..batch import atlas

    batch = _load(folder, stamp)
    return within_range(atlas.curve_bands(batch, label, score), score), within_range(
        atlas.consensus_bands(batch, label), "ndf"
    )


def within_range(bands: list[dict], score: str) -> list[dict]:
    """The bands with their 95 % intervals cut to the score's own range, [0, 1] for NDF and
    necessity: Student's t over a few prompts reached past it, and the consensus sentence read "a
    mean NDF of 0.184 (95 % interval -0.608 to 0.976)" over three prompts whose NDFs are each at
    least 0 (the cut interval still holds the mean with the same chance: the mean lies in [0, 1])."""
    if score not in BOUNDED:
        return bands
    return [dict(b, low=min(max(b["low"], 0.0), 1.0), high=min(max(b["high"], 0.0), 1.0)) for b in bands]


@st.cache_data(show_spinner=False, max_entries=64)
def mib(folder: str, stamp: float, label: str) -> dict:
    # here, not at the top: keeps torch out of the first paint
    from ..batch import atlas

    return atlas.mib_scores(_load(folder, stamp), label)


@st.cache_data(show_spinner="Finding what the circuits share…", max_entries=32)
def circuits_view(folder: str, stamp: float, label: str, budget: int, threshold: float) -> dict:
    """Edge frequencies, the consensus and its stability at one budget, as plain arrays."""
    # here, not at the top: keeps torch out of the first paint
    from ..batch import atlas

    matrix = atlas.circuit_matrix(_load(folder, stamp), label, budget)
    return {
        "frequency": atlas.edge_frequency(matrix),
        "consensus": atlas.consensus_edges(matrix, threshold),
        "stability": atlas.edge_stability(matrix, threshold),
        "sizes": matrix.sizes,
        "task_index": matrix.task_index,
        "jaccard": atlas.jaccard(
            matrix.members,
            atlas.edge_set_rows(atlas.consensus_edges(matrix, threshold), matrix.members.shape[1]),
        )[:, 0],
    }


@st.cache_data(show_spinner="Clustering the prompts by circuit…", max_entries=16)
def clusters_view(
    folder: str, stamp: float, label: str, budget: int, threshold: float, k: int | None
) -> dict:
    # here, not at the top: keeps torch out of the first paint
    from ..batch import atlas

    matrix = atlas.circuit_matrix(_load(folder, stamp), label, budget)
    found = atlas.cluster_prompts(matrix, k=k, threshold=threshold)
    return {
        "labels": found.labels,
        "k": found.k,
        "silhouette": found.silhouette,
        "tried": found.tried,
        "sizes": found.sizes,
        "consensus": found.consensus,
        "similarity": found.similarity,
        "coords": atlas.circuit_map(matrix),
        "task_index": matrix.task_index,
    }


def model_line(manifest: dict, sidebar_model: str | None) -> str:
    """Which model the batch ran on, and where the sidebar holds another one, that opening a prompt
    in Explore loads the batch's: a SmolLM2-135M batch was read under a sidebar naming Gemma-3-270M,
    and nothing on the page named the batch's model."""
    model = manifest.get("model") or {}
    model_id = str(model.get("model_id") or "a model the manifest does not name")
    device = model.get("device")  # a hand-edited manifest's 8,000 characters were said whole
    device = f" on {cut(device.strip(), 40)}" if isinstance(device, str) and device.strip() else ""
    line = f"This batch ran on {shown(model_id)}{device}."
    if sidebar_model and sidebar_model != model_id and model_id in SUPPORTED_MODELS:
        line += (
            f" The sidebar's model, {shown(sidebar_model)}, is for new runs; a prompt opened in Explore "
            f"from this batch loads {shown(model_id)}."
        )
    return line


def explore_problem(manifest: dict) -> str | None:
    """Why this batch's prompts cannot open in Explore (its model is not one the app loads), or None."""

    model_id = manifest["model"]["model_id"]
    if model_id in SUPPORTED_MODELS:
        return None
    return (
        f"This batch ran on {shown(model_id)}, which the app's model list does not hold, so its prompts "
        "cannot open in Explore; run the batch on one of the sidebar's models to open them."
    )


def open_in_explore(row: dict, manifest: dict, budget: int | None = None) -> None:
    """Open a table row in Explore (``state.open_task``) with the batch's model, method, settings
    and budgets, its own answer, foil and corrupted prompt, and have Explore run it when it opens
    (it comes straight from the result store when the batch kept the result there). ``budget``:
    the page's, so Explore shows the circuit whose NDF and edges the row showed (it opened at its
    own readable budget: a row read at budget 103 opened on a graph of budget 20)."""
    config = json.loads(row["config"]) if isinstance(row["config"], str) else dict(row["config"])
    state.open_task(
        {
            "clean": row["clean"],
            "corrupted": row["corrupted"],
            "answer": row["answer"],
            "foils": list(row["foils"]),
            "metric": row["metric"],
        },
        model=manifest["model"]["model_id"],
        method=row["method"],
        settings=config,
        budgets=budgets_text(manifest["budgets"]),
        corrupted_note=f"The corrupted prompt of {row['task_id']} in the batch.",
        budget=budget,
    )


def left_out(manifest: dict) -> tuple[str, list[str]] | None:
    """(one sentence, each line's reason) for the dataset file's lines the batch left out before it
    ran (not JSON, no answer, a repeated id...: the manifest's ``dataset.problems``), or None. The
    command printed them once; the page showed 4 prompts of a 7-line file and said nothing of the
    2 lines it never ran. A batch that drew its tasks (MMLU) notes a subject with fewer valid
    questions than asked: no line of a file, and the sentence named the source as the runner
    writes it, "1 line of generated ('mmlu', 10, 0) was left out"."""
    from ..batch.reuse import generated_parts  # here, not at the top: keeps torch out of the first paint

    dataset = manifest.get("dataset") if isinstance(manifest.get("dataset"), dict) else {}
    problems = dataset.get("problems")
    if not isinstance(problems, list) or not problems:
        return None
    reasons = [problem_text(problem) for problem in problems]
    drawn = generated_parts(dataset.get("source"))
    if drawn is not None:
        family = "MMLU" if drawn[0] == "mmlu" else drawn[0]
        return (
            f"Drawing the batch's {family} tasks left {counted(len(problems), 'note')}: every figure on "
            "this page is of the tasks it drew.",
            reasons,
        )
    source = dataset.get("source")
    source = Path(source).name if isinstance(source, str) and source else "the dataset file"
    lines = counted(len(problems), "line")
    return (
        f"{lines} of {source} {'was' if len(problems) == 1 else 'were'} left out before the batch ran, "
        "as not tasks: no figure on this page is of them.",
        reasons,
    )


def problem_text(problem) -> str:
    """One of the manifest's problems as a sentence: its text; a record another version or a hand
    wrote ({"line": 4, "reason": "..."}) as its values, never its repr."""
    if isinstance(problem, str):
        return problem
    if isinstance(problem, dict):
        return "; ".join(f"{key}: {problem_text(value)}" for key, value in problem.items()) or "(empty)"
    if isinstance(problem, list):
        return ", ".join(problem_text(value) for value in problem) or "(empty)"
    return "(empty)" if problem is None else str(problem)


# ----- the page's sections (the headline and the curves: dataset_curves.py) ----------------------
def consensus(
    batch, label: str, folder: str, stamp: float, budget: int, threshold: float, view: dict
) -> None:
    """The consensus circuit: its size, its own NDF on every prompt, its graph, its edges."""
    # here, not at the top: keeps torch out of the first paint
    import pandas

    from ..batch.units import over_positions
    from .dataset_figures import consensus_drawing
    from .result_view import show_graph

    # over token positions a prompt's circuit is of units, read here as the edges they use; the
    # consensus was measured as those edges at every position (it said 'at budget 50' of units)
    units = over_positions(batch, label)
    at = (
        f"{budget:,} (edge, position) units, each read as the edges its units use" if units else f"{budget:,}"
    )
    alone = " (its edges at every position)" if units else ""
    edges, spec = view["consensus"], batch.spec
    measured = bands(folder, stamp, label, "ndf")[1]
    point = {b["budget"]: b for b in measured}.get(budget)
    n = len(view["sizes"])
    if n == 1:  # 'in at least 50% of the one prompt's circuit ...; a Jaccard of 1.00 on average'
        st.write(
            f"One prompt: its own circuit at budget {at} is the consensus, **{counted(len(edges), 'edge')}**."
        )
    else:
        st.write(
            f"**{counted(len(edges), 'edge')}** {'is' if len(edges) == 1 else 'are'} in at least {threshold:.0%} "
            f"of the {n:,} prompts' circuits at budget {at}; a prompt's circuit and it have a Jaccard "
            f"similarity of {view['jaccard'].mean():.2f} on average (the edges they share over the edges of either)."
        )
    if point is not None and abs(point["threshold"] - threshold) < 1e-9:
        st.write(
            f"Alone, this circuit{alone} reaches a mean NDF of **{point['mean']:.3f}** on every prompt (95\u00a0% interval "
            f"{point['low']:.3f} to {point['high']:.3f}), against {point['own_mean']:.3f} for each prompt's own circuit."
        )
    elif point is not None:
        st.caption(
            f"The batch evaluated the consensus at {point['threshold']:.0%}; set the share to that to see its NDF."
        )
    elif n == 1:  # the page said nothing of the NDF it lacked
        st.caption("One prompt's consensus is its own circuit: the batch measured no NDF of its own.")
    elif not measured and not batch.dropped and not batch.manifest.get("consensus"):
        st.caption(
            "The batch measured no consensus circuit's NDF (it ran with `--consensus 0`); rerun it "
            "with `--consensus 0.5` to measure it."
        )
    elif batch.dropped:
        st.caption(
            "The batch measured its consensus with the damaged rows left out above, so its figures "
            "are of another circuit; rerun `circuitviz batch` to measure this one."
        )
    elif batch.rows(label, passing=True).num_rows < batch.rows(label).num_rows:
        st.caption(
            "The batch measured the consensus of all its stored tasks, refused ones included, which is "
            "another circuit at this budget; rerun `circuitviz batch` on the passing tasks to measure this one."
        )
    if len(edges):
        title = f"consensus at budget {budget:,}{' units' if units else ''}: width = share of prompts holding the edge"
        show_graph(consensus_drawing(folder, stamp, label, budget, threshold, title, spec, view))
    names = spec.edge_names
    # every consensus edge, and the most frequent others up to EDGES_SHOWN rows: a consensus of 60
    # edges listed its 50 most frequent, unsaid, and 10 of its edges in no row (the arithmetic atlas)
    held = int((view["frequency"] > 0).sum())  # edges in no prompt's circuit are never listed
    order = view["frequency"].argsort()[::-1][: min(max(EDGES_SHOWN, len(edges)), held)]
    st.caption(
        f"The {counted(len(order), 'edge')} in the most prompts' circuits at budget {at}, of the {held:,} in "
        f"any prompt's circuit"
        + (f"; every edge of the consensus ({len(edges):,}) is among them." if len(edges) else ".")
    )
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
        placeholder="—",
        column_config={
            "stability": st.column_config.NumberColumn(
                help="how often the edge stays in the consensus when the prompts are resampled"
            )
        },
    )


DISTINCT = 0.25  # a silhouette above about this: groups a reader would call distinct


def clusters_sentence(found: dict, budget: int, auto: bool) -> str:
    """What the clustering found, in words true of its silhouette: below about 0.25 the prompts'
    circuits do not fall into distinct groups, and the sentence says so rather than leave a reader
    to take the clusters for a finding."""
    k, silhouette = found["k"], found["silhouette"]
    sizes = ", ".join(map(str, found["sizes"]))
    if found["tried"] and k not in found["tried"]:  # k-medoids ran out of circuits unlike its medoids
        alike = "all the same" if k == 1 else f"only {k} different ones"
        return (  # it read "1 clusters (the number chosen) ... Silhouette 0.00" under 'auto' (3 prompts alike)
            f"{counted(k, 'cluster')} of {sizes} prompts: at budget {budget:,} their circuits are {alike}, "
            "so there are no more groups to find."
        )
    how = (
        f"the number of 2 to {max(found['tried'])} with the highest silhouette"
        if auto and len(found["tried"]) > 1
        else f"the only number {sum(found['sizes']):,} prompts allow"
        if auto
        else "the number chosen"
    )
    head = (
        f"{k} clusters ({how}) of {sizes} prompts, by the Jaccard similarity of their circuits at "
        f"budget {budget:,}."
    )
    if silhouette >= DISTINCT:
        return f"{head} Silhouette {silhouette:.2f}: distinct groups (above about {DISTINCT})."
    return (
        f"{head} Silhouette {silhouette:.2f}, below about {DISTINCT}: these circuits do not fall into "
        "distinct groups: read the clusters as a division of one spread of circuits, not as groups found."
    )


MIN_CLUSTERED = 3  # two clusters of one prompt each have no pair inside a cluster: no silhouette


def clusters(
    batch, label: str, folder: str, stamp: float, budget: int, threshold: float, n_prompts: int
) -> dict:
    """The prompts' clusters: the map, the similarity between clusters, the UpSet of their consensus.
    ``n_prompts``: the prompts with a circuit at the budget. k runs from 2 to one less than that, as
    the automatic choice tries (a batch of 4 offered 6 clusters, of 1 '1 clusters (the number
    chosen)' with a silhouette of 0 and an empty heatmap)."""
    # here, not at the top: keeps torch out of the first paint
    import numpy

    from .dataset_figures import cluster_figures

    if n_prompts < MIN_CLUSTERED:
        st.caption(
            f"Clustering needs at least {MIN_CLUSTERED} prompts with a circuit at budget {budget:,}; this "
            f"batch has {n_prompts:,}."
        )
        return {"task_index": numpy.zeros(0, dtype=numpy.int64), "labels": numpy.zeros(0, dtype=numpy.int64)}
    ks = list(range(2, min(6, n_prompts - 1) + 1))
    chosen = link_choices.clusters(ks, n_prompts, budget)  # in the link (``clusters``)
    k = None if chosen == "auto" else int(chosen)
    found = clusters_view(folder, stamp, label, budget, threshold, k)
    st.caption(clusters_sentence(found, budget, chosen == "auto"))
    # the figures are kept per atlas and choice: a tab click reruns the page (dataset_figures)
    cluster_map, similarity, upset, cut = cluster_figures(
        folder, stamp, label, budget, threshold, k, batch, found
    )
    left, right = st.columns([3, 2])
    left.plotly_chart(cluster_map, key="dataset.map")
    right.plotly_chart(similarity, key="dataset.similarity")
    if upset is not None:
        st.caption("Edges of each cluster's consensus circuit, and which clusters share them:")
        st.plotly_chart(upset, key="dataset.upset")
        if cut:  # six clusters can make 63 bars
            st.caption(cut)
    return found


def prompts(batch, label: str, budget: int, threshold: float, view: dict, found: dict) -> None:
    """The prompts, sortable by any column; a click on one opens it in Explore. ``view``: the
    page's ``circuits_view`` at ``budget`` and ``threshold``; ``found``: its clusters."""
    from ..batch.units import counts as counted_in
    from ..measure.task_validity import gap_check_enabled

    counts = counted_in(batch, label)  # 'edges', or 'units' for a method over token positions
    kept = "(edge, position) units" if counts == "units" else "edges"
    # kept per atlas and choice: each click on the page reruns it (dataset_rows)
    clusters, check = tuple(found["labels"].tolist()), gap_check_enabled()
    rows, done, table = prompt_rows(
        str(batch.folder), _stamp(batch.folder), label, budget, threshold, clusters, check, batch, view, found
    )
    refused = int((table["validity check"] != "passes").sum())
    only_refused = False
    if refused:
        st.warning(
            f"{refused:,} of these {len(table):,} prompts fail the validity check the app now applies (the "
            "corruption must lower the answer's metric clearly; the check's sentence is in the column "
            "'check' beside the id, and each is written out below the table): they are listed with the figures the batch "
            "computed for them, "
            + (
                "left out of every figure above"
                if batch.checked
                else "counted in every figure above (the batch ran without the check)"
            )
            + ", and Explore refuses to run them."
        )
        # three among 200 (the IOI atlas) are found only by scrolling without it
        only_refused = link_choices.toggle(
            f"only the {counted(refused, 'prompt')} the check refuses", key="dataset.refused"
        )
    positions = [i for i, why in enumerate(table["validity check"]) if why != "passes" or not only_refused]
    table = table.iloc[positions].reset_index(drop=True)
    st.caption(
        f"Click a row to open that prompt in Explore (with {markdown_text(label)} and the batch's budgets, at "
        f"budget {budget:,}). Sort by any column. "
        f"NDF is the faithfulness of the prompt's circuit at budget {budget:,}, and the next column the {kept} "
        "it keeps after pruning; each header's help says what its column holds. CPR is the area under the "
        f"prompt's NFS curve over the share of {'its own ' if counts == 'units' else ''}{kept} its circuits "
        "keep, divided by the span they cover (the curve's mean height, as discover gives it"
        + (
            ""
            if counts == "units"
            else ": on MIB's ten budgets the span runs from 0.1 to 100 %, so the large circuits weigh most in it"
        )
        + "), and NFS is unbounded "
        "(a circuit that overshoots the model scores above 1): a prompt can show NDF 0 at a small budget "
        "beside a CPR of 1 or more. '\u2026' marks where a prompt is cut to fit its cell: "
        + (
            "the last column holds it whole."
            if len(table) > STYLED_ROWS
            else "double-click it to read it whole."
        )
    )
    none = table["edges kept"] == 0
    empty = empty_circuits(list(table["id"][none]), list(table["NDF"][none]), budget, counts=counts)
    if empty:  # the ids are the dataset file's, as typed: never markup
        st.caption(markdown_text(empty))
    whole = len(table) > STYLED_ROWS
    order, config = prompt_columns(
        budget, bool(refused), whole, max(map(len, map(str, table["id"])), default=10), counts
    )
    shown_table = prompt_display(
        table.rename(columns=lambda name: at_budget(name, budget, counts)), config, whole
    )
    marked = invisible_rows(table, whole)  # the file's texts: drawn as codes in the table
    if marked:
        st.warning(markdown_text(marked))
    with guarded("dataset-prompts"):  # the file's texts: the grid's own CSV wrote '=HYPERLINK(...)' live
        picked = st.dataframe(
            shown_table,
            hide_index=True,
            row_height=ROW_PX,
            height=table_height(len(table)),
            column_order=order,
            column_config=config,
            placeholder="—",  # a prompt left out of the clusters or the consensus: no figure there
            on_select="rerun",
            selection_mode="single-row",
            # a new table after each opening and each filter: no row stays ticked
            key=f"dataset.prompts.{session.dataset_opened}.{only_refused}",
        )
    csv_button(
        shown_table,
        "Prompts (CSV)",
        f"prompts_{slug(label, 40, keep='.', fallback='series')}_budget-{budget}.csv",
        "dataset.prompts.csv",
        order,
        what="table of prompts",
    )
    selected = picked.selection.rows if picked is not None else []
    problem = explore_problem(batch.manifest)
    if selected and problem:
        st.error(markdown_sentence(problem))
    elif selected:
        session.dataset_opened += 1
        # switches to Explore, at this budget
        open_in_explore(done.iloc[positions[selected[0]]].to_dict(), batch.manifest, budget)
    if refused:  # the column is narrow at 1,000 px: each sentence whole, once
        with st.expander(f"Why the check refuses {counted(refused, 'prompt')}"):
            for task_id, why in zip(table["id"], table["validity check"]):
                if why != "passes":
                    st.markdown(markdown_text(f"{task_id}: {why}"))
    failed = rows[rows["status"] == "failed"]
    if len(failed):  # each reason written out: at 1,000 px the table's error column showed 'line 7: The a'
        with st.expander(f"{counted(len(failed), 'prompt')} failed"):
            for task_id, error in list(zip(failed["task_id"], failed["error"]))[:FAILED_SHOWN]:
                st.markdown(markdown_text(f"{task_id}: {error}"))
            if len(failed) > FAILED_SHOWN:
                st.caption(
                    f"{len(failed) - FAILED_SHOWN:,} more in the table (results.parquet's error column):"
                )
            with guarded("dataset-failed"):
                st.dataframe(failed[["task_id", "error", "clean"]], hide_index=True, placeholder="—")
            csv_button(
                failed[["task_id", "error", "clean"]],
                "Failed prompts (CSV)",
                f"failed_{slug(label, 40, keep='.', fallback='series')}.csv",
                "dataset.failed.csv",
                what="table of failed prompts",
            )
