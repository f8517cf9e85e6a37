"""The command line's method settings: ``--set NAME=VALUE`` and each setting's own flag, merged
into one dict and checked against the method's ranges before the model loads."""

from __future__ import annotations

import json


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
        method.make_config(method.settings_from_cli(dict(settings)))
    except (TypeError, ValueError) as error:
        message = str(error)
        for name in settings:
            if message.startswith(f"{name} "):
                message = f"--{name.replace('_', '-')}{message[len(name) :]}"
                break
        raise ValueError(message) from None


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
        return name.strip().replace("-", "_"), json.loads(value)
    except json.JSONDecodeError:
        return name.strip().replace("-", "_"), value
