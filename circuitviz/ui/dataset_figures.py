"""The Dataset page's figures, each built once per atlas and choice and kept: the page draws all
four tabs on every run, and since the open tab is in the link (``tab``) a tab click reruns it, so
a click rebuilt the band chart, the cluster map, the similarity heatmap, the UpSet chart and the
consensus drawing each time (about 0.5 s of a 0.7 s rerun on a stored atlas). Each is kept by
what sets it: the batch folder and when its table last changed (``dataset._stamp``, so a rerun
batch is drawn again), the method, budget, share and score; the arguments named with a leading
underscore are what those already determine (the page's cached views), so the cache does not
hash them. ``st.plotly_chart`` copies a figure before it sends it (``to_dict``), so a kept figure
is never changed by the page."""

from __future__ import annotations

import streamlit as st

from ..core.text import read_token


@st.cache_resource(show_spinner=False, max_entries=32)
def curves_figure(folder: str, stamp: float, score: str, budget: int, _series: dict, _over: set):
    """The Curves tab's chart: every series' mean curve with its band, the consensus dashed.
    ``_series``: {name shown: (its bands, its consensus's bands)} for ``score``."""
    # here, not at the top: keeps torch out of the first paint
    from ..render.atlas import band_figure

    own = {name: pair[0] for name, pair in _series.items()}
    together = {name: pair[1] for name, pair in _series.items()} if score == "ndf" else {}
    return band_figure(own, together, score=score, current_budget=budget, over_positions=_over)


@st.cache_resource(show_spinner=False, max_entries=32)
def consensus_drawing(
    folder: str, stamp: float, label: str, budget: int, threshold: float, title: str, _spec, _view: dict
):
    """The Consensus tab's drawing: the consensus edges, each as wide as its share of prompts.
    ``_view``: the page's ``circuits_view`` of this method, budget and share."""
    # here, not at the top: keeps torch out of the first paint
    from ..render.atlas import consensus_graph_html

    return consensus_graph_html(_spec, _view["frequency"], _view["consensus"], title=title)


@st.cache_resource(show_spinner=False, max_entries=16)
def cluster_figures(
    folder: str, stamp: float, label: str, budget: int, threshold: float, k: int | None, _batch, _found: dict
):
    """The Clusters tab's figures: (the map, the similarity heatmap, the UpSet chart of the
    clusters' consensus edges or None with one cluster, the sentence of the bars it left out).
    ``_found``: the page's ``clusters_view`` of this method, budget, share and count."""
    # here, not at the top: keeps torch out of the first paint
    from ..render import cut_sentence, upset_figure
    from ..render.atlas import cluster_map_figure, similarity_figure

    rows = _batch.rows(label).to_pandas().set_index("task_index")
    hover = [  # the answer as a word: "→  Mary" read as a gap before the name
        f"{rows.loc[i, 'task_id']}: {rows.loc[i, 'clean']} → {read_token(rows.loc[i, 'answer'])}"
        for i in _found["task_index"]
    ]
    names = _batch.spec.edge_names
    sets = {f"cluster {c}": {names[e] for e in edges} for c, edges in enumerate(_found["consensus"])}
    upset = upset_figure(sets)[0] if len(sets) > 1 else None
    cut = cut_sentence(sets, what="cluster's consensus") if len(sets) > 1 else None  # 63 bars at most
    return (
        cluster_map_figure(_found["coords"], _found["labels"], hover),
        similarity_figure(_found["similarity"]),
        upset,
        cut,
    )
