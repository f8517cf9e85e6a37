"""What a method setting is, declared once on its ``Config`` field, and its values parsed in one place.

A setting is a dataclass field made by ``setting(default, help, ...)``: its metadata carries the
help sentence (the command line's ``--help`` and the form's tooltip), a fixed set of ``choices``
(a select box, argparse ``choices``), bounds (``low``/``high``: the form's number limits) and the
``widget`` when its type alone does not say it (``lines``: a text area; ``budgets``: picked among
the run's budgets; ``circuit``: a circuit computed for this prompt). Its type hint says what the
value is; tuple fields (``tuple[int, ...]``, ``tuple[str, ...]``) hold typed items, never a
comma string. A setting whose items are records of their own (Best-of-N's paraphrase pairs)
names its ``parse`` (text, a list of dicts or the items -> the typed tuple) and ``show`` (the
typed value -> the text a text area edits).

``parse_value`` turns what a boundary gives (a command-line string, a form's list, JSON from a URL
or a stored result) into the field's type; ``Method.make_config`` calls it for every value, so
the command line, the form and stored settings all parse the same way.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
import typing
from typing import Any

from ..core.text import given

WIDGETS = ("lines", "budgets", "circuit")
# the most IG steps and paraphrases any setting takes: the fields below declare them, and the
# limits' defaults (``limits.Limits``) are these same values, lowered by an operator if need be
IG_STEPS_HIGH = 1000
PARAPHRASES_HIGH = 64


def setting(
    default: Any,
    help: str,
    *,
    choices=None,
    low: float | None = None,
    high: float | None = None,
    widget: str | None = None,
    parse=None,
    show=None,
    applies: tuple[str, tuple] | None = None,
) -> Any:
    """A Config field with its help, choices, bounds and widget (``dataclasses.field`` metadata).

    ``choices``: a tuple, or a callable giving one (methods registered later); ``widget``: one of
    ``WIDGETS`` when the type does not say how to edit it; ``applies``: (an earlier field, its
    values) for a setting that only means something when that field holds one of them (the form
    hides it otherwise and keeps its value).
    """
    if widget is not None and widget not in WIDGETS:
        raise ValueError(f"widget must be one of {', '.join(WIDGETS)}, not {widget!r}.")
    metadata = {
        "help": help,
        "choices": choices,
        "low": low,
        "high": high,
        "widget": widget,
        "parse": parse,
        "show": show,
        "applies": applies,
    }
    if isinstance(default, (list, dict, set)):
        raise TypeError("A setting's default must be immutable (a tuple, not a list).")
    return dataclasses.field(default=default, metadata=metadata)


def ig_steps_setting(default: int, help: str, low: int = 1) -> Any:
    """The number of integrated-gradient steps, bounded once here (``IG_STEPS_HIGH``)."""
    return setting(default, help, low=low, high=IG_STEPS_HIGH)


def paraphrases_setting(default: int, help: str, applies: tuple[str, tuple] | None = None) -> Any:
    """A number of paraphrases to generate and score, bounded once here (``PARAPHRASES_HIGH``)."""
    return setting(default, help, low=0, high=PARAPHRASES_HIGH, applies=applies)


def check_settings(config) -> None:
    """A Config's ``__post_init__`` check of what its fields declare: list settings as typed
    tuples (``type_fields``), whole numbers where the type is ``int`` (an integral float or a
    digit string, from a URL or JSON, becomes the int), and every value within its field's
    ``low``/``high``. ValueError in one sentence naming the setting and what it takes."""
    type_fields(config)
    for config_field in dataclasses.fields(config):
        low, high = setting_bounds(config_field)
        kind = setting_type(type(config), config_field)
        name, value = config_field.name, getattr(config, config_field.name)
        if kind is bool:  # a link's or a file's "false" was truthy: it switched the setting on
            flag = _as_flag(value)
            if flag is None:
                raise ValueError(f"{name} must be true or false, not {given(value)}.")
            if flag is not value:
                object.__setattr__(config, name, flag)
            continue
        if kind not in (int, float):
            continue
        number = _as_number(value, kind)
        if low is None and high is None:  # no bounds, but a number all the same ('x' raised in float())
            if number is None:
                raise ValueError(
                    f"{name} must be {'a whole number' if kind is int else 'a number'}, not {given(value)}."
                )
        elif number is None or (low is not None and number < low) or (high is not None and number > high):
            whole = "a whole number " if number is None and kind is int else ""
            raise ValueError(f"{name} must be {whole}{_allowed(low, high)}, not {given(value)}.")
        if number is not value:
            object.__setattr__(config, name, number)


def _as_flag(value) -> bool | None:
    """``value`` as a true/false setting: a bool, or the text true or false (JSON's words, in any
    case) from a link or a file; None for anything else (1, 'yes', 'x' are not guessed at)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return None


