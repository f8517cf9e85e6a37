"""CD-T's decomposition says how far it has gone: on a CPU one chunk holds every source, and
discover's line stood at 'score 0.0%' for the whole decomposition (minutes for SmolLM2-135M's 301
sources on a busy machine, 2026-12-07) until the phase ended."""

from __future__ import annotations

import pytest
import torch

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.core.graph import GraphSpec
from circuitviz.core.tasks import prepare_task
from circuitviz.measure.evaluate import Evaluator
from circuitviz.methods.cdt import decompose


def _setup():
    model = tiny_model("llama", seed=1)
    spec = GraphSpec.from_model(model)
    prepared = prepare_task(model, IOI_TASK)
    return model, spec, prepared, Evaluator(model, spec, prepared).clean_writers[0]


def test_the_decomposition_reports_its_progress_inside_the_pass():
    model, spec, prepared, writers = _setup()
    said: list[tuple[str, float]] = []
    found = decompose(model, spec, prepared, writers, progress=lambda phase, done: said.append((phase, done)))
    assert {phase for phase, _ in said} == {"score"}
    done = [fraction for _, fraction in said]
    assert done == sorted(done) and 0.0 <= done[0] and done[-1] <= 1.0
    assert any(0.0 < fraction < 1.0 for fraction in done)  # not only where the phase begins and ends
    assert len(done) >= spec.n_layers  # a report before each block of the pass
    quiet = decompose(model, spec, prepared, writers)  # the report changes nothing it computes
    assert torch.equal(found.relevance, quiet.relevance) and torch.equal(found.shares, quiet.shares)


def test_a_cancelled_run_stops_inside_the_decomposition():
    model, spec, prepared, writers = _setup()

    def cancelled(phase, done):
        raise KeyboardInterrupt("cancelled")

    with pytest.raises(KeyboardInterrupt):
        decompose(model, spec, prepared, writers, progress=cancelled)
