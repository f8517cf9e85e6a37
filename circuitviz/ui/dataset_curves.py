"""The Dataset page's headline (prompts, CPR and CMD of a series) and its Curves tab (every
series' mean curve and the scores table), each in what the series' budgets count: the graph's
edges or, for a method over token positions, (edge, position) units (``batch.units``)."""

from __future__ import annotations

import os

import streamlit as st

from ..core.text import markdown_text
from . import link_choices, state
from .dataset import FAILED_SHOWN, _load, bands, left_out, mib, short_labels
from .downloads import slug
from .guarded_table import csv_button, guarded

OVER_UNITS = (
    "over the (edge, position) units its circuits keep, divided by the span they cover, as "
    "`circuitviz batch` prints it (MIB's areas are over the model's edges)"
)


@st.cache_data(show_spinner=False, max_entries=64)
def unit_scores(folder: str, stamp: float, label: str) -> dict:
    """A series over token positions' CPR and CMD: the dataset's faithfulness over the units its
    circuits keep, each area divided by its span (``batch.command.dataset_scores``, the batch's own
    summary). MIB's raw areas are over the budget as a share of the model's edges, which a unit
    budget is not: the page showed CPR 0.192 over 50 to 5,000 units read as 0.5 to 48 % of
    Gemma's edges, where the batch printed 0.406."""
    # here, not at the top: keeps torch out of the first paint
    from ..batch.command import dataset_scores

    return dataset_scores(_load(folder, stamp), label)


def series_scores(folder: str, stamp: float, label: str, units: bool) -> dict:
    """The CPR and CMD the page shows for a series: MIB's (``atlas.mib_scores``) over edges, the
    batch summary's over token positions (``unit_scores``); with the per-prompt means either way."""
    scores = mib(folder, stamp, label)
    if not units:
        return scores
    spanned = unit_scores(folder, stamp, label)
    return {**scores, "cpr": spanned["cpr"], "cmd": spanned["cmd"]}


def units_sentence(batch, label: str) -> str:
    """What a series over token positions' budgets count and what its CPR and CMD are, with the
    prompts' unit totals (a budget of 5,000 units is 48 % of Gemma's 10,342 edges but 3 % of a
    16-token prompt's 164,107 units)."""
    from ..batch.units import unit_totals

    totals = unit_totals(batch, batch.rows(label, passing=True))
    low, high = (int(totals.min()), int(totals.max())) if len(totals) else (0, 0)
    each = f"{low:,}" if low == high else f"{low:,} to {high:,}"
    return (
        "This method ran over token positions: its budgets and the units its circuits keep count (edge, "
        f"position) units, of which each prompt's graph holds {each}, so CPR and CMD are the dataset's "
        "faithfulness over the units kept, each area divided by the span they cover (as `circuitviz "
        "batch` prints them), not MIB's areas over the model's edges."
    )


