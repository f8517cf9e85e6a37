"""Widgets built from data: a method's settings form from its ``Config`` dataclass fields.

Every registered method gets a form without UI code of its own: int and float fields become
number inputs, bool fields checkboxes, str fields text boxes. A line ``name: text`` in the
Config docstring becomes the field's help. Invalid values come back as one sentence (the
Config's own validation) instead of a traceback.
"""

from __future__ import annotations

import dataclasses
import typing

import streamlit as st


def field_help(config_class: type) -> dict[str, str]:
    """``{field: help}`` from ``name: text`` lines of a Config docstring."""
    helps = {}
    for line in (config_class.__doc__ or "").splitlines():
        name, separator, text = line.strip().partition(":")
        if separator and name.strip().isidentifier():
            helps[name.strip()] = text.strip()
    return helps


def _field_type(config_class: type, field: dataclasses.Field) -> type:
    try:
        hints = typing.get_type_hints(config_class)
    except Exception:  # unresolvable annotation: fall back to the default's type
        hints = {}
    hint = hints.get(field.name, field.type)
    if isinstance(hint, type):
        return hint
    default = field.default if field.default is not dataclasses.MISSING else ""
    return type(default)


def config_form(method, key_prefix: str, initial: dict | None = None) -> dict:
    """Widgets for every field of ``method.Config``; returns {field: value} as plain values."""
    initial = dict(initial or {})
    config_class = method.Config
    fields = dataclasses.fields(config_class)
    if not fields:
        st.caption(f"{method.label} has no settings.")
        return {}
    helps = field_help(config_class)
    values = {}
    columns = st.columns(min(3, len(fields)))
    for index, field in enumerate(fields):
        default = field.default if field.default is not dataclasses.MISSING else None
        value = initial.get(field.name, default)
        kind = _field_type(config_class, field)
        label = field.name.replace("_", " ")
        key = f"{key_prefix}.{method.name}.{field.name}"
        with columns[index % len(columns)]:
            if kind is bool:
                values[field.name] = st.checkbox(
                    label, value=bool(value), key=key, help=helps.get(field.name)
                )
            elif kind is int:
                values[field.name] = int(
                    st.number_input(label, value=int(value or 0), step=1, key=key, help=helps.get(field.name))
                )
            elif kind is float:
                values[field.name] = float(
                    st.number_input(
                        label, value=float(value or 0.0), format="%.4g", key=key, help=helps.get(field.name)
                    )
                )
            else:
                values[field.name] = st.text_input(
                    label, value="" if value is None else str(value), key=key, help=helps.get(field.name)
                )
    return values


def check_config(method, values: dict) -> str | None:
    """None when the settings make a valid Config, else the sentence that says what is wrong."""
    try:
        method.make_config(values)
    except (TypeError, ValueError) as error:
        return str(error)
    return None
