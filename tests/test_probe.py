"""The forward pass that prices a model's first run (circuitviz/entry/probe.py)."""

from __future__ import annotations

import json

from circuitviz.entry import calibration, probe


def test_a_model_without_a_rate_is_timed_once_and_its_first_estimate_priced_from_it(
    words, tmp_path, monkeypatch
):
    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    assert not calibration.measured("cpu", probe.rate_key(words))
    assert probe.probe_unmeasured(words)
    (pass_,) = json.loads(calibration.calibration_path().read_text())["cpu"][calibration.PROBE]
    assert pass_["model"] == probe.rate_key(words) and pass_["seconds"] > 0
    assert pass_["flops"] == 2.0 * sum(p.numel() for p in words.parameters()) * probe.PROBE_BATCH * len(
        words.to_tokens(probe.EXAMPLE_TEXT)[0]
    )
    assert not probe.probe_unmeasured(words)  # measured now: not timed again
    assert len(json.loads(calibration.calibration_path().read_text())["cpu"][calibration.PROBE]) == 1
    rate = calibration.rate("cpu", "eap", 2e10, model=probe.rate_key(words))
    assert rate.source == "probe" and "forward pass timed on this machine" in rate.describe("eap")


def test_a_model_the_pass_cannot_run_keeps_the_nominal_price(words, tmp_path, monkeypatch):
    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))

    def fails(model):
        raise RuntimeError("no forward pass here")

    monkeypatch.setattr(probe, "probe_rate", fails)
    assert not probe.probe_unmeasured(words)
    assert not calibration.measured("cpu")


def test_a_pass_quiet_only_in_the_sample_before_it_is_scaled_as_busy(words, tmp_path, monkeypatch):
    """The 0.1 s sample before the timed passes flickers on a shared machine: other work that
    kept the cores busy over the passes (``during``) is kept with them, and the pass is scaled to
    a quiet machine rather than priced as a quiet one."""
    from circuitviz.entry import cpu_share

    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(cpu_share, "others_busy", lambda *_, **__: 0.0)
    monkeypatch.setattr(cpu_share, "others_between", lambda *_: 1.5)
    probe.probe_rate(words)
    (pass_,) = json.loads(calibration.calibration_path().read_text())["cpu"][calibration.PROBE]
    assert (pass_["others"], pass_["during"]) == (0.0, 1.5)
    rate = calibration.rate("cpu", "eap", 2e10, model=probe.rate_key(words))
    assert rate.source == "probe" and rate.machine == "scaled"


def test_a_pass_beside_other_work_is_scaled_by_the_cpu_it_used(words, tmp_path, monkeypatch):
    """A busy pass was scaled by the others' share of the cores (the load average once they are
    full: load 6 on two cores made any pass four times a quiet one), the rule runs left for their
    own CPU seconds (``calibration._at_quiet``); the pass keeps its CPU seconds and threads too and
    is scaled by them."""
    import pytest

    from circuitviz.entry import cpu_share

    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(cpu_share, "others_busy", lambda *_, **__: 2.0)
    monkeypatch.setattr(cpu_share, "load_average", lambda: 6.0)
    probe.probe_rate(words)
    (pass_,) = json.loads(calibration.calibration_path().read_text())["cpu"][calibration.PROBE]
    import torch

    assert pass_["threads"] == pass_["default_threads"] == torch.get_num_threads()
    assert 0 < pass_["cpu"]
    rate = calibration.rate("cpu", "eap", 2e10, model=probe.rate_key(words))
    at_quiet = min(pass_["seconds"], pass_["cpu"] / pass_["threads"])
    assert rate.source == "probe" and rate.machine == "scaled"
    assert rate.flops_per_second == pytest.approx(pass_["flops"] / at_quiet)
