"""The embedded Gemma-3-270M: the IOI example works and the graph reproduces it exactly."""

import pytest
import torch

from circuitviz.core.graph import GraphSpec
from circuitviz.core.tasks import PromptTask, prepare_task
from circuitviz.measure.evaluate import Evaluator

IOI = PromptTask(
    clean="When Mary and John went to the store, John gave a drink to",
    corrupted="When Alice and Bob went to the store, Carl gave a drink to",
    answer=" Mary",
    foils=(" John",),
)


def test_ioi_has_a_positive_logit_difference_and_the_full_circuit_reproduces_it(embedded_model):
    spec = GraphSpec.from_model(embedded_model)
    assert spec.n_edges == 10_342
    prepared = prepare_task(embedded_model, IOI)
    assert prepared.n_positions == 15
    evaluator = Evaluator(embedded_model, spec, prepared)
    with torch.no_grad():
        logits = embedded_model(prepared.clean_tokens)[0, -1]
    reference = (logits[prepared.answer_id] - logits[prepared.foil_ids[0]]).item()
    assert evaluator.baseline.clean > 0
    assert evaluator.baseline.clean == pytest.approx(reference, abs=1e-3)
    values = evaluator.metrics(torch.stack([spec.edge_mask, torch.zeros_like(spec.edge_mask)]))
    assert values[0].item() == pytest.approx(evaluator.baseline.clean, abs=1e-3)
    assert values[1].item() == pytest.approx(evaluator.baseline.corrupted, abs=1e-3)
