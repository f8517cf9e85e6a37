"""The Signals page's view of a result with a signals view (ACC++): the circuit on a token-by-layer
grid, its attention decisions, one decision's signals with the attention weight falling as they
are removed one by one, and the paper's knockout (found versus random signals)."""

from __future__ import annotations

import streamlit as st

from ..acc.tables import (
    SIGNAL_HELP,
    decision_label,
    decision_rows,
    knockout_caption,
    knockout_rows,
    knockout_verdict,
    metric_words,
    rank1_shown,
    signal_rows,
    summary_help,
)
from ..core.text import markdown_text
from ..render.acc_graph import position_graph_html, removal_figure
from . import result_view, state
from .node_card import graph_with_card

# the decision table's columns (``decision_rows``) under headers short enough that all ten fit a
# 1,000 px page (about 540 px of table; "attention weight", "query signals", "below threshold" put the
# last four out of view), each with what it holds in its help: {column: (header, width, help)}
DECISION_COLUMNS = {
    "#": ("#", 34, "the decision's number, as the Decision picker below names it"),
    "head": ("head", 58, "the attention head that decides: a5.h1 is layer 5, head 1"),
    "destination": ("dest.", 78, "the token (and its position) that attends: the head's query position"),
    "source": ("source", 78, "the token (and its position) it attends to: the head's key position"),
    "attention weight": ("weight", 56, "the head's attention weight from the destination to the source"),
    "threshold": (
        "tau",
        50,
        "the weight that makes it a decision: tau = k / the number of positions the destination attends over",
    ),
    "query signals": (
        "query",
        46,
        "how many signals were removed from the query, largest IG first, until the weight fell below tau "
        "(or no signal of positive IG was left, or max signals was reached); a signal here is one singular "
        "direction, so this is the query rows' ranks in 'Its signal edges' added up, not the number of rows",
    ),
    "key signals": (
        "key",
        38,
        "how many signals were removed from the keys, the same way: the key rows' ranks in 'Its signal "
        "edges' added up",
    ),
    "below threshold": (
        "below",
        50,
        "whether removing the query's signals, and the keys' signals, each brought the weight below tau "
        "(not when IG ran out of positive signals or max signals was reached first)",
    ),
    "depth": (
        "depth",
        48,
        "how far upstream of the answer: 1 for a head the answer reads directly (a seed), one more a step",
    ),
}


SIGNAL_TABLE_TITLE = (
    "**Its signal edges**: a row per upstream component and side, its signals (one singular direction "
    "each) grouped; the rank is how many"
)


def decision_config() -> dict:
    """The decision table's ``column_config``: the short headers, widths and help of ``DECISION_COLUMNS``."""
    return {
        name: st.column_config.Column(label, width=width, help=text)
        for name, (label, width, text) in DECISION_COLUMNS.items()
    }


# the directions column as wide as its longest list, the other columns sized to their text: shared
# out evenly, a rank-13 row's 13 directions ("251, 4, 123, 1, 174, ...", 50 characters) were cut
# even at 2,000 px. At 1,000 px (about 540 px of table) the seven columns before it take about
# 450 px and the table scrolls sideways, each column in view and the directions' start in sight;
# at 1,500 px (1,040 px) the row is whole up to DIRECTIONS_PX, at 2,000 px too.
DIRECTIONS_CHAR_PX = 6.2  # the grid's 14 px font: digits 7 px, ", " 6.5 px, measured 5.3-5.6 px a character
DIRECTIONS_PAD_PX = 24  # the cell's padding, either side
# the narrowest (the header "directions") and the widest, beside the others' 450 px at 1,500 px
DIRECTIONS_PX = (100, 560)


def signal_config(rows: list[dict]) -> dict:
    """The signal table's ``column_config``: each column's help (``SIGNAL_HELP``), and the
    directions column as wide as its longest list (``DIRECTIONS_PX``)."""
    config = {name: st.column_config.Column(help=text) for name, text in SIGNAL_HELP.items()}
    longest = max((len(str(row.get("directions", ""))) for row in rows), default=0)
    width = int(
        min(max(longest * DIRECTIONS_CHAR_PX + DIRECTIONS_PAD_PX, DIRECTIONS_PX[0]), DIRECTIONS_PX[1])
    )
    config["directions"] = st.column_config.Column(help=SIGNAL_HELP["directions"], width=width)
    return config


