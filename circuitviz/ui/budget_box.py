"""The budgets box: its default budgets for a graph, the text it holds as the model (or the
unit total) changes, and what it says of the budgets typed in it.

Defaults belong to the graph the budgets count: a model's edges, or, with a method's
``positions`` setting on, the prompt's (edge, position) units. While the box still holds the
default it was last given, it follows that graph; budgets the user typed stay as written.
"""

from __future__ import annotations

from collections.abc import Callable

from ..entry.budgets import (  # default_budgets: discover's defaults too, one function for both
    APP_BUDGETS,
    budget_findings,
    default_budgets,
    over_graph_note,
    zero_sentence,
)
from ..entry.budgets import READABLE_BUDGET as READABLE_BUDGET  # where a first view opens
from . import state

SMALLEST_MODEL_GRAPH = 5000  # a default text of a graph this large is taken for one (Gemma: 10,342)


def budgets_text(budgets) -> str:
    return ",".join(str(int(b)) for b in budgets)


def budgets_for_graph(
    text: str | None, n_edges: int, placed: str | None, defaults: Callable[[int], list[int]] = default_budgets
) -> str:
    """The budgets box's text for a graph of ``n_edges``: the graph's default budgets when the box
    is empty or still holds ``placed``, the default it was last given (the sidebar switched models:
    Gemma's "...,10000,10342" left on SmolLM2's 123,211 edges would leave that graph's whole-model
    point out of the curve), or another real graph's default exactly (a link opened, then the model
    switched: the URL keeps the text, not where it came from), else the text as the user wrote it.
    ``defaults``: a page's default budgets of a graph size."""
    last = str(text).rsplit(",", 1)[-1].strip()
    # a count of edges as digits 0-9 ('²' is a digit int() refuses; 5,000 nines are more than int() reads)
    another = (
        last.isascii() and last.isdigit() and len(last) <= 12 and SMALLEST_MODEL_GRAPH <= int(last) != n_edges
    )
    if not text or text == placed or (another and text == budgets_text(defaults(int(last)))):
        return budgets_text(defaults(n_edges))
    return text


def fit_budgets_box(key: str, n_edges: int, defaults: Callable[[int], list[int]] = default_budgets) -> str:
    """Set the budgets box ``key`` (a ``Session`` field's key; its last default under
    ``key + ".default"``) for a graph of ``n_edges`` edges; returns its text."""
    placed_key = f"{key}.default"
    text, placed = state.value(key), state.value(placed_key)
    fitted = budgets_for_graph(text, n_edges, placed, defaults)
    if fitted != text:
        state.set_value(key, fitted)
        state.set_value(placed_key, fitted)
    return fitted


def graph_edge_total(model) -> int:

    # here, not at the top: keeps torch out of the first paint
    from ..models.adapter import adapter_of  # torch is loaded once a model is

    return adapter_of(model).spec.n_edges


def unit_total(model, n_tokens: int) -> int | None:
    """The (edge, position) units of a prompt of ``n_tokens`` tokens (the BOS token counted, as the
    runs count it): what the budgets of a method over token positions count, and so the largest
    default of its box; None while the prompt has no tokens to count."""
    if n_tokens < 1:
        return None
    # here, not at the top: keeps torch out of the first paint
    from ..models.adapter import adapter_of
    from ..positions.graph import n_units

    return n_units(adapter_of(model).spec, n_tokens)


ZERO_BUDGET = zero_sentence(APP_BUDGETS)


def budget_reading(
    text: str, n_edges: int, keeps: str | None = None, units: bool = False, n_units: int | None = None
) -> tuple[list[int], list[str], list[str]]:
    """(the budgets, sorted and distinct; every problem of the budgets box; the notes on it), one
    sentence each and all at once, so a user fixes them in one go, by the command line's rules
    (``entry.budgets``). Problems stop the run: an empty item (``10,,20``), a part that is not a
    whole number (``10 20``), a negative one, a 0 (an empty circuit), one beyond what a result
    holds, an empty list. Notes do not: repeats are evaluated once, and a budget over the graph's
    edges keeps the whole graph (or ``keeps``, the method's phrase: ACC++'s traced circuit). With
    ``units`` the budgets count (edge, position) units: one over the prompt's ``n_units`` keeps its
    whole graph, said in units as ``discover --positions`` says it (nothing is said while the
    prompt's units are unknown: the model's edge count is no bound on them)."""
    total = n_units if units else n_edges  # the way out of a budget too large names it
    values, problems, repeats = budget_findings(text, APP_BUDGETS, total=total, units=units)
    if not units:
        over = over_graph_note(values, n_edges, keeps=keeps)
    elif n_units:
        over = over_graph_note(values, n_units, "(edge, position) units", "this prompt's graph", keeps)
    else:
        over = None
    notes = [note for note in (repeats, over) if note]
    return values, problems, notes


def budget_check(text: str, n_edges: int) -> tuple[list[str], list[str]]:
    """(every problem of the budgets box, the notes on it): ``budget_reading`` without the budgets."""
    return budget_reading(text, n_edges)[1:]