def headline(batch, label: str, folder: str, stamp: float) -> bool:
    """How many stored tasks pass the validity check (the figures are over those), then prompts
    finished and failed, and MIB's CPR and CMD of the series. False when no task passes."""
    # here, not at the top: keeps torch out of the first paint
    from ..batch.task_check import validity, validity_sentence
    from ..batch.units import over_positions
    from ..batch.unlikely import unlikely_problem, unlikely_summary

    rows = batch.rows(label, done=False)
    done = batch.rows(label).num_rows
    found = validity(batch, label)
    if not found["passing"]:
        which = "The one stored task" if done == 1 else f"None of the {done:,} stored tasks"
        st.warning(
            f"{which} of {markdown_text(label)} {'fails' if done == 1 else 'passes'} the validity check, so the "
            "atlas has no figure to show; pick another method or atlas, or rerun the batch on meaningful tasks."
        )
        return False
    st.write(validity_sentence(found))
    skipped = left_out(batch.manifest)
    if skipped:  # the file's own lines, as the command printed them: never markup
        with st.expander(markdown_text(skipped[0])):
            for line in skipped[1][:FAILED_SHOWN]:
                st.markdown(markdown_text(line))
            if len(skipped[1]) > FAILED_SHOWN:
                st.caption(f"and {len(skipped[1]) - FAILED_SHOWN:,} more (the manifest's dataset.problems)")
    unreadable = unlikely_problem(batch.manifest)  # a hand-edited record: said, never a traceback
    if unreadable:
        st.warning(markdown_text(unreadable))
    unlikely = unlikely_summary(batch.manifest)
    if unlikely:  # the tasks' own answers and ids: never markup
        with st.expander(markdown_text(unlikely[0])):
            for line in unlikely[1][:FAILED_SHOWN]:
                st.markdown(markdown_text(line))
            if len(unlikely[1]) > FAILED_SHOWN:
                st.caption(
                    f"and {len(unlikely[1]) - FAILED_SHOWN:,} more (the manifest's dataset.unlikely_answers)"
                )
    units = over_positions(batch, label)
    scores = series_scores(folder, stamp, label, units)
    columns = st.columns(4)
    failed = rows.num_rows - done
    columns[0].metric(
        "prompts",
        f"{found['passing']:,}",
        f"{failed:,} failed" if failed else None,
        delta_color="inverse",
        delta_arrow="off",  # a count beside the prompts, not a rise: the arrow read as one
        help="finished prompts that pass the validity check: every figure on this page is over these",
    )
    over = OVER_UNITS if units else "over the edge fraction"
    of = "units" if units else "MIB"
    columns[1].metric(
        f"CPR ({of})",
        f"{scores['cpr']:.3f}",
        help=f"area under the dataset's faithfulness {over}; higher is better",
    )
    columns[2].metric(
        f"CMD ({of})",
        f"{scores['cmd']:.3f}",
        help=f"area between the dataset's faithfulness and 1{' ' + over if units else ''}; lower is better",
    )
    per_prompt = scores["per_prompt"]["cpr_nfs"]
    columns[3].metric(
        "CPR per prompt",
        f"{per_prompt['mean']:.3f}",
        help=f"mean of the prompts' own CPR, 95\u00a0% interval {per_prompt['low']:.3f} to {per_prompt['high']:.3f}"
        if found["passing"] > 1
        else "the prompt's own CPR (one prompt: no interval)",
    )
    if units:
        st.caption(units_sentence(batch, label))
    elif not scores["mib_grid"]:
        st.caption(off_grid_sentence(scores["fractions"], scores["cpr"], scores["cmd"]))
    return True


def kept_budgets_help(batch, label: str, kept: list[int]) -> str:
    """The budget slider's help: the budgets whose circuits the table keeps, and why the slider
    stops short of the curve's largest budget (the stored arithmetic atlas's slider ended at 1034,
    its curve at 10,342, nothing saying why)."""
    over = [b for b in batch.budgets(label) if b > max(kept)]
    shown = f"the budgets whose circuits the batch's table keeps, up to {max(kept):,}"
    if not over:
        return f"{shown}: every budget of the curve"
    return (
        f"{shown}: the consensus, the clusters and the prompts' table need a prompt's circuit, and "
        f"the batch kept none over {max(kept):,} (`--keep-edges`), so the curve's larger budgets "
        f"({', '.join(f'{b:,}' for b in over)}) are not offered here"
    )


def off_grid_sentence(fractions: list[float], cpr: float, cmd: float) -> str:
    """What MIB's CPR and CMD are over budgets that are not MIB's ten: areas over the share of the
    edges the budgets span, so a narrow span makes them small whatever the circuits. A batch at
    budgets 20 and 100 on Gemma-3-270M (0.19 % to 0.97 % of the edges) read "CPR (MIB) 0.003" and
    "CMD (MIB) 0.004" (lower is better) beside "CPR per prompt 0.381", and said only that they
    compare with runs on the same budgets."""
    head = "These budgets are not MIB's ten fractions of the edges (`--budgets mib`)"
    low, high = min(fractions, default=0.0), max(fractions, default=0.0)
    if high <= low:
        return f"{head}: with one budget there is no area, so CPR and CMD are 0 whatever the circuits."
    width = high - low
    return (
        f"{head}: CPR and CMD are areas over the share of the edges the budgets span, here {low:.2%} to "
        f"{high:.2%} (a width of {width:.3g}, where MIB's ten span 0.999), so they are small by the width "
        f"alone and compare only with runs on the same budgets. Over that width the dataset's curve "
        f"stands {cpr / width:.3f} high on average (CPR) and {cmd / width:.3f} from 1 (CMD)."
    )


