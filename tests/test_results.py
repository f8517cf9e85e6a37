"""Results: EAP-IG JSON out and in, plain edge lists, the store's atomic and corrupt-file paths."""

import dataclasses
import json

import pytest
import torch

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.core.graph import GraphError, GraphSpec
from circuitviz.core.results import CircuitResult, load_circuit, parse_circuit
from circuitviz.entry.api import discover, parse_budgets
from circuitviz.services.store import ResultStore


@pytest.fixture(scope="module")
def result():
    model = tiny_model("gpt2")
    return discover(model, IOI_TASK, "eap-ig", {"ig_steps": 5}, budgets=[3, 10, 30])[0]


def test_eap_ig_json_has_every_node_and_edge_with_eap_ig_names(result, tmp_path):
    data = result.to_eap_json(budget=10)
    spec = result.graph
    assert set(data) >= {"cfg", "nodes", "edges", "task", "method", "config", "curve", "timings", "model_id"}
    assert data["cfg"] == {"n_layers": 2, "n_heads": 2, "parallel_attn_mlp": False, "d_model": 16}
    assert "parts of scoring_s" in data["timings_note"]  # the phases nest: summed, they count twice
    assert data["summary_note"].startswith("CPR and CMD are areas under the curve")
    assert data["score_meaning"] == ""  # this layer knows no method: its callers say what "score" is
    assert result.to_eap_json(10, score_meaning="a mask")["score_meaning"] == "a mask"
    assert list(data["edges"]) == list(spec.edge_names)
    assert set(data["nodes"]) == set(spec.node_names)
    kept = [name for name, edge in data["edges"].items() if edge["in_graph"]]
    assert kept == spec.edge_names_of(result.circuit(10))
    # every node touched by a kept edge is marked in the graph
    for name in kept:
        source, target = name.split("->")
        assert data["nodes"][source]["in_graph"]
        assert data["nodes"][target.split("<")[0]]["in_graph"]
    path = tmp_path / "circuit.json"
    path.write_text(json.dumps(data))
    loaded = load_circuit(path, spec)
    assert torch.equal(loaded.mask, result.circuit(10))
    assert torch.allclose(loaded.scores, result.scores)


def test_plain_edge_lists_load(result):
    spec = result.graph
    names = spec.edge_names_of(result.circuit(3))
    assert spec.edge_names_of(parse_circuit(json.dumps(names), spec).mask) == names
    assert spec.edge_names_of(parse_circuit("\n".join(["# a comment", *names]), spec).mask) == names


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("", "is empty"),
        ("{not json", "not valid JSON"),
        ('{"nodes": {}}', "has no 'edges'"),
        ('{"cfg": {"n_layers": 12, "n_heads": 12}, "nodes": {}, "edges": {}}', "12 layers and 12 heads"),
        ('["input->a9.h0<q>"]', "no node 'a9.h0'"),
        ("[1, 2]", "edge names as strings"),
    ],
)
def test_bad_circuit_files_say_why(text, fragment):
    with pytest.raises(GraphError, match=fragment):
        parse_circuit(text, GraphSpec(n_layers=2, n_heads=2))


def test_state_round_trip(result):
    again = CircuitResult.from_state(result.to_state())
    assert torch.equal(again.scores, result.scores)
    assert again.curve == result.curve and again.task == result.task
    assert again.summary() == pytest.approx(result.summary(), nan_ok=True)
    assert result.backend == again.backend == result.to_eap_json()["backend"] == "hooked"


def test_the_backend_is_kept_and_a_result_stored_before_it_was_named_reads_as_hooked(result):
    bridged = dataclasses.replace(result, backend="bridge")
    assert CircuitResult.from_state(bridged.to_state()).backend == "bridge"
    assert bridged.to_eap_json()["backend"] == "bridge"
    state = result.to_state()
    del state["backend"]
    assert CircuitResult.from_state(state).backend == "hooked"


