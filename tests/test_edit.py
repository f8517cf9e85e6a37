"""Editing a circuit and measuring it: the mask an edit gives (against a by-hand edge list), what
an untrusted edit keeps, and the edited circuit's NDF and necessity against the evaluation the
command line runs (``api.evaluate_circuits``) and, on the embedded model, the CLI's own output.
"""

import re

import pytest
import torch

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.core.graph import GraphSpec, top_n
from circuitviz.entry import cli
from circuitviz.entry.api import evaluate_circuits
from circuitviz.measure.edit import MAX_ITEMS, CircuitEdit, edited_mask, measure, read_edit, reader_node
from circuitviz.models.adapter import adapter_of

SPEC = GraphSpec(n_layers=3, n_heads=2)


def _scores(seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(SPEC.n_forward, SPEC.n_backward, generator=generator) * SPEC.edge_mask


def _edges(mask) -> set[str]:
    return set(SPEC.edge_names_of(mask))


def test_removing_a_node_removes_exactly_its_edges_in_and_out():
    mask = top_n(SPEC, _scores(), 30)
    before = _edges(mask)
    node = next(name.split("->")[0] for name in sorted(before) if name.startswith("a1"))
    after = _edges(edited_mask(SPEC, mask, CircuitEdit().with_node_removed(node)))
    by_hand = {e for e in before if e.split("->")[0] != node and reader_node(e.split("->")[1]) != node}
    assert after == by_hand and after != before
    # restoring the node gives the circuit back; removing and restoring an edge too
    edit = CircuitEdit().with_node_removed(node).with_node_restored(node)
    assert _edges(edited_mask(SPEC, mask, edit)) == before
    edge = sorted(before)[0]
    assert _edges(edited_mask(SPEC, mask, CircuitEdit().with_edge_removed(edge))) == before - {edge}
    outside = next(e for e in SPEC.edge_names if e not in before)
    assert _edges(edited_mask(SPEC, mask, CircuitEdit().with_edge_restored(outside))) == before | {outside}


def test_keeping_only_pinned_nodes_keeps_the_edges_between_them_and_the_ends():
    mask = top_n(SPEC, _scores(1), 40)
    pinned = ["a0.h1", "m1", "a2.h0"]
    kept = _edges(edited_mask(SPEC, mask, CircuitEdit().keeping_only(pinned)))
    allowed = set(pinned) | {"input", "logits"}
    by_hand = {
        e for e in _edges(mask) if e.split("->")[0] in allowed and reader_node(e.split("->")[1]) in allowed
    }
    assert kept == by_hand


def test_an_untrusted_edit_keeps_what_the_model_has_and_says_what_it_dropped():
    read = read_edit({"removed_nodes": ["a1.h0", "a99.h7"], "removed_edges": ["x->y"]}, SPEC)
    assert read.edit.removed_nodes == ("a1.h0",) and read.edit.removed_edges == ()
    assert "2 names this model does not have" in read.problem and "'a99.h7'" in read.problem
    huge = read_edit({"keep_only": ["a0.h0"] * (MAX_ITEMS + 1)}, SPEC)
    assert huge.edit.is_empty() and "more than the" in huge.problem
    assert read_edit("nonsense", SPEC).problem and read_edit(None, SPEC).edit.is_empty()
    assert read_edit({"keep_only": "a0.h0"}, SPEC).problem  # not a list


def test_the_edited_circuits_figures_are_the_evaluations_exactly():
    model = tiny_model("gpt2", seed=0)
    spec = adapter_of(model).spec
    generator = torch.Generator().manual_seed(3)
    scores = torch.randn(spec.n_forward, spec.n_backward, generator=generator) * spec.edge_mask
    mask = top_n(spec, scores, 25)
    edited = edited_mask(spec, mask, CircuitEdit().with_node_removed("a1.h0"))
    baseline, point = measure(model, IOI_TASK, edited)
    reference_baseline, (reference,) = evaluate_circuits(model, IOI_TASK, [edited], [int(edited.sum())])
    assert baseline == reference_baseline
    assert point.ndf == reference.ndf and point.necessity == reference.necessity
    assert point.metric == reference.metric and point.n_edges == reference.n_edges
    # a second edit reuses the clean and corrupted runs (same evaluator) and is still exact
    again = edited_mask(spec, mask, CircuitEdit().with_node_removed("m0"))
    _, second = measure(model, IOI_TASK, again)
    _, (expected,) = evaluate_circuits(model, IOI_TASK, [again], [int(again.sum())])
    assert second.ndf == expected.ndf and second.necessity == expected.necessity


@pytest.mark.embedded
def test_the_command_line_prints_the_edited_circuits_ndf(tmp_path, capsys, monkeypatch, embedded_model):
    from circuitviz.core.tasks import PromptTask

    monkeypatch.setattr(cli, "_load", lambda args: (embedded_model, "gemma-3-270m", 0.0))
    task = PromptTask(
        clean="When Mary and John went to the store, John gave a drink to",
        corrupted="When Alice and Bob went to the store, Carl gave a drink to",
        answer=" Mary",
        foils=(" John",),
    )
    spec = adapter_of(embedded_model).spec
    generator = torch.Generator().manual_seed(0)
    scores = torch.randn(spec.n_forward, spec.n_backward, generator=generator) * spec.edge_mask
    mask = top_n(spec, scores, 300)
    node = sorted({e.split("->")[0] for e in spec.edge_names_of(mask)} - {"input"})[0]
    edited = edited_mask(spec, mask, CircuitEdit().with_node_removed(node))
    _, point = measure(embedded_model, task, edited)
    path = tmp_path / "edited.txt"
    path.write_text("\n".join(spec.edge_names_of(edited)))
    args = ["--prompt", task.clean, "--corrupted", task.corrupted, "--answer", " Mary", "--foil", " John"]
    assert cli.main(["evaluate", "--circuit", str(path), *args]) == 0
    printed = capsys.readouterr().out.splitlines()
    row = [line for line in printed if re.match(r"\s*in_graph\s+\d+\s", line)][0]  # the file's circuit
    printed_ndf, printed_necessity = row.split()[-2:]
    assert printed_ndf == f"{point.ndf:.3f}" and printed_necessity == f"{point.necessity:.3f}"
