"""Edge budgets read as typed: the command line's ``--budgets`` (``discover``, ``batch``), the
app's budgets box and ``api.parse_budgets`` follow these rules, each naming what was typed in.

A problem is refused in one sentence naming the flag, before the model loads: an empty item
(``10,,20``, a comma at an end), an item that is not a whole number (``1e3``, ``10 20`` for
``10,20``), a budget under 1 (0 keeps no edge, as the app says) and one beyond ``MAX_BUDGET``
(results.parquet keeps budgets as 32-bit integers: 99,999,999,999 ran every method and then
failed writing the table). What is done to the budgets is said in one line: repeats are evaluated
once (the note of ``read_budgets``), and a budget over the graph's edges keeps the whole graph, said once
the graph is known (``over_graph_note``). The budgets run smallest first, as the table lists them.
The app shows every problem at once under its box (``budget_findings``) and the note beside it.
"""

from __future__ import annotations

import numbers
from collections import Counter

from ..core.text import given, joined, shown, shown_number

UNITS = "(edge, position) units"  # what the budgets of a method over token positions count
MAX_BUDGET = 2**31 - 1  # what results.parquet's int32 budgets hold; no model's graph comes near it
EXAMPLE = "50,100,200"
APP_BUDGETS = (
    "The budgets box"  # how the app's sentences name the box, where the command line names --budgets
)
API_BUDGETS = "The budget list"  # parse_budgets' name for its text
NO_BUDGETS = f"No budgets given; write edge counts such as {EXAMPLE}."  # parse_budgets' empty text


MAX_PROBLEMS = 5  # sentences said about one budgets box or flag, the last counting the rest


def _items(values: list[int]) -> str:
    """'3', '3 and 20', '3, 20 and 50': budgets as a sentence lists them."""
    shown_values = [f"{value:,}" for value in values]
    return shown_values[0] if len(values) == 1 else ", ".join(shown_values[:-1]) + " and " + shown_values[-1]


# ten budgets, log-spaced: each costs one patched pass, so the curve adds about a third to EAP-IG's
# scoring time instead of doubling it
_BUDGET_STEPS = (10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 20_000, 50_000, 100_000, 200_000)
MAX_BUDGETS = 10
READABLE_BUDGET = 200  # render.READABLE_EDGES: the largest circuit a first view opens at


def default_budgets(n_edges: int, count: int = MAX_BUDGETS) -> list[int]:
    """About ``count`` log-spaced budgets ending with the whole graph (the slider's steps): the
    defaults of Explore's budgets box and of ``discover`` without ``--budgets``, of a model's
    edges or, over token positions, of a prompt's (edge, position) units.

    The readable ones (up to ``READABLE_BUDGET`` edges, where a first view opens) are kept on any
    graph; on a large one the larger steps are thinned evenly instead (SmolLM2's 123,211 edges
    once started at 200, so a first view had one readable circuit to open at, and a graph of
    millions had none)."""
    steps = [b for b in _BUDGET_STEPS if b < n_edges]
    if len(steps) + 1 > count and len(steps) > 1:
        steps = steps[1:]  # the 10-edge step goes first: a circuit of 10 edges rarely says much
    small = [b for b in steps if b <= READABLE_BUDGET]
    large = [b for b in steps if b > READABLE_BUDGET]
    room = max(count - 1 - len(small), 1)
    if len(large) > room:  # evenly spaced over the large steps' log-spaced list, the largest kept
        large = [large[round(i * (len(large) - 1) / max(room - 1, 1))] for i in range(room)]
    return small + sorted(set(large)) + [int(n_edges)]


def over_positions(settings: dict) -> bool:
    """Whether typed settings (``--positions``, ``--set positions=true``) run over token positions,
    before the method reads them: what the budgets' sentences count."""
    return str(settings.get("positions", "")).strip().lower() in ("true", "1", "yes", "on")


def graph_total(model, positions: bool, n_positions: int) -> int:
    """What a run's budgets count on ``model``: its graph's edges or, over token positions, the
    (edge, position) units of a prompt of ``n_positions`` tokens (the BOS token counted)."""
    from ..models.adapter import adapter_of
    from ..positions.graph import n_units

    spec = adapter_of(model).spec
    return n_units(spec, n_positions) if positions else spec.n_edges


