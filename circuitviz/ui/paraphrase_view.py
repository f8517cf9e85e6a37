"""The Paraphrases page's view of a Best-of-N result: its pairs (editable for the next run), the
candidates' NDF at the slider's budget, the edges they share (an UpSet whose bars highlight their
edges in the graph), the winner's graph and the family's curves."""

from __future__ import annotations

import streamlit as st

from .. import render
from ..core.text import counted, cut, markdown_sentence, markdown_text, shown
from ..methods.settings import PARAPHRASES_HIGH
from ..query.pairs import LEFT_OUT_SHOWN, parse_paraphrases, warned_note
from ..query.sources import source_problem
from . import bon, loaders, result_view, state
from .guarded_table import guarded
from .measure_offers import measure_offers
from .paraphrase_downloads import paraphrase_downloads

USED_KEY = "bon.use_pairs.count"  # how many pairs the last click handed to the form
SETTINGS_KEY = "bon.settings"  # where the page's form keeps its settings (pages/paraphrases.py)
UPSET_KEY = "bon.upset"  # the UpSet chart, a widget: its value is the bar last clicked
HIGHLIGHT_READ = "bon.intersection.read"  # the link's highlighted intersection was read (once a session)


def checked_source(task, config):
    """``config``, or None (Run disabled) with its paraphrase source's one sentence when that source
    cannot give paraphrases of ``task`` (``query.sources.source_problem``)."""
    problem = source_problem(task, config) if task is not None and config is not None else ""
    if problem:
        st.error(markdown_sentence(problem))
        return None
    return config


def pairs_table(result, method: str) -> None:
    """The paraphrase pairs, editable; a button makes the edited ones the next run's."""
    rows = bon.table_rows(result)
    # typed or generated texts: the grid's own CSV wrote '=HYPERLINK(...)' as a live formula; the
    # table is in the page's guarded "Candidates (CSV)" below (bon.TABLE_SIDEWAYS says so)
    with guarded("bon-pairs"):
        edited = st.data_editor(
            rows,
            hide_index=True,
            key="bon.pairs",
            placeholder="",  # a cleared cell looks empty (the word None would read as typed)
            disabled=bon.READ_ONLY_COLUMNS,
            width="stretch",
            column_config=bon.table_widths(rows),
            row_height=bon.table_row_height(rows),
            height=bon.table_height(rows),
        )
    st.caption(bon.TABLE_SIDEWAYS)
    if bon.invisible_rows_sentence(rows):  # the grid draws a direction override's text reordered
        st.warning(markdown_sentence(bon.invisible_rows_sentence(rows)))
    if bon.line_break_rows_sentence(rows):  # the grid draws a line break as a space
        st.caption(bon.line_break_rows_sentence(rows))
    if bon.cut_rows_sentence(rows):  # a row shows a few lines of a long text
        st.caption(markdown_sentence(bon.cut_rows_sentence(rows)))

    def use_edited_pairs():
        reasons = [
            str(pair.get("reason") or "") if isinstance(pair, dict) else "" for pair in result.details.pairs
        ]
        kept, left_out = bon.rows_for_next_run(edited, rows, reasons)  # the first row is the prompt itself
        text = bon.edited_pairs_text([edited[i] for i in kept], [rows[i] for i in kept])
        for name, value in (("paraphrase_source", "file"), ("paraphrases", text)):
            state.set_widget_value(f"bon.method.{method}.{name}", value)
        try:  # said here too: "press Run" stood beside a Run the form had disabled
            parse_paraphrases(text, result.task) if text.strip() else None
        except ValueError as error:
            state.set_widget_value(USED_KEY, str(error))
            return
        count = len(text.splitlines())
        if count:  # the estimate above Run counts this (hidden) field: it said 9 beside 10 handed over
            settings = state.method_settings(SETTINGS_KEY, method)
            state.remember_settings(
                SETTINGS_KEY, method, {**settings, "n_paraphrases": min(count, PARAPHRASES_HIGH)}
            )
        cleared = [
            str(rows[i].get("pair")) for i in kept if not str(edited[i].get("paraphrase") or "").strip()
        ]
        state.set_widget_value(USED_KEY, (count, left_out, cleared))

    st.button("Use the edited paraphrases for the next run", on_click=use_edited_pairs, key="bon.use_pairs")
    used = state.widget_value(USED_KEY)  # said once, beside the button (the form is far above)
    state.forget_widget_value(USED_KEY)
    if isinstance(used, str):
        st.warning(markdown_sentence(f"The form above now holds the edited table, which cannot run: {used}"))
    elif used and (used[0] or used[1]):  # quotes the run's reasons (the paraphrases' words)
        (st.success if used[0] else st.warning)(markdown_sentence(bon.next_run_sentence(*used)))
    elif used:
        st.warning(
            "Every paraphrase of the table was cleared, so the next run has none to score; restore "
            "one here or choose another paraphrase source in the form above."
        )
    for note in result.details.notes:
        st.caption(markdown_text(note))  # quotes paraphrases: the user's (or a file's) text
    warned = warned_note(result.details.pairs, bon.candidate_pairs(result))
    if warned:  # a candidate's check warned (a corruption that barely moves the metric): said nowhere
        st.caption(markdown_text(warned))  # quotes paraphrases
    if bon.fewer_than_asked_sentence(result):
        st.caption(bon.fewer_than_asked_sentence(result))
    scored = set(bon.candidate_pairs(result))  # a mismatched answer may be scored when asked for
    left_out = [
        pair
        for index, pair in enumerate(result.details.pairs)
        if index and index not in scored and isinstance(pair, dict) and pair.get("reason")
    ]
    if len(left_out) > LEFT_OUT_SHOWN:  # the sentence names the first few: every one is here
        with st.expander(f"Every paraphrase left out, with its reason ({len(left_out)})"):
            for pair in left_out:
                line = result_view.paraphrase_left_out_line(shown(str(pair.get("clean", ""))), pair["reason"])
                st.caption(markdown_text(line))


