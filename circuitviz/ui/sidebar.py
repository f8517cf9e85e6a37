"""The sidebar every page shares: which model, on which device."""

from __future__ import annotations

import streamlit as st

from ..models.catalog import EMBEDDED_MODEL, SUPPORTED_MODELS  # no torch: the first paint shows it
from . import state
from .state import Session, session

DEVICES = ("auto", "cpu", "cuda", "mps")


def _checked() -> tuple[str, str]:
    """(model id, device) of the session, each replaced by the default when it is not one the
    app offers (a URL's typo)."""
    if session.model not in SUPPORTED_MODELS:
        session.model = EMBEDDED_MODEL
    if session.device not in DEVICES:
        session.device = "auto"
    return session.model, session.device


def model_choice() -> tuple[str, str]:
    """(model id, device) of this session: from the URL on its first run, else the sidebar's
    choice, else the embedded model on the automatic device. Pages call it, so a page works
    (and reads its URL, and a task opened for it) even when run on its own, without the app's
    navigation."""
    state.begin()
    return _checked()


def sidebar() -> tuple[str, str]:
    """Draw the model and device pickers; returns (model id, device)."""
    state.begin()
    _checked()
    models, ids = SUPPORTED_MODELS, list(SUPPORTED_MODELS)
    with st.sidebar:
        st.markdown("### Model")
        model_id = state.bind(
            st.selectbox,
            "model",
            Session.model.key,
            options=ids,
            format_func=lambda m: f"{m} (offline)" if not models[m].needs_hub else m,
            help="The embedded models load offline; hub models need the Hugging Face cache.",
        )
        device = state.bind(
            st.selectbox,
            "device",
            Session.device.key,
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
