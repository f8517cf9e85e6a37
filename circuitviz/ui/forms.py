"""Widgets built from data: a method's settings form from its ``Config`` dataclass fields.

Every registered method gets a form without UI code of its own: a field with a fixed set of
values (``field(metadata={"choices": ...})``) becomes a select box, int and float fields number
inputs, bool fields checkboxes, str fields text boxes. Two kinds of setting name circuits or
budgets, so they are offered as choices too: ``anchor_budgets`` (budgets of this run, picked from
the budgets box) and ``reference`` (a circuit computed for this prompt). A line ``name: text`` of
the Config docstring becomes the field's help, and a "0: ..." meaning is written into the label
("max depth (0 = no limit)"). Invalid values come back as one sentence (the Config's own
validation) instead of a traceback.
"""

from __future__ import annotations

import dataclasses
import re
import typing

import streamlit as st

from ..methods.base import setting_choices

NO_REFERENCE = "none"


def field_help(config_class: type) -> dict[str, str]:
    """``{field: help}`` from ``name: text`` lines of a Config docstring."""
    helps = {}
    for line in (config_class.__doc__ or "").splitlines():
        for part in re.split(r";\s+(?=\w+:)", line):
            name, separator, text = part.strip().partition(":")
            if separator and name.strip().isidentifier() and name.strip() not in helps:
                helps[name.strip()] = text.strip()
    return helps


def field_label(name: str, help_text: str | None) -> str:
    """The field's name in words, with what 0 means when its help says ('(0: no limit)')."""
    label = name.replace("_", " ")
    zero = re.search(r"\(?\b0\s*[:=]\s*([^;,)]+)", help_text or "")
    return f"{label} (0 = {zero.group(1).strip()})" if zero else label


def _field_type(config_class: type, config_field: dataclasses.Field) -> type:
    try:
        hints = typing.get_type_hints(config_class)
    except Exception:  # unresolvable annotation: fall back to the default's type
        hints = {}
    hint = hints.get(config_field.name, config_field.type)
    if isinstance(hint, type):
        return hint
    default = config_field.default if config_field.default is not dataclasses.MISSING else ""
    return type(default)


def config_form(
    method,
    key_prefix: str,
    initial: dict | None = None,
    budgets: list[int] | None = None,
    references: dict[str, str] | None = None,
) -> dict:
    """Widgets for every field of ``method.Config``; returns {field: value} as plain values.

    ``budgets``: the run's budgets (``anchor_budgets`` picks among them); ``references``:
    {label: edge names} of circuits a ``reference`` setting may name.
    """
    initial = dict(initial or {})
    config_class = method.Config
    fields = dataclasses.fields(config_class)
    if not fields:
        st.caption(f"{method.label} has no settings.")
        return {}
    helps = field_help(config_class)
    values = {}
    columns = st.columns(min(3, len(fields)))
    for index, config_field in enumerate(fields):
        default = config_field.default if config_field.default is not dataclasses.MISSING else None
        value = initial.get(config_field.name, default)
        key = f"{key_prefix}.{method.name}.{config_field.name}"
        with columns[index % len(columns)]:
            values[config_field.name] = _field_widget(
                config_class, config_field, value, key, helps.get(config_field.name), budgets, references
            )
    return values


def _field_widget(config_class, config_field, value, key, help_text, budgets, references):
    """One setting's widget, chosen by its name, its choices or its type."""
    name = config_field.name
    label = field_label(name, help_text)
    choices = setting_choices(config_field)
    if name == "anchor_budgets":
        return _anchor_budgets(label, value, key, help_text, budgets or [])
    if name == "reference" and references is not None:
        return _reference(label, value, key, help_text, references)
    if choices:
        options = list(choices)
        if key not in st.session_state and value in options:
            st.session_state[key] = value
        return st.selectbox(label, options, key=key, help=help_text)
    kind = _field_type(config_class, config_field)
    if kind is bool:
        return st.checkbox(label, value=bool(value), key=key, help=help_text)
    if kind is int:
        return int(st.number_input(label, value=int(value or 0), step=1, key=key, help=help_text))
    if kind is float:
        return float(
            st.number_input(label, value=float(value or 0.0), format="%.4g", key=key, help=help_text)
        )
    if name == "paraphrases":
        return st.text_area(
            label, value="" if value is None else str(value), key=key, help=help_text, height=90
        )
    return st.text_input(label, value="" if value is None else str(value), key=key, help=help_text)


def _anchor_budgets(label: str, value, key: str, help_text: str | None, budgets: list[int]) -> str:
    """The anchor budgets picked among the run's budgets; none picked means the method's default."""
    chosen = [int(part) for part in str(value or "").replace(" ", "").split(",") if part.isdigit()]
    if key not in st.session_state:
        st.session_state[key] = [b for b in chosen if b in budgets]
    else:
        st.session_state[key] = [b for b in st.session_state[key] if b in budgets]
    picked = st.multiselect(
        f"{label} (none = every other budget and the largest)",
        budgets,
        key=key,
        help=help_text,
        format_func=lambda b: f"{b:,}",
    )
    return ",".join(str(b) for b in sorted(picked))


def _reference(label: str, value, key: str, help_text: str | None, references: dict[str, str]) -> str:
    """A reference circuit chosen among those computed for this prompt (or none)."""
    options = [NO_REFERENCE, *references]
    if st.session_state.get(key) not in options:
        matching = next((name for name, edges in references.items() if edges == value), NO_REFERENCE)
        st.session_state[key] = matching
    chosen = st.selectbox(
        f"{label} circuit",
        options,
        key=key,
        help=(help_text or "") + " Run another method on this prompt to offer its circuit here.",
    )
    return "" if chosen == NO_REFERENCE else references[chosen]


def build_config(method, values: dict):
    """(the method's Config of the form's values, None), or (None, the sentence that says what is
    wrong). The one place a form's settings become a config: the page's request takes it as is."""
    try:
        return method.make_config(values), None
    except (TypeError, ValueError) as error:
        return None, str(error)
