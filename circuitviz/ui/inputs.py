"""The inputs of a run: prompt, answer, foil, corrupted prompt, method, settings and budgets."""

from __future__ import annotations

import streamlit as st

from .. import render
from . import loaders, state

EXAMPLE_PROMPT = "When Mary and John went to the store, John gave a drink to"
EXAMPLE_CORRUPTED = "When Alice and Bob went to the store, Carl gave a drink to"
_NICE_BUDGETS = (10, 20, 30, 50, 75, 100, 150, 200, 300, 500, 750, 1000, 1500, 2000, 3000, 5000, 7500)
_NICE_BUDGETS += (10_000, 15_000, 20_000, 30_000, 50_000, 100_000, 200_000)


def default_budgets(n_edges: int) -> list[int]:
    """A log-spaced grid of budgets up to the whole graph, so the slider has steps everywhere."""
    return [b for b in _NICE_BUDGETS if b < n_edges] + [int(n_edges)]


def budgets_text(budgets) -> str:
    return ",".join(str(int(b)) for b in budgets)


def graph_edge_total(model) -> int:
    from ..graph import GraphSpec

    return GraphSpec.from_model(model).n_edges


def shared_settings(method, settings: dict) -> dict:
    """The settings that ``method``'s Config has (e.g. ig_steps carried from Explore to Compare)."""
    import dataclasses

    fields = {field.name for field in dataclasses.fields(method.Config)}
    return {name: value for name, value in settings.items() if name in fields}


def token_label(token: str) -> str:
    """A token as the user sees it: quotes keep leading spaces visible."""
    return repr(token)


def token_check(model, model_key: str, prompt: str, corrupted: str) -> bool:
    """Both tokenisations side by side; True when the lengths match."""
    clean_tokens = loaders.str_tokens(model, model_key, prompt) if prompt else []
    corrupted_tokens = loaders.str_tokens(model, model_key, corrupted) if corrupted else []
    st.markdown(
        "<div style='font-size:0.85rem;margin:2px 0'>prompt</div>"
        + render.token_strip_html(clean_tokens, render.differing_positions(clean_tokens, corrupted_tokens))
        + "<div style='font-size:0.85rem;margin:6px 0 2px'>corrupted</div>"
        + render.token_strip_html(
            corrupted_tokens, render.differing_positions(corrupted_tokens, clean_tokens)
        ),
        unsafe_allow_html=True,
    )
    if not corrupted:
        st.warning("Give a corrupted prompt: the prompt with its key fact or name replaced.")
        return False
    if len(clean_tokens) != len(corrupted_tokens):
        st.error(
            f"The prompt has {len(clean_tokens)} tokens and the corrupted prompt {len(corrupted_tokens)}; "
            "edit the corrupted prompt so each replaced word is one token too (marked chips differ)."
        )
        return False
    changed = sum(render.differing_positions(clean_tokens, corrupted_tokens))
    st.success(f"Both prompts are {len(clean_tokens)} tokens; {changed} position(s) differ.")
    return True


def propose_corruption(model, prompt: str) -> str | None:
    """A corrupted prompt from the paraphrase module's templates, when it exists and knows the task."""
    try:
        from ..paraphrase import propose_corruption as propose
    except ImportError:
        return None
    try:
        return propose(model, prompt)
    except Exception:  # a template that fails on odd input proposes nothing
        return None


def _pick(role: str) -> None:
    picked = st.session_state.get(f"pick.{role}")
    if picked is not None:
        state.set_value(role, picked)


def task_inputs(model, model_id: str, need_corrupted: bool = True):
    """Prompt, answer and foil picked from the model's top tokens, corrupted prompt with a live
    length check (optional when the method needs none). Returns a PromptTask, or None while the
    inputs cannot run."""
    from ..tasks import METRICS, PromptTask

    prompt = state.bound(st.text_area, "Prompt", "prompt", default=EXAMPLE_PROMPT, height=80)
    if not prompt.strip():
        st.info("Type a prompt: the text whose next token you want explained.")
        return None
    top = loaders.next_tokens(model, model_id, prompt)
    tokens = [token for token, _ in top]
    probability = dict(top)
    if not st.session_state.get("answer"):
        state.set_value("answer", tokens[0])
    if not st.session_state.get("foil"):
        state.set_value("foil", tokens[1] if len(tokens) > 1 else "")
    for role in ("answer", "foil"):
        current = st.session_state.get(role)
        st.session_state[f"pick.{role}"] = current if current in tokens else None
    st.markdown("**The model's next token** — click to choose the answer and a foil (a wrong answer):")
    for role in ("answer", "foil"):
        st.pills(
            role,
            tokens,
            key=f"pick.{role}",
            format_func=lambda t: f"{token_label(t)} {100 * probability[t]:.1f}%",
            on_change=_pick,
            args=(role,),
        )
    columns = st.columns([2, 2, 1])
    with columns[0]:
        answer = state.bound(st.text_input, "answer token (with its leading space)", "answer")
    with columns[1]:
        foil = state.bound(st.text_input, "foil token", "foil")
    with columns[2]:
        metric = state.bound(st.selectbox, "metric", "metric", default="logit_diff", options=list(METRICS))

    if st.session_state.get("corrupted_for") != prompt:
        proposal = (
            None
            if (st.session_state.get("corrupted") and "corrupted_for" not in st.session_state)
            else (propose_corruption(model, prompt))
        )
        if proposal:
            state.set_value("corrupted", proposal)
            st.session_state["corrupted_note"] = (
                "Proposed from a template that recognised the task; edit it freely."
            )
        else:
            st.session_state["corrupted_note"] = ""
        st.session_state["corrupted_for"] = prompt
    default_corrupted = EXAMPLE_CORRUPTED if prompt == EXAMPLE_PROMPT else ""
    corrupted = state.bound(
        st.text_area,
        "Corrupted prompt (the key fact or name replaced; same number of tokens)",
        "corrupted",
        default=default_corrupted,
        height=80,
    )
    if st.session_state.get("corrupted_note"):
        st.caption(st.session_state["corrupted_note"])
    if not corrupted.strip() and not need_corrupted:
        st.caption("This method needs no corrupted prompt.")
    elif not token_check(model, model_id, prompt, corrupted):
        return None
    return PromptTask(
        clean=prompt, corrupted=corrupted, answer=answer, foils=(foil,) if foil else (), metric=metric
    )


def method_inputs(n_edges: int, key: str = "method", methods=None):
    """Method picker, its settings form and the budgets. Returns (method name, settings, budgets)."""
    from ..api import parse_budgets
    from ..methods import available_methods
    from .forms import check_config, config_form

    registered = methods or available_methods()
    names = sorted(registered)
    if st.session_state.get(key) not in names:
        st.session_state[key] = "eap-ig" if "eap-ig" in names else names[0]
    name = state.bound(
        st.selectbox, "method", key, options=names, format_func=lambda n: f"{registered[n].label} ({n})"
    )
    method = registered[name]
    st.caption(method.summary)
    settings = config_form(method, key, st.session_state.get("settings") if key == "method" else None)
    problem = check_config(method, settings)
    if problem:
        st.error(problem)
    if not st.session_state.get("budgets"):
        st.session_state["budgets"] = budgets_text(default_budgets(n_edges))
    text = state.bound(st.text_input, "edge budgets (the slider's steps; each is evaluated once)", "budgets")
    try:
        budgets = parse_budgets(text)
    except ValueError as error:
        st.error(str(error))
        return name, settings, None
    return name, (None if problem else settings), budgets
