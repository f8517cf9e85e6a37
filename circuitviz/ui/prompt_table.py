"""The Dataset page's Prompts table: its columns, the prompts as the table shows them, and the
sentence that explains a circuit pruned to nothing."""

from __future__ import annotations

import os
import re

import streamlit as st

from ..core.text import invisible_as_codes, invisible_characters, invisible_kinds, joined, shown_token

TABLE_PX = 540  # the table at a 1,000 px window (the main column less its borders)
TICK_PX = 36  # each row's selection box
ROW_PX = 66  # over 64 px the grid wraps a cell's text: three lines of 18 px
VISIBLE_ROWS = 10  # rows in view at once: the grid's default 400 px showed 5 1/2 of these tall rows
HEADER_PX = 36  # the grid's header row, and its borders


def table_height(n_rows: int) -> int:
    """The Prompts table's height: its header and up to VISIBLE_ROWS rows (fewer: no empty space)."""
    return HEADER_PX + ROW_PX * max(1, min(n_rows, VISIBLE_ROWS)) + 2


LINES = 3
CHAR_PX = 7.0  # a generous width of one character at the grid's 14 px font (prose is about 5.8)
PADDING_PX = 17  # the cell's padding, both sides
STYLED_ROWS = 2_000  # the styler costs about 0.2 ms a cell and each rerun: 0.4 s at 2,000 rows
SHARED_CHARS = 20  # a start every prompt shares is cut to '…' from this length on
CUT = "\u2026"  # the ellipsis that marks a cut
ID_PX = (72, 140)  # the id column's narrowest and widest
ANSWER_PX = 60  # the answer column: a quoted token
WORD_CHARS = 12  # a cut moves back to a word's end this near


AT_BUDGET = ("NDF", "edges kept", "cluster", "Jaccard to consensus")  # figures of the budget's circuits


def at_budget(name: str, budget: int, counts: str = "edges") -> str:
    """The column name of a figure of the circuits at ``budget``: 'NDF at a budget of 103 edges'.
    The table's CSV download (Prompts (CSV), as the grid's own did) writes column names, not the
    short headers shown, and its 'NDF'
    did not say at which budget it was measured; names without a budget stay as they are.
    ``counts``: what the budget counts, 'edges' or, over token positions, 'units' (the CSV of a
    batch over positions read 'edges kept at a budget of 500 edges' over its units kept)."""
    if name not in AT_BUDGET:
        return name
    shown = f"{counts} kept" if name == "edges kept" else name
    return f"{shown} at a budget of {budget} {counts}"


