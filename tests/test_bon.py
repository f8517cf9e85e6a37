"""The Best-of-N family against ground truth: scores recomputed by the registry's scorers one pair
at a time, candidates re-evaluated by a separate Evaluator, hand-built iBoN/BoN-CSM cases, and
the paper's NFS/NDF contrast on constructed numbers."""

import json
import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from circuitviz.bench.toy_models import IOI_TASK, planted_model, tiny_model
from circuitviz.core.curves import Baseline, ndf, nfs
from circuitviz.core.graph import GraphSpec, prune, top_n
from circuitviz.core.results import CircuitResult
from circuitviz.core.tasks import PromptTask, TaskError, prepare_task
from circuitviz.details.query import variant_circuit
from circuitviz.measure.evaluate import Evaluator, curves_of_tasks
from circuitviz.methods import get_method
from circuitviz.methods.base import GRADIENT_SETUP_PASSES
from circuitviz.methods.bon import QueryCircuitConfig
from circuitviz.methods.scoring import pair_scores
from circuitviz.query.variants import (
    csm_circuit,
    csm_matrices,
    csm_order,
    edge_matrix,
    edge_vector,
    ibon_circuit,
    parse_anchor_budgets,
)
from circuitviz.services.store import ResultStore

# paraphrases for the tiny models' word vocabulary: two of the prompt's length, one longer
TINY_PAIRS = "\n".join(
    [
        "When John and Mary went to the store , John gave a drink to\tWhen Bob and Alice went to the store , Carl gave a drink to",
        "When Mary and John went to the park , John gave a ball to\tWhen Alice and Bob went to the park , Carl gave a ball to",
        "When Mary and John went to the store at the park , John gave a drink to\t"
        "When Alice and Bob went to the store at the park , Carl gave a drink to",
    ]
)
BUDGETS = [4, 8, 16, 32, 64]


def config(**values):
    base = {"paraphrase_source": "file", "paraphrases": TINY_PAIRS, "include_mismatched": True, "ig_steps": 5}
    return QueryCircuitConfig(**{**base, **values})


def run(model, method, task=IOI_TASK, budgets=BUDGETS, store=None, **values):
    values.setdefault("cache_scores", store is not None)
    return get_method(method).run_on(model, task, config(**values), budgets=budgets, store=store)


def registry_scores(model, result, method="eap-ig", steps=5):
    """Each candidate's score matrix computed alone by the registered scorer."""
    pairs = [result.details.pairs[i] for i in result.details.candidates]
    chosen = get_method(method)
    settings = {"ig_steps": steps} if method == "eap-ig" else {}
    return [
        chosen.run_on(
            model,
            PromptTask(p["clean"], p["corrupted"], p["answer"], tuple(p["foils"])),
            chosen.make_config(settings),
            budgets=[1],
        ).scores
        for p in pairs
    ]


@pytest.fixture(scope="module", params=["gpt2", "gemma"])
def tiny(request):
    return tiny_model(request.param, seed=0)


@pytest.fixture(scope="module")
def planted():
    return planted_model(seed=1)


@pytest.fixture(scope="module")
def tiny_bon(tiny):
    return run(tiny, "bon")


# ----- scores ----------------------------------------------------------------------------------
def test_batched_scores_equal_the_registry_scorer_pair_by_pair(tiny, tiny_bon):
    """Pairs of equal length share forward/backward batches; each matrix must be what eap-ig
    computes for that pair alone (the third paraphrase is longer: a group of its own)."""
    assert len(tiny_bon.details.candidates) == 4
    lengths = {p["n_tokens"] for p in tiny_bon.details.pairs}
    assert len(lengths) == 2
    expected = registry_scores(tiny, tiny_bon)
    spec = tiny_bon.graph
    single = edge_matrix(spec, tiny_bon.details.edge_scores["single"])
    assert torch.allclose(single, expected[0], rtol=1e-5, atol=1e-7)
    tasks = [
        prepare_task(tiny, PromptTask(p["clean"], p["corrupted"], p["answer"], tuple(p["foils"])))
        for p in tiny_bon.details.pairs
    ]
    method = get_method("eap-ig")
    batched = pair_scores(tiny, spec, tasks, method, method.make_config({"ig_steps": 5}))
    for mine, theirs in zip(batched, expected):
        assert torch.allclose(mine, theirs, rtol=1e-5, atol=1e-7)
        assert mine.abs().sum() > 0


