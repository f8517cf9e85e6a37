"""What a setting's field declares is true: the bounds the form's help states are the values the
Config accepts, every setting has help, and list settings hold typed tuples."""

from __future__ import annotations

import dataclasses

import pytest

from circuitviz.methods import available_methods
from circuitviz.methods.settings import item_type, setting_bounds, setting_help, setting_type


def _bounded_settings():
    seen = set()
    for name, method in sorted(available_methods().items()):
        if method.Config in seen:
            continue
        seen.add(method.Config)
        for config_field in dataclasses.fields(method.Config):
            low, high = setting_bounds(config_field)
            if low is not None or high is not None:
                yield pytest.param(method, config_field, id=f"{name}.{config_field.name}")


@pytest.mark.parametrize("method, config_field", list(_bounded_settings()))
def test_the_stated_bounds_are_the_accepted_values(method, config_field):
    kind = setting_type(method.Config, config_field)
    step = 1 if kind is int else 1e-6
    low, high = setting_bounds(config_field)
    for inside in [value for value in (low, high) if value is not None]:
        method.make_config({config_field.name: kind(inside)})  # the bounds themselves are allowed
    if low is not None:
        with pytest.raises(ValueError, match=config_field.name):
            method.make_config({config_field.name: kind(low - step)})
    if high is not None:
        with pytest.raises(ValueError, match=config_field.name):
            method.make_config({config_field.name: kind(high + step)})


def test_every_setting_has_help_and_list_settings_are_tuples():
    for name, method in available_methods().items():
        defaults = method.Config()
        for config_field in dataclasses.fields(method.Config):
            assert setting_help(config_field), f"{name}.{config_field.name}"
            if item_type(setting_type(method.Config, config_field)) is not None:
                assert isinstance(getattr(defaults, config_field.name), tuple), f"{name}.{config_field.name}"


def test_paraphrase_pairs_are_records_parsed_once_whatever_the_boundary_gives():
    """Best-of-N's ``paraphrases`` holds typed records: typed lines, JSONL, the JSON of a stored
    config and the records themselves give one config and one store key; the form's text of it
    reads back to the same records; a bad line is refused in one sentence naming it."""
    from circuitviz.methods import config_to_dict, get_method
    from circuitviz.query.pairs import ParaphraseError, ParaphraseRecord, records_text

    bon = get_method("bon")
    typed = "When Ann and Bob left, Bob thanked || When Ann and Cid left, Cid thanked\n# a comment\n"
    jsonl = (
        '{"clean": "When Ann and Bob left, Bob thanked", "corrupted": "When Ann and Cid left, Cid thanked"}\n'
    )
    first = bon.make_config({"paraphrases": typed, "paraphrase_source": "file"})
    assert first.paraphrases == (
        ParaphraseRecord("When Ann and Bob left, Bob thanked", "When Ann and Cid left, Cid thanked"),
    )
    from_jsonl = bon.make_config({"paraphrases": jsonl, "paraphrase_source": "file"})
    stored = bon.make_config(config_to_dict(first))  # the dicts of a stored result or a URL
    shown = bon.make_config({"paraphrases": records_text(first.paraphrases), "paraphrase_source": "file"})
    assert first == from_jsonl == stored == shown
    assert config_to_dict(first) == config_to_dict(stored)
    with pytest.raises(ParaphraseError, match="Line 2"):
        bon.make_config({"paraphrases": "a || b\nno separator here"})


def test_the_ig_steps_and_paraphrases_bounds_have_one_home():
    """Every IG-steps and paraphrase-count setting takes what its field declares, and the limits
    start there: the form, the command line and the limits read one number."""
    from circuitviz.entry.limits import Limits
    from circuitviz.methods.settings import IG_STEPS_HIGH, PARAPHRASES_HIGH

    highs = {"ig_steps": set(), "n_paraphrases": set()}
    for method in available_methods().values():
        for config_field in dataclasses.fields(method.Config):
            if (
                config_field.name in highs and method.name != "circuit-lasso"
            ):  # its paraphrases are observations
                highs[config_field.name].add(setting_bounds(config_field)[1])
    # a method may take fewer (EAP-GP's GradPath points: 200); none takes more than the limits allow
    assert max(highs["ig_steps"]) == IG_STEPS_HIGH and max(highs["n_paraphrases"]) == PARAPHRASES_HIGH
    limits = Limits.load(environ={})
    assert (limits.max_ig_steps, limits.max_paraphrases) == (IG_STEPS_HIGH, PARAPHRASES_HIGH)


