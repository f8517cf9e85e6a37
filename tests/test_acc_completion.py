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


def test_a_budget_keeps_a_path_when_every_edge_ties_at_its_weakest_link():
    """The cap made every edge of a path tie at its weakest link (here the one edge into the logits)
    and the tie went to graph order, the input's edges first: SmolLM2-135M's capital of Germany
    kept 123 edges none of which reached the logits, pruned to an empty circuit. Each budget now
    keeps exactly its edges, all on paths into the logits."""
    spec = GraphSpec.from_model(planted_model(seed=0).model)
    scores = torch.zeros(spec.n_forward, spec.n_backward, device="cpu")
    head0, head1 = spec.head_forward(0).start, spec.head_forward(1).start
    scores[head0, spec.head_backward(1, "q").start] = 0.8  # a0.h0 -> a1.h0<q>
    scores[head1, spec.logits_backward] = 0.1  # the weakest link: every path ends on it
    completed = completed_scores(spec, scores)
    found = int(((completed != 0) & spec.edge_mask).sum())
    circuits = acc_circuits(spec, completed, range(1, found + 1))
    assert "a1.h0->logits" in spec.edge_names_of(circuits[1])
    assert [int(circuits[budget].sum()) for budget in range(1, found + 1)] == list(range(1, found + 1))
