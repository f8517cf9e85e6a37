"""What the method form's budgets box is called, and what it may say of its budgets, when the method
keeps token positions: its budgets then count (edge, position) units, not edges.

The box is drawn above the method's settings (whose ``positions`` box is below it), so it reads that
setting from the checkbox's own value when it has one, else from the settings the form starts from.
Until 2026-12-06 it read "edge budgets" with positions ticked, and a budget over the model's edges
was said to keep the whole graph, false of units: IOI on Gemma-3-270M has 10,342 edges and 153,856
units. The box's defaults and its note on a budget over the whole graph count the prompt's units
(``budget_box``)."""

from __future__ import annotations

from . import state

EDGE_LABEL = "edge budgets (the slider's steps; each is evaluated once)"
UNIT_LABEL = "unit budgets: (edge, position) units (the slider's steps; each is evaluated once)"


def positions_on(key: str, method: str, settings_key: str) -> bool:
    """Whether the method's ``positions`` setting is on, as its checkbox (drawn below) holds it."""
    box = f"{key}.{method}.positions"
    if state.has_widget_value(box):
        return bool(state.widget_value(box))
    return bool(state.method_settings(settings_key, method).get("positions"))


def budgets_label(positions: bool) -> str:
    return UNIT_LABEL if positions else EDGE_LABEL
