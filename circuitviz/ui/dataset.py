"""The Dataset page's pieces: open a batch folder, cache the atlas's computations, open a prompt
in Explore. The atlas itself is pure (circuitviz.batch.atlas); this module only caches and shows."""

from __future__ import annotations

import json
import os
from pathlib import Path

import streamlit as st

from . import state

ATLAS_ASSETS = Path(__file__).resolve().parents[2] / "assets" / "atlas"


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
    from ..batch.atlas import BatchTable

    return BatchTable.load(folder)


def load_batch(folder: str | Path):
    """The batch table of a folder (AtlasError in one sentence when it is not one)."""
    folder = Path(folder).expanduser()
    return _load(str(folder), _stamp(folder))


@st.cache_data(show_spinner=False, max_entries=64)
def bands(folder: str, stamp: float, label: str, score: str) -> tuple[list, list]:
    """(the prompts' own circuits' bands, the consensus circuit's bands) of one series."""
    from ..batch import atlas

    batch = _load(folder, stamp)
    return atlas.curve_bands(batch, label, score), atlas.consensus_bands(batch, label)


@st.cache_data(show_spinner=False, max_entries=64)
def mib(folder: str, stamp: float, label: str) -> dict:
    from ..batch import atlas

    return atlas.mib_scores(_load(folder, stamp), label)


@st.cache_data(show_spinner="Finding what the circuits share…", max_entries=32)
def circuits_view(folder: str, stamp: float, label: str, budget: int, threshold: float) -> dict:
    """Edge frequencies, the consensus and its stability at one budget, as plain arrays."""
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


def open_in_explore(row: dict, manifest: dict) -> None:
    """Put a table row's prompt, method, settings and budgets on the Explore page and run it
    there (it comes straight from the result store when the batch kept the result)."""
    from .views import budgets_text

    config = json.loads(row["config"]) if isinstance(row["config"], str) else dict(row["config"])
    for key, value in {
        "model": manifest["model"]["model_id"],
        "prompt": row["clean"],
        "corrupted": row["corrupted"],
        "answer": row["answer"],
        "foil": (list(row["foils"]) or [""])[0],
        "metric": row["metric"],
        "method": row["method"],
        "budgets": budgets_text(manifest["budgets"]),
    }.items():
        state.set_value(key, value)
    st.session_state["corrupted_for"] = row["clean"]
    st.session_state["settings"] = config
    for name, value in config.items():
        st.session_state[f"method.{row['method']}.{name}"] = value
    st.session_state["explore.autorun"] = True
    st.session_state["explore.result"] = None