def test_other_base_scorers_are_reached_through_the_registry(tiny):
    result = run(tiny, "average", base_method="eap", budgets=[8])
    expected = torch.stack(registry_scores(tiny, result, method="eap")).mean(0)
    assert torch.allclose(result.scores, expected, rtol=1e-5, atol=1e-7)
    with pytest.raises(ValueError, match="must be a method that scores edges"):
        run(tiny, "bon", base_method="bon")


def test_scores_are_stored_once_and_reused_by_every_method(tiny, tmp_path):
    store = ResultStore(tmp_path)
    first = run(tiny, "bon", store=store, budgets=[8, 16])
    assert first.details.counts["scored_pairs"] == 4 and first.details.counts["scores_from_store"] == 0
    again = run(tiny, "bon-csm", store=store, budgets=[5, 40])
    assert (again.details.counts["scored_pairs"], again.details.counts["scores_from_store"]) == (0, 4)
    assert again.details.edge_scores["single"] == first.details.edge_scores["single"]
    # circuit evaluations are memoised too: the same request again evaluates nothing
    repeat = run(tiny, "bon-csm", store=store, budgets=[5, 40])
    assert repeat.details.counts["circuits_evaluated"] == 0
    assert [p.to_dict() for p in repeat.curve] == [p.to_dict() for p in again.curve]
    other_steps = run(tiny, "bon", store=store, budgets=[8], ig_steps=6)
    assert other_steps.details.counts["scored_pairs"] == 4
    # the calibration records the work each run did: no scoring for pairs read back, no evaluation
    # for circuits whose metrics were (a rerun priced whole made the next estimates 4x too short)
    spec, n_tokens = first.graph, len(first.tokens["clean"])
    base = get_method("eap-ig").estimate(get_method("eap-ig").make_config({"ig_steps": 5}), spec, n_tokens, 0)
    checks = 12.0 * 3  # PARAPHRASE_CHECK_PASSES for each of the file's three pairs
    bon, csm = get_method("bon"), get_method("bon-csm")
    n = len(first.curve)  # its budgets, 8 and 16 (again's: 5 and 40)
    # 4 pairs, each scored over its own tokens (the longest pair's paraphrase is longer than the prompt)
    lengths = sum(first.details.pairs[i]["n_tokens"] for i in first.details.candidates) / n_tokens
    assert lengths > 4
    # the 4 pairs' IG steps as one batched gradient pass: one set-up over their mean length, not one
    # a pair (2026-12-07; its chunks are counted where the estimate prices the run, not here)
    scoring = (base.passes - GRADIENT_SETUP_PASSES) * lengths + GRADIENT_SETUP_PASSES * lengths / 4
    assert bon.passes_done(first) == pytest.approx(scoring + 2.0 * n * 4 + n + checks)
    assert csm.passes_done(again) == pytest.approx(2.0 * n * 4 + n + checks)  # every pair read back
    assert csm.passes_done(repeat) == pytest.approx(n + checks)  # and every circuit's metrics too
    # the estimate prices the file's three pairs, not n_paraphrases' default nine
    assert bon.as_config(first.config).n_paraphrases == 9
    priced = bon.estimate_for_task(tiny, IOI_TASK, bon.as_config(first.config), spec, n_tokens, n)
    assert bon.passes_done(first) == pytest.approx(priced.passes)
    assert priced.n_paraphrases == 3  # and says three beside the estimate (it said nine)
    assert len(list((tmp_path / "scores").glob("*.pt"))) == 8
    assert len(list((tmp_path / "circuit-metrics").glob("*.pt"))) == 1


