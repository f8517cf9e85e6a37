"""Widgets built from data: a method's settings form from its ``Config`` dataclass fields.

Every registered method gets a form without UI code of its own, from what each field declares
(``methods.settings.setting``): a field with ``choices`` becomes a select box, int and float
fields number inputs (within the field's ``low``/``high``), bool fields checkboxes, str fields
text boxes (``widget="lines"``: a text area), tuple fields a comma-separated text box. Two
widgets name budgets or circuits, so they are offered as choices: ``widget="budgets"`` (budgets
of this run, picked from the budgets box) and ``widget="circuit"`` (a circuit computed for this
prompt). The field's help is its tooltip, and a "0: ..." meaning in it is written into the label
("max depth (0 = no limit)"). The values go through ``Method.make_config``, which parses them as
the command line's are; invalid ones come back as one sentence (the Config's own validation)
instead of a traceback.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re

import streamlit as st

from ..core.text import cut, invisible_sentence, markdown_text
from ..methods.settings import (
    item_type,
    parse_value,
    setting_applies,
    setting_bounds,
    setting_choices,
    setting_help,
    setting_text,
    setting_type,
    setting_widget,
)
from . import state

NO_REFERENCE = "none"


def field_label(name: str, help_text: str | None) -> str:
    """The field's name in words, with what 0 means when its help says ('(0: no limit)')."""
    label = name.replace("_", " ")
    zero = re.search(r"\(?\b0\s*[:=]\s*([^;,)]+)", help_text or "")
    return f"{label} (0 = {zero.group(1).strip()})" if zero else label


# Streamlit cuts a checkbox's label to one line ('include mismatc…' in a third of the form at
# 1,000 px); the form's labels wrap instead, as every other widget's label does
_WRAP_CHECKBOX_LABELS = (
    "<style>[data-testid='stCheckbox'] .stMarkdownEllipsis, [data-testid='stCheckbox'] .stMarkdownEllipsis p "
    "{ white-space: normal; text-overflow: clip; overflow: visible; }</style>"
)


def config_form(
    method,
    key_prefix: str,
    initial: dict | None = None,
    budgets: list[int] | None = None,
    references: dict[str, str] | None = None,
    link: dict | None = None,
) -> dict:
    """Widgets for every field of ``method.Config``; returns {field: value} as plain values.

    ``budgets``: the run's budgets (``anchor_budgets`` picks among them); ``references``:
    {label: edge names} of circuits a ``reference`` setting may name; ``link``: the settings a
    link gave for this method, whose names the method does not have are said (they were dropped
    unsaid: a link's 'ig_step' ran with the default IG steps).
    """
    initial = dict(initial or {})
    config_class = method.Config
    fields = dataclasses.fields(config_class)
    if not fields:
        st.caption(f"{method.label} has no settings.")
        return {}
    values = {}
    st.html(_WRAP_CHECKBOX_LABELS)
    notice = st.empty()  # the settings a link gave that no widget can show, said above the form
    unreadable = []
    columns = st.columns(min(3, len(fields)))
    shown = 0
    for config_field in fields:
        default = config_field.default if config_field.default is not dataclasses.MISSING else None
        value = initial.get(config_field.name, default)
        readable = shown_value(config_class, config_field, value)
        if readable is UNREADABLE:
            unreadable.append(
                f"{config_field.name.replace('_', ' ')} {_as_given(value)} (now {_as_given(default)})"
            )
            value = default
        else:
            value = readable
        if not setting_applies(config_field, values):  # e.g. the LLM's name with template paraphrases
            values[config_field.name] = value  # kept as it was, for when it applies again
            continue
        key = f"{key_prefix}.{method.name}.{config_field.name}"
        shown += 1
        with columns[(shown - 1) % len(columns)]:
            values[config_field.name] = _field_widget(
                config_class,
                config_field,
                value,
                key,
                setting_help(config_field) or None,
                budgets,
                references,
            )
    sentences = []
    if unreadable:
        sentences.append(
            (
                "The link's settings hold a value the form cannot show, replaced by its default: "
                if len(unreadable) == 1
                else f"The link's settings hold {len(unreadable)} values the form cannot show, each "
                "replaced by its default: "
            )
            + "; ".join(unreadable)
            + "."
        )
    unknown = [name for name in link or {} if name not in {f.name for f in fields}]
    if unknown:
        said = ", ".join(repr(cut(str(name), 40)) for name in unknown[:8]) + (
            ", ..." if len(unknown) > 8 else ""
        )
        sentences.append(
            f"The link's settings name {'a setting' if len(unknown) == 1 else f'{len(unknown)} settings'} "
            f"{method.label} does not have, left out: {said}."
        )
    if sentences:
        notice.warning(markdown_text(" ".join(sentences)))
    return values


UNREADABLE = object()  # a setting's value that its widget cannot show (``shown_value``)


def _as_given(value, limit: int = 60) -> str:
    """A setting's value as a link writes it (JSON: true, null, {"a": 1}), cut at ``limit``
    characters with the full length named (a 3,000-character value was quoted whole)."""
    return cut(json.dumps(value, ensure_ascii=False, default=str), limit)


_LARGEST_WHOLE = 2**53 - 1  # Streamlit's number box: JavaScript's largest safe integer