def read_budgets(
    text: str, flag: str = "--budgets", mib: bool = False, least: int = 1, units: bool = False
) -> tuple[list[int] | str, str | None]:
    """(the budgets, sorted and distinct, or "mib" where ``mib`` allows it; the note on repeats or
    None). ValueError in one sentence naming ``flag`` for anything that is not a list of whole
    numbers from ``least`` (1; 0 for the Python API) to ``MAX_BUDGET``: the first of
    ``budget_findings``' problems; ``units``: the budgets count (edge, position) units, and the
    sentences say so."""
    values, problems, note = budget_findings(text, flag, mib, least, units=units)
    if problems:
        raise ValueError(problems[0])
    return values, note


def budget_findings(
    text: str,
    flag: str = "--budgets",
    mib: bool = False,
    least: int = 1,
    empty: str | None = None,
    total: int | None = None,
    units: bool = False,
) -> tuple[list[int] | str, list[str], str | None]:
    """(the budgets, sorted and distinct, or "mib"; every problem, one sentence each and in the
    order typed; the note on repeats or None): the rules of the command line's ``--budgets`` and
    the app's budgets box, which names itself as ``flag`` (``APP_BUDGETS``). The command line
    stops at the first problem; the app shows them all, so they are fixed in one go.
    ``empty``: the sentence for no budget at all (the API's own, older one); ``total``: the
    graph's edge count where it is known (the app), named as the way out of a budget too large;
    ``units``: the budgets count a prompt's (edge, position) units (a method over token positions),
    and ``total``, where given, is the prompt's unit total."""
    way_out = f"write {'unit' if units else 'edge'} counts such as {EXAMPLE}" + (", or mib" if mib else "")
    text = str(text)
    if mib and text.strip().lower() == "mib":
        return "mib", [], None
    parts = [part.strip() for part in text.split(",")]
    if not any(parts):
        return [], [empty or f"{flag} gives no budget; {way_out}."], None
    problems = []
    if not all(parts):
        problems.append(
            f"{flag} {shown(text, 40)} has an empty item (two commas together, or one at an end); "
            f"give one budget between each two commas, such as {EXAMPLE}."
        )
    values = []
    for part in filter(None, parts):
        problem, value = _item_problem(part, flag, way_out, least, total, units)
        if problem:
            problems.append(problem)
        else:
            values.append(value)
    problems = list(dict.fromkeys(problems))  # '0,0,0' is one problem, said once
    if len(problems) > MAX_PROBLEMS:  # a pasted column of words: the first few, and how many more
        more = len(problems) - MAX_PROBLEMS + 1
        problems = [*problems[: MAX_PROBLEMS - 1], f"{flag} has {more:,} more items that are not budgets."]
    counts = Counter(values)
    distinct = sorted(counts)
    repeated = [value for value in distinct if counts[value] > 1]
    note = None
    if repeated and not problems:
        note = (
            f"{flag} names {_items(repeated)} more than once; each budget is evaluated once, "
            f"so the budgets are {', '.join(map(str, distinct))}."
        )
    return distinct, problems, note


def zero_sentence(flag: str) -> str:
    """Why a budget of 0 is refused, naming ``flag``."""
    return (
        f"{flag} has 0: a budget of 0 keeps no edge, so its circuit is empty and says nothing "
        "about the method; use budgets of 1 edge or more."
    )


def _item_problem(
    part: str, flag: str, way_out: str, least: int, total: int | None, units: bool = False
) -> tuple[str | None, int]:
    """(the sentence on one item, or None; its value)."""
    counts = UNITS if units else "edges"
    digits = part[1:] if part[:1] in "+-" else part
    if part[:1] == "-" and digits.isdecimal() and digits.strip("0"):
        return (
            f"{flag} has {shown_number(part)}, a negative budget; budgets count {counts}, so use {least} or more.",
            0,
        )
    # before int(): 5,000 digits is Python's own error
    if len(digits.lstrip("0")) > 12 and digits.isdecimal():
        return _too_large(flag, part, total, units), 0
    try:
        value = int(part)
    except ValueError:
        words = part.split()
        if len(words) > 1 and all(word.isdecimal() for word in words):  # '10 20' read as 1020 once
            way_out = f"separate budgets with commas, as in {','.join(words)}"
        return f"{flag} item {shown(part, 30)} is not a whole number of {counts}; {way_out}.", 0
    if value < least:
        return zero_sentence(flag), 0
    if value > MAX_BUDGET:
        return _too_large(flag, part, total, units), 0
    return None, value