# ----- Best-of-N -------------------------------------------------------------------------------
@pytest.mark.parametrize("which", ["tiny", "planted"])
def test_bon_is_at_least_single_by_construction_and_both_curves_are_measured_on_q(which, tiny, planted):
    """BoN >= single holds by construction, not by measurement: candidate 0 is the prompt's own
    circuit (single) and the winner is the argmax over candidates evaluated on q, so it is
    checked here as that structure. What is not a tautology: single's curve is eap-ig's own
    top-N evaluated on q (a separate run), and every BoN point is what a fresh Evaluator on the
    original prompt measures for the winner's circuit (not its score on the paraphrase)."""
    model, task = (tiny, IOI_TASK) if which == "tiny" else (planted.model, planted.task)
    budgets = [2, 4, 8, 12, 16, 24, 32, 48]
    result = run(model, "bon", task=task, budgets=budgets)
    curves = result.details.curves
    assert result.details.candidates[0] == 0 and result.details.pairs[0]["clean"] == task.clean
    for entry, own_single in zip(result.details.per_budget, curves["single"]):
        points = entry["candidates"]
        assert points[0]["ndf"] == own_single["ndf"] and points[0]["n_edges"] == own_single["n_edges"]
        assert points[entry["winner"]]["ndf"] == max(p["ndf"] for p in points)
    single = get_method("eap-ig").run_on(
        model, task, get_method("eap-ig").make_config({"ig_steps": 5}), budgets=budgets
    )
    for own_single, alone in zip(curves["single"], single.curve):
        assert own_single["ndf"] == pytest.approx(alone.ndf, abs=1e-9)
        assert own_single["n_edges"] == alone.n_edges
    evaluator = Evaluator(model, result.graph, prepare_task(model, task))
    fresh = curves_of_tasks([evaluator], torch.stack([result.circuits[b] for b in budgets])[None], budgets)[0]
    assert [p["ndf"] for p in curves["bon"]] == pytest.approx([p.ndf for p in fresh], abs=1e-9)
    assert [p.ndf for p in result.curve] == pytest.approx([p.ndf for p in fresh], abs=1e-9)


def test_candidates_are_evaluated_on_the_original_prompt_and_the_best_wins(tiny, tiny_bon):
    """Brute force: top-N of each candidate's own registry scores, evaluated with a fresh Evaluator
    on q; BoN's winner is the argmax and its circuit is that candidate's."""
    spec = tiny_bon.graph
    evaluator = Evaluator(tiny, spec, prepare_task(tiny, IOI_TASK))
    expected = registry_scores(tiny, tiny_bon)
    for entry in tiny_bon.details.per_budget:
        budget = entry["budget"]
        masks = torch.stack([prune(spec, top_n(spec, s, budget)) for s in expected])
        values = evaluator.metrics(masks)
        ndfs = [ndf(float(v), evaluator.baseline) for v in values]
        assert [c["ndf"] for c in entry["candidates"]] == pytest.approx(ndfs, abs=1e-9)
        assert [c["n_edges"] for c in entry["candidates"]] == [int(m.sum()) for m in masks]
        assert ndfs[entry["winner"]] == pytest.approx(max(ndfs), abs=1e-12)
        assert torch.equal(tiny_bon.circuits[budget], masks[entry["winner"]])
        assert tiny_bon.details.bon_circuits[str(budget)] == spec.edge_names_of(masks[entry["winner"]])


