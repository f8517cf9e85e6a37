"""Position-resolved scores and patching against ground truth on float64 tiny models.

- the position scores summed over positions are today's scores, exactly (eap, eap-ig,
  eap-ig-activations; a late corruption, whose unchanged prefix runs once, included);
- patching one (edge, position) unit equals a brute-force hooked run that adds that writer's
  corrupted-minus-clean output to that reader's input at that position only;
- the full and empty position circuits reproduce the clean and corrupted metrics;
- a batch of position circuits equals each alone; a position run's result says it is one.
"""

from __future__ import annotations

import json

import pytest
import torch
from reference_patching import edge_change, raw_heads

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.core.graph import GraphSpec
from circuitviz.core.tasks import PromptTask, prepare_task
from circuitviz.engine.capture import writers_and_residual
from circuitviz.engine.metric import metric_from_residual
from circuitviz.engine.prefix import final_residual
from circuitviz.engine.sites import reader_sites
from circuitviz.measure.evaluate import Evaluator, curves_of_tasks
from circuitviz.methods import get_method
from circuitviz.models.adapter import adapter_of
from circuitviz.positions.graph import n_units, unit_mask

SHAPES = ["gpt2", "gemma", "llama"]
LATE_CORRUPTION = PromptTask(  # differs from the clean prompt only at the second name
    clean=IOI_TASK.clean,
    corrupted=IOI_TASK.clean.rsplit(" ", 4)[0] + " " + " ".join(["Mary"] + IOI_TASK.clean.split(" ")[-3:]),
    answer=IOI_TASK.answer,
    foils=IOI_TASK.foils,
)


@pytest.fixture(scope="module", params=SHAPES)
def tiny(request):
    return tiny_model(request.param, seed=0)


@pytest.mark.parametrize(
    "method, config", [("eap", {}), ("eap-ig", {"ig_steps": 3}), ("eap-ig-activations", {"ig_steps": 2})]
)
@pytest.mark.parametrize("task", [IOI_TASK, LATE_CORRUPTION], ids=["ioi", "late"])
def test_position_scores_sum_to_todays_scores(tiny, method, config, task):
    chosen = get_method(method)
    from circuitviz.methods import RunContext

    ctx = RunContext(tiny, task)
    agnostic = chosen.score_batch([ctx], chosen.make_config(config))[0][0]
    resolved = chosen.score_positions(ctx, chosen.make_config(config))
    spec = adapter_of(tiny).spec
    assert resolved.shape == (spec.n_forward, spec.n_backward, ctx.prepared().n_positions)
    assert resolved.dtype == torch.float64
    assert torch.allclose(resolved.sum(-1), agnostic, atol=1e-12, rtol=0)
    # the logits read the last position only: nothing scores elsewhere
    assert not resolved[:, spec.logits_backward, :-1].any()
    assert resolved[:, spec.logits_backward, -1].abs().sum() > 0


def brute_force_unit(model, spec: GraphSpec, prepared, forward: int, backward: int, position: int) -> float:
    """The metric with writer ``forward``'s corrupted-minus-clean output added to reader
    ``backward``'s input at ``position`` only, by a hook on that reader and nothing else (a head
    under a post-attention norm: the norm of the layer's clean heads with this one corrupted,
    minus the layer's clean output, ``reference_patching.edge_change``)."""
    tokens = torch.cat([prepared.clean_tokens, prepared.corrupted_tokens])
    writers, _ = writers_and_residual(model, spec, tokens)  # [2, pos, n_forward, d_model]
    change = writers[1, position, forward] - writers[0, position, forward]  # [d_model]
    name = spec.forward_names[forward]
    if name.startswith("a"):
        raw = (
            raw_heads(model, spec, prepared.clean_tokens),
            raw_heads(model, spec, prepared.corrupted_tokens),
        )
        change = edge_change(
            model, spec, {name: writers[0, :, forward]}, {name: writers[1, :, forward]}, name, raw
        )
        change = change[position]
    name, readers = next(
        (name, readers)
        for name, _, readers in reader_sites(spec)
        if (readers.start <= backward < readers.stop if isinstance(readers, slice) else readers == backward)
    )
    head = backward - readers.start if isinstance(readers, slice) else None

    def hook(x, hook):  # a head input [batch, pos, n_heads, d_model], else [batch, pos, d_model]
        x = x.clone()
        if head is None:
            x[:, position] += change
        else:
            x[:, position, head] += change
        return x

    residual = final_residual(model, prepared.clean_tokens, [(name, hook)])
    return float(metric_from_residual(model, prepared, residual)[0])


