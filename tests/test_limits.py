"""Limits before work: estimates grow with what costs, and requests over a limit are refused
before any pass runs, with the limit and its environment variable named."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.entry import limits
from circuitviz.entry.api import discover
from circuitviz.entry.limits import LimitError, Limits, busy_note, check_run, estimate_request, estimate_run
from circuitviz.models.adapter import ModelAdapter


@pytest.fixture(scope="module")
def tiny():
    return tiny_model("gpt2", seed=4)


def test_estimate_grows_with_tokens_steps_and_paraphrases(tiny):
    short = estimate_run(tiny, "eap-ig", {"ig_steps": 5}, n_tokens=8)
    longer = estimate_run(tiny, "eap-ig", {"ig_steps": 5}, n_tokens=32)
    steps = estimate_run(tiny, "eap-ig", {"ig_steps": 50}, n_tokens=8)
    paraphrased = estimate_run(tiny, "bon", {"ig_steps": 5, "n_paraphrases": 20}, n_tokens=8)
    assert longer.seconds > short.seconds and longer.memory_bytes > short.memory_bytes
    assert steps.seconds > short.seconds
    assert paraphrased.seconds > short.seconds and paraphrased.n_paraphrases == 20
    assert estimate_run(tiny, "eap-ig", {"ig_steps": 5}, n_tokens=8, device="cuda").seconds < short.seconds
    text = short.summary()
    assert text.startswith("Estimate: about") and "GB on cpu" in text and "5 IG steps" in text


def test_a_busy_cpu_is_said_beside_the_estimate(tiny, monkeypatch, tmp_path):
    """The estimate is priced from earlier runs; more work waiting than cores says so (a price
    from runs on a quiet machine says more: tests/test_estimate_busy_machine.py)."""
    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))  # nominal: no load known
    assert busy_note(waiting=0.2, cores=2) == ""
    assert busy_note(waiting=2.9, cores=2) == (
        " The machine is busy now (2.9 other tasks running or waiting for its 2 cores): the run may take longer."
    )
    monkeypatch.setattr(limits, "others_wanting", lambda: 7.5)
    monkeypatch.setattr(limits, "load_average", lambda: 8.0)
    text = estimate_run(tiny, "eap-ig", {"ig_steps": 5}, n_tokens=8).summary()
    assert text.startswith("Estimate: about") and text.endswith("the run may take longer.")
    assert "(7.5 other tasks running or waiting for its" in text
    assert estimate_run(tiny, "eap-ig", {"ig_steps": 5}, n_tokens=8, device="cuda").busy == ""
    monkeypatch.setattr(limits, "others_wanting", lambda: 0.0)
    assert estimate_run(tiny, "eap-ig", {"ig_steps": 5}, n_tokens=8).busy == ""


def test_a_damaged_calibration_file_keeps_what_is_sound_of_it(tmp_path, monkeypatch):
    """9,000 random edits of a real calibration file: a list where a run's phases belong, a run's
    seconds that are None, a method's runs that are a number, raised in 12 places, every estimate
    after it (the app's Run priced nothing until the cache was deleted). The estimates now read what
    is sound and a new run is recorded beside it."""
    from circuitviz.entry import calibration

    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    weights = calibration.WEIGHTS_VERSION
    sound = {
        "flops": 2e9,
        "seconds": 2.0,
        "model": "m",
        "others": 0.0,
        "phases": {"work": 2.0},
        "weights": weights,
    }
    damaged = [
        {"flops": None, "seconds": 1.0},
        {"flops": 1e9, "seconds": float("inf")},
        [1, 2],
        {**sound, "phases": [{}], "parts": 5, "timings": {"scoring_s": "x"}, "others": [1], "model": 3},
        sound,
    ]
    path = calibration.calibration_path()
    path.parent.mkdir(parents=True)
    path.write_text(
        json.dumps(
            {"loads": [], "cpu": {"eap": damaged, "eap-ig": 1.5, calibration.PROBE: [None]}, "cuda": 7}
        )
    )
    rate = calibration.rate("cpu", "eap", 1e6, model="m")
    assert (rate.flops_per_second, rate.runs, rate.source) == (1e9, 1, "method")  # the one of model m
    assert calibration.phase_shares("cpu", "eap") == {"work": 1.0}
    assert calibration.part_shares("cpu", "eap") is None and calibration.last_run("cpu", ["eap"]) is None
    assert calibration.last_load("gemma-3-270m") is None and not calibration.measured("cuda")
    assert calibration.rate("cpu", "eap-ig", 1e6).source == "device"
    calibration.record("cpu", "eap-ig", 3e9, 1.0)
    calibration.record_load("gemma-3-270m", 4.0)
    assert calibration.recorded_runs("cpu", "eap-ig") == [{"flops": 3e9, "seconds": 1.0, "weights": weights}]
    assert calibration.last_load("gemma-3-270m") == 4.0


def test_runs_beside_other_work_do_not_price_a_quiet_machine(tmp_path, monkeypatch):
    """Three runs that began beside other work (half the speed) and one on a quiet machine: the
    estimate is priced from the quiet one and says so; with no run known quiet, from all of them;
    runs recorded before the others' load was (no 'others') count only where no run's load is known."""
    from circuitviz.entry import calibration

    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    for others in (1.0, 1.0, 1.2):
        calibration.record("cpu", "eap", 1e9, 2.0, others=others, cores=2)
    busy = calibration.rate("cpu", "eap", 1.0)  # none quiet: each scaled to a quiet machine (1.5x)
    assert busy.flops_per_second == pytest.approx(7.5e8) and busy.runs == 3 and not busy.quiet_only
    calibration.record("cpu", "eap", 1e9, 1.0)  # unknown load beside known ones: an older run, left out
    assert calibration.rate("cpu", "eap", 1.0).runs == 3
    calibration.record("cpu", "eap", 1e9, 1.0, others=0.1)
    quiet = calibration.rate("cpu", "eap", 1.0)
    assert quiet.flops_per_second == pytest.approx(1e9) and quiet.runs == 1 and quiet.quiet_only
    assert quiet.describe("eap") == "priced from 1 eap run on this machine while it was quiet"
    stored = json.loads(calibration.calibration_path().read_text())["cpu"]["eap"]
    assert [run.get("others") for run in stored] == [1.0, 1.0, 1.2, None, 0.1]
    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "gpu"))
    for seconds in (1.0, 2.0, 4.0):
        calibration.record("cuda", "eap", 1e9, seconds)  # no load known anywhere: every run counts
    assert calibration.rate("cuda", "eap", 1.0).runs == 3


def test_limits_from_env_and_file(tmp_path):
    assert Limits.load({}) == Limits()
    path = tmp_path / "limits.toml"
    path.write_text("max_ig_steps = 10\nmax_memory_gb = 2.5\n")
    loaded = Limits.load({"CIRCUITVIZ_LIMITS_FILE": str(path), "CIRCUITVIZ_MAX_PARAPHRASES": "3"})
    assert (loaded.max_ig_steps, loaded.max_memory_gb, loaded.max_paraphrases) == (10, 2.5, 3)
    (tmp_path / "limits.json").write_text(json.dumps({"max_tokens": 12}))
    assert Limits.load({"CIRCUITVIZ_LIMITS_FILE": str(tmp_path / "limits.json")}).max_tokens == 12
    for bad in ({"CIRCUITVIZ_MAX_IG_STEPS": "many"}, {"CIRCUITVIZ_MAX_IG_STEPS": "0"}):
        with pytest.raises(LimitError, match="CIRCUITVIZ_MAX_IG_STEPS"):
            Limits.load(bad)
    (tmp_path / "bad.toml").write_text("max_steps = 3\n")
    with pytest.raises(LimitError, match="unknown keys max_steps"):
        Limits.load({"CIRCUITVIZ_LIMITS_FILE": str(tmp_path / "bad.toml")})


@pytest.mark.parametrize(
    "variable,value,method,config,named",
    [
        ("CIRCUITVIZ_MAX_IG_STEPS", "4", "eap-ig", {"ig_steps": 5}, "IG steps"),
        ("CIRCUITVIZ_MAX_MEMORY_GB", "0.000001", "eap", None, "GB"),
        ("CIRCUITVIZ_MAX_PARAPHRASES", "2", "bon", {"n_paraphrases": 3, "ig_steps": 2}, "paraphrases"),
        ("CIRCUITVIZ_MAX_MINUTES", "0.000001", "eap", None, "min"),
    ],
)
def test_a_request_over_a_limit_is_refused_before_any_pass(
    tiny, monkeypatch, variable, value, method, config, named
):
    monkeypatch.setenv(variable, value)
    runs = []
    original = ModelAdapter.hooked
    monkeypatch.setattr(ModelAdapter, "hooked", lambda *a, **k: runs.append(1) or original(*a, **k))
    with pytest.raises(LimitError) as refused:
        discover(tiny, IOI_TASK, method, config, budgets=(5,))
    message = str(refused.value)
    assert variable in message and named in message
    assert runs == []  # refused before the clean/corrupted runs


def test_token_limit_and_a_run_within_limits(tiny, monkeypatch):
    estimate = estimate_request(tiny, IOI_TASK, "eap")
    with pytest.raises(LimitError, match="CIRCUITVIZ_MAX_TOKENS"):
        check_run(estimate, Limits(max_tokens=estimate.n_tokens - 1))
    check_run(estimate, Limits())
    monkeypatch.setenv("CIRCUITVIZ_MAX_IG_STEPS", "5")
    result, _ = discover(tiny, IOI_TASK, "eap-ig", {"ig_steps": 5}, budgets=(5,))
    assert result.config["ig_steps"] == 5
    assert limits.ENV["max_memory_gb"] == "CIRCUITVIZ_MAX_MEMORY_GB"


@pytest.mark.slow
def test_cli_prints_the_estimate_line_before_the_run(tmp_path):
    code = (
        "import sys; from circuitviz.entry.cli import _print_estimate; from circuitviz.bench.toy_models import tiny_model, IOI_TASK;"
        "_print_estimate(tiny_model(), IOI_TASK, 'eap-ig', {'ig_steps': 3}, [5, 10])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Estimate: about" in done.stderr and "3 IG steps" in done.stderr


def _explore_app(monkeypatch, tmp_path, **query):
    streamlit_testing = pytest.importorskip("streamlit.testing.v1")
    import circuitviz.ui.loaders as loaders

    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(
        loaders, "MODEL_LOADER", lambda model_id, device: tiny_model("gpt2", n_layers=2, n_heads=2)
    )
    at = streamlit_testing.AppTest.from_file("../pages/explore.py", default_timeout=300)
    base = {"prompt": IOI_TASK.clean, "corrupted": IOI_TASK.corrupted, "answer": " Mary", "foil": " John"}
    for name, value in {**base, **query}.items():
        at.query_params[name] = value
    return at


def test_explore_page_shows_the_estimate_and_refuses_over_a_limit(monkeypatch, tmp_path):
    at = _explore_app(monkeypatch, tmp_path, method="eap", budgets="5,10").run()
    assert not at.exception, at.exception
    assert any(c.value.startswith("Estimate: about") for c in at.caption)
    monkeypatch.setenv("CIRCUITVIZ_MAX_IG_STEPS", "1")
    at = _explore_app(
        monkeypatch, tmp_path, method="eap-ig", settings=json.dumps({"ig_steps": 2}), budgets="5"
    ).run()
    assert not at.exception, at.exception
    assert any("CIRCUITVIZ_MAX_IG_STEPS" in e.value for e in at.error)
    run = next(b for b in at.button if b.label == "Run")
    assert run.disabled


def test_a_run_estimated_over_the_servers_minutes_is_refused_in_one_sentence(monkeypatch, tmp_path):
    """A link could queue a run of a quarter of an hour on a shared server (budgets 1 to 10,342,
    'about 17 min'); with CIRCUITVIZ_MAX_MINUTES set the page refuses it, and with none it runs."""
    estimate = limits.Estimate(1020.0, 1e9, 15, 0, 0, 100.0, "cpu")
    with pytest.raises(LimitError) as refused:
        check_run(estimate, Limits(max_minutes=5))
    assert str(refused.value) == (
        "This run is estimated at about 17 min, over this server's limit of 5 min; use fewer budgets, steps or "
        "paraphrases, or a shorter prompt, or raise the limit with CIRCUITVIZ_MAX_MINUTES."
    )
    check_run(estimate, Limits())  # no limit by default
    monkeypatch.setenv("CIRCUITVIZ_MAX_MINUTES", "0.000001")
    at = _explore_app(monkeypatch, tmp_path, method="eap", budgets="5,10").run()
    assert not at.exception, at.exception
    assert any("CIRCUITVIZ_MAX_MINUTES" in e.value for e in at.error)
    assert next(b for b in at.button if b.label == "Run").disabled


def test_a_models_first_acc_run_is_priced_with_its_heads_svd(tmp_path, monkeypatch):
    """A model's first ACC++ run computes the SVD of its heads (4-9 s of a 15.9 s first run on
    Gemma-3-270M), which its estimate left out; the next runs read it from disk in 0.1 s."""
    import copy

    from circuitviz.acc.svd import load_svd, svd_seconds

    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path))
    model = tiny_model("gpt2", seed=5)
    first = estimate_run(model, "acc++", None, n_tokens=8)
    heads = model.cfg.n_layers * model.cfg.n_heads
    assert first.one_off == pytest.approx(svd_seconds(model)) and first.one_off > 0
    assert f"; with the SVD of the model's {heads} heads, once per model, about " in first.summary()
    assert estimate_run(model, "eap-ig", None, n_tokens=8).one_off == 0  # ACC++'s own work only
    load_svd(model)  # what the first run does: in memory, and on disk for the next process
    later = estimate_run(model, "acc++", None, n_tokens=8)
    assert later.one_off == 0 and "SVD" not in later.summary()
    assert first.seconds == pytest.approx(later.seconds + first.one_off)
    assert estimate_run(copy.deepcopy(model), "acc++", None, n_tokens=8).one_off == 0  # found on disk


def test_a_range_whose_ends_read_alike_is_said_as_one_figure(tiny):
    """ACDC's and ACC++'s estimates are ranges; on a short prompt both ends rounded to one figure
    and the line read "Estimate: 1 s to 1 s" (until 2026-12-07)."""
    import dataclasses

    estimate = estimate_run(tiny, "eap-ig", {"ig_steps": 5}, n_tokens=8)
    alike = dataclasses.replace(estimate, seconds=1.1, seconds_range=(0.9, 1.2), range_reason="")
    assert alike.summary().startswith("Estimate: about 1 s and ")
    apart = dataclasses.replace(estimate, seconds=20.0, seconds_range=(5.0, 60.0), range_reason="")
    assert apart.summary().startswith("Estimate: 5 s to 60 s and ")