@st.cache_data(show_spinner="Evaluating the candidates at this budget…", max_entries=64)
def _candidates_at(_model, _result, result_key: str, budget: int) -> list[dict]:
    return bon.candidates_at(_model, _result.model_id, _result, budget, loaders.get_store())


def candidates_at(model, result, budget: int) -> list[dict]:
    """Each candidate's NDF at ``budget`` (one batched pass where the run did not evaluate it)."""
    return _candidates_at(
        model, result, f"{result_view.result_id(result)} {loaders.model_key(model)}", int(budget)
    )


def candidate_sets(model, result, budget: int) -> dict[str, set[str]] | None:
    """{candidate: its circuit's edges} at ``budget``: what the UpSet draws and its download holds."""
    return bon.candidate_edge_sets(model, result.model_id, result, budget, loaders.get_store())


def shared_edges(model, result, budget: int, circuit_edges: set[str], sets=None):
    """The UpSet of the candidates' edges at ``budget`` (``sets``: ``candidate_sets``, found here
    when not given); a bar clicked (or an intersection chosen below it) highlights its edges in the
    graph. Returns those edges, or None."""
    sets = candidate_sets(model, result, budget) if sets is None else sets
    if not sets or len(sets) < 2:
        shared = bon.shared_entry(result, budget)
        if sets or (shared is not None and len(shared.get("set_sizes") or ()) == 1):
            # one candidate: "common to all candidates (their score matrices were not kept)" was
            # said of the prompt alone, its scores kept (an audit)
            st.caption(bon.one_candidate_note(budget))
        elif shared is not None:
            st.caption(
                f"{shared['n_common']:,} edges are common to all candidates (their score matrices were not kept)."
            )
        return None
    st.subheader("Edges shared across candidate circuits")
    shown = render.exclusive_intersections(sets)[: render.UPSET_BARS]
    named = {f"{item.label} ({item.size} edges)": item for item in shown}
    by_label = {item.label: name for name, item in named.items()}
    # The click is read before the chart is drawn, so this run already draws its bar highlighted.
    # Drawn first (as before), the chart of the run after a click was the unhighlighted one, and
    # the next run's highlighted figure is another chart to streamlit (a plotly chart's identity
    # hashes its figure): the click that run carried was dropped, so a second bar took two clicks.
    clicked = bon.clicked_intersection(state.widget_value(UPSET_KEY), shown)
    if clicked is not None and clicked != state.session.bon_intersection_clicked and clicked in by_label:
        state.session.bon_intersection = by_label[clicked]  # a bar clicked: as if chosen below
    state.session.bon_intersection_clicked = clicked
    if state.session.bon_intersection not in named:  # another budget's, or a link's the run lacks
        if state.session.bon_intersection != "none" and not state.widget_value(HIGHLIGHT_READ):
            st.info(missing_intersection_sentence(state.session.bon_intersection, budget))
        state.session.bon_intersection = "none"
    state.set_widget_value(HIGHLIGHT_READ, True)
    chosen = named.get(state.session.bon_intersection)
    upset, _ = render.upset_figure(sets, selected=chosen.members if chosen else None)
    st.plotly_chart(upset, key=UPSET_KEY, on_select="rerun", selection_mode="points")
    if render.cut_sentence(sets, render.UPSET_BARS, "candidate"):
        st.caption(render.cut_sentence(sets, render.UPSET_BARS, "candidate"))
    picked = st.selectbox(
        "highlight the edges of one intersection in the graph (or click its bar above)",
        ["none", *named],
        key=state.Session.bon_intersection.key,
    )
    highlight = None
    if picked != "none":
        item = named[picked]
        highlight, sentence = bon.highlight_in_circuit(set(item.edges), circuit_edges, result, item.members)
        st.caption(sentence)
    shared = len(render.shared_by_all(sets))
    st.caption(
        f"{counted(shared, 'edge')} {'is' if shared == 1 else 'are'} in every candidate at budget {budget:,}."
    )
    return highlight


