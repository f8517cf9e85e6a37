"""The Dataset page's run form priced a batch on SmolLM2-135M with "No batch here has measured
eap-ig yet" (a batch on Gemma-3-270M had: the count is per model, the sentence named none) and
"Loading smollm2-135m took 1 s last time, before the first prompt": the app's own load, its imports
long done, while a batch starts a process of its own (Chromium, 2026-12-06). Both say whose now."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")


def test_the_form_names_the_model_unmeasured_and_whose_load_it_quotes(tmp_path, monkeypatch):
    from circuitviz.entry import calibration
    from circuitviz.ui import batch_form

    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    calibration.record_load("smollm2-135m", 0.563)
    assert batch_form.measured_cost("smollm2-135m", ["eap-ig"], 4, "ioi") == (
        "No batch here has measured eap-ig on smollm2-135m yet: the batch shows its own estimate of the "
        "time left once its first group of prompts ends. This server's last load of smollm2-135m took 1 s; "
        "the batch loads it again in a process of its own, Python's start and imports first, before its "
        "first prompt."
    )