def test_bon_with_the_first_k_candidates_runs_from_single_to_bon(tiny_bon):
    """k = 0 is the prompt alone (single's point), the last k is BoN's own curve, and more
    candidates never lower it; the values are candidates' measured points, not a model rerun."""
    details = tiny_bon.details
    last = len(details.candidates) - 1
    single = {p["budget"]: p["ndf"] for p in details.curves["single"]}
    bon = {p["budget"]: p["ndf"] for p in details.curves["bon"]}
    first = details.bon_with_first(0)
    assert first and all(first[b] == pytest.approx(single[b], abs=1e-12) for b in first)
    assert details.bon_with_first(last) == pytest.approx({b: bon[b] for b in first}, abs=1e-12)
    for k in range(1, last + 1):
        before, now = details.bon_with_first(k - 1), details.bon_with_first(k)
        assert all(now[b] >= before[b] for b in now)
        for entry in details.per_budget:
            assert now[entry["budget"]] in [c["ndf"] for c in entry["candidates"][: k + 1]]
    assert details.bon_with_first(last + 5) == details.bon_with_first(last)
    with pytest.raises(ValueError, match="at least the prompt"):
        details.bon_with_first(-1)


def test_averaging_is_top_n_of_the_mean_matrix(tiny):
    result = run(tiny, "average")
    mean = torch.stack(registry_scores(tiny, result)).mean(0)
    spec = result.graph
    for budget in BUDGETS:
        assert torch.equal(result.circuits[budget], prune(spec, top_n(spec, mean, budget)))
        assert torch.equal(variant_circuit(result, budget, "average"), result.circuits[budget])
    assert torch.allclose(result.scores, mean, rtol=1e-5, atol=1e-7)


def test_ibon_at_an_anchor_budget_is_that_bon_circuit(tiny, tiny_bon):
    ibon = run(tiny, "ibon")
    assert ibon.details.anchor_budgets == [4, 16, 64]
    for anchor in ibon.details.anchor_budgets:
        assert torch.equal(ibon.circuits[anchor], tiny_bon.circuits[anchor])
        assert torch.equal(variant_circuit(tiny_bon, anchor, "ibon"), tiny_bon.circuits[anchor])
    for budget, lower in ((8, 4), (32, 16)):  # between anchors: the lower anchor's circuit is kept whole
        assert bool((tiny_bon.circuits[lower] <= ibon.circuits[budget]).all())
        assert torch.equal(variant_circuit(ibon, budget, "ibon"), ibon.circuits[budget])
        assert int(ibon.circuits[budget].sum()) <= budget


def test_bon_csm_circuits_are_nested(tiny):
    result = run(tiny, "bon-csm", budgets=[3, 6, 10, 20, 30, 50, 80])
    budgets = sorted(result.circuits)
    for small, large in zip(budgets, budgets[1:]):
        assert bool((result.circuits[small] <= result.circuits[large]).all())
    previous = None
    for budget in range(0, result.graph.n_edges + 5, 7):
        circuit = variant_circuit(result, budget, "bon-csm")
        if budget in result.circuits:
            assert torch.equal(circuit, result.circuits[budget])
        if previous is not None:
            assert bool((previous <= circuit).all())
        previous = circuit


def test_only_what_a_variant_needs_without_compare(tiny, tiny_bon):
    single = run(tiny, "single", compare=False)
    assert len(single.details.pairs) == 1 and set(single.details.curves) == {"single"}
    ibon = run(tiny, "ibon", compare=False)
    assert set(ibon.details.curves) == {"ibon", "bon"}  # BoN only at its anchors
    assert [p["budget"] for p in ibon.details.curves["bon"]] == ibon.details.anchor_budgets
    assert [e["budget"] for e in ibon.details.per_budget] == ibon.details.anchor_budgets
    assert [p["ndf"] for p in tiny_bon.details.curves["ibon"]] == pytest.approx([p.ndf for p in ibon.curve])


# ----- iBoN and BoN-CSM on hand-built circuits ---------------------------------------------------
SPEC = GraphSpec(n_layers=2, n_heads=1)


def _mask(*names):
    return SPEC.mask_from_edge_names(names)


def _scores(values: dict):
    matrix = torch.zeros(SPEC.n_forward, SPEC.n_backward)
    for name, value in values.items():
        matrix[SPEC.edge_position(name)] = value
    return matrix