def missing_intersection_sentence(wanted: str, budget: int) -> str:
    """One sentence (markdown, the link's text escaped): the link's highlighted intersection
    (``highlight``) is not one of the UpSet's bars at this budget."""
    return markdown_text(
        f"The link's highlighted intersection {cut(str(wanted), 80)!r} is not one of the candidates' "
        f"intersections drawn below at budget {budget:,}: nothing is highlighted."
    )


def learn_offer_caption(model, result, budget: int) -> None:
    """Under the slider's offer to learn a circuit that carries over (drawn, as ``budget_slider``
    draws it, at the opening budget of a curve that reaches no faithful circuit): that it leaves
    this page for Explore and how long the run there takes by its estimate. Only its hover said
    "runs on the Explore page", and the run took about 70 s there (an audit). Drawn where the
    button is: ``result_view.learn_offer`` decides both."""
    from ..methods import method_traits

    offer = result_view.learn_offer(result, budget)
    if offer is None:
        return
    name, readable = offer
    try:  # the estimate Explore will show above its run
        request = loaders.request_for(
            model, result.model_id, result.task, name, state.own_settings(name), readable
        )
        estimate = request.estimate
    except (TypeError, ValueError):
        estimate = None
    seconds, span = (estimate.seconds, estimate.seconds_range) if estimate is not None else (None, None)
    st.caption(bon.learn_offer_sentence(method_traits(name).label, seconds, span))


def candidates_view(model, result) -> None:
    """Everything below the pairs: the budget, the candidates, their shared edges, the graph, the curves."""
    budget = result_view.budget_slider(result, "budget", any_budget=True)
    learn_offer_caption(model, result, budget)  # under the slider's "Learn a small circuit" button
    point = result_view.point_at(result, budget, model)
    result_view.metrics_row(result, budget, point)
    measure_offers(result, budget, model, "bon.result")  # transfer: what the fitted caveat points to
    scores = candidates_at(model, result, budget)  # evaluated now where the run did not
    if scores:
        st.plotly_chart(render.candidate_figure(scores, budget), key="bon.candidates")
        st.caption(bon.winner_note(result, budget, point, scores, budget))
    circuit_edges = set(result.graph.edge_names_of(result.circuit(budget)))
    sets = candidate_sets(model, result, budget)  # the UpSet's and its download's: one set of data
    highlight = shared_edges(model, result, budget, circuit_edges, sets)
    paraphrase_downloads(result, budget, scores, sets)
    labels = loaders.node_labels(model, result.model_id, result.task)
    drawing = result_view.graph_drawing(
        result, budget, labels=labels, highlight=highlight, ndf=point.ndf if point else None
    )
    result_view.show_graph(drawing)
    curves = {name: points for name, points in result.details.curves.items() if name != result.method}
    result_view.curve_chart(result, budget, key="bon.curve", extra_curves=curves, point=point)
