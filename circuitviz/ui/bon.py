"""Reading a Best-of-N family result (``circuitviz/methods/bon.py``) for the app.

The family keeps its data in ``result.details`` (a ``QueryCircuitDetails``: pairs, candidates, per-budget candidate
points and winners, shared-subcircuit data, iBoN/BoN-CSM ingredients). This module is the one
place of the app that knows that layout, so the pages see tidy rows, edge sets and masks.
Circuits at any budget come from ``variant_circuit`` (no model pass); the candidates at any
budget, their evaluation and the winner are ``query.candidates`` and ``api.bon_candidates``
(the command line and Python reach them there); a run's price without what a sibling variant
stored is the method's (``Method.stored_work``, priced by ``limits.estimate_request``).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence

from ..core.text import counted, invisible_characters, invisible_kinds, joined, rough_duration, shown_token
from ..entry.api import bon_candidate_masks, bon_candidates
from ..methods import methods_with
from ..methods.bon import paraphrases_asked
from ..query.candidates import candidate_names as query_candidate_names
from ..query.candidates import (  # noqa: F401  (the paraphrase view reads the sentences here)
    candidate_pairs,
    evaluated_candidates,
    highlight_in_circuit,
    winner_note,
)
from ..query.pairs import LEFT_OUT_SHOWN


def registered_bon_methods(registered: dict) -> list[str]:
    """The registered methods whose results the Paraphrases page draws (bon, ibon, bon-csm)."""
    return [name for name in methods_with("has_paraphrases_view") if name in registered]


def is_query_circuits(result) -> bool:
    return getattr(getattr(result, "details", None), "kind", None) == "query-circuits"


def candidate_names(result) -> list[str]:
    """'q' for the prompt itself, 'p<i>' for paraphrase pair i (``query.candidates``)."""
    return query_candidate_names(result)


def paraphrase_rows(result) -> list[dict]:
    """One row per pair: text, corruption, source, the model's answer, whether it is a candidate."""
    candidates = set(candidate_pairs(result))
    rows = []
    for index, pair in enumerate(result.details.pairs):
        rows.append(
            {
                "pair": "q" if index == 0 else f"p{index}",
                "paraphrase": str(pair.get("clean", "")),
                "corrupted": str(pair.get("corrupted", "")),
                "source": str(pair.get("source", "")),
                # quoted as the sentences quote it: a grid cell hides a leading space, so the model's
                # 'Rome' and ' Rome' both read "Rome", one beside "answer matches" ticked and one not
                "model's answer": shown_token(pair["model_answer"]) if pair.get("model_answer") else "",
                # blank where the model never read the paraphrase (its corruption of another token
                # length, or over the limit): unticked, such a pair read as one the model answers otherwise
                "answer matches": _answer_matches(pair),
                "candidate": index in candidates,
            }
        )
    return rows


def _answer_matches(pair: dict) -> bool | None:
    """Whether the model answers the pair's paraphrase as it answers the prompt; None when the checks
    never ran it on the model (a stored result of an older version without the field: True)."""
    matches = pair.get("answer_matches", True)
    return None if matches is None else bool(matches)


def invisible_rows_sentence(rows: list[dict]) -> str:
    """The table's rows whose texts hold invisible characters, and what the table does with them
    ('' when none does): a paraphrase typed with a right-to-left override (U+202E) before 'store,'
    stood in the table as 'the ,erots John gave', unsaid, while the model read 'the store, John'
    (the sentence under the table quotes a left-out pair as 'the \\u202estore')."""
    texts = {row["pair"]: f"{row['paraphrase']}{row['corrupted']}" for row in rows}
    named = [pair for pair, text in texts.items() if invisible_characters(text)]
    if not named:
        return ""
    kinds = invisible_kinds("".join(texts[pair] for pair in named))
    return (
        f"{'Pair' if len(named) == 1 else 'Pairs'} {joined(named)} {'holds' if len(named) == 1 else 'hold'} "
        f"invisible characters ({kinds}): the table does not show them, or shows the text around them "
        "reordered, but the model reads them; delete them in the table's cells unless you mean them, and "
        "use the edited paraphrases for the next run."
    )


