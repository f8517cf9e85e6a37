"""The sidebar every page shares: which model, on which device."""

from __future__ import annotations

import streamlit as st

from ..models.catalog import EMBEDDED_MODEL, SUPPORTED_MODELS  # no torch: the first paint shows it
from . import state

DEVICES = ("auto", "cpu", "cuda", "mps")


def model_choice() -> tuple[str, str]:
    """(model id, device) of this session: from the URL on its first run, else the sidebar's
    choice, else the embedded model on the automatic device. Pages call it, so a page works
    (and reads its URL) even when run on its own, without the app's navigation."""
    state.seed_from_url()
    if st.session_state.get("model") not in SUPPORTED_MODELS:
        st.session_state["model"] = EMBEDDED_MODEL
    if st.session_state.get("device") not in DEVICES:
        st.session_state["device"] = "auto"
    return st.session_state["model"], st.session_state["device"]


def sidebar() -> tuple[str, str]:
    """Draw the model and device pickers; returns (model id, device)."""
    state.seed_from_url()
    models, ids = SUPPORTED_MODELS, list(SUPPORTED_MODELS)
    if state.keep("model", EMBEDDED_MODEL) not in ids:
        st.session_state["model"] = EMBEDDED_MODEL
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
        st.caption(
            f"{info.description}. {info.n_layers} layers × {info.n_heads} heads, d_model {info.d_model} · "
            f"{info.n_edges:,} edges."
        )
        with st.expander("about this model"):
            st.write(info.notes)
    return model_id, device