def test_a_refusal_reads_the_same_in_the_form_and_in_the_run():
    """The app's inputs and the backend say a problem in one sentence (``refusals``)."""
    from circuitviz.bench.toy_models import IOI_TASK, tiny_model
    from circuitviz.core.tasks import TaskError, prepare_task
    from circuitviz.entry.limits import Limits, prompt_limit_problem
    from circuitviz.models.adapter import adapter_of
    from circuitviz.ui import inputs

    model = tiny_model("gpt2")
    with pytest.raises(TaskError) as raised:
        prepare_task(model, dataclasses.replace(IOI_TASK, foils=(IOI_TASK.answer,)))
    assert inputs.foil_problem(model, IOI_TASK.answer, IOI_TASK.answer, "logit_diff") == str(raised.value)
    with pytest.raises(TaskError) as raised:
        prepare_task(model, dataclasses.replace(IOI_TASK, foils=()))
    assert inputs.foil_problem(model, IOI_TASK.answer, "", "logit_diff") == str(raised.value)
    # the one token count: untruncated, with the <bos> the run prepends
    n_tokens = adapter_of(model).token_count(IOI_TASK.clean)
    assert n_tokens == prepare_task(model, IOI_TASK).clean_tokens.shape[1]
    assert prompt_limit_problem(n_tokens, Limits(max_tokens=n_tokens)) is None
    assert "over the limit of 3" in prompt_limit_problem(n_tokens, Limits(max_tokens=3))


def test_a_links_setting_the_form_cannot_show_is_found_not_raised():
    """A link's settings reach the form as JSON: each value its widget cannot show is found (the
    form then says so and uses the default) instead of the number box raising on int('x')."""
    from circuitviz.ui.forms import UNREADABLE, shown_value

    method = available_methods()["eap-ig"]
    fields = {f.name: f for f in dataclasses.fields(method.Config)}
    ig_steps, positions = fields["ig_steps"], fields["positions"]
    assert shown_value(method.Config, ig_steps, 7) == 7
    assert shown_value(method.Config, ig_steps, 7.0) == 7 and isinstance(
        shown_value(method.Config, ig_steps, 7.0), int
    )
    assert shown_value(method.Config, ig_steps, None) is None  # the form's own default then
    for wrong in ("x", "7", 7.5, True, [7], {"a": 1}, 1e308, 10**400, 2**53, float("nan")):  # 1e308 raised
        assert shown_value(method.Config, ig_steps, wrong) is UNREADABLE, wrong
    assert shown_value(method.Config, positions, True) is True
    assert shown_value(method.Config, positions, 1) is UNREADABLE
    with_choices = next(
        (m.Config, f)
        for m in available_methods().values()
        for f in dataclasses.fields(m.Config)
        if f.metadata.get("choices")
    )
    choices = list(with_choices[1].metadata["choices"])
    assert shown_value(*with_choices, choices[0]) == choices[0]
    assert shown_value(*with_choices, "no such choice") is UNREADABLE
    floats = next(
        (m.Config, f)
        for m in available_methods().values()
        for f in dataclasses.fields(m.Config)
        if setting_type(m.Config, f) is float
    )
    assert shown_value(*floats, 1) == 1.0 and shown_value(*floats, float("nan")) is UNREADABLE
    assert shown_value(*floats, 10**400) is UNREADABLE and shown_value(*floats, 1e308) == 1e308


def test_a_true_false_setting_takes_true_or_false_and_a_number_setting_a_number():
    """From a link, a batch spec or the API: the text 'false' was kept as text and read as true
    (it switched per-position scoring on); 'x' for a learning rate raised Python's own
    "could not convert string to float"."""
    eap, pruning = available_methods()["eap"], available_methods()["edge-pruning"]
    assert eap.make_config({"positions": "false"}).positions is False
    assert eap.make_config({"positions": "TRUE"}).positions is True
    for wrong in ("x", 1, 0, None, "yes", [True]):
        with pytest.raises(ValueError, match="positions must be true or false, not"):
            eap.make_config({"positions": wrong})
    for wrong in ("x", "inf", float("nan"), [0.1]):
        with pytest.raises(ValueError, match="learning_rate must be a number, not"):
            pruning.make_config({"learning_rate": wrong})
    assert pruning.make_config({"learning_rate": "0.5"}).learning_rate == 0.5
    with pytest.raises(ValueError) as raised:
        pruning.make_config({"learning_rate": "9" * 3000})  # inf as a float: no number either
    assert len(str(raised.value)) < 200  # the value is cut, its length named
    eap_ig = available_methods()["eap-ig"]
    for huge in (10**400, 2**1100):  # an argparse int of 400 digits raised OverflowError
        with pytest.raises(
            ValueError, match=r"ig_steps must be between 1 and 1000, not \d+… \(\d+ characters\)"
        ):
            eap_ig.make_config({"ig_steps": huge})
        with pytest.raises(ValueError, match="learning_rate must be a number"):
            pruning.make_config({"learning_rate": huge})