def test_store_computes_once_and_survives_a_corrupt_entry(tmp_path):
    model = tiny_model("gpt2")
    store = ResultStore(tmp_path)
    first, cached = discover(model, IOI_TASK, "eap", None, [5], store=store)
    assert not cached
    second, cached = discover(model, IOI_TASK, "eap", None, [5], store=store)
    assert cached and torch.equal(first.scores, second.scores)
    # another budget or config is another entry
    assert not discover(model, IOI_TASK, "eap", None, [6], store=store)[1]
    entries = list((tmp_path / "result").glob("*.pt"))
    assert len(entries) == 2 and not list((tmp_path / "result").glob(".*.tmp"))
    for entry in entries:
        entry.write_bytes(entry.read_bytes()[:100])  # truncated as by a killed write
    third, cached = discover(model, IOI_TASK, "eap", None, [5], store=store)
    assert not cached and torch.equal(third.scores, first.scores)
    assert store.notices and "set aside" in store.notices[0]
    assert list((tmp_path / "corrupt").glob("*.pt"))


def test_parse_budgets():
    assert parse_budgets("50, 100,50,0") == [0, 50, 100]
    for bad, fragment in [("ten", "not a whole number"), ("-3", "negative"), (",", "No budgets")]:
        with pytest.raises(ValueError, match=fragment):
            parse_budgets(bad)


def test_budgets_beyond_the_edge_count_are_clipped_not_padded(result):
    model = tiny_model("gpt2")
    big = discover(model, IOI_TASK, "eap", None, [0, 10**6])[0]
    assert [p.n_edges for p in big.curve][0] == 0
    assert big.curve[1].n_edges <= big.graph.n_edges
    assert big.curve[1].metric == pytest.approx(big.baseline.clean, abs=1e-6)
    assert big.curve[0].metric == pytest.approx(big.baseline.corrupted, abs=1e-6)


# ----- results are data: the circuits a run chose are stored, compactly, and read back -------------
def test_a_result_holds_the_circuit_of_every_budget_it_evaluated(result, monkeypatch):
    """The run stores what it computed; reading a circuit back recomputes no top-N and no prune."""
    import circuitviz.core.results as results

    assert sorted(result.circuits) == result.budgets == [3, 10, 30]
    for point in result.curve:
        assert int(result.circuits[point.budget].sum()) == point.n_edges
    monkeypatch.setattr(results, "top_n", lambda *a, **k: pytest.fail("a stored circuit was recomputed"))
    monkeypatch.setattr(results, "prune", lambda *a, **k: pytest.fail("a stored circuit was recomputed"))
    again = CircuitResult.from_state(result.to_state())
    for budget in result.budgets:
        assert torch.equal(again.circuit(budget), result.circuit(budget))