def checked_edge_count(flag: str, value: int | None, least: int = 1) -> None:
    """An edge count given by a flag (``--html-budget``, ``--keep-edges``; ``--top-edges`` with
    ``least`` 0: a table without its strongest edges) or by the Python API's field of that name
    (``keep_edges``: ``batch.run`` and ``run_batch``): None (its default), or a whole number from
    ``least`` to ``MAX_BUDGET``; ValueError in one sentence naming the flag, the value and the
    range otherwise (the API took any value: 0 or -5 kept no circuit in the table, unsaid)."""
    if value is None:
        return
    span = f"a whole number of edges from {least} to {MAX_BUDGET:,}"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):  # argparse gives ints
        raise ValueError(f"{flag} must be {span}, not {given(value)}.")
    if value < least:
        raise ValueError(f"{flag} must be {span}, not {shown_number(value)}.")
    if value > MAX_BUDGET:
        raise ValueError(
            f"{flag} must be at most {MAX_BUDGET:,} edges (the largest budget taken), not "
            f"{shown_number(value)}; the graph's edge count covers the whole graph (discover prints it)."
        )


def _too_large(flag: str, part: str, total: int | None = None, units: bool = False) -> str:
    """A budget beyond ``MAX_BUDGET``, with the graph's edge count (``total``) as the way out; with
    ``units``, the prompt's (edge, position) units and their total (said "edges" until 2026-12-06,
    though the box or flag counted units)."""
    if units:
        count = (
            f"this prompt's graph has {total:,}"
            if total
            else "discover --positions prints it: 153,856 for the IOI prompt on Gemma-3-270M"
        )
        return (
            f"{flag} has {shown_number(part.lstrip('+'))}, more {UNITS} than any prompt's graph holds (the "
            f"largest budget taken is {MAX_BUDGET:,}); a budget at or over the prompt's unit count keeps "
            f"its whole graph, so give that count ({count})."
        )
    count = (
        f"this model's graph has {total:,}"
        if total
        else "discover prints it: 10,342 for the embedded Gemma-3-270M"
    )
    return (
        f"{flag} has {shown_number(part.lstrip('+'))}, more edges than any model's graph holds (the largest "
        f"budget taken is {MAX_BUDGET:,}); a budget at or over the graph's edge count keeps the whole graph, "
        f"so give that count ({count})."
    )


def over_graph_note(
    budgets,
    total: int,
    kept: str = "edges",
    graph: str = "this model's graph",
    keeps: str | None = None,
) -> str | None:
    """One line for the budgets over the graph's ``total`` edges (or units): each keeps the whole
    graph, or ``keeps`` (a method's phrase, ``Method.over_graph_keeps``: ACC++ keeps no edge it
    did not trace); None when there are none."""
    over = sorted(int(budget) for budget in budgets if int(budget) > total)
    if not over:
        return None
    what = keeps or "the whole graph"
    if len(over) == 1:
        return f"Budget {over[0]:,} is over the {total:,} {kept} of {graph}, so it keeps {what}."
    return f"Budgets {_items(over)} are over the {total:,} {kept} of {graph}: each keeps {what}."


def discover_note(model, budgets, positions: bool, n_positions: int, keeps: str | None = None) -> str | None:
    """``over_graph_note`` for a discover run: over the model's edges, or, over token positions,
    over this prompt's (edge, position) units; ``keeps``: the method's phrase, if any."""
    total = graph_total(model, positions, n_positions)
    if positions:
        return over_graph_note(budgets, total, "(edge, position) units", "this prompt's graph", keeps)
    return over_graph_note(budgets, total, keeps=keeps)


def mib_over_units(
    over_positions: list[str],
    flag: str = "--budgets",
    untick: str = "run them without positions",
    default: bool = False,
) -> str:
    """Why ``mib`` cannot serve methods run over token positions (``over_positions``, their names):
    their budgets count (edge, position) units, and a prompt's units grow with its length, so MIB's
    fractions would be other numbers on every prompt of a batch, whose table, consensus and CPR/CMD
    need one list of budgets for all of them; ``default``: mib was not typed, it is the flag's default."""
    mib = f"{flag} defaults to mib, MIB's fractions" if default else f"{flag} mib means MIB's fractions"
    return (
        f"{mib} of the model's edges, but the budgets of {joined(over_positions)} "
        "over token positions count (edge, position) units, which grow with each prompt's length, so "
        f"no one list fits every prompt; give unit counts such as 1000,10000,100000, or {untick}."
    )
