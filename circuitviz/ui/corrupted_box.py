"""The corrupted prompt's box on Explore: its note (where the proposed prompt came from), both
tokenisations with the differing tokens marked, and the token-count check."""

from __future__ import annotations

import streamlit as st

from ..core.refusals import EMPTY_CORRUPTED, IDENTICAL_PROMPTS, unequal_lengths
from ..core.text import counted, markdown_sentence
from . import loaders, spelling, state  # no torch here: the prompt box paints before the engine loads
from .state import session

MAX_CHIPS = 80  # token chips drawn per prompt; a longer prompt shows its first ones and a count


def follows_answer(answer: str, corrupted: str | None) -> bool:
    """Whether the corrupted prompt and its note are proposed again for ``answer``: they were
    proposed for another answer (not an opened task's own), and the box still holds what was
    proposed (or is still empty beside the note that nothing passes)."""
    made_for = session.corrupted_answer
    return (
        made_for is not None
        and answer != made_for
        and (corrupted or "") == (session.corrupted_proposed or "")
    )


def follow_answer(model, model_id: str, prompt: str, answer: str, top_tokens: list[str]) -> None:
    """Another answer picked (a chip, or typed): the corrupted prompt is proposed again for it,
    measured as a new prompt's is ("What is the capital of Japan?": no word decides '\\n\\n', but
    'Japan' swapped for 'France' lowers ' Tokyo'), with its note. The foil box still holding the
    proposed foil takes the new answer's; a foil of the user's is kept and every candidate is
    measured against it. Call before the boxes are drawn, with ``answer`` one token."""
    if not follows_answer(answer, state.coming_value("corrupted")):
        return
    foil = state.coming_value("foil")
    proposed_foil = foil == session.foil_proposed
    own_foil = foil if foil and not proposed_foil and foil != answer else None
    found = loaders.completion(model, model_id, prompt, answer, None, top_tokens, own_foil)
    state.set_value("corrupted", found.corrupted)
    session.corrupted_note, session.corrupted_proposed = found.corrupted_note, found.corrupted or ""
    session.corrupted_answer, session.corrupted_foil = answer, found.foil
    if proposed_foil:
        state.set_value("foil", found.foil)
        session.foil_note, session.foil_proposed = found.foil_note, found.foil
        spelling.remember(prompt, "foil", found.foil)


def follow_foil(model, model_id: str, prompt: str, answer: str, top_tokens: list[str]) -> None:
    """Another foil picked (a chip, or typed) while the corrupted box still holds the prompt the
    app proposed for ``answer`` (not one the user wrote, nor an opened task's): the corrupted
    prompt is proposed again, each candidate measured against the new foil, with its note. Until
    2026-12-07 only a new answer did so, and the note's gap stayed the old foil's. Call after
    ``follow_answer``, before the boxes are drawn, with ``answer`` one token."""
    foil = state.coming_value("foil")
    if (
        not foil
        or foil == answer
        or session.corrupted_answer != answer
        or foil == session.corrupted_foil
        or (state.coming_value("corrupted") or "") != (session.corrupted_proposed or "")
    ):
        return
    from ..core.tasks import TaskError, single_token_id  # here, not at the top: keeps torch out

    try:
        single_token_id(model, foil, "foil")
    except TaskError:  # refused under its box: nothing is measured against it
        return
    own = None if foil == session.foil_proposed else foil  # the proposed foil: the proposal itself
    found = loaders.completion(model, model_id, prompt, answer, None, top_tokens, own)
    if found.foil != foil:  # proposed with another foil: measured against this one
        found = loaders.completion(model, model_id, prompt, answer, None, top_tokens, foil)
    state.set_value("corrupted", found.corrupted)
    session.corrupted_note, session.corrupted_proposed = found.corrupted_note, found.corrupted or ""
    session.corrupted_foil = foil


# the switch that shows the box for a method that needs no corrupted prompt (hidden by default)
OWN_CORRUPTED = "Measure against a corrupted prompt of my own"
OWN_CORRUPTED_HELP = (
    "This method finds its circuit without a corrupted prompt. Switched on, the box below is shown "
    "and the prompt you give there is the corrupted run of its NDF, necessity and curve."
)


SWITCH_KEY = "corrupted.own.switch"
OWN_CORRUPTED_USED = "NDF, necessity and the faithfulness curve patch to this corrupted prompt."


def hidden_sentence(method) -> str:
    """What the form says where the box hides: the method needs none, and what its figures use."""
    return f"The method below ({method.label}) needs no corrupted prompt. {method.without_corrupted or ''}".strip()


def hidden_foil_sentence() -> str | None:
    """Where the box hides, which corrupted prompt the foil's note above speaks of: "The foil is
    what the corrupted prompt leads to" stood over no box (CD-T on the Eiffel Tower prompt, whose
    proposed ' Rome' came from the hidden 'The Colosseum is located in the city of'); None when
    the note names none."""
    corrupted, foil = (session.corrupted or "").strip(), session.foil
    if not corrupted or "corrupted prompt" not in (session.foil_note or ""):
        return None
    if foil != (session.foil_proposed or foil):  # the note is not shown for a foil typed since
        return None
    return (
        f"The foil above was proposed from the corrupted prompt '{corrupted}', which this run does not use."
    )