def line_break_rows_sentence(rows: list[dict]) -> str:
    """The table's rows whose texts hold a line break or a tab, which its cells draw as a space ('' when
    none does): SmolLM2-135M's arithmetic template gave 'one plus one is two.\\none plus two is', whose
    row read exactly as the prompt's row above it, a duplicate to the eye, scored as a candidate."""
    named = [
        row["pair"] for row in rows if any(c in f"{row['paraphrase']}{row['corrupted']}" for c in "\n\r\t")
    ]
    if not named:
        return ""
    return (
        f"{'Pair' if len(named) == 1 else 'Pairs'} {joined(named)} {'holds' if len(named) == 1 else 'hold'} "
        "a line break or a tab, which the table shows as a space; the model reads it as written."
    )


def fewer_than_asked_sentence(result) -> str:
    """Where a generated source gave fewer usable paraphrases than the form asked for, what Best-of-N
    then chose among: the page's heading says N = p + 1 candidates, and an audit saw 'n paraphrases
    9' above six candidates (the factual family's 11 rewrites of a SmolLM2 prompt, 5 usable), with
    only '6 of 11 paraphrases left out' to say why ('' when the count asked for was met, or the
    pairs were the user's own)."""
    config = getattr(result, "config", None) or {}  # the run's settings as a dict
    if config.get("paraphrase_source", "file") == "file" or not result.details.pairs:
        return ""
    asked, usable = int(config.get("n_paraphrases", 0)), len(candidate_pairs(result)) - 1
    if asked <= 0 or usable >= asked:
        return ""
    drawn = len(result.details.pairs) - 1
    return (
        f"The form asked for {counted(asked, 'paraphrase')}; {usable} of the {drawn} drawn pass the checks, "
        f"so Best-of-N chose among {counted(usable + 1, 'candidate')} (the prompt and {usable}), not {asked + 1}."
    )


def candidate_ndf(result, budget: int) -> list[dict]:
    """[{name, ndf, n_edges, winner}] for the BoN candidates evaluated at ``budget`` ([] if none)."""
    return evaluated_candidates(result, budget)


def shared_entry(result, budget: int) -> dict | None:
    """The run's shared-subcircuit data at ``budget`` (common edges, UpSet sizes, Jaccard)."""
    for entry in result.details.shared:
        if int(entry.get("budget", -1)) == int(budget):
            return entry
    return None


def one_candidate_note(budget: int) -> str:
    """Under the candidates' NDF when Best-of-N had no usable paraphrase: no edges to compare."""
    return (
        f"Best-of-N has one candidate at budget {int(budget):,}, the prompt itself (no paraphrase was "
        "usable), so there are no candidates' edges to compare."
    )


def candidate_edge_sets(model, model_id: str, result, budget: int, store) -> dict[str, set[str]] | None:
    """{candidate: its circuit's edges} at ``budget`` (``api.bon_candidate_masks``), or None."""
    masks = bon_candidate_masks(model, result, budget, store, model_id)
    if masks is None:
        return None
    return {name: set(result.graph.edge_names_of(mask)) for name, mask in masks.items()}


def candidates_at(model, model_id: str, result, budget: int, store) -> list[dict]:
    """Every candidate at ``budget``, evaluated where the run did not (``api.bon_candidates``)."""
    return bon_candidates(model, result, budget, store, model_id)


# ----- the Paraphrases page's views --------------------------------------------------------------
# the page's own starting settings: 5 IG steps per pair, 6 budgets and no extra variants keep 9
# paraphrases to about a minute on a busy 2-core CPU (20 steps, 10 budgets and the four other
# variants take about four times as long); the form raises them
PAGE_DEFAULTS = {"ig_steps": 5, "n_paraphrases": 9, "compare": False}
PAGE_BUDGETS = (50, 100, 200, 500, 1000)


def page_budgets(n_edges: int) -> list[int]:
    """The page's default budgets: the candidates are evaluated at each, so few and small."""
    return [b for b in PAGE_BUDGETS if b < n_edges] + [int(n_edges)]