def prompt_columns(
    budget: int, refused: bool, whole: bool = False, id_chars: int = 10, counts: str = "edges"
) -> tuple[tuple[str, ...], dict]:
    """The Prompts table's column order and headers. The three figures of the prompt's circuit come
    first, under short headers with their meaning in the help, then the answer and the prompt, so
    that all of them fit the 540 px of table at a 1,000 px window (the answer and the prompt were
    the seventh and eighth columns, out of view there); the cluster, the Jaccard similarity and the
    family follow, a scroll away at 1,000 px. The validity check's sentence sits beside the id where
    some task fails it. The id column is as wide as the longest id, ``id_chars`` characters, within
    ID_PX ('arithmetic-00000' was cut at 82 px). ``whole``: the prompt column holds the shortened
    text, and the whole prompt comes last (a table too long to style, see ``prompt_display``).
    ``counts``: what the budgets count, 'edges' or 'units' (a method over token positions)."""
    units = counts == "units"
    kept = "(edge, position) units" if units else "edges"
    number = st.column_config.NumberColumn
    order = [
        "id",
        "NDF",
        "edges kept",
        "CPR",
        "answer",
        "prompt",
        "cluster",
        "Jaccard to consensus",
        "family",
    ]
    if refused:
        order.insert(1, "validity check")
    if whole:
        order.append("whole prompt")
    config = {
        "id": st.column_config.TextColumn(width=min(max(int(id_chars * 7) + 20, ID_PX[0]), ID_PX[1])),
        "validity check": st.column_config.TextColumn(
            "check", width=72, help="the validity check's sentence: why it refuses the task, or 'passes'"
        ),
        "NDF": number(
            format="%.3f",
            width=52,
            help=f"normalized faithfulness of the prompt's circuit at budget {budget:,}",
        ),
        "edges kept": number(
            counts,
            format="%d",
            width=52,
            help=f"{kept} the prompt's circuit keeps at budget {budget:,}, once pruning has dropped those "
            "on no path from the input to the logits",
        ),
        "CPR": number(
            format="%.3f",
            width=52,
            help=f"the area under the prompt's NFS curve over the share of {'its own ' if units else ''}{kept} "
            "its circuits keep, divided by the span they cover (its mean height)",
        ),
        "answer": st.column_config.TextColumn(
            width=ANSWER_PX,
            help="the answer token the prompt's metric is about, quoted: its leading space shows",
        ),
        "cluster": number(format="%d", width=62, help="the prompt's cluster on the Clusters tab"),
        "Jaccard to consensus": number(
            "Jaccard",
            format="%.2f",
            width=70,
            help=f"Jaccard similarity of the prompt's circuit and the consensus circuit at budget {budget:,} "
            "(the edges they share over the edges of either)",
        ),
        "whole prompt": st.column_config.TextColumn(help="the clean prompt, whole"),
    }
    before = TICK_PX + sum(config[name]["width"] for name in order[: order.index("prompt")])
    where = "in the last column, 'whole prompt'" if whole else "double-click the cell"
    config["prompt"] = st.column_config.TextColumn(
        width=max(TABLE_PX - before, 120),
        help=f"the clean prompt; '{CUT}' marks a part the cell leaves out (the start every prompt shares, "
        f"or the middle of a long one): to read it whole, {where}",
    )
    # each figure of the budget's circuits under its name with the budget (the CSV's header), its
    # short header shown as before
    for name in AT_BUDGET:
        config[name]["label"] = config[name].get("label") or name
    return tuple(at_budget(name, budget, counts) for name in order), {
        at_budget(name, budget, counts): value for name, value in config.items()
    }


def prompt_chars(width: int) -> int:
    """How many characters of a prompt ``width`` px of column shows on its lines."""
    return int((width - PADDING_PX) / CHAR_PX) * LINES


def flat(text: str) -> str:
    """``text`` on one line: each run of spaces and line breaks one space."""
    return re.sub(r"\s+", " ", str(text)).strip()


def shared_start(texts: list[str]) -> int:
    """How many characters of each of ``texts`` (flat) form a start they all share, cut back to a
    word's end, where that is at least SHARED_CHARS long and leaves each some text; else 0. MMLU's
    prompts all begin 'The following is a multiple choice question about'."""
    if len(texts) < 2:
        return 0
    start = os.path.commonprefix(texts)
    start = start[: start.rfind(" ") + 1]
    if len(start) < SHARED_CHARS or any(len(text) <= len(start) for text in texts):
        return 0
    return len(start)


