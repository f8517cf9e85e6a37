"""One click to measure more of the circuit on screen: its NDF on paraphrases its method never
saw (transfer), and its completeness. Each runs the model; the figure joins the metrics above
and is kept with the stored result, so a reload shows it measured."""

from __future__ import annotations

import json
import math

import streamlit as st

from ..core.text import counted, joined, markdown_sentence, markdown_text, score_text
from ..measure.transfer import DEFAULT_PARAPHRASES
from . import kept_results, loaders, state
from .result_figures import METRIC_HELP, held_out_at, held_out_caption, transfer_entry


def measure_offers(result, budget: int, model, key: str) -> None:
    """The buttons under the metrics at ``budget`` (none without a model). While the graph below
    shows an edit, a caption says they measure the method's circuit, not the edit (a completeness
    measured after removing a node joined the method's figures, where it read as the edit's)."""
    transfer_offer(result, budget, model, key)
    completeness_offer(result, budget, model, key)
    offered = transfer_label(result, budget) or completeness_label(result, budget)
    if model is not None and offered and _edited(key):
        st.caption(
            "These measure the method's circuit at this budget, not your edit: the edit's own NDF and "
            "necessity are under the graph."
        )


def _edited(key: str) -> bool:
    """Whether the graph below shows an edit: the instrument's view (``ui/instrument``), or on a
    link's first run, before the graph read it, the link's own view."""
    view = state.widget_value(f"{key}.instrument")
    if view is not None:
        return not view.edit.is_empty()
    if not state.Session.instrument_view.read_on(state.session.page):  # a page with no graph view
        return False  # (Paraphrases): Explore's edit, or a link's, is no edit of this page's
    try:
        edit = json.loads(state.session.instrument_view or "{}").get("edit")
    except (ValueError, AttributeError, RecursionError):  # unreadable: the graph below says so
        return False
    return isinstance(edit, dict) and any(edit.values())


def transfer_label(result, budget: int) -> str | None:
    """The transfer button's label at ``budget``, or None when no click is offered: no corrupted
    prompt, a transfer measured there already, or a held-out figure on five paraphrases or more."""
    known = held_out_at(result, budget)
    measured = transfer_entry(result, budget) is not None
    if not result.task.corrupted or (known and (measured or len(known) >= DEFAULT_PARAPHRASES)):
        return None
    if measured_nothing(result, budget):  # a second click would measure the same nothing
        return None
    if not known:
        return "Measure its NDF on paraphrases it never saw (runs the model)"
    return (
        f"Measure its NDF on up to {DEFAULT_PARAPHRASES} paraphrases it never saw; the figure above "
        f"has {len(known)} (runs the model)"
    )


def measured_elsewhere_sentence(result, budget: int) -> str:
    """Without a model (a Gallery example), a budget with no held-out figure of a result whose
    stored transfer was measured at other budgets: where it was, and how to measure it here. The
    Gallery's "NDF held out" vanished as its slider left the headline budget, unsaid (an audit,
    2026-12-07); '' where the figure is shown or none was measured."""
    if held_out_at(result, budget):
        return ""
    stored = ((result.transfer or {}).get("budgets") or {}).items()
    measured = sorted(int(b) for b, entry in stored if (entry or {}).get("ndf"))
    if not measured:
        return ""
    where = joined([f"{b:,}" for b in measured])
    return (
        f"NDF on held-out paraphrases was measured when this result was stored at budget"
        f"{'s' if len(measured) > 1 else ''} {where} only, not at {budget:,}; measuring it here runs the "
        "model: re-run the example live on the Explore page, which offers it."
    )