def signals_view(result) -> None:
    """Everything about one result's attention decisions and their signals."""

    details = result.details  # ACCDetails
    result_view.task_caption(result)
    summary = details.summary
    cells = st.columns(4)
    # short labels, the rest in the help, with this result's counts: at 1,000 px a quarter of the row
    # cut the longer ones ("nodes (componen…", "signal edges of ran…")
    helps = summary_help(details)
    cells[0].metric("nodes", summary["n_nodes"], help=helps["nodes"])
    cells[1].metric("edges", summary["n_edges"], help=helps["edges"])
    cells[2].metric("attention decisions", summary["n_decisions"], help=helps["attention decisions"])
    cells[3].metric("rank-1 edges", rank1_shown(summary), help=helps["rank-1 edges"])
    if details.limits.get("max_decisions_reached"):
        st.warning(
            f"Tracing stopped at {details.limits['max_decisions']} decisions with "
            f"{details.limits['decisions_left']} left; raise max decisions to trace them."
        )
    decisions = details.decisions
    if not decisions:
        st.info("No attention decision of the answer's components reached the threshold tau = k/d; lower k.")
        return

    st.subheader("Attention decisions")
    st.dataframe(
        decision_rows(details),
        hide_index=True,
        placeholder="—",
        width="stretch",
        column_config=decision_config(),
    )
    options = [d["index"] for d in decisions]
    missing = open_decision(result, options)
    if missing:
        st.info(missing)
    chosen = state.bind(  # the decision chosen is the link's (``decision``)
        st.selectbox,
        "Decision",
        state.Session.signals_decision.key,
        options=options,
        format_func=lambda index: decision_label(decisions[index]),
    )
    # the table the page's width, the chart below it: beside the chart, at 1,000 px, the table showed
    # three of its columns and scrolled the figures out of sight
    # a row groups an upstream component's signals (a rank-13 row is 13 of them): "Its signals" over
    # two query rows beside a chart whose "signals removed" ran to 14 read as two counts of one thing
    st.markdown(SIGNAL_TABLE_TITLE)
    signals = signal_rows(details, chosen)
    st.dataframe(
        signals, hide_index=True, placeholder="—", width="stretch", column_config=signal_config(signals)
    )
    st.markdown("**Attention weight as the signals are removed**, the largest IG first")
    st.plotly_chart(removal_figure(decisions[chosen]), key="signals.removal")

    st.subheader("The circuit, by token and layer")
    title = f"{result.model_id} · ACC++ (k = {result.config.get('k')}) · decision #{chosen} highlighted"
    graph_with_card(
        position_graph_html(details, title=title, highlight_decision=chosen), "signals.graph", result=result
    )

    st.subheader("Knockout: the signals found versus as many random ones")
    st.caption(
        "Each signal's clean value is subtracted from the query or keys of its head and the model "
        "runs on; the paper's check of whether the signals found carry the attention and the answer."
    )
    metric = metric_words(result.task)
    st.dataframe(knockout_rows(details, metric), hide_index=True, width="stretch", placeholder="—")
    verdict = knockout_verdict(details, metric)
    if verdict:
        st.markdown(markdown_text(verdict))  # figures and fixed words only, escaped all the same
    st.caption(knockout_caption(details, metric))


DECISION_OF = "signals.decision.result"  # the result the decision was chosen for (``result_view.result_id``)


def open_decision(result, options: list[int]) -> str | None:
    """Set the decision ``result``'s view opens at: the one chosen, while the result is the one it
    was chosen for; a new result's first (another circuit's decision #5 is another decision),
    except a session's first result, which opens at the link's. A link's decision this result does
    not have opens the first and gets one sentence, returned; before 2026-12-06 the link did not
    carry the decision at all, and a shared Signals view opened at decision #0."""
    key = state.Session.signals_decision.key
    mark, seen = result_view.result_id(result), state.widget_value(DECISION_OF)
    if seen == mark:
        return None
    state.set_widget_value(DECISION_OF, mark)
    wanted = state.value(key)
    if seen is None and wanted in options:
        return None
    state.set_value(key, options[0])
    if seen is None and wanted is not None:
        return missing_decision_sentence(wanted, options)
    return None


def missing_decision_sentence(wanted: int, options: list[int]) -> str:
    """The link names a decision this circuit does not have: which, what it has, what is shown."""
    count = f"{len(options):,} attention decision{'s' if len(options) != 1 else ''}"
    have = f"#{options[0]}" if len(options) == 1 else f"#{options[0]} to #{options[-1]}"
    return (
        f"The link's decision #{wanted:,} is not one of this circuit's {count} ({have}): "
        f"decision #{options[0]} is shown."
    )
