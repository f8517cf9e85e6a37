"""Edge scores that are not numbers stop a run in one sentence (``engine.score_checks``): they
were turned into 0 and the largest float, and the circuit chosen among the other edges unsaid."""

from __future__ import annotations

import math

import pytest
import torch

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.core.graph import GraphSpec
from circuitviz.engine.score_checks import NonFiniteScoresError, require_finite_scores
from circuitviz.methods import get_method


@pytest.fixture(scope="module")
def model():
    return tiny_model("gpt2", seed=0)


def _first_edge(spec: GraphSpec) -> tuple[int, int]:
    forward, backward = torch.nonzero(spec.tensors("cpu").edge_mask, as_tuple=True)
    return int(forward[0]), int(backward[0])


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_score_that_is_not_a_number_stops_the_run_in_one_sentence(model, monkeypatch, value):
    method = get_method("eap")
    spec = GraphSpec.from_model(model)
    real = type(method).score_batch

    def broken(self, contexts, config, progress=None):
        found = real(self, contexts, config, progress)
        scores, details = found[0]
        scores = scores.clone()
        scores[_first_edge(spec)] = value
        return [(scores, details)]

    monkeypatch.setattr(type(method), "score_batch", broken)
    with pytest.raises(NonFiniteScoresError) as raised:
        method.run_on(model, IOI_TASK, budgets=[5])
    said = str(raised.value)
    assert said.startswith(f"eap gave 1 of {spec.n_edges:,} edge scores that are not numbers")
    assert "float64" in said and "--dtype float32" in said  # the tiny model runs in float64
    assert said.count(". ") == 0 and said.endswith(".")
    assert NonFiniteScoresError.said_as == "The run stopped"  # the page does not say "could not start"


def test_off_the_graph_a_nan_is_arithmetic_not_a_score(model):
    spec = GraphSpec.from_model(model)
    mask = spec.tensors("cpu").edge_mask
    scores = torch.zeros(mask.shape, dtype=torch.float32, device="cpu")
    off = torch.nonzero(~mask)
    assert len(off), "the graph has entries off its edge mask"
    scores[tuple(off[0])] = math.nan
    require_finite_scores(scores, spec, "eap", model)  # no error
    scores[_first_edge(spec)] = math.inf
    with pytest.raises(NonFiniteScoresError, match="1 of"):
        require_finite_scores(scores, spec, "eap", model)


def test_a_float32_model_is_not_told_to_load_in_float32():
    float32 = tiny_model("gpt2", seed=0).to(torch.float32)
    spec = GraphSpec.from_model(float32)
    scores = torch.zeros(spec.tensors("cpu").edge_mask.shape, dtype=torch.float32, device="cpu")
    scores[_first_edge(spec)] = math.nan
    with pytest.raises(NonFiniteScoresError) as raised:
        require_finite_scores(scores, spec, "eap-ig", float32)
    assert "float32" in str(raised.value) and "--dtype float32" not in str(raised.value)


def test_a_circuit_over_positions_stops_on_a_unit_score_that_is_not_a_number(model, monkeypatch):
    method = get_method("eap")
    real = type(method).score_positions

    def broken(self, ctx, config):
        scores = real(self, ctx, config).clone()
        forward, backward = _first_edge(ctx.spec)
        scores[forward, backward, -1] = math.nan
        return scores

    monkeypatch.setattr(type(method), "score_positions", broken)
    with pytest.raises(NonFiniteScoresError, match=r"eap gave 1 of [\d,]+ \(edge, position\) unit scores"):
        method.run_on(model, IOI_TASK, {"positions": True}, budgets=[5])