# the scores table's headers, short enough that a long series name leaves every figure in view at
# 1,000 px ("CMD per prompt" was cut), what each is in its help
SCORE_COLUMNS = {
    "method": st.column_config.TextColumn(
        help="the series, named by what sets it apart (every setting below)"
    ),
    "CPR (MIB)": st.column_config.NumberColumn(
        "CPR",
        format="%.3f",
        help="MIB's CPR: area under the dataset's faithfulness over the edge fraction (for a method over "
        f"token positions, {OVER_UNITS}); higher is better",
    ),
    "CMD (MIB)": st.column_config.NumberColumn(
        "CMD",
        format="%.3f",
        help="MIB's CMD: area between the dataset's faithfulness and 1 (for a method over token positions, "
        f"{OVER_UNITS}); lower is better",
    ),
    "CPR per prompt": st.column_config.NumberColumn(
        "CPR each", format="%.3f", help="mean of the prompts' own CPR (of their NFS curves)"
    ),
    "CMD per prompt": st.column_config.NumberColumn(
        "CMD each", format="%.3f", help="mean of the prompts' own CMD (of their NFS curves)"
    ),
}


def curves(batch, folder: str, stamp: float, budget: int) -> None:
    """Every series' mean curve with its band, the consensus circuits dashed, and the scores table."""
    # here, not at the top: keeps torch out of the first paint
    import pandas

    from ..batch.units import over_positions
    from .dataset_figures import curves_figure

    scores = ["ndf", "nfs", "necessity"]
    link_choices.seed("dataset.score", state.Session.dataset_score, scores, "ndf")  # the link's (``score``)
    score = st.segmented_control("score", scores, key="dataset.score") or "ndf"
    link_choices.keep(state.Session.dataset_score, score)
    short = short_labels(batch.labels)  # the legend and the table name series by what sets them apart
    series = {short[name]: bands(folder, stamp, name, score) for name in batch.labels}
    positioned = {name for name in batch.labels if over_positions(batch, name)}
    over = {short[name] for name in positioned}
    # kept per atlas, score and budget: a tab click reruns the page (dataset_figures)
    st.plotly_chart(curves_figure(folder, stamp, score, budget, series, over), key="dataset.curves")
    table = []
    for name in batch.labels:
        found = series_scores(folder, stamp, name, name in positioned)
        table.append(
            {
                "method": short[name],
                "prompts": found["n_prompts"],
                "CPR (MIB)": found["cpr"],
                "CMD (MIB)": found["cmd"],
                "CPR per prompt": found["per_prompt"]["cpr_nfs"]["mean"],
                "CMD per prompt": found["per_prompt"]["cmd_nfs"]["mean"],
            }
        )
    # the CSV download writes column names: 'CPR (MIB)' over a series over positions named MIB's
    # areas over the model's edges where the figure is the batch summary's over its units
    whose = "MIB" if not positioned else "units" if len(positioned) == len(batch.labels) else "MIB, or units"
    names = {f"{score} (MIB)": f"{score} ({whose})" for score in ("CPR", "CMD")}
    config = {names.get(name, name): value for name, value in SCORE_COLUMNS.items()}
    scores = pandas.DataFrame(table).rename(columns=names)
    with guarded("dataset-scores"):  # the series' names are the batch folder's, a file's text
        st.dataframe(scores, hide_index=True, placeholder="—", column_config=config)
    csv_button(
        scores,
        "Scores (CSV)",
        f"scores_{slug(os.path.basename(os.path.normpath(str(folder))), 40, keep='.', fallback='batch')}.csv",
        "dataset.scores.csv",
        what="table of scores",
    )
    if any(short[name] != name for name in batch.labels):  # every setting of each series, once
        with st.expander("Each series' settings"):
            for name in batch.labels:
                st.text(name)
