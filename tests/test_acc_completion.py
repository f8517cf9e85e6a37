"""ACC++'s completed circuit on a planted model: patching measures it, the traced one alone reads 0."""

import pytest
import torch

from circuitviz.acc.completion import claimed_mask, completed_scores, completion_edges, traced_nodes
from circuitviz.bench.toy_models import planted_model
from circuitviz.core.graph import GraphSpec
from circuitviz.core.tasks import prepare_task
from circuitviz.details.acc import acc_circuits
from circuitviz.measure.evaluate import Evaluator, curves_of_tasks
from circuitviz.methods import get_method


@pytest.fixture(scope="module")
def planted_run():
    planted = planted_model(seed=0)
    method = get_method("acc++")
    result = method.run_on(planted.model, planted.task, method.make_config({"n_random": 1}), budgets=[5, 10])
    return planted, GraphSpec.from_model(planted.model), result


def test_completed_circuit_has_ndf_above_zero_where_the_traced_one_has_none(planted_run):
    planted, spec, result = planted_run
    full = result.details.full_circuit_budget
    completed = next(point for point in result.curve if point.budget == full)
    assert completed.ndf > 0.05
    traced = result.scores * claimed_mask(spec)
    alone = acc_circuits(spec, traced, [full])[full]
    evaluator = Evaluator(planted.model, spec, prepare_task(planted.model, planted.task))
    (point,) = curves_of_tasks([evaluator], alone[None, None], [full])[0]
    assert point.ndf < completed.ndf  # without value paths the traced heads read the corrupted run
    assert result.details.completion["completion_edges"] > 0


def test_completion_feeds_only_the_traced_nodes_from_the_input_and_each_other():
    spec = GraphSpec.from_model(planted_model(seed=0).model)
    scores = torch.zeros(spec.n_forward, spec.n_backward, device="cpu")
    head = spec.head_forward(1).start  # a1.h0: its query reads a0.h0, it writes to logits
    scores[spec.head_forward(0).start, spec.head_backward(1, "q").start] = 0.4
    scores[head, spec.logits_backward] = 1.0
    nodes = traced_nodes(spec, scores)
    assert spec.forward_names[int(nodes.nonzero()[0])] == "a0.h0"
    added = set(spec.edge_names_of(completion_edges(spec, scores)))
    assert added == {"input->a0.h0<v>", "input->a1.h0<v>", "a0.h0->a1.h0<v>"}
    completed = completed_scores(spec, scores)
    assert float(completed[spec.edge_position("a0.h0->a1.h0<v>")]) == pytest.approx(0.999)
    assert float(completed[spec.edge_position("input->a0.h0<v>")]) == pytest.approx(0.999 * 0.4)
    assert torch.equal(completed * claimed_mask(spec), scores * claimed_mask(spec))  # traced unchanged
