"""Every method's settings are checked against their declared types and bounds, whichever Config
declares them: AtP*'s took ``--set qk_fix=maybe`` (and ``grad_drop=no``, a truthy string) and ran
with the setting on, its config printed as ``{"qk_fix": "maybe"}`` (a command-line audit)."""

import dataclasses

import pytest

from circuitviz.entry import cli
from circuitviz.methods import available_methods
from circuitviz.methods.settings import setting_bounds, setting_type


def _cases():
    for name, method in sorted(available_methods().items()):
        for config_field in dataclasses.fields(method.Config):
            kind = setting_type(method.Config, config_field)
            low, _ = setting_bounds(config_field)
            if kind is bool:
                yield name, config_field.name, "maybe"
            elif kind in (int, float):
                yield name, config_field.name, "many" if low is None else low - 1


@pytest.mark.parametrize("method, name, value", list(_cases()))
def test_a_value_of_the_wrong_kind_is_refused(method, name, value):
    with pytest.raises(ValueError, match=name):
        available_methods()[method].make_config({name: value})


@pytest.mark.parametrize("value", ["maybe", "no"])
def test_the_command_line_refuses_it_before_the_load(value, capsys, monkeypatch):
    monkeypatch.setattr(cli, "_load", lambda args: pytest.fail("loaded a model for a refused setting"))
    argv = ["discover", "--prompt", "The capital of Japan is the city of", "--method", "atp-star"]
    assert cli.main([*argv, "--set", f"qk_fix={value}"]) == 2
    error = capsys.readouterr().err.strip()
    assert error == f"error: --qk-fix must be true or false, not '{value}'.", error


def test_a_setting_that_applies_only_beside_another_is_refused_without_it(capsys, monkeypatch):
    """``--neuron-top-k 5`` without ``--neurons`` ran with the setting unused and unsaid."""
    monkeypatch.setattr(cli, "_load", lambda args: pytest.fail("loaded a model for a refused setting"))
    argv = ["discover", "--prompt", "The capital of Japan is the city of", "--method", "eap-ig"]
    assert cli.main([*argv, "--neuron-top-k", "5"]) == 2
    error = capsys.readouterr().err.strip()
    assert (
        error
        == "error: --neuron-top-k applies only with --neurons; add --neurons or leave --neuron-top-k out."
    )


def test_two_settings_that_cannot_be_combined_are_both_named_by_their_flags(capsys, monkeypatch):
    """It read "--neurons and positions cannot be combined": one flag, one setting name."""
    monkeypatch.setattr(cli, "_load", lambda args: pytest.fail("loaded a model for a refused setting"))
    argv = ["discover", "--prompt", "The capital of Japan is the city of", "--method", "eap-ig"]
    assert cli.main([*argv, "--neurons", "--positions"]) == 2
    error = capsys.readouterr().err.strip()
    assert error == "error: --neurons and --positions cannot be combined; turn one of them off."