def transfer_offer(result, budget: int, model, key: str) -> None:
    """One click to measure the circuit at ``budget`` on template paraphrases of the prompt that
    its method never used (the figure then joins the metrics above); offered while none is known,
    or while the one known is the method's own held-out share of fewer than five (paraphrase
    pruning holds out one to three: one paraphrase can decide its mean)."""
    if model is None:  # a stored result (the Gallery): said where its figure was measured, if elsewhere
        elsewhere = measured_elsewhere_sentence(result, budget)
        if elsewhere:
            st.caption(elsewhere)
        return
    known, label = held_out_at(result, budget), transfer_label(result, budget)
    if measured_nothing(result, budget):  # said for as long as the button stays away
        st.caption(markdown_text(nothing_measured_sentence((result.transfer or {}).get("note"))))
        return
    if label is None:
        return
    if not st.button(label, key=f"{key}.transfer", help=METRIC_HELP["NDF held out"]):
        return
    from ..entry.api import measure_transfer

    with st.spinner("Evaluating the circuit on paraphrases its method never used..."):
        found = measure_transfer(model, result, budgets=[budget])
    now = held_out_at(result, budget)
    # kept past a rerun and a reload, a measurement of nothing too (the page reads its result from
    # the store each run: unstored, the button came back and measured the same nothing again)
    problem = loaders.store_measured(result, kept_results.request_key_of(result))
    if now:
        if problem is None and len(now) > len(known):
            st.rerun()  # the metrics above show it now
        if problem:
            st.warning(markdown_sentence(f"{problem} {held_out_caption(result, budget)}"))  # and the figure
            return
        counts = transfer_entry(result, budget) or {}  # ``found`` is the record kept there
        st.caption(
            markdown_text(no_wider_sentence(len(counts.get("ndf") or []), len(known), found.get("note")))
        )
        return
    if problem is None and measured_nothing(result, budget):
        st.rerun()  # the sentence in the button's place (measured_nothing above)
    st.caption(markdown_text(nothing_measured_sentence(found.get("note"))))


def measured_nothing(result, budget: int) -> bool:
    """Whether a transfer was measured at ``budget`` and found no paraphrase to measure on, with no
    held-out figure of the method's own either (the button then stays away: its next click would
    find the same nothing, as the paraphrases and their checks are the same)."""
    entry = transfer_entry(result, budget)
    return entry is not None and not entry.get("ndf") and not held_out_at(result, budget)


def nothing_measured_sentence(note: str | None) -> str:
    """What a transfer click that measured nothing says: the measurement's own ``note`` (its
    sentences start with a capital: after a colon it read "Nothing was measured: The prompt ...")."""
    from ..query.templates import for_transfer

    said = for_transfer(note or "No paraphrase of this prompt passed the checks.")
    if "--transfer-file" in said:  # the way out is in the note already
        return f"Nothing was measured. {said}"
    return (
        f"Nothing was measured. {said} On the command line, --transfer-file measures a circuit on "
        "paraphrase pairs of your own."
    )


def no_wider_sentence(measured: int, held: int, note: str | None) -> str:
    """Why the figure shown stays the method's own held-out one: the wider measurement reached
    ``measured`` paraphrases, no more than the ``held`` of its own; ``note`` (the measurement's
    sentences) says why (the source ran out, a check refused some, the method used some)."""
    return (
        f"Only {counted(measured, 'paraphrase')} it never saw could be measured, no more than the {held} "
        f"it held out itself: the figure above stays its own. {note or ''}"
    ).strip()


def completeness_label(result, budget: int) -> str | None:
    """The completeness button's label at ``budget``, or None when no click is offered: no
    corrupted prompt, a circuit over token positions (its halves would be of edges, not of its
    units), a budget the run did not evaluate, a circuit of fewer than two edges (no half to
    remove), or a completeness measured there already."""
    point = result.point(budget)
    if not result.task.corrupted or result.positions or point is None or point.n_edges < 2:
        return None
    if not math.isnan(point.completeness):
        return None
    return "Measure its completeness (runs the model)"


def completeness_offer(result, budget: int, model, key: str) -> None:
    """One click to measure the completeness of the circuit at ``budget``: 8 random halves of it
    removed from it and from the whole model, in one batched evaluation (``api.measure_completeness``)."""
    label = completeness_label(result, budget) if model is not None else None
    if label is None or not st.button(label, key=f"{key}.completeness", help=METRIC_HELP["completeness"]):
        return
    from ..entry.api import measure_completeness

    with st.spinner("Removing random halves of the circuit from it and from the whole model..."):
        found = measure_completeness(model, result, budgets=[budget])
    problem = loaders.store_measured(result, kept_results.request_key_of(result))  # kept past a reload
    if problem:  # the metrics above ran before the figure: say it here too
        st.warning(
            markdown_sentence(f"{problem} Completeness at budget {budget}: {score_text(found[budget])}.")
        )
        return
    st.rerun()  # the metrics above show it now