def shortened(text: str, limit: int, skip: int = 0) -> str:
    """``text`` (flat) within ``limit`` characters: a shared start of ``skip`` characters cut to
    '…', then, where it is still longer, its middle cut to ' … ' at words, keeping a third for
    its end (where the model answers)."""
    text = flat(text)
    if skip:
        text = f"{CUT} {text[skip:]}"
    if len(text) <= limit:
        return text
    room = limit - 3
    head = text[: room - room // 3]
    tail = text[len(text) - room // 3 :]
    # at a word's end where one is near, so the cut falls between words and the line can wrap there
    if " " in head[-WORD_CHARS:]:
        head = head[: head.rfind(" ")]
    if " " in tail[:WORD_CHARS]:
        tail = tail[tail.find(" ") + 1 :]
    return f"{head.rstrip()} {CUT} {tail.lstrip()}"


def prompt_display(table, config: dict, whole: bool):
    """What st.dataframe gets: each prompt shown within its cell's lines. Through a pandas styler,
    whose display value the grid draws while the cell keeps the whole prompt (for sorting, search,
    copying, the double-click view and the CSV); where ``whole`` (a table over STYLED_ROWS rows),
    the prompt column holds the shortened text and 'whole prompt' the text itself. Canvas text,
    never HTML. An invisible character of a prompt is drawn as its code ('\\u202e'), and so is one
    of an id or answer in a styled table (``invisible_rows``): the grid drew a right-to-left
    override's text reordered and a zero-width space or NUL as nothing."""
    limit = prompt_chars(config["prompt"]["width"])
    coded = [flat(invisible_as_codes(text)) for text in table["prompt"]]
    skip = shared_start(coded)
    if whole:
        table = table.assign(**{"whole prompt": table["prompt"]})
        table["prompt"] = [shortened(text, limit, skip) for text in coded]
        return table
    styled = table.style.format(
        lambda text: shortened(invisible_as_codes(text), limit, skip), subset=["prompt"]
    )
    # the answer token quoted, its leading space seen: a cell hid it (' Mary' read 'Mary')
    if "answer" in table.columns:
        styled = styled.format(lambda text: shown_token(str(text), 20), subset=["answer"])
    others = [name for name in MARKED if name not in ("prompt", "answer") and name in table.columns]
    return styled.format(invisible_as_codes, subset=others) if others else styled


MARKED = ("id", "prompt", "answer")  # the dataset file's texts the table shows
ROWS_NAMED = 5


def invisible_rows(table, whole: bool) -> str | None:
    """The rows whose id, prompt or answer hold invisible characters (``core.text.invisible_characters``:
    zero-width spaces, direction overrides, NUL...) and what the table does with them, or None. The
    batch's printed line named such tasks; the table drew a right-to-left override's prompt
    reordered and a NUL as nothing, unmarked (2026-12-06). ``whole``: only the prompt column is
    drawn coded (a table too long to style, ``prompt_display``)."""
    found = [
        (task_id, text)
        for task_id, *texts in zip(*(table[name] for name in MARKED))
        for text in ["".join(map(str, texts)) + str(task_id)]
        if invisible_characters(text)
    ]
    if not found:
        return None
    names = [invisible_as_codes(task_id) for task_id, _ in found]
    more = len(names) - ROWS_NAMED
    named = joined(names) if more <= 0 else f"{', '.join(names[:ROWS_NAMED])} and {more:,} more"
    first = invisible_characters("".join(text for _, text in found))[0][1]
    where = (
        "the prompt column draws each as its code (the 'whole prompt' column, the ids and the answers as "
        "written)"
        if whole
        else "the table draws each as its code"
    )
    one = len(found) == 1
    return (
        f"{named} {'holds' if one else 'hold'} invisible characters ({invisible_kinds(''.join(t for _, t in found))}): "
        f"{where}, such as {invisible_as_codes(first)}, in place of nothing or of the text around it reordered "
        f"(a cell that cuts a prompt's middle to '{CUT}' may cut it out). The model read them as written, and "
        "Prompts (CSV) holds them as written."
    )


def empty_circuits(
    ids: list[str], ndf: list[float], budget: int, shown: int = 5, counts: str = "edges"
) -> str | None:
    """Why a prompt keeps no edge at ``budget`` (its table row reads 0 edges and an NDF of 0), or
    None when every prompt keeps some. Pruning keeps an edge only on a path from the input to the
    logits through kept edges, so a circuit pruned to nothing held no such path: ioi-00120's 103
    edges ranked first at budget 103 hold two edges from the input (to m1 and a3.h3) and 13 into
    the logits, and no edge leaves m1 or a3.h3. ``counts``: 'units' over token positions."""
    if not ids:
        return None
    names = ", ".join(ids[:shown]) + (f" and {len(ids) - shown:,} more" if len(ids) > shown else "")
    one, unit = len(ids) == 1, counts.rstrip("s")
    return (
        f"{names} {'keeps' if one else 'keep'} no {unit} at budget {budget:,} (sort by {counts} to find "
        f"{'it' if one else 'them'}): the {budget:,} {counts} {'its' if one else 'their'} method chose hold "
        f"no path from the input to the logits, and pruning drops every {unit} that lies on no such path, so the "
        "circuit is empty, the model runs as on the corrupted prompt, and "
        f"{'its NDF is' if one else 'their NDF is at most'} {max(ndf):.3f}."
    )
