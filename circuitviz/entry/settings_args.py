"""The command line's method settings: ``--set NAME=VALUE`` and each setting's own flag, merged
into one dict and checked against the method's ranges before the model loads."""

from __future__ import annotations

import dataclasses
import json

from ..core import json_text
from ..methods.settings import setting_applies


def merged_settings(args) -> dict:
    """``--set NAME=VALUE`` and the settings' own flags together; the same setting given both ways
    with two values is refused (the flag won without a word: ``--ig-steps 3 --set ig_steps=5``)."""
    settings = dict(_parse_setting(item) for item in args.set)
    for name, value in _settings_given(args).items():
        if name in settings and settings[name] != value:
            flag = "--" + name.replace("_", "-")
            raise ValueError(
                f"{flag} {value} and --set {name}={settings[name]} disagree; give the setting once."
            )
        settings[name] = value
    return settings


def checked_settings(method, settings: dict) -> None:
    """The settings' values against the method's ranges before the model loads, named by their
    flags: '--steps -3' was refused after the load as "steps must be between 0 and 10000". A
    reference circuit is read against the model's graph, so with one the check waits for it."""
    if "reference" in settings:
        return
    try:
        config = method.make_config(method.settings_from_cli(dict(settings)))
    except (TypeError, ValueError) as error:
        message = str(error)
        for name in settings:
            if message.startswith(f"{name} "):
                message = f"--{_flag(name)}{message[len(name) :]}"
                for other in settings:  # "--neurons and positions cannot be combined": both by their flags
                    message = message.replace(f" and {other} ", f" and --{_flag(other)} ")
                break
        raise ValueError(message) from None
    _check_applies(config, settings)


def _flag(name: str) -> str:
    return name.replace("_", "-")


def _check_applies(config, settings: dict) -> None:
    """A setting given that means nothing beside the others (its field's ``applies``) is refused
    in one sentence: ``--neuron-top-k 5`` without ``--neurons`` ran, unused and unsaid."""
    values = {field.name: getattr(config, field.name) for field in dataclasses.fields(config)}
    for field in dataclasses.fields(config):
        if field.name in settings and not setting_applies(field, values):
            other, allowed = field.metadata["applies"]
            if allowed == (True,):
                needs = f"with --{_flag(other)}; add --{_flag(other)}"
            else:
                shown_values = " or ".join(str(value) for value in allowed)
                needs = f"when --{_flag(other)} is {shown_values} (it is {values[other]}); change --{_flag(other)}"
            raise ValueError(
                f"--{_flag(field.name)} applies only {needs} or leave --{_flag(field.name)} out."
            )


def _settings_given(args) -> dict:
    """The method settings given as flags (none given: none, so no method is offered settings it lacks)."""
    prefix = "setting_"
    return {
        name[len(prefix) :]: value
        for name, value in vars(args).items()
        if name.startswith(prefix) and value is not None
    }


def _parse_setting(text: str) -> tuple[str, object]:
    name, separator, value = text.partition("=")
    if not separator:
        raise ValueError(f"Setting {text!r} needs the form NAME=VALUE.")
    try:
        return name.strip().replace("-", "_"), json_text.loads(value)
    except (json.JSONDecodeError, RecursionError):  # not JSON: the text itself, checked as the setting's
        return name.strip().replace("-", "_"), value
