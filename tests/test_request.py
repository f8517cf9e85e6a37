"""One request value: settings parsed, store key computed, estimate and limits checked once per run.

The counts are taken on the real paths (the Explore page through streamlit's AppTest, the API), on
the tiny random model, by wrapping the functions that do each job.
"""

from __future__ import annotations

import json

import pytest
from graph_data import graph_data

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.entry import request as request_module
from circuitviz.entry.api import discover, request_key, run_request
from circuitviz.entry.limits import LimitError
from circuitviz.entry.request import Request
from circuitviz.methods import base
from circuitviz.services.store import ResultStore


@pytest.fixture
def counts(monkeypatch):
    """{job: calls} of building a config, computing a request's key, estimating, checking limits, running."""
    found = {"config": 0, "key": 0, "estimate": 0, "limits": 0, "run": 0}

    def counted(job, function):
        def wrapper(*args, **kwargs):
            found[job] += 1
            return function(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(base.ScoringMethod, "run", counted("run", base.ScoringMethod.run))
    monkeypatch.setattr(base.Method, "make_config", counted("config", base.Method.make_config))
    monkeypatch.setattr(request_module, "content_key", counted("key", request_module.content_key))
    monkeypatch.setattr(
        request_module, "estimate_request", counted("estimate", request_module.estimate_request)
    )
    monkeypatch.setattr(request_module, "check_run", counted("limits", request_module.check_run))
    return found


@pytest.fixture(scope="module")
def tiny():
    return tiny_model("gpt2", n_layers=2, n_heads=2)


def test_one_explore_click_builds_the_config_key_and_verdict_once(tmp_path, monkeypatch, counts):
    streamlit_testing = pytest.importorskip("streamlit.testing.v1")
    import circuitviz.ui.loaders as loaders

    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(
        loaders, "MODEL_LOADER", lambda model_id, device: tiny_model("gpt2", n_layers=2, n_heads=2)
    )
    at = streamlit_testing.AppTest.from_file("../app.py", default_timeout=300)
    view = {"prompt": IOI_TASK.clean, "corrupted": IOI_TASK.corrupted, "answer": " Mary", "foil": " John"}
    view |= {"method": "eap-ig", "settings": json.dumps({"ig_steps": 3}), "budgets": "5,10,20"}
    for name, value in view.items():
        at.query_params[name] = value
    at.run()
    assert not at.exception, at.exception
    for job in counts:
        counts[job] = 0
    next(button for button in at.button if button.label == "Run").click()
    at.run()
    assert not at.exception, at.exception
    assert graph_data(at), (
        "the run drew no graph"
    )  # the graph component (no iframe since the two-way drawing)
    assert counts == {"config": 1, "key": 1, "estimate": 1, "limits": 1, "run": 1}


def test_one_api_run_builds_the_config_key_and_verdict_once(tiny, tmp_path, counts):
    result, cached = discover(
        tiny, IOI_TASK, "eap-ig", {"ig_steps": 2}, budgets=(5, 10), store=ResultStore(tmp_path)
    )
    assert not cached and result.config == {"ig_steps": 2}
    assert counts == {"config": 1, "key": 1, "estimate": 1, "limits": 1, "run": 1}
    _, cached = discover(
        tiny, IOI_TASK, "eap-ig", {"ig_steps": 2}, budgets=(10, 5), store=ResultStore(tmp_path)
    )
    assert cached  # a stored request is neither priced nor checked again
    assert counts == {"config": 2, "key": 2, "estimate": 1, "limits": 1, "run": 1}


def test_a_request_is_the_key_the_store_and_the_batch_use(tiny):
    made = Request.for_model(tiny, IOI_TASK, "EAP-IG ", {"ig_steps": 4}, budgets=(20, 5, 20), model_id="m")
    assert (made.method, made.budgets, made.config.ig_steps) == ("eap-ig", (5, 20), 4)
    assert made.key == request_key(tiny, "m", IOI_TASK, "eap-ig", {"ig_steps": 4}, (5, 20), made.max_tokens)
    again = Request.of(
        "eap-ig", made.config, model_id="m", dtype=made.dtype, task=IOI_TASK, budgets=(5, 20)
    )  # a batch's driver: no model, the same key
    assert again == made and again.key == made.key
    assert made.settings == {"ig_steps": 4}


def test_a_refused_request_says_why_once_and_runs_nothing(tiny, monkeypatch, counts):
    monkeypatch.setenv("CIRCUITVIZ_MAX_IG_STEPS", "3")
    priced = Request.for_model(tiny, IOI_TASK, "eap-ig", {"ig_steps": 5}, budgets=(5,)).priced(tiny)
    assert priced.priced(tiny) is priced and counts["estimate"] == 1
    assert "5 IG steps is over the limit of 3" in priced.refusal
    with pytest.raises(LimitError, match="CIRCUITVIZ_MAX_IG_STEPS"):
        run_request(tiny, priced)
    with pytest.raises(ValueError, match="after it is priced"):
        Request.for_model(tiny, IOI_TASK, "eap-ig", None, (5,)).check()


def test_one_request_looks_its_method_up_once_and_prices_it_once(tiny, tmp_path, monkeypatch):
    """``ig_steps`` walks from the request to the engine once: the method is looked up where the
    request is made, priced once from the method's own estimate, and run by the same method."""
    from circuitviz.methods import get_method, registry

    calls = {"lookup": 0, "estimate": 0, "ig_steps seen by the run": []}
    lookup, method = registry.discover_methods, get_method("eap-ig")
    estimate, run = type(method).estimate, type(method).run

    def counted_lookup():
        calls["lookup"] += 1
        return lookup()

    def counted_estimate(self, config, *args, **kwargs):
        calls["estimate"] += 1
        return estimate(self, config, *args, **kwargs)

    def counted_run(self, ctx, config, budgets):
        calls["ig_steps seen by the run"].append(config.ig_steps)
        return run(self, ctx, config, budgets)

    monkeypatch.setattr(registry, "discover_methods", counted_lookup)
    monkeypatch.setattr(type(method), "estimate", counted_estimate)
    monkeypatch.setattr(type(method), "run", counted_run)
    result, cached = discover(
        tiny, IOI_TASK, "eap-ig", {"ig_steps": 3}, budgets=(5,), store=ResultStore(tmp_path)
    )
    assert not cached and result.config == {"ig_steps": 3}
    assert calls == {"lookup": 1, "estimate": 1, "ig_steps seen by the run": [3]}


def test_a_request_changes_and_knows_its_result_without_a_dict_round_trip(tiny):
    made = Request.for_model(
        tiny, IOI_TASK, "eap-ig", {"ig_steps": 2, "n_paraphrases": 5}, (5, 10), known_only=True
    )
    assert made.settings == {"ig_steps": 2}  # Explore's settings carried to a method without them
    result, _ = run_request(tiny, made)
    assert made.is_for(result)
    more = made.with_changes(settings={"ig_steps": 3})
    assert more.config.ig_steps == 3 and more.budgets == made.budgets and not more.is_priced
    assert not more.is_for(result)  # other settings
    assert not made.with_changes(budgets=(0,)).is_for(result)  # other budgets: the note says so
    assert not made.with_changes(budgets=(5,)).is_for(result)  # fewer budgets are other inputs too