E_SMALL = _mask("input->a0.h0<q>", "a0.h0->logits")
E_LARGE = _mask("input->a0.h0<q>", "input->m0", "m0->logits", "input->logits", "a0.h0->logits")
W_SMALL = _scores({"input->a0.h0<q>": 1.0, "a0.h0->logits": -2.0, "input->m1": 9.0})
W_LARGE = _scores({"input->m0": 3.0, "m0->logits": -4.0, "input->logits": 0.5, "input->a1.h0<v>": 7.0})


def test_ibon_by_hand():
    circuits, scores = {2: E_SMALL, 5: E_LARGE}, {2: W_SMALL, 5: W_LARGE}
    names = lambda mask: set(SPEC.edge_names_of(mask))  # noqa: E731
    assert torch.equal(ibon_circuit(circuits, scores, 2, SPEC), E_SMALL)
    # between anchors: E_small plus E_large's best new edges by the large winner's |score|
    three = ibon_circuit(circuits, scores, 3, SPEC, prune_dead=False)
    assert names(three) == names(E_SMALL) | {"m0->logits"}
    four = ibon_circuit(circuits, scores, 4, SPEC, prune_dead=False)
    assert names(four) == names(E_SMALL) | {"m0->logits", "input->m0"}
    # below the smallest anchor: the best edges of that anchor's circuit
    one = ibon_circuit(circuits, scores, 1, SPEC, prune_dead=False)
    assert names(one) == {"a0.h0->logits"}
    # past the largest: the largest circuit, then its winner's ranking over all edges
    six = ibon_circuit(circuits, scores, 6, SPEC, prune_dead=False)
    assert names(six) == names(E_LARGE) | {"input->a1.h0<v>"}
    # pruned by default: a0.h0->logits alone has no input, so nothing survives at budget 1
    assert not ibon_circuit(circuits, scores, 1, SPEC).any()
    # the spec can be inferred from a sequential graph's shapes
    assert torch.equal(ibon_circuit(circuits, scores, 4, prune_dead=False), four)


def test_bon_csm_by_hand():
    circuits, scores = {2: E_SMALL, 5: E_LARGE}, {2: W_SMALL, 5: W_LARGE}
    csm_scores, tiers = csm_matrices(circuits, scores, SPEC)
    at = lambda matrix, name: matrix[SPEC.edge_position(name)].item()  # noqa: E731
    assert at(tiers, "input->a0.h0<q>") == 0 and at(csm_scores, "input->a0.h0<q>") == 1.0
    assert at(tiers, "a0.h0->logits") == 0 and at(csm_scores, "a0.h0->logits") == -2.0
    assert at(tiers, "m0->logits") == 1 and at(csm_scores, "m0->logits") == -4.0
    assert at(tiers, "input->m1") == 2 and at(csm_scores, "input->m1") == 0.0  # not in W_LARGE
    assert at(tiers, "input->a1.h0<v>") == 2 and at(csm_scores, "input->a1.h0<v>") == 7.0
    order = csm_order(csm_scores, tiers, SPEC)
    forward, backward = (t.tolist() for t in SPEC.edge_index)
    flat_names = {f * SPEC.n_backward + b: name for name, f, b in zip(SPEC.edge_names, forward, backward)}
    ranked = [flat_names[int(p)] for p in order[:6]]
    assert ranked == [
        "a0.h0->logits",
        "input->a0.h0<q>",
        "m0->logits",
        "input->m0",
        "input->logits",
        "input->a1.h0<v>",
    ]
    assert len(order) == SPEC.n_edges
    for budget in range(SPEC.n_edges + 1):
        assert int(csm_circuit(csm_scores, tiers, budget, SPEC, prune_dead=False).sum()) == budget


