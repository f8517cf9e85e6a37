"""The sidebar every page shares: which model, on which device."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import streamlit as st

from . import state

DEVICES = ("auto", "cpu", "cuda", "mps")
_CATALOG = Path(__file__).resolve().parent.parent / "models" / "catalog.py"


def model_catalog() -> dict:
    """``SUPPORTED_MODELS`` without importing torch.

    ``circuitviz.models`` imports torch in its package ``__init__``; the catalog module itself
    needs only the standard library, so it is read on its own and the first paint stays fast.
    """
    loaded = sys.modules.get("circuitviz.models.catalog")
    if loaded is None:
        spec = importlib.util.spec_from_file_location("circuitviz_ui_catalog", _CATALOG)
        loaded = importlib.util.module_from_spec(spec)
        sys.modules.setdefault("circuitviz_ui_catalog", loaded)
        spec.loader.exec_module(loaded)
    return loaded.SUPPORTED_MODELS, loaded.EMBEDDED_MODEL


def graph_edge_count(n_layers: int, n_heads: int) -> int:
    """Edges of a sequential-attention model's graph (every earlier node to every later reader), without building it."""
    return (3 * n_heads + 1) * (n_layers + (n_heads + 1) * n_layers * (n_layers - 1) // 2) + (
        n_layers * n_heads + 1 + n_layers * (n_heads + 1)
    )


def model_choice() -> tuple[str, str]:
    """(model id, device) of this session: from the URL on its first run, else the sidebar's
    choice, else the embedded model on the automatic device. Pages call it, so a page works
    (and reads its URL) even when run on its own, without the app's navigation."""
    state.seed_from_url()
    models, embedded = model_catalog()
    if st.session_state.get("model") not in models:
        st.session_state["model"] = embedded
    if st.session_state.get("device") not in DEVICES:
        st.session_state["device"] = "auto"
    return st.session_state["model"], st.session_state["device"]


def sidebar() -> tuple[str, str]:
    """Draw the model and device pickers; returns (model id, device)."""
    state.seed_from_url()
    models, embedded = model_catalog()
    ids = list(models)
    if state.keep("model", embedded) not in ids:
        st.session_state["model"] = embedded
    with st.sidebar:
        st.markdown("### Model")
        model_id = state.bound(
            st.selectbox,
            "model",
            "model",
            options=ids,
            format_func=lambda m: f"{m} (offline)" if not models[m].needs_hub else m,
            help="The embedded models load offline; hub models need the Hugging Face cache.",
        )
        if st.session_state.get("device") not in DEVICES:
            st.session_state["device"] = "auto"
        device = state.bound(
            st.selectbox,
            "device",
            "device",
            options=list(DEVICES),
            help="auto: a CUDA GPU, else Apple MPS, else CPU",
        )
        info = models[model_id]
        edges = (
            "" if info.id == "pythia-160m" else f" · {graph_edge_count(info.n_layers, info.n_heads):,} edges"
        )
        st.caption(
            f"{info.description}. {info.n_layers} layers × {info.n_heads} heads, d_model {info.d_model}{edges}."
        )
        with st.expander("about this model"):
            st.write(info.notes)
    return model_id, device
