"""The first estimate on a model with no runs of its own (calibration.rate, limits.estimate_run).

A rate in FLOPs a second does not carry over between models: the app priced SmolLM2-135M's first
EAP-IG run from Gemma-3-270M's runs at "about 2 s", and it took 9.6 s (a FLOP is 2 x parameters
a token, and Gemma's parameters hold a 262,144-token vocabulary a forward pass barely pays for).
Another model's runs are now scaled by a forward pass of each model timed on this machine, and
where that pass is missing the sentence says the price is another model's, not scaled."""

from __future__ import annotations

import pytest

from circuitviz.bench.toy_models import tiny_model
from circuitviz.entry import calibration
from circuitviz.entry.limits import estimate_run


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))


def test_another_models_runs_are_scaled_by_each_models_forward_pass():
    model = tiny_model("gpt2", n_layers=2, n_heads=2)
    first = estimate_run(model, "eap-ig", n_tokens=15, n_budgets=4)
    this = first.model
    other = f"{3 * int(this.split('p-')[0])}p-10342e"  # a model 3 times its size
    # the other model ran this much work in 4 s; its forward pass runs 3x this model's FLOP rate
    calibration.record("cpu", "eap-ig", first.flops, 4.0, model=other)
    unscaled = estimate_run(model, "eap-ig", n_tokens=15, n_budgets=4)
    assert unscaled.seconds == pytest.approx(4.0)
    assert "of other models on this machine, not scaled to this model" in unscaled.priced
    assert "several times off" in unscaled.summary()
    calibration.record_probe("cpu", 3e9, 1.0, model=other)
    calibration.record_probe("cpu", 1e9, 1.0, model=this)
    scaled = estimate_run(model, "eap-ig", n_tokens=15, n_budgets=4)
    assert scaled.seconds == pytest.approx(12.0)
    assert (
        "1 eap-ig run of other models on this machine, scaled to this model by a forward pass"
        in scaled.priced
    )
    # a run of this model's own prices its next one, unscaled
    calibration.record("cpu", "eap-ig", first.flops, 7.0, model=this)
    own = estimate_run(model, "eap-ig", n_tokens=15, n_budgets=4)
    assert own.seconds == pytest.approx(7.0) and own.priced == "priced from 1 eap-ig run on this machine"


def test_a_model_without_its_own_rate_is_timed_once_at_load():
    assert not calibration.measured("cpu") and not calibration.measured("cpu", "m1")
    calibration.record("cpu", "eap", 1e9, 1.0, model="m0")
    assert calibration.measured("cpu") and not calibration.measured("cpu", "m1")
    calibration.record_probe("cpu", 1e9, 1.0, model="m1")
    assert calibration.measured("cpu", "m1")


def test_only_passes_timed_alike_scale_another_models_runs():
    """A pass timed beside other work (two test runs: 2.4 times as long) against another model's
    quiet one priced SmolLM2's first run at 41 s (it took 18 s): such a pair scales nothing."""
    calibration.record_probe("cpu", 3e9, 1.0, model="gemma")  # an older start's pass: load unknown
    calibration.record_probe("cpu", 1e9, 1.0, model="smol", others=2.0)
    assert calibration._probe_scale(calibration.recorded_runs("cpu", calibration.PROBE), "smol") is None
    calibration.record_probe("cpu", 1e9, 0.5, model="smol", others=0.1)  # a quiet one of its own
    scale = calibration._probe_scale(calibration.recorded_runs("cpu", calibration.PROBE), "smol")
    assert scale == {"gemma": pytest.approx(2e9 / 3e9)}
    calibration.record_probe("cpu", 3e9, 2.0, model="busy", others=1.5)  # only beside other work
    assert "busy" not in calibration._probe_scale(calibration.recorded_runs("cpu", calibration.PROBE), "smol")


def test_a_busy_pass_with_its_cpu_seconds_scales_against_a_quiet_one():
    """A pass beside other work that kept its CPU seconds is brought to a quiet machine by them,
    so it scales another model's runs against that model's quiet pass: SmolLM2's pass timed beside
    a busy machine and Gemma's quiet one otherwise scaled nothing, and SmolLM2's first run was
    priced at Gemma's FLOP rate, several times off."""
    calibration.record_probe("cpu", 3e9, 1.0, model="gemma", others=0.0)
    calibration.record_probe("cpu", 1e9, 1.0, model="smol", others=2.0, during=1.4, cpu=0.5, threads=1)
    scale = calibration._probe_scale(calibration.recorded_runs("cpu", calibration.PROBE), "smol")
    assert scale == {"gemma": pytest.approx(2e9 / 3e9)}


def test_the_runs_of_a_model_of_another_order_of_size_price_nothing_unscaled():
    """The runs of 2-layer random models of 83,000 parameters (what a reviewer runs first) priced
    Gemma-3-270M's first RelP run from the command line at "about 28 min"; it took 6 s. Runs of a
    model more than ten times larger or smaller are left out; the estimate is nominal, and says so."""
    model = tiny_model("gpt2", n_layers=2, n_heads=2)
    first = estimate_run(model, "relp", n_tokens=15, n_budgets=4)
    size = int(first.model.split("p-")[0])
    calibration.record("cpu", "relp", first.flops, 400.0, model=f"{size * 3000}p-10342e")
    calibration.record("cpu", "eap", first.flops, 400.0, model=f"{size // 3000 or 1}p-110e")
    alone = estimate_run(model, "relp", n_tokens=15, n_budgets=4)
    assert alone.seconds == pytest.approx(first.seconds) and "nominal" in alone.priced
    calibration.record("cpu", "eap", first.flops, 4.0, model=f"{size * 5}p-110e")  # within ten times
    near = estimate_run(model, "relp", n_tokens=15, n_budgets=4)
    assert near.seconds == pytest.approx(4.0) and "of other models on this machine" in near.priced