def page_defaults_note(n_edges: int, config=None) -> str:
    """What the page starts at, from its defaults (the time is the estimate's: it said 'about a
    minute on a CPU' above an estimate of 18 s); with the user's own list (``config``'s file
    source) its paraphrases are counted, as the run and the estimate count them (it said "9
    paraphrases", the generated sources' default, beside a list of 4)."""
    paraphrases = f"{PAGE_DEFAULTS['n_paraphrases']} paraphrases"
    if getattr(config, "paraphrase_source", None) == "file" and getattr(config, "paraphrases", None):
        paraphrases = f"the {counted(paraphrases_asked(config), 'paraphrase')} of your list"
    return (
        f"This page starts at {PAGE_DEFAULTS['ig_steps']} IG steps per pair, "
        f"{counted(len(page_budgets(n_edges)), 'budget')}, {paraphrases} and the chosen variant alone (the estimate "
        "under the form is priced from this machine's runs); more steps score each pair more closely, and "
        "'compare' adds the other variants' curves, each at a proportional cost."
    )


# the two texts next to each other after the pair's name, so a narrow page shows both (the short
# columns came first: at 1,000 px they filled the 540 px frame and both texts were past its edge);
# what the corruption replaces, a summary of the two, last
TEXT_COLUMNS = ("paraphrase", "corrupted")
TABLE_COLUMNS = (
    "pair",
    *TEXT_COLUMNS,
    "candidate",
    "answer matches",
    "model's answer",
    "source",
    "replaced",
)
READ_ONLY_COLUMNS = tuple(name for name in TABLE_COLUMNS if name not in TEXT_COLUMNS)
_BOOLEAN_COLUMNS = ("candidate", "answer matches")

# the table's type (Source Sans, 14 px): 6.06 px a character over an IOI paraphrase in Chromium,
# 6.3 leaves room for wider letters (a text wrapped once more than planned still fits its row); a
# cell's padding is 8 px a side (18 with a pixel each to spare), the edit icon beside an editable
# header and a checkbox 20 px each. _CHAR_PX = 7 with Streamlit's own short columns made
# the table 1,700 px wide: its corrupted column was cut mid-word even in a 1,540 px frame.
_CHAR_PX, _PAD_PX, _ICON_PX, _TEXT_CAP_PX = 6.3, 18, 20, 720
# the narrowest main column the page has (1,000 px with the sidebar open): the pair's name and the
# two texts fit it, wrapped onto up to _WRAP_LINES lines where one line would not
NARROW_FRAME_PX, _WRAP_LINES, _LINE_PX = 540, 3, 20
# the columns a 1,500 px page's 1,040 px frame holds (Streamlit's frame adds about 12 px); the texts
# wrap onto up to _MAX_LINES lines where _WRAP_LINES would leave the table wider than that
WIDE_FRAME_PX, _MAX_LINES = 1040 - 12, 5
_HEADER_PX, _ROWS_SHOWN = 36, 12


def _wrapped_lines(text: str, chars: int) -> int:
    """The lines ``text`` takes wrapped at word boundaries into lines of ``chars`` characters."""
    lines, used = 1, 0
    for word in text.split():
        if used and used + 1 + len(word) > chars:
            lines, used = lines + 1, len(word)
        else:
            used += len(word) + (1 if used else 0)
    return lines