def test_vectors_and_anchors():
    vector = edge_vector(SPEC, W_LARGE)
    assert len(vector) == SPEC.n_edges and torch.equal(edge_matrix(SPEC, vector), W_LARGE)
    assert parse_anchor_budgets("", [10, 20, 30, 40]) == [10, 30, 40]
    assert parse_anchor_budgets("", [10]) == [10]
    assert parse_anchor_budgets("20, 40", [10, 20, 30, 40]) == [20, 40]
    with pytest.raises(ValueError, match="not one of the budgets"):
        parse_anchor_budgets("25", [10, 20])
    with pytest.raises(ValueError, match="not a whole number"):
        parse_anchor_budgets("x", [10])
    with pytest.raises(ValueError, match="no model graph"):
        ibon_circuit({3: torch.zeros(4, 4, dtype=torch.bool)}, torch.zeros(4, 4), 2)


# ----- NFS and NDF (the paper's contrast) ------------------------------------------------------
def test_ndf_on_the_papers_mmlu_marketing_numbers():
    """Query Circuits Table 1: three MMLU Marketing items with NFS 2.15, 1.32, -1.57 have NDF
    0.00, 0.68, 0.00. NDF = 1 - min(|1 - NFS|, 1), so any baseline with those NFS reproduces them."""
    baseline = Baseline(clean=2.0, corrupted=1.0)
    for expected_nfs, expected_ndf in [(2.15, 0.0), (1.32, 0.68), (-1.57, 0.0)]:
        circuit = baseline.corrupted + expected_nfs * (baseline.clean - baseline.corrupted)
        assert nfs(circuit, baseline) == pytest.approx(expected_nfs)
        assert ndf(circuit, baseline) == pytest.approx(expected_ndf, abs=1e-9)


def test_overshooting_the_clean_metric_gives_nfs_above_one_and_ndf_below_one():
    baseline = Baseline(clean=3.0, corrupted=1.0)
    assert nfs(4.0, baseline) == 1.5 and ndf(4.0, baseline) == 0.5
    assert nfs(2.0, baseline) == 0.5 and ndf(2.0, baseline) == 0.5  # symmetric around L(M(q))
    assert ndf(3.0, baseline) == 1.0 and ndf(10.0, baseline) == 0.0
    near = Baseline(clean=1.0, corrupted=0.999)  # L(M(q)) close to L(M(q'))
    assert abs(nfs(0.5, near)) > 100 and ndf(0.5, near) == 0.0
    assert 0.0 <= ndf(0.9995, near) <= 1.0


@given(
    st.floats(-50, 50, allow_nan=False),
    st.floats(-50, 50, allow_nan=False),
    st.floats(-200, 200, allow_nan=False),
)
def test_ndf_is_bounded_symmetric_and_tied_to_nfs(clean, corrupted, circuit):
    baseline = Baseline(clean, corrupted)
    value = ndf(circuit, baseline)
    assert 0.0 <= value <= 1.0
    assert value == pytest.approx(ndf(2 * clean - circuit, baseline), abs=1e-9)
    if abs(clean - corrupted) > 1e-6:
        assert value == pytest.approx(1 - min(abs(1 - nfs(circuit, baseline)), 1), abs=1e-6)


# ----- the stored result ----------------------------------------------------------------------
def test_the_result_is_plain_data_the_app_can_use(tiny_bon, tmp_path):
    text = json.dumps(tiny_bon.to_eap_json())
    assert "query_circuits_version" in text
    path = tmp_path / "result.pt"
    torch.save(tiny_bon.to_state(), path)
    loaded = CircuitResult.from_state(torch.load(path, weights_only=True))
    for variant in ("single", "average", "ibon", "bon-csm"):
        for budget in (5, 16, 50):
            assert torch.equal(
                variant_circuit(loaded, budget, variant), variant_circuit(tiny_bon, budget, variant)
            )
    assert torch.equal(variant_circuit(loaded, 16, "bon"), tiny_bon.circuits[16])
    with pytest.raises(ValueError, match="needs every candidate evaluated"):
        variant_circuit(loaded, 17, "bon")
    extra = tiny_bon.details
    assert set(extra.curves) == {"single", "average", "bon", "ibon", "bon-csm"}
    assert [e["budget"] for e in extra.shared] == BUDGETS
    for entry, shared in zip(extra.per_budget, extra.shared):
        assert shared["winner"] == entry["winner"] and len(shared["jaccard_with_winner"]) == 4
        assert shared["set_sizes"] == [c["n_edges"] for c in entry["candidates"]]
    for pair in extra.pairs:
        assert {"clean", "corrupted", "source", "model_answer", "answer_matches", "reason"} <= set(pair)