def _finite(value) -> bool:
    """Whether a number is finite; a whole number too large for a float (10**400) is not."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def shown_value(config_class, config_field, value):
    """``value`` as the field's widget shows it (a whole float as an int), or ``UNREADABLE`` when it
    cannot (a link's ``"x"`` for a number, a choice the field does not have, 1 for a checkbox).
    Bounds are not checked here: the Config's validation says what is out of them."""
    if value is None:
        return value
    choices = setting_choices(config_field)
    kind = setting_type(config_class, config_field)
    if choices:
        return value if value in choices else UNREADABLE
    if kind is bool:
        return value if isinstance(value, bool) else UNREADABLE
    if kind in (int, float) and (isinstance(value, bool) or not isinstance(value, (int, float))):
        return UNREADABLE
    if kind is int:  # a number box holds whole numbers up to 2**53 - 1 (JavaScript's); 1e308 raised there
        whole = _finite(value) and abs(value) <= _LARGEST_WHOLE and float(value).is_integer()
        return int(value) if whole else UNREADABLE
    if kind is float:
        return float(value) if _finite(value) else UNREADABLE
    return value


def _field_widget(config_class, config_field, value, key, help_text, budgets, references):
    """One setting's widget, chosen by what its field declares: its widget, its choices, its type."""
    label = field_label(config_field.name, help_text)
    widget = setting_widget(config_field)
    choices = setting_choices(config_field)
    kind = setting_type(config_class, config_field)
    if widget == "budgets":
        return _anchor_budgets(label, value, key, help_text, budgets or [])
    if widget == "circuit" and references is not None:
        return _reference(label, value, key, help_text, references)
    if choices:
        options = list(choices)
        if not state.has_widget_value(key) and value in options:
            state.set_widget_value(key, value)
        return st.selectbox(label, options, key=key, help=help_text)
    if kind is bool:
        return st.checkbox(label, value=bool(value), key=key, help=help_text)
    if kind in (int, float):
        return _number(config_field, kind, label, value, key, help_text)
    if widget == "lines":  # a text area, parsed by make_config (records by the field's own parse)
        text = st.text_area(
            label, value=setting_text(config_field, value), key=key, help=help_text, height=90
        )
        # said as for the prompt: a direction override drew typed paraphrases reordered, unsaid
        hidden = invisible_sentence(text, f"The {config_field.name.replace('_', ' ')} box")
        if hidden:
            st.warning(markdown_text(hidden))
        return text
    if item_type(kind) is not None:  # a tuple: its items comma separated, parsed by make_config
        text = value if isinstance(value, str) else ",".join(str(item) for item in value or ())
        return st.text_input(label, value=text, key=key, help=help_text)
    return st.text_input(label, value="" if value is None else str(value), key=key, help=help_text)


def _number(config_field, kind: type, label: str, value, key: str, help_text: str | None):
    """A number box, whole numbers for an int field; the field's bounds are said in its help.

    The box does not clamp to the bounds: a value outside them (typed, or from a shared URL) is
    refused by the Config's own validation, in one sentence, with Run disabled.
    """
    help_text = _with_bounds(help_text, *setting_bounds(config_field))
    if kind is int:
        return int(st.number_input(label, value=int(value or 0), step=1, key=key, help=help_text))
    return float(st.number_input(label, value=float(value or 0.0), format="%.4g", key=key, help=help_text))


def _with_bounds(help_text: str | None, low, high) -> str | None:
    """The help with the values the setting accepts ('from 1 to 1000', 'at least 0')."""
    if low is None and high is None:
        return help_text
    allowed = (
        f"from {low:g} to {high:g}"
        if low is not None and high is not None
        else f"at least {low:g}"
        if low is not None
        else f"at most {high:g}"
    )
    return f"{help_text or ''} Allowed: {allowed}.".strip()


def _anchor_budgets(label: str, value, key: str, help_text: str | None, budgets: list[int]) -> tuple:
    """The anchor budgets picked among the run's budgets; none picked means the method's default."""
    try:
        chosen = list(parse_value(tuple[int, ...], value or ()))
    except ValueError:  # a stored or typed value that is not budgets: start with none picked
        chosen = []
    kept = state.widget_value(key) if state.has_widget_value(key) else chosen
    state.set_widget_value(key, [b for b in kept if b in budgets])
    picked = st.multiselect(
        f"{label} (none = every other budget and the largest)",
        budgets,
        key=key,
        help=help_text,
        format_func=lambda b: f"{b:,}",
    )
    return tuple(sorted(picked))


def _reference(label: str, value, key: str, help_text: str | None, references: dict[str, str]) -> tuple:
    """A reference circuit chosen among those computed for this prompt (or none): its edge names."""
    options = [NO_REFERENCE, *references]
    if state.widget_value(key) not in options:
        given = tuple(parse_value(tuple[str, ...], value or ()))
        matching = next(
            (name for name, edges in references.items() if tuple(edges.splitlines()) == given), NO_REFERENCE
        )
        state.set_widget_value(key, matching)
    chosen = st.selectbox(
        f"{label} circuit",
        options,
        key=key,
        help=(help_text or "") + " Run another method on this prompt to offer its circuit here.",
    )
    return () if chosen == NO_REFERENCE else tuple(references[chosen].splitlines())


def build_config(method, values: dict):
    """(the method's Config of the form's values, None), or (None, the sentence that says what is
    wrong). The one place a form's settings become a config: the page's request takes it as is."""
    try:
        return method.make_config(values), None
    except (TypeError, ValueError) as error:
        return None, str(error)
