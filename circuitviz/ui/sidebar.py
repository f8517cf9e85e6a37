"""The sidebar every page shares: which model, on which device."""

from __future__ import annotations

import streamlit as st

from ..core.text import markdown_sentence, markdown_text
from ..models.catalog import (  # no torch: the first paint shows it
    EMBEDDED_MODEL,
    SUPPORTED_MODELS,
    looks_like_path,
)
from . import loaders, state
from .state import Session, session

DEVICES = ("auto", "cpu", "cuda", "mps")


def _accepted(model_id) -> bool:
    """Whether ``model_id`` is a model the app offers: one of its list, the free model this
    session chose, or (from a URL) a hub id; a local path only when typed in this session."""
    import re

    from ..models.estimate import HUB_ID

    if not isinstance(model_id, str):
        return False
    return (
        model_id in SUPPORTED_MODELS
        or model_id == session.free_model
        or re.fullmatch(HUB_ID, model_id) is not None
    )


def _checked() -> tuple[str, str]:
    """(model id, device) of the session, each replaced by the default when it is not one the
    app offers (a URL's typo), saying so once, when it is replaced."""
    from .inputs import unknown_in_link_sentence

    if not _accepted(session.model):
        if session.model:
            st.warning(
                unknown_in_link_sentence(
                    "model",
                    [session.model],
                    f"the embedded {EMBEDDED_MODEL} is loaded instead (another model's hub id or "
                    "folder goes in the sidebar's 'another model' box)",
                )
            )
        session.model = EMBEDDED_MODEL
    elif session.model not in SUPPORTED_MODELS:
        session.free_model = session.model  # a hub id from the URL: offered in the list too
    if session.device not in DEVICES:
        if session.device:
            st.warning(
                unknown_in_link_sentence(
                    "device",
                    [session.device],
                    f"auto is used instead (a CUDA GPU, else Apple MPS, else the CPU; also {', '.join(DEVICES[1:])})",
                )
            )
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
    if session.free_model and session.free_model not in ids:
        ids.append(session.free_model)
    with st.sidebar:
        st.markdown("### Model")
        model_id = state.bind(
            st.selectbox,
            "model",
            Session.model.key,
            options=ids,
            format_func=lambda m: (
                m if m not in models else f"{m} (offline)" if not models[m].needs_hub else m
            ),
            help="The embedded models load offline; hub models need the Hugging Face cache.",
        )
        device = state.bind(
            st.selectbox,
            "device",
            Session.device.key,
            options=list(DEVICES),
            help="auto: a CUDA GPU, else Apple MPS, else CPU",
        )
        info = models.get(model_id)
        if info is not None:
            st.caption(
                f"{info.description}. {info.n_layers} layers × {info.n_heads} heads, d_model {info.d_model} · "
                f"{info.n_edges:,} edges."
            )
            with st.expander("about this model"):
                st.write(info.notes)
        else:
            st.caption(markdown_text(_estimate_line(model_id, device)))
        free_model_input()
    return model_id, device


def _estimate_line(model_id: str, device: str) -> str:
    """A model outside the list: once loaded, its size counted from its weights; before, its
    memory estimate, or why it is not known (one sentence). A GGUF file read "its size is known
    once it is converted" beside the converted model, loaded and drawing circuits (2026-12-06)."""
    from ..models.estimate import check_free_model, loaded_size

    loaded = loaders.loaded_model(model_id, device)
    if loaded is not None:
        return loaded_size(model_id, loaded).loaded_sentence()

    checked = check_free_model(model_id, local=loaders.browser_paths_allowed())
    if checked.estimate is not None:
        return checked.estimate.sentence()
    return checked.problem or checked.note or ""


def free_model_input() -> None:
    """A hub id or local folder typed beside the list: checked as it is typed (its memory
    estimate before loading, or one sentence naming the fix), loaded by a button."""
    from ..models.estimate import check_free_model

    paths = loaders.browser_paths_allowed()  # off: the box takes hub ids only, and says so
    label = "hub id or local folder" if paths else "hub id"
    with st.expander(f"another model ({label})", expanded=bool(session.model_typed)):
        typed = state.bind(
            st.text_input,
            label,
            Session.model_typed.key,
            "",
            placeholder="Qwen/Qwen3-0.6B or /path/to/checkpoint" if paths else "Qwen/Qwen3-0.6B",
            help="Any model TransformerLens's bridge supports: a Hugging Face hub id (offline: one in "
            "the Hugging Face cache)"
            + (", a folder saved with save_pretrained, or a .gguf file." if paths else "."),
        ).strip()
        if not typed:
            return
        if not paths and looks_local(typed):  # nor says whether it exists
            st.warning(
                markdown_sentence(
                    loaders.no_browser_paths("give a Hugging Face hub id, such as Qwen/Qwen3-0.6B")
                )
            )
            return
        checked = check_free_model(typed, local=paths)
        if checked.problem:
            st.warning(markdown_sentence(checked.problem))  # quotes the typed id or folder
            return
        st.caption(
            markdown_sentence(checked.estimate.sentence() if checked.estimate is not None else checked.note)
        )
        if st.button("Load this model", key="sidebar.load_free_model"):
            session.free_model = typed
            session.model = typed
            st.rerun()


def looks_local(typed: str) -> bool:
    """Whether a typed model id has a path's shape or is a .gguf file. Decided by its shape alone:
    asking whether it exists here would tell a visitor of a shared server what the disk holds
    (a hub-shaped id is then never read from this machine: ``check_free_model(..., local=False)``)."""
    return looks_like_path(typed) or ".." in typed