def test_reference_circuit_overlap(planted):
    spec = GraphSpec.from_model(planted.model)
    reference = "\n".join(spec.edge_names_of(planted.true_edges))
    result = run(planted.model, "bon", task=planted.task, budgets=[8, 16], reference=reference)
    assert result.details.reference_edges == int(planted.true_edges.sum())
    for entry in result.details.shared:
        winner = result.circuits[entry["budget"]]
        shared = int((winner & planted.true_edges).sum())
        assert entry["reference"]["winner"]["shared"] == shared
        assert entry["reference"]["winner"]["recall"] == pytest.approx(shared / int(planted.true_edges.sum()))


def test_user_errors_are_one_sentence(tiny):
    with pytest.raises(
        TaskError, match="for example 'When Alice and Bob went to the store , Carl gave a drink to'"
    ):
        run(tiny, "bon", task=PromptTask(IOI_TASK.clean, "", " Mary", (" John",)))
    with pytest.raises(ValueError, match="paraphrase_source must be one of"):
        QueryCircuitConfig(paraphrase_source="email")
    with pytest.raises(ValueError, match="Anchor budget 5 is not one of the budgets"):
        run(tiny, "ibon", anchor_budgets="5")
    result = run(tiny, "bon", paraphrases="The cat sat on the mat\tThe cat sat on the", budgets=[8])
    assert result.details.candidates == [0] and "equals single" in result.details.notes[-1]
    assert "left out" in result.details.notes[0]


def test_nan_free_json_curves(tiny_bon):
    for curve in tiny_bon.details.curves.values():
        for point in curve:
            assert all(v is None or not (isinstance(v, float) and math.isnan(v)) for v in point.values())


# ----- the embedded model ---------------------------------------------------------------------
@pytest.mark.slow
def test_bon_on_the_embedded_model_with_template_paraphrases(embedded_model, tmp_path):
    from circuitviz.query.families import EXAMPLE_TASKS

    task = EXAMPLE_TASKS["ioi"]
    values = {"n_paraphrases": 2, "ig_steps": 2, "anchor_budgets": "100,1000"}
    result = get_method("bon").run_on(
        embedded_model,
        task,
        QueryCircuitConfig(**values),
        budgets=[100, 300, 1000],
        store=ResultStore(tmp_path),
    )
    extra = result.details
    assert result.graph.n_edges == 10342
    assert len(extra.candidates) >= 2
    assert all(p["n_tokens"] == p["corrupted_n_tokens"] for p in extra.pairs)
    # BoN >= single holds by construction (candidate 0 is the prompt); what is measured: the
    # BoN circuits' NDF on the original prompt, as a fresh Evaluator finds it
    evaluator = Evaluator(embedded_model, result.graph, prepare_task(embedded_model, task))
    fresh = curves_of_tasks(
        [evaluator], torch.stack([result.circuits[b] for b in result.budgets])[None], result.budgets
    )[0]
    assert [p["ndf"] for p in extra.curves["bon"]] == pytest.approx([p.ndf for p in fresh], abs=1e-4)
    assert torch.equal(variant_circuit(result, 1000, "ibon"), result.circuits[1000])
    smaller, larger = variant_circuit(result, 250, "bon-csm"), variant_circuit(result, 700, "bon-csm")
    assert bool((smaller <= larger).all()) and int(larger.sum()) <= 700