def own_corrupted_on(method) -> bool:
    """The switch under the foil for ``method`` (one that needs no corrupted prompt): whether the
    user shows the box. Off unless chosen, except for a corrupted prompt a link or an opened task
    gave with this very method (its run used it: the link still shows that run)."""
    came_with = session.corrupted_came_with
    given = bool((state.coming_value("corrupted") or "").strip()) and came_with in (True, method.name)
    if session.corrupted_own is None:  # a new prompt or an opened task: the switch starts afresh,
        state.forget_widget_value(SWITCH_KEY)  # not handed a value (a quick click was taken for an echo)
    key = state.Session.corrupted_own.key
    return bool(
        state.bind(st.toggle, OWN_CORRUPTED, key, given, widget_key=SWITCH_KEY, help=OWN_CORRUPTED_HELP)
    )


def corrupted_input(model, model_id: str, prompt: str, method=None) -> tuple[str, list[str]]:
    """The corrupted prompt with its note and both tokenisations. Returns (text, problems).

    For a ``method`` that needs none the box hides behind a switch (``own_corrupted_on``), and
    what its figures are measured against is said instead; the text stays in the state, so a
    method that needs one shows it again as it was. Hidden, the task has no corrupted prompt."""
    need_corrupted = method is None or method.needs_corrupted
    if not need_corrupted and not own_corrupted_on(method):
        st.caption(hidden_sentence(method))
        if said := hidden_foil_sentence():
            st.caption(markdown_sentence(said))  # quotes the user's text
        return "", []
    corrupted = state.bind(
        st.text_area,
        "Corrupted prompt (the key fact or name replaced; same number of tokens)",
        "corrupted",
        height=80,
    )
    corrupted = corrupted or ""  # a box never filled reads None
    note = session.corrupted_note
    if note and session.corrupted_proposed not in (None, corrupted):  # said of what the box held before
        note = None
    if note and not corrupted.strip() and need_corrupted:
        st.warning(markdown_sentence(note))  # may quote the user's text
    elif note:  # a method that needs none: the note is no call to write one (Signals said both)
        st.caption(markdown_sentence(note))
    if not corrupted.strip():
        if not need_corrupted:
            st.caption(f"Left empty, the box is ignored: {hidden_sentence(method)}")
            return corrupted, []
        problem = EMPTY_CORRUPTED
        if not note:
            st.error(markdown_sentence(problem))  # may quote the user's text
        return corrupted, [problem]
    problems = token_check(model, model_id, prompt, corrupted)
    if not need_corrupted and not problems:  # what the switch changed, said beside the figures' source
        st.caption(OWN_CORRUPTED_USED)
    return corrupted, problems


def token_check(model, model_key: str, prompt: str, corrupted: str) -> list[str]:
    """Both tokenisations, the differing tokens marked; [] when the lengths match, else the
    sentence that says so."""
    # here, not at the top: keeps torch out of the first paint
    from .. import render

    clean_tokens = loaders.str_tokens(model, model_key, prompt)
    corrupted_tokens = loaders.str_tokens(model, model_key, corrupted)
    st.markdown(
        "<div style='font-size:0.85rem;margin:2px 0'>prompt</div>"
        + _chips(clean_tokens, corrupted_tokens)
        + "<div style='font-size:0.85rem;margin:6px 0 2px'>corrupted</div>"
        + _chips(corrupted_tokens, clean_tokens),
        unsafe_allow_html=True,
    )
    if len(clean_tokens) != len(corrupted_tokens):
        problem = unequal_lengths(len(clean_tokens), len(corrupted_tokens), "marked chips differ")
        st.error(markdown_sentence(problem))  # may quote the user's text
        return [problem]
    changed = sum(render.differing_positions(clean_tokens, corrupted_tokens))
    if changed == 0:
        problem = IDENTICAL_PROMPTS
        st.error(markdown_sentence(problem))  # may quote the user's text
        return [problem]
    differ = "differs" if changed == 1 else "differ"
    st.success(f"Both prompts are {len(clean_tokens)} tokens; {counted(changed, 'position')} {differ}.")
    return []


def _chips(tokens: list[str], other: list[str]) -> str:
    """Token chips, at most ``MAX_CHIPS`` of them (then how many more there are)."""
    # here, not at the top: keeps torch out of the first paint
    from .. import render

    differs = render.differing_positions(tokens, other)
    strip = render.token_strip_html(tokens[:MAX_CHIPS], differs[:MAX_CHIPS])
    if len(tokens) > MAX_CHIPS:
        strip += f" <span style='font-size:0.85rem'>… and {len(tokens) - MAX_CHIPS} more tokens</span>"
    return strip