def test_patching_one_unit_equals_a_hooked_run_at_that_position_only(tiny):
    spec = adapter_of(tiny).spec
    prepared = prepare_task(tiny, IOI_TASK)
    evaluator = Evaluator(tiny, spec, prepared)
    n_positions = prepared.n_positions
    units = unit_mask(spec, n_positions)
    picks = [
        (0, spec.head_backward(1, "v").start, 2),  # the embedding at position 2 into a value
        (spec.head_forward(0).start, spec.head_backward(1, "k").start + 1, 3),  # a head into a key
        (spec.mlp_forward(0), spec.mlp_backward(1), n_positions - 1),  # MLP to MLP at the end
        (spec.mlp_forward(spec.n_layers - 1), spec.logits_backward, n_positions - 1),  # into the logits
        (0, spec.head_backward(0, "q").start, n_positions - 1),  # into a query at the last position
    ]
    circuits = []
    for forward, backward, position in picks:
        circuit = units.clone()
        circuit[forward, backward, position] = False  # remove that unit alone
        circuits.append(circuit)
    measured = evaluator.metrics(torch.stack(circuits)).tolist()
    for (forward, backward, position), value in zip(picks, measured):
        expected = brute_force_unit(tiny, spec, prepared, forward, backward, position)
        assert value == pytest.approx(expected, abs=1e-9)
    assert any(abs(value - evaluator.baseline.clean) > 1e-6 for value in measured)  # the patches do something


def test_full_and_empty_position_circuits_are_the_clean_and_corrupted_runs(tiny):
    spec = adapter_of(tiny).spec
    for task in (IOI_TASK, LATE_CORRUPTION):
        prepared = prepare_task(tiny, task)
        evaluator = Evaluator(tiny, spec, prepared)
        units = unit_mask(spec, prepared.n_positions)
        values = evaluator.metrics(torch.stack([units, torch.zeros_like(units)])).tolist()
        assert values[0] == pytest.approx(evaluator.baseline.clean, abs=1e-9)
        assert values[1] == pytest.approx(evaluator.baseline.corrupted, abs=1e-9)
        (curve,) = curves_of_tasks([evaluator], units[None, None], [n_units(spec, prepared.n_positions)])
        assert curve[0].ndf == 1.0 and curve[0].n_edges == n_units(spec, prepared.n_positions)


def test_a_batch_of_position_circuits_equals_each_alone(tiny):
    spec = adapter_of(tiny).spec
    prepared = prepare_task(tiny, LATE_CORRUPTION)
    evaluator = Evaluator(tiny, spec, prepared)
    generator = torch.Generator().manual_seed(3)
    units = unit_mask(spec, prepared.n_positions)
    circuits = (torch.rand(5, *units.shape, generator=generator, device=units.device) < 0.6) & units
    together = evaluator.metrics(circuits)
    alone = torch.cat([evaluator.metrics(c[None]) for c in circuits])
    assert torch.allclose(together, alone, atol=1e-10)


def test_a_position_run_says_so_and_its_edge_scores_are_the_summed_ones(tiny):
    method = get_method("eap-ig")
    result = method.run_on(tiny, IOI_TASK, {"ig_steps": 2, "positions": True}, budgets=[20, 200])
    agnostic = method.run_on(tiny, IOI_TASK, {"ig_steps": 2}, budgets=[20])
    assert result.positions and not agnostic.positions
    assert torch.allclose(result.scores, agnostic.scores, atol=1e-6)
    spec = result.graph
    n_positions = len(result.tokens["clean"])
    assert result.attention.shape == (spec.n_layers, spec.n_heads, n_positions, n_positions)
    rows = result.attention.sum(-1)  # [layers, heads, pos]: each destination's pattern sums to 1
    assert torch.allclose(rows, torch.ones_like(rows), atol=1e-5)
    for point in result.curve:
        circuit = result.position_circuit(point.budget)
        assert point.n_edges == int(circuit.sum()) <= point.budget
    data = json.loads(json.dumps(result.to_eap_json()))
    assert data["positions"] is True and data["config"]["positions"] is True
    # the stored state reads back with its position axis
    from circuitviz.core.results import CircuitResult

    again = CircuitResult.from_state(result.to_state())
    assert torch.equal(again.position_scores, result.position_scores) and again.positions