# ----- the command line -----------------------------------------------------------------------
def test_cli_discover_prints_candidates_winners_curves_and_shared_subcircuits(
    tmp_path, monkeypatch, capsys, tiny
):
    from circuitviz.entry import cli

    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(cli, "_load", lambda args: (tiny, "tiny", 0.0))
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text(TINY_PAIRS, encoding="utf-8")
    spec = GraphSpec.from_model(tiny)
    reference = tmp_path / "reference.txt"
    reference.write_text("\n".join(spec.edge_names[:12]), encoding="utf-8")
    task = [
        "--prompt",
        IOI_TASK.clean,
        "--corrupted",
        IOI_TASK.corrupted,
        "--answer",
        " Mary",
        "--foil",
        " John",
    ]
    out = tmp_path / "bon.json"
    code = cli.main(
        [
            "discover",
            *task,
            "--method",
            "bon",
            "--paraphrases",
            str(pairs),
            "--budgets",
            "4,8,16",
            "--ig-steps",
            "3",
        ]
        + ["--reference", str(reference), "--set", "include_mismatched=true", "--out", str(out)]
    )
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "each candidate's NDF on the original prompt (* the winner)" in printed
    assert printed.count("*") >= 3  # a winner per budget
    assert "NDF on the original prompt by variant:" in printed and "bon-csm" in printed
    assert "budget 16:" in printed and "edges common to all 4 candidates" in printed
    assert "reference circuit (12 edges)" in printed
    data = json.loads(out.read_text())
    assert data["method"] == "bon" and data["config"]["paraphrase_source"] == "file"
    assert len(data["details"]["pairs"]) == 4 and data["details"]["reference_edges"] == 12


def test_cli_paraphrase_errors_are_one_sentence(tmp_path, monkeypatch, capsys, tiny):
    from circuitviz.entry import cli

    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setattr(cli, "_load", lambda args: (tiny, "tiny", 0.0))
    task = [
        "--prompt",
        IOI_TASK.clean,
        "--corrupted",
        IOI_TASK.corrupted,
        "--answer",
        " Mary",
        "--foil",
        " John",
    ]
    assert (
        cli.main(["discover", *task, "--method", "bon", "--paraphrase-source", "openai", "--budgets", "4"])
        == 2
    )
    assert "error: No OpenAI API key is set" in capsys.readouterr().err
    assert cli.main(["discover", *task, "--method", "eap-ig", "--n-paraphrases", "3", "--budgets", "4"]) == 2
    assert "eap-ig has no setting n_paraphrases" in capsys.readouterr().err
    missing = tmp_path / "missing.jsonl"
    assert (
        cli.main(["discover", *task, "--method", "bon", "--paraphrases", str(missing), "--budgets", "4"]) == 2
    )
    assert "Cannot read the paraphrase file" in capsys.readouterr().err


def test_every_variants_curve_carries_its_circuits_necessity(tiny):
    """Best-of-N's curves come from its pool (NDF only); the necessity beside them is each kept
    circuit's complement evaluated as any method's curve evaluates it."""
    from circuitviz.measure.evaluate import Evaluator, curves_of_tasks

    result = run(tiny, "bon")
    evaluator = Evaluator(tiny, GraphSpec.from_model(tiny), prepare_task(tiny, IOI_TASK))
    budgets = [point.budget for point in result.curve]
    (expected,) = curves_of_tasks(
        [evaluator], torch.stack([result.circuit(b) for b in budgets])[None], budgets
    )
    for point, reference in zip(result.curve, expected):
        assert point.necessity == pytest.approx(reference.necessity, abs=1e-9)
    assert all(0.0 <= point.necessity <= 1.0 for point in result.curve)


def test_the_pages_defaults_note_counts_its_budgets_in_words():
    """On a graph of fewer edges than the page's smallest budget the note read '1 budgets'."""
    from circuitviz.ui.bon import page_budgets, page_defaults_note

    assert page_budgets(46) == [46]
    assert "per pair, 1 budget, 9 paraphrases" in page_defaults_note(46)
    assert "per pair, 6 budgets, 9 paraphrases" in page_defaults_note(10_342)