def _chars_for(texts: list[str], lines: int) -> int:
    """The fewest characters a line needs so that each of ``texts`` wraps onto ``lines`` lines."""
    longest = max((len(text) for text in texts), default=0)
    words = max((len(word) for text in texts for word in text.split()), default=0)
    chars = max(words, -(-longest // lines))
    while any(_wrapped_lines(text, chars) > lines for text in texts):
        chars += 1
    return chars


def table_lines(rows: list[dict]) -> int:
    """The lines a row's texts take: the fewest with which the pair's name and the two texts fit the
    narrowest frame and the whole table the wide one (up to _MAX_LINES), else the fewest (up to
    _WRAP_LINES) with which the texts fit the narrowest frame. Up to _WRAP_LINES only, a template's
    longer name ('template:inline-choice') and what its corruption replaces left the whole table
    76 px wider than a 1,500 px page's frame, its last column cut mid-word ("yes → n", an audit)."""
    texts = {name: [str(row.get(name) or "") for row in rows] for name in TEXT_COLUMNS}
    pair_px = _column_px("pair", [str(row.get("pair") or "") for row in rows])
    fitting, whole = [], []
    for lines in range(1, _MAX_LINES + 1):
        needed = pair_px + sum(_text_px(name, values, lines) for name, values in texts.items())
        fits_wide = needed + sum(_short_widths(rows, lines).values()) <= WIDE_FRAME_PX
        if needed <= NARROW_FRAME_PX:
            if fits_wide:
                return lines
            fitting.append(lines)
        elif fits_wide:
            whole.append(lines)
    if fitting:
        return min([lines for lines in fitting if lines <= _WRAP_LINES] or [_WRAP_LINES])
    # texts too long for the narrow frame on any lines (a paraphrase of a few hundred characters):
    # the fewest lines with which the whole table fits the wide frame, else the most (``table_widths``
    # then shares the wide frame between the texts, and ``cut_rows`` names the rows it cuts)
    return min(whole) if whole else _MAX_LINES


def _short_widths(rows: list[dict], lines: int) -> dict[str, int]:
    """The columns right of the two texts, for rows whose texts take ``lines`` lines."""
    widths = {}
    for name in TABLE_COLUMNS:
        values = [str(row.get(name) or "") for row in rows]
        if name == "replaced":  # short replacements, the last column: as many lines as a row has
            arrows = [value.replace("→", "->") for value in values]  # an arrow is about two letters wide
            widths[name] = _text_px(name, arrows, _row_lines(lines))
        elif name in _BOOLEAN_COLUMNS:
            widths[name] = max(_column_px(name, []), _ICON_PX + _PAD_PX)
        elif name not in TEXT_COLUMNS and name != "pair":
            widths[name] = _column_px(name, values, icon=name not in READ_ONLY_COLUMNS)
    return widths


def _row_lines(lines: int) -> int:
    """The lines a row holds when its texts take ``lines``: one, else at least _WRAP_LINES (a row
    over 64 px, the height from which Streamlit wraps a cell's text at all)."""
    return 1 if lines == 1 else max(lines, _WRAP_LINES)


def _column_px(name: str, values: list[str], icon: bool = False) -> int:
    """A one-line column as wide as its header or its longest value."""
    longest = max([len(name)] + [len(value) for value in values])
    return round(_CHAR_PX * longest) + _PAD_PX + (_ICON_PX if icon else 0)


def _text_px(name: str, values: list[str], lines: int) -> int:
    """A text column wide enough for each of ``values`` on ``lines`` lines (and for its header)."""
    chars = max(_chars_for(values, lines), len(name) + _ICON_PX / _CHAR_PX)
    return min(round(_CHAR_PX * chars) + _PAD_PX, _TEXT_CAP_PX)


def table_widths(rows: list[dict]) -> dict:
    """Every column as wide as its content needs and no wider, the two texts on ``table_lines``
    lines (what the corruption replaces on _WRAP_LINES where they wrap): the whole table fits the 1,040 px frame of a
    1,500 px page, and the pair's name and the two texts the 540 px one of a 1,000 px page, where
    the short columns scroll into view sideways (the sentence under the table says so). A wider
    frame widens every column evenly (Streamlit's stretch)."""
    lines = table_lines(rows)
    widths = {"pair": _column_px("pair", [str(row.get("pair") or "") for row in rows])}
    for name in TEXT_COLUMNS:
        widths[name] = _text_px(name, [str(row.get(name) or "") for row in rows], lines)
    widths.update(_short_widths(rows, lines))
    widths = {name: widths[name] for name in TABLE_COLUMNS}
    room = (WIDE_FRAME_PX - sum(width for name, width in widths.items() if name not in TEXT_COLUMNS)) // 2
    if lines == _MAX_LINES and sum(widths.values()) > WIDE_FRAME_PX:
        # one text of 731 characters made both text columns 720 px: even at 2,000 px the columns
        # right of them (candidate, its answer...) were off the table's right edge for every row
        for name in TEXT_COLUMNS:
            widths[name] = max(min(widths[name], room), _text_px(name, [], 1))
    # the texts fill the narrowest frame, so the column after them starts past its edge (a sliver
    # of it read as a header cut mid-word), as far as the whole table still fits the wide frame
    spare = NARROW_FRAME_PX - widths["pair"] - sum(widths[name] for name in TEXT_COLUMNS)
    total = sum(widths.values())
    if total <= WIDE_FRAME_PX:
        spare = min(spare, WIDE_FRAME_PX - total)
    if spare > 0:
        first, second = TEXT_COLUMNS
        widths[first], widths[second] = widths[first] + spare // 2, widths[second] + spare - spare // 2
    return {name: {"width": width} for name, width in widths.items()}


def cut_rows(rows: list[dict]) -> list[str]:
    """The pairs whose texts hold more lines than a row of the table shows at its widths
    (``table_widths``: the 1,000 and 1,500 px pages'; a wider page stretches every column)."""
    lines = table_lines(rows)
    if lines == 1:
        return []
    shown_lines = _row_lines(lines)
    widths = {name: config["width"] for name, config in table_widths(rows).items()}
    chars = {name: max(int((widths[name] - _PAD_PX) / _CHAR_PX), 1) for name in TEXT_COLUMNS}
    return [
        str(row.get("pair") or "")
        for row in rows
        if any(_wrapped_lines(str(row.get(name) or ""), chars[name]) > shown_lines for name in TEXT_COLUMNS)
    ]


def cut_rows_sentence(rows: list[dict]) -> str:
    """The sentence under the table for rows whose texts it cuts ('' when none): a 731-character
    paraphrase showed its first lines in its row, and nothing said the rest was there."""
    named = cut_rows(rows)
    if not named:
        return ""
    longer = joined(
        [
            f"{row['pair']} ({len(str(row.get('paraphrase') or '')):,} and "
            f"{len(str(row.get('corrupted') or '')):,} characters)"
            for row in rows
            if row.get("pair") in named
        ]
    )
    return (
        f"A row shows the first {_row_lines(table_lines(rows))} lines of its texts; longer: {longer}. "
        'Double-click a text to read it whole; "Candidates (CSV)" further down has them all.'
    )


TABLE_SIDEWAYS = (
    "Right of the two texts: whether the pair is a candidate, whether the model answers it as it "
    "answers the prompt (blank where the checks never ran it: its corruption has another token length, "
    "or it is over the token limit), its answer, the pair's source and what its corruption replaces (the table "
    'scrolls sideways to them where the page is narrow). "Candidates (CSV)", further down, writes the table as the '
    "run gave it, with each candidate's figures."
)


def table_row_height(rows: list[dict]) -> int | None:
    """The rows' height: Streamlit's own for one line; where the texts wrap, _WRAP_LINES lines (over
    64 px, the height from which Streamlit wraps a cell's text at all): what the corruption
    replaces takes as many, and a text a narrower font would wrap once more still fits."""
    lines = table_lines(rows)
    return None if lines == 1 else _row_lines(lines) * _LINE_PX + 10


def table_height(rows: list[dict]) -> int | str:
    """The table's height: Streamlit's own ("auto", ten rows of one line) or, for rows of wrapped
    texts, every row up to _ROWS_SHOWN (at Streamlit's 400 px five and a half rows showed)."""
    row_px = table_row_height(rows)
    return "auto" if row_px is None else _HEADER_PX + row_px * min(len(rows), _ROWS_SHOWN) + 3


def replaced_words(clean: str, corrupted: str) -> str:
    """What a corruption replaces, word for word ("Mary → Alice, John → Bob"); where the two have
    different numbers of words, the runs of words that differ ("Eiffel Tower → Colosseum", "x
    dropped", "y added"), found by matching the words they share. It said "8 words (of 9)" for
    "The Eiffel Tower is located in the city of" corrupted into "The Colosseum is ...", which read
    as eight of the nine words replaced."""
    before, after = clean.split(), corrupted.split()
    if len(before) == len(after):
        pairs = [_replaced(a, b) for a, b in zip(before, after) if a != b]
        return ", ".join(pairs) if pairs else "nothing"
    pairs = []
    matcher = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        old, new = " ".join(before[i1:i2]), " ".join(after[j1:j2])
        if tag == "delete":
            pairs.append(f"{old} dropped")
        elif tag == "insert":
            pairs.append(f"{new} added")
        elif tag == "replace":
            pairs.append(_replaced(old, new))
    return ", ".join(pairs) if pairs else "nothing"


def _replaced(word: str, other: str) -> str:
    return "{} → {}".format(*_without_shared_punctuation(word, other))


def _without_shared_punctuation(word: str, other: str) -> tuple[str, str]:
    """Two differing words without the punctuation both carry at either end ("Japan," and
    "France," read "Japan → France", not "Japan, → France," in a list joined by commas). Only a
    sentence's punctuation: a typed '<b>John</b>' for '<b>Bob</b>' read "b>John</b → b>Bob</b",
    its tags cut at their brackets. A word the taking off would leave with a bracket it does not
    close is kept whole: a markdown link '[John](https://x)' for '[Bob](https://x)' read
    "John](https://x → Bob](https://x"."""
    whole = word, other
    while word and other and word[-1] == other[-1] and word[-1] in _CLOSING:
        word, other = word[:-1], other[:-1]
    while word and other and word[0] == other[0] and word[0] in _OPENING:
        word, other = word[1:], other[1:]
    if not (_balanced(word) and _balanced(other)):
        return whole
    return word, other


def _balanced(word: str) -> bool:
    """Whether every bracket of ``word`` is closed in order, and none closes what is not open."""
    open_ = []
    for char in word:
        if char in _BRACKETS:
            open_.append(_BRACKETS[char])
        elif char in _BRACKETS.values() and (not open_ or open_.pop() != char):
            return False
    return not open_


_CLOSING, _OPENING = ".,;:!?)]}\"'’”", "([{\"'‘“"  # a sentence's punctuation after and before a word
_BRACKETS = {"(": ")", "[": "]", "{": "}"}


def table_rows(result) -> list[dict]:
    """``paraphrase_rows`` in the table's order (``TABLE_COLUMNS``), with what each corruption
    replaces."""
    rows = []
    for row in paraphrase_rows(result):
        row = {**row, "replaced": replaced_words(row["paraphrase"], row["corrupted"])}
        rows.append({name: row[name] for name in TABLE_COLUMNS})
    return rows


def edited_pairs_text(rows: list[dict], before: list[dict]) -> str:
    """The paraphrase table's edited ``rows`` (``before``: the same rows as the run gave them) as the
    next run's list, one JSON object a line: a paraphrase holding a tab or a line break stays one
    pair (typed lines would split it). A row whose paraphrase was cleared is left out (clearing it
    removes the pair); a cleared corruption is kept empty, so the next run names the line that lacks
    one rather than corrupting with the word None (the table gives a cleared cell back as None). A
    pair keeps its source (a template's name) unless its text was changed: then it is 'edited'."""
    lines = []
    for row, old in zip(rows, before):
        paraphrase, corrupted = row.get("paraphrase") or "", row.get("corrupted") or ""
        if not paraphrase.strip():
            continue
        same = (paraphrase, corrupted) == (old.get("paraphrase"), old.get("corrupted"))
        source = (old.get("source") or "edited") if same else "edited"
        lines.append(
            json.dumps({"clean": paraphrase, "corrupted": corrupted, "source": source}, ensure_ascii=False)
        )
    return "\n".join(lines)


def rows_for_next_run(
    rows: list[dict], before: list[dict], reasons: list[str]
) -> tuple[list[int], list[tuple[str, str]]]:
    """(the indices of the table's ``rows`` the next run gets, (pair, reason) of each it does not):
    every row but the prompt's, except a paraphrase this run left out (``reasons``: the run's reason
    per pair, '' for none) that was not edited since, which the next run would leave out again for
    the same reason. "Use the edited paraphrases" without an edit handed over 10, the one the run had
    left out for answering ' the' among them, beside an estimate of 9 (an audit)."""
    kept, left_out = [], []
    for index, (row, old) in enumerate(zip(rows, before)):
        if index == 0:  # the prompt itself
            continue
        same = (row.get("paraphrase"), row.get("corrupted")) == (old.get("paraphrase"), old.get("corrupted"))
        reason = reasons[index] if index < len(reasons) else ""
        if same and reason and not old.get("candidate"):
            left_out.append((str(old.get("pair")), reason))
        else:
            kept.append(index)
    return kept, left_out


def next_run_sentence(count: int, left_out: list[tuple[str, str]], cleared: Sequence[str] = ()) -> str:
    """What the form now holds, beside the button: how many paraphrases, and which of this run's
    are not among them and why (edited in the table, one is handed over and checked again;
    ``cleared``: the pairs whose paraphrase was cleared in the table, which removes them: a cleared
    p1 went unsaid beside "p2, p3 and p4 are not among them", as though p1 were)."""
    held = f"The form above now holds {counted(count, 'paraphrase')} (source: file)"
    if cleared:
        one = len(cleared) == 1
        held += (
            f"; {joined(list(cleared))} {'is' if one else 'are'} not among them: "
            f"{'its paraphrase was' if one else 'their paraphrases were'} cleared in the table"
        )
    if left_out:
        names = [pair for pair, _ in left_out]
        named = joined(names)
        one = len(left_out) == 1
        why = (
            left_out[0][1]
            if one
            else "; ".join(f"{pair}: {reason}" for pair, reason in left_out[:LEFT_OUT_SHOWN])
            + (f"; and {len(left_out) - LEFT_OUT_SHOWN:,} more" if len(left_out) > LEFT_OUT_SHOWN else "")
        )
        it = "it" if one else "them"
        held += (
            f"; {named} {'is' if one else 'are'} not among them{' either' if cleared else ''}: this run "
            f"left {it} out ({why}), and so "
            f"would the next unless {'it is' if one else 'they are'} edited in the table"
        )
    return held + ("; press Run Best-of-N to score them." if count else ".")


def learn_offer_sentence(
    label: str, seconds: float | None, seconds_range: tuple[float, float] | None = None
) -> str:
    """Under the offer to learn a circuit that carries over: where its run goes and how long it
    takes, as Explore's estimate says it: a range where the estimate is one (paraphrase pruning
    stops a budget's learning once its circuit is faithful enough). It gave one figure ("about
    37 s", SmolLM2-135M, 2026-12-07) where Explore's line gives the range ("16 s to 48 s" on both
    since; the run took 41 s of CPU)."""
    if seconds_range is not None:
        low, high = (rough_duration(value) for value in seconds_range)
        took = f", {low} to {high} on this machine by its estimate"
    else:
        took = f", about {rough_duration(seconds)} on this machine by its estimate" if seconds else ""
    return (
        f"The button above opens the Explore page and runs {label} there{took}; this Best-of-N result "
        "stays on this page."
    )


def clicked_intersection(event, shown) -> str | None:
    """The label of the UpSet bar clicked (a plotly selection event), or None. The bar's own label
    (its customdata) where the event carries it, so an event from a chart drawn at another budget
    never names another bar; else its index among ``shown``."""
    points = ((event or {}).get("selection") or {}).get("points") or []
    labels = [item.label for item in shown]
    for item in points:
        if item.get("curve_number", 0) != 0:
            continue
        if isinstance(item.get("customdata"), str):
            return item["customdata"] if item["customdata"] in labels else None
        if item.get("point_index") is not None and 0 <= int(item["point_index"]) < len(shown):
            return labels[int(item["point_index"])]
    return None
