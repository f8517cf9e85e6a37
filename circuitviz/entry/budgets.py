"""The command line's edge budgets (``--budgets`` of ``discover`` and ``batch``), read as typed.

A problem is refused in one sentence naming the flag, before the model loads: an empty item
(``10,,20``, a comma at an end), an item that is not a whole number (``1e3``, ``10 20`` for
``10,20``), a budget under 1 (0 keeps no edge, as the app says) and one beyond ``MAX_BUDGET``
(results.parquet keeps budgets as 32-bit integers: 99,999,999,999 ran every method and then
failed writing the table). What is done to the budgets is said in one line: repeats are evaluated
once (``repeats_note``), and a budget over the graph's edges keeps the whole graph, said once
the graph is known (``over_graph_note``). The budgets run smallest first, as the table lists them.
"""

from __future__ import annotations

from collections import Counter

from ..core.text import shown, shown_number

MAX_BUDGET = 2**31 - 1  # what results.parquet's int32 budgets hold; no model's graph comes near it
EXAMPLE = "50,100,200"


def _items(values: list[int]) -> str:
    """'3', '3 and 20', '3, 20 and 50': budgets as a sentence lists them."""
    shown_values = [f"{value:,}" for value in values]
    return shown_values[0] if len(values) == 1 else ", ".join(shown_values[:-1]) + " and " + shown_values[-1]


def read_budgets(text: str, flag: str = "--budgets", mib: bool = False) -> tuple[list[int] | str, str | None]:
    """(the budgets, sorted and distinct, or "mib" where ``mib`` allows it; the note on repeats or
    None). ValueError in one sentence naming ``flag`` for anything that is not a list of whole
    numbers from 1 to ``MAX_BUDGET``."""
    way_out = f"write edge counts such as {EXAMPLE}" + (", or mib" if mib else "")
    text = str(text)
    if mib and text.strip().lower() == "mib":
        return "mib", None
    parts = [part.strip() for part in text.split(",")]
    if not any(parts):
        raise ValueError(f"{flag} gives no budget; {way_out}.")
    if not all(parts):
        raise ValueError(
            f"{flag} {shown(text, 40)} has an empty item (two commas together, or one at an end); "
            f"give one budget between each two commas, such as {EXAMPLE}."
        )
    values = []
    for part in parts:
        digits = part[1:] if part[:1] in "+-" else part
        if part[:1] == "-" and digits.isdecimal() and digits.strip("0"):
            raise ValueError(
                f"{flag} has {shown_number(part)}, a negative budget; budgets count edges, so use 1 or more."
            )
        if (
            len(digits.lstrip("0")) > 12 and digits.isdecimal()
        ):  # before int(): 5,000 digits is Python's own error
            raise _too_large(flag, part)
        try:
            value = int(part)
        except ValueError:
            raise ValueError(
                f"{flag} item {shown(part, 30)} is not a whole number of edges; {way_out}."
            ) from None
        if value < 1:
            raise ValueError(
                f"{flag} has 0: a budget of 0 keeps no edge, so its circuit is empty and says nothing "
                "about the method; use budgets of 1 edge or more."
            )
        if value > MAX_BUDGET:
            raise _too_large(flag, part)
        values.append(value)
    counts = Counter(values)
    distinct = sorted(counts)
    repeated = [value for value in distinct if counts[value] > 1]
    note = None
    if repeated:
        note = (
            f"{flag} names {_items(repeated)} more than once; each budget is evaluated once, "
            f"so the budgets are {', '.join(map(str, distinct))}."
        )
    return distinct, note


def _too_large(flag: str, part: str) -> ValueError:
    return ValueError(
        f"{flag} has {shown_number(part.lstrip('+'))}, more edges than any model's graph holds (the largest "
        f"budget taken is {MAX_BUDGET:,}); a budget at or over the graph's edge count keeps the whole graph, "
        "so give that count (discover prints it: 10,342 for the embedded Gemma-3-270M)."
    )


def over_graph_note(
    budgets, total: int, kept: str = "edges", graph: str = "this model's graph"
) -> str | None:
    """One line for the budgets over the graph's ``total`` edges (or units): each keeps the whole
    graph; None when there are none."""
    over = sorted(int(budget) for budget in budgets if int(budget) > total)
    if not over:
        return None
    if len(over) == 1:
        return f"Budget {over[0]:,} is over the {total:,} {kept} of {graph}, so it keeps the whole graph."
    return f"Budgets {_items(over)} are over the {total:,} {kept} of {graph}: each keeps the whole graph."


def discover_note(model, budgets, positions: bool, n_positions: int) -> str | None:
    """``over_graph_note`` for a discover run: over the model's edges, or, over token positions,
    over this prompt's (edge, position) units."""
    from ..models.adapter import adapter_of
    from ..positions.graph import n_units

    spec = adapter_of(model).spec
    if positions:
        return over_graph_note(
            budgets, n_units(spec, n_positions), "(edge, position) units", "this prompt's graph"
        )
    return over_graph_note(budgets, spec.n_edges)