def test_circuits_are_stored_as_one_bit_per_edge(result):
    state = result.to_state()
    assert state["format_version"] == 3
    bits = state["circuits"]["bits"]
    assert bits.dtype == torch.uint8 and tuple(bits.shape) == (3, (result.graph.n_edges + 7) // 8)
    assert state["circuits"]["budgets"] == [3, 10, 30]


def test_a_budget_the_run_did_not_evaluate_is_derived_once_from_the_scores(result, monkeypatch):
    import circuitviz.core.results as results
    from circuitviz.core.graph import prune, top_n

    fresh = CircuitResult.from_state(result.to_state())
    calls = []
    monkeypatch.setattr(results, "top_n", lambda *a: calls.append(1) or top_n(*a))
    first = fresh.circuit(7)
    assert torch.equal(fresh.circuit(7), first) and calls == [1]  # kept, not derived again
    assert torch.equal(first, prune(fresh.graph, top_n(fresh.graph, fresh.scores, 7)))
    assert fresh.point(7) is None  # a result never runs the model


def test_format_2_results_still_read_their_circuits_derived_once(result):
    """A format-2 entry kept only the circuits a method chose itself (none for a scoring method)."""
    state = result.to_state()
    state.update(format_version=2, circuits={})
    older = CircuitResult.from_state(state)
    assert sorted(older.circuits) == result.budgets
    for budget in result.budgets:
        assert torch.equal(older.circuit(budget), result.circuit(budget))


def test_exported_json_carries_every_circuit_and_reads_back(result):
    from circuitviz.core.results import circuits_from_json

    data = json.loads(json.dumps(result.to_eap_json()))
    assert data["circuitviz_version"] == 3 and data["circuits"]["encoding"] == "bits-base64"
    read = circuits_from_json(result.graph, data)
    assert sorted(read) == result.budgets
    for budget in result.budgets:
        assert torch.equal(read[budget], result.circuit(budget))
    # an export of circuitviz 2 named each budget's edges
    older = {"circuits": {"10": result.graph.edge_names_of(result.circuit(10))}}
    assert torch.equal(circuits_from_json(result.graph, older)[10], result.circuit(10))


def test_a_stored_result_loads_without_the_engine_acc_or_lasso(result, tmp_path):
    """A result is plain data: importing the result type and the store, and reading back stored
    results of every family with details (their circuits at a budget the run did not evaluate
    included), loads no engine, ACC++ or CircuitLasso module. Counted in a fresh interpreter."""
    import dataclasses
    import subprocess
    import sys
    from pathlib import Path

    from circuitviz.details.kinds import BUILT_IN

    store = ResultStore(tmp_path)
    scores = result.scores.clone()
    scores[scores != 0] = torch.linspace(
        1.0, 2.0, int((scores != 0).sum()), device="cpu"
    )  # ranked, all found
    keys = ["plain"]
    store.put("plain", result)
    for details in BUILT_IN:
        key = details.kind.replace("+", "p")
        store.put(key, dataclasses.replace(result, scores=scores, details=details(), _derived={}))
        keys.append(key)
    code = (
        "import sys\n"
        "from circuitviz.services.store import ResultStore\n"
        f"store = ResultStore({str(tmp_path)!r})\n"
        f"for key in {keys!r}:\n"
        "    loaded = store.get(key)\n"
        "    assert loaded is not None, key\n"
        "    loaded.circuit(7), loaded.summary()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[:2] in (\n"
        "    ['circuitviz', 'engine'], ['circuitviz', 'acc'], ['circuitviz', 'lasso'], ['circuitviz', 'evaluate'])))\n"
    )
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


def test_a_circuit_file_is_evaluated_on_the_circuits_its_method_drew(result):
    """`circuitviz evaluate` reads each budget's circuit from the file: a learned mask or a chosen
    candidate is not the top-N of the scores the file exports. Where a budget has no stored
    circuit (an EAP-IG JSON from elsewhere), the top-N of the scores stands in, and the note says so."""
    from circuitviz.core.graph import top_n
    from circuitviz.core.results import LoadedCircuit, circuits_json
    from circuitviz.entry.api import file_circuits

    spec = result.graph
    data = json.loads(json.dumps(result.to_eap_json(budget=10)))
    # a method that drew another circuit at 10 than the top 10 of its scores: the next 10 edges
    drawn = top_n(spec, result.scores, 20) & ~top_n(spec, result.scores, 10)
    assert not torch.equal(drawn, result.circuit(10))
    data["circuits"] = circuits_json(spec, {3: result.circuit(3), 10: drawn})
    loaded = load_circuit_text(data, spec)
    circuits, budgets, rows = file_circuits(spec, loaded)
    assert budgets == [int(loaded.mask.sum()), 3, 10, 30]
    assert torch.equal(circuits[1], result.circuit(3)) and torch.equal(circuits[2], drawn)
    assert torch.equal(circuits[3], top_n(spec, result.scores, 30))  # none stored at 30
    assert "drew at each budget" in rows and "top-N of the file's scores at 30" in rows
    # a plain edge list has no curve: its own circuit alone
    plain = LoadedCircuit(mask=result.circuit(3), scores=None, source={})
    assert file_circuits(spec, plain) == ([plain.mask], [int(plain.mask.sum())], "")


def load_circuit_text(data: dict, spec):
    return parse_circuit(json.dumps(data), spec)


def test_the_apps_circuit_json_says_what_its_scores_are(result):
    from circuitviz.methods import method_traits
    from circuitviz.ui.downloads import circuit_json

    assert circuit_json(result, 10)["score_meaning"] == method_traits("eap-ig").score_meaning != ""
    assert circuit_json(result, 7)["score_meaning"] != ""  # a budget the run did not evaluate


def test_a_one_budget_summary_says_it_is_one_point_not_an_area():
    """``discover --budgets 103`` wrote CPR and CMD, the areas under the faithfulness curve, for a
    curve of one point: that point's NFS/NDF and |1 - it|, read as areas with nothing said."""
    model = tiny_model("gpt2")
    one = discover(model, IOI_TASK, "eap", {}, budgets=[10])[0]
    assert len(one.curve) == 1
    data = one.to_eap_json(budget=10)
    assert data["summary_note"].startswith("one point on the curve")
    assert data["summary"]["cpr_ndf"] == pytest.approx(one.curve[0].ndf)