def _as_number(value, kind):
    """``value`` as an int or float setting's value, or None when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    # NaN and inf are no setting's number; a numpy number (a benchmark's sweep) is one (numbers.Real)
    if not isinstance(value, numbers.Real) or value != value or value in (math.inf, -math.inf):
        return None
    if isinstance(value, numbers.Integral):  # whole already (10**400 has no float: it raised here)
        return int(value) if kind is int else (float(value) if abs(value) < 2**1023 else None)
    if kind is int:
        return int(value) if float(value).is_integer() else None
    return float(value) if not isinstance(value, float) else value


def _allowed(low, high) -> str:
    """'between 1 and 1000', 'at least 0', 'at most 1'."""

    def shown(bound) -> str:
        return str(int(bound)) if float(bound).is_integer() else f"{bound:g}"

    if low is not None and high is not None:
        return f"between {shown(low)} and {shown(high)}"
    return f"at least {shown(low)}" if low is not None else f"at most {shown(high)}"


def setting_help(config_field: dataclasses.Field) -> str:
    """The help sentence of a setting ('' when it has none)."""
    return str(config_field.metadata.get("help") or "")


def setting_choices(config_field: dataclasses.Field) -> tuple | None:
    """The allowed values of a setting, if it has a fixed set."""
    choices = config_field.metadata.get("choices")
    if callable(choices):
        choices = choices()
    return tuple(choices) if choices else None


def setting_bounds(config_field: dataclasses.Field) -> tuple[float | None, float | None]:
    """(lowest, highest) value a number setting accepts; None where unbounded."""
    return config_field.metadata.get("low"), config_field.metadata.get("high")


def setting_widget(config_field: dataclasses.Field) -> str | None:
    """The widget a setting asks for beyond its type (``WIDGETS``), or None."""
    return config_field.metadata.get("widget")


def setting_applies(config_field: dataclasses.Field, values: dict) -> bool:
    """Whether a setting means something beside the ``values`` chosen so far (``applies``)."""
    applies = config_field.metadata.get("applies")
    if applies is None:
        return True
    field_name, allowed = applies
    return field_name not in values or values[field_name] in allowed


def setting_text(config_field: dataclasses.Field, value) -> str:
    """The text a text box shows for ``value`` (its ``show`` for a typed value, else str)."""
    show = config_field.metadata.get("show")
    if value is None:
        return ""
    if show is not None and not isinstance(value, str):
        return show(value)
    if isinstance(value, (tuple, list)):
        return "\n".join(str(item) for item in value)
    return str(value)


def parse_field(config_class: type, config_field: dataclasses.Field, value):
    """``value`` as the field's type: its own ``parse`` when it names one, else ``parse_value``."""
    parse = config_field.metadata.get("parse")
    if parse is not None:
        return parse(value)
    return parse_value(setting_type(config_class, config_field), value, config_field.name)


def setting_type(config_class: type, config_field: dataclasses.Field):
    """The setting's type hint resolved (``int``, ``tuple[int, ...]``, ...); the default's type
    when the hint cannot be resolved."""
    hints = _type_hints(config_class)
    if hints is not None:
        return hints.get(config_field.name, config_field.type)
    default = config_field.default  # an annotation that names something not importable here
    return type(default) if default is not dataclasses.MISSING else str


@functools.lru_cache(maxsize=256)
def _type_hints(config_class: type) -> dict | None:
    """A Config's resolved type hints, once per class (a Config is built often); None if not resolvable."""
    try:
        return typing.get_type_hints(config_class)
    except Exception:  # noqa: BLE001
        return None


def item_type(kind) -> type | None:
    """The item type of a ``tuple[X, ...]`` hint, else None."""
    if typing.get_origin(kind) is tuple:
        arguments = typing.get_args(kind)
        return arguments[0] if arguments else str
    return None


def parse_value(kind, value, name: str = "setting"):
    """``value`` as a setting of type ``kind``: a tuple field takes a comma-separated string
    (the command line), a list or tuple (a form, JSON), one item per line for edge names
    (``tuple[str, ...]`` given text with newlines); other types pass through (the Config's own
    validation says what is wrong). ValueError in one sentence for an item of the wrong type."""
    items = item_type(kind)
    if items is None:
        return value
    if isinstance(value, str):
        separator = "\n" if "\n" in value else ","
        parts = [part.strip() for part in value.split(separator)]
        value = [part for part in parts if part]
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"{name} takes a list of {items.__name__} values, not {given(value)}.")
    if items is int:
        return tuple(_whole_number(part, name) for part in value)
    return tuple(items(part) for part in value)


def _whole_number(part, name: str) -> int:
    if isinstance(part, bool):
        raise ValueError(f"{name} takes whole numbers, not {given(part)}.")
    if isinstance(part, int):
        return part
    text = str(part).strip()
    if not text.lstrip("-").isdigit():
        raise ValueError(f"{name}: {text[:30]!r} is not a whole number.")
    return int(text)


def parse_settings(config_class: type, values: dict) -> dict:
    """Every value of ``values`` parsed as its field's type (unknown names are left to the caller)."""
    fields = {config_field.name: config_field for config_field in dataclasses.fields(config_class)}
    return {
        name: parse_field(config_class, fields[name], value) if name in fields else value
        for name, value in values.items()
    }


def type_fields(config) -> None:
    """Give a frozen Config's list settings their typed values in place (its ``__post_init__``
    calls it), so a Config built directly from plain values (a stored result's, a test's, a comma
    string) holds tuples like one from ``make_config``."""
    for config_field in dataclasses.fields(config):
        kind = setting_type(type(config), config_field)
        if item_type(kind) is not None:
            value = getattr(config, config_field.name)
            object.__setattr__(config, config_field.name, parse_field(type(config), config_field, value))


def flag_type(kind, widget: str | None = None, own_parse: bool = False):
    """What argparse's ``type=`` is for a setting of type ``kind``: the type itself, for a
    tuple field the parser of its comma-separated items, and for a ``circuit`` setting the name
    of the file that holds it (the method's ``settings_from_cli`` reads it against the model), as
    for a setting with its own ``parse`` (the file's text, parsed by ``make_config``)."""
    if widget == "circuit" or own_parse:
        return str
    if item_type(kind) is None:
        return kind if isinstance(kind, type) else str

    def comma_separated(text: str):
        return parse_value(kind, text)

    return comma_separated