@pytest.mark.parametrize("name", ["eap", "eap-ig", "eap-ig-activations"])
def test_a_position_run_on_a_simulated_device_equals_the_host(name):
    """Every tensor of a position run is made on its data's device (tests/simulated_device.py
    raises as CUDA does when a host tensor meets a device one), and the results agree."""
    from simulated_device import SimulatedDevice

    from circuitviz.export.neuronpedia import to_neuronpedia
    from circuitviz.positions.present import readable_position_budget, result_attribution_graph

    model = tiny_model("gemma", seed=0)
    method = get_method(name)
    config = method.make_config({"positions": True, **({"ig_steps": 2} if name != "eap" else {})})
    on_host = method.run_on(model, IOI_TASK, config, budgets=(10, 60))
    with SimulatedDevice(model):
        on_device = method.run_on(model, IOI_TASK, config, budgets=(10, 60))
        budget = readable_position_budget(on_device).budget
        to_neuronpedia(result_attribution_graph(on_device, budget))
    assert on_device.position_scores.device.type == "cpu"
    assert torch.allclose(on_device.position_scores, on_host.position_scores, atol=1e-12)
    assert [p.to_dict() for p in on_device.curve] == [p.to_dict() for p in on_host.curve]


def test_batch_runs_with_positions_and_each_row_is_the_prompts_own_position_run(
    tmp_path, monkeypatch, capsys
):
    """``batch --positions``: every prompt runs as ``discover --positions`` would, one by one."""
    from circuitviz.batch.work import ModelSource
    from circuitviz.entry import cli

    tasks = [IOI_TASK, LATE_CORRUPTION]
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join(json.dumps(dict(t.to_dict(), id=f"p{i}")) for i, t in enumerate(tasks)) + "\n")
    model = tiny_model("gpt2", seed=0)
    monkeypatch.setattr(cli, "_batch_source", lambda args: ModelSource("tiny-gpt2-0", factory=lambda: model))
    argv = ["batch", "--dataset", str(path), "--out", str(tmp_path / "out"), "--methods", "eap-ig"]
    argv += ["--ig-steps", "2", "--positions", "--budgets", "10,60", "--store", str(tmp_path / "store")]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert "2 finished" in printed and "positions=True" in printed
    alone = get_method("eap-ig").run_on(model, IOI_TASK, {"ig_steps": 2, "positions": True}, budgets=[10, 60])
    assert alone.positions
    from circuitviz.core.tasks import DEFAULT_MAX_TOKENS
    from circuitviz.entry.api import request_key
    from circuitviz.services.store import ResultStore

    method = get_method("eap-ig")
    config = method.make_config({"ig_steps": 2, "positions": True})
    key = request_key(model, "tiny-gpt2-0", IOI_TASK, "eap-ig", config, [10, 60], DEFAULT_MAX_TOKENS)
    stored = ResultStore(tmp_path / "store").get(key)
    assert stored is not None and stored.positions
    # repr: a figure not measured is NaN, which equals no NaN read back from the store
    assert repr([p.to_dict() for p in stored.curve]) == repr([p.to_dict() for p in alone.curve])


@pytest.mark.parametrize("task", [IOI_TASK, LATE_CORRUPTION], ids=["ioi", "late"])
def test_each_positions_scores_are_the_agnostic_scores_of_that_positions_difference_alone(tiny, task):
    """score(u, v, p) is today's score with every writer's difference zeroed except at p: the
    position-agnostic contraction (checked against re-derivations in test_reference) of one
    position's difference, position by position, so a score cannot land on another position."""
    from circuitviz.engine.gradients import reader_gradients
    from circuitviz.engine.scores import accumulate_scores
    from circuitviz.methods import RunContext

    ctx = RunContext(tiny, task)
    spec, evaluator = ctx.spec, ctx.evaluator
    resolved = get_method("eap").score_positions(ctx, get_method("eap").make_config({}))
    gradients, _ = reader_gradients(tiny, spec, ctx.prepared(), batch=1)
    differences = evaluator.corrupted_writers - evaluator.clean_writers  # [1, pos, n_forward, d_model]
    for position in range(differences.shape[1]):
        alone = torch.zeros_like(differences)
        alone[:, position] = differences[:, position]
        expected = torch.zeros(spec.n_forward, spec.n_backward, dtype=resolved.dtype, device=resolved.device)
        accumulate_scores(spec, expected, gradients, alone)
        assert torch.allclose(resolved[..., position], expected, atol=1e-12, rtol=0), position
