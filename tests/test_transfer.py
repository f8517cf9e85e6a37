"""Held-out transfer: each circuit's NDF on paraphrases its method never used, against a brute-force
recomputation (every paraphrase's clean, corrupted and circuit runs rebuilt by hand on a tiny
Gemma, ``test_exact_norm.hand_patched_metric``), and the paraphrases a method used left out."""

from __future__ import annotations

import pytest
import torch
from test_exact_norm import _gemma_with_spread_post_norms, hand_patched_metric
from test_paraphrase_pruning import PARAPHRASES

from circuitviz.bench.toy_models import IOI_TASK
from circuitviz.core.graph import GraphSpec
from circuitviz.core.tasks import prepare_task
from circuitviz.details.ensemble import EnsembleDetails
from circuitviz.details.paraphrase_pruning import ParaphrasePruningDetails
from circuitviz.details.query import QueryCircuitDetails
from circuitviz.measure import transfer


def _brute_ndf(model, spec, task, circuit) -> float:
    """1 - min(|L(M) - L(C)| / |L(M) - L(M')|, 1) from three runs of the model, none through the
    evaluator: the clean and corrupted logits, and the circuit's hand-patched run."""
    from reference_patching import metric_of

    prepared = prepare_task(model, task)
    with torch.no_grad():
        clean = float(metric_of(model, prepared, model(prepared.clean_tokens))[0])
        corrupted = float(metric_of(model, prepared, model(prepared.corrupted_tokens))[0])
    kept = hand_patched_metric(model, spec, prepared, circuit)
    return 1.0 - min(abs((clean - kept) / (clean - corrupted)), 1.0)


@pytest.fixture
def every_gap_clear(monkeypatch):
    """The tiny random model's corruptions need not lower its metric by the threshold; here each
    paraphrase counts, to test what is measured on it."""
    monkeypatch.setattr(transfer, "gap_problem", lambda *args, **kwargs: None)


def test_held_out_ndf_equals_a_brute_force_recomputation_and_leaves_out_what_was_used(every_gap_clear):
    model = _gemma_with_spread_post_norms(0)
    spec = GraphSpec.from_model(model)
    generator = torch.Generator().manual_seed(0)
    shape = (spec.n_forward, spec.n_backward)
    circuits = {
        name: (torch.rand(shape, generator=generator, dtype=torch.float64, device="cpu") < share)
        & spec.edge_mask
        for name, share in (("sparse", 0.3), ("dense", 0.8))
    }
    circuits["full"] = spec.edge_mask.clone()
    circuits["empty"] = torch.zeros_like(spec.edge_mask)
    used = {PARAPHRASES[0].clean, PARAPHRASES[2].clean}
    given = [IOI_TASK, *PARAPHRASES, PARAPHRASES[1]]  # the prompt itself and a repeat are dropped
    found = transfer.held_out_transfer(
        model, IOI_TASK, circuits, seen={"dense": used}, count=3, paraphrases=given
    )
    assert found.paraphrases == len(PARAPHRASES)
    # a circuit whose method used nothing: the first three; "dense" skips the two its method used
    assert found.texts["sparse"] == [p.clean for p in PARAPHRASES[:3]]
    assert found.texts["dense"] == [PARAPHRASES[1].clean, PARAPHRASES[3].clean]
    assert not set(found.texts["dense"]) & used and found.excluded["dense"] == 2
    assert found.note == (  # why "dense" has two: the source's four, less the two its method used
        "Some circuits were measured on 2 held-out paraphrases, not the 3 asked for: the source gave "
        "4 besides the prompt; the method used 2 to fit or select (dense)."
    )
    by_text = {p.clean: p for p in PARAPHRASES}
    for name, circuit in circuits.items():
        expected = [_brute_ndf(model, spec, by_text[text], circuit) for text in found.texts[name]]
        assert found.ndf[name] == pytest.approx(expected, abs=1e-9)
    assert found.ndf["full"] == pytest.approx([1.0] * 3) and found.ndf["empty"] == pytest.approx([0.0] * 3)
    assert found.mean("sparse") == pytest.approx(sum(found.ndf["sparse"]) / 3)
    record = transfer.transfer_record(found, {"sparse": 10, "dense": 20}, source="given")
    assert record["budgets"]["20"]["paraphrases"] == found.texts["dense"]
    assert record["budgets"]["20"]["excluded_as_used"] == 2 and record["source"] == "given"


def test_an_invalid_paraphrase_is_skipped_and_the_next_held_out_taken(monkeypatch):
    model = _gemma_with_spread_post_norms(1)
    spec = GraphSpec.from_model(model)
    refused = PARAPHRASES[0].clean
    monkeypatch.setattr(
        transfer, "gap_problem", lambda task, *_, **__: "too small" if task.clean == refused else None
    )
    earlier = [("a pair the caller refused", "its corruption has 2 more tokens")]
    found = transfer.held_out_transfer(
        model, IOI_TASK, {"full": spec.edge_mask}, count=2, paraphrases=PARAPHRASES, left_out=earlier
    )
    assert found.texts["full"] == [p.clean for p in PARAPHRASES[1:3]] and found.valid == 2
    # nothing left out silently: each refused paraphrase is named with its reason, of how many
    total = len(PARAPHRASES) + 1
    assert found.note == (
        f"2 of {total} paraphrases left out, {total - 2} kept: 'a pair the caller refused': its corruption has 2 more "
        f"tokens; {refused!r}: too small."
    )
    # every pair given refused: nothing measured, and the note still says why
    none = transfer.held_out_transfer(model, IOI_TASK, {"full": spec.edge_mask}, count=0, left_out=earlier)
    assert none.ndf == {"full": []} and none.note.startswith("1 of 1 paraphrase left out: 'a pair the")
    # the sentence names the first five; the record keeps every one with its reason
    assert found.left_out == [*earlier, (refused, "too small")]
    many = [(f"pair {i}", f"reason {i}") for i in range(8)]
    lots = transfer.held_out_transfer(model, IOI_TASK, {"full": spec.edge_mask}, count=0, left_out=many)
    assert lots.note.endswith("; and 3 more.") and "pair 7" not in lots.note
    record = transfer.transfer_record(lots, {"full": 10})
    assert record["left_out"] == [{"paraphrase": f"pair {i}", "reason": f"reason {i}"} for i in range(8)]


def test_each_family_names_the_paraphrases_it_fitted_or_selected_on():
    bon = QueryCircuitDetails(pairs=[{"clean": "prompt"}, {"clean": "a"}, {"clean": "b"}])
    assert bon.paraphrases_used() == ["a", "b"]
    assert EnsembleDetails(prompts=["prompt", "c"]).paraphrases_used() == ["c"]
    pruning = ParaphrasePruningDetails(fit=["d"], held_out=["e"])
    assert pruning.paraphrases_used() == ["d"]  # the held-out share was never used

    class Result:
        details = pruning

    assert transfer.paraphrases_used(Result()) == frozenset({"d"})
    assert transfer.paraphrases_used(object()) == frozenset()


def test_a_results_transfer_is_in_its_json_and_its_stored_state(every_gap_clear, monkeypatch):
    from circuitviz.core.results import CircuitResult
    from circuitviz.entry.api import discover, measure_transfer

    model = _gemma_with_spread_post_norms(0)
    monkeypatch.setattr(
        transfer,
        "template_tasks",
        lambda model, task, n, seed, max_tokens, refused=None: (PARAPHRASES[:n], ""),
    )
    result, _ = discover(model, IOI_TASK, "eap", budgets=[5, 20], model_id="tiny")
    record = measure_transfer(model, result, count=2)
    spec = GraphSpec.from_model(model)
    expected = [_brute_ndf(model, spec, task, result.circuit(20)) for task in PARAPHRASES[:2]]
    assert record["budgets"]["20"]["ndf"] == pytest.approx(expected, abs=1e-9)
    assert record["budgets"]["5"]["paraphrases"] == [p.clean for p in PARAPHRASES[:2]]
    assert result.to_eap_json()["transfer"] == record
    assert CircuitResult.from_state(result.to_state()).transfer == record


def test_completeness_equals_hand_patched_halves_of_the_circuit_and_of_the_model():
    from circuitviz.measure.completeness import completeness, random_halves
    from circuitviz.measure.evaluate import Evaluator

    model = _gemma_with_spread_post_norms(1)
    spec = GraphSpec.from_model(model)
    prepared = prepare_task(model, IOI_TASK)
    evaluator = Evaluator(model, spec, prepared)
    generator = torch.Generator().manual_seed(3)
    circuit = (
        torch.rand(spec.n_forward, spec.n_backward, generator=generator, dtype=torch.float64, device="cpu")
        < 0.4
    ) & (spec.edge_mask)
    halves = random_halves(circuit, draws=3, seed=5)
    assert bool((halves <= circuit).all()) and [int(h.sum()) for h in halves] == [int(circuit.sum()) // 2] * 3
    span = abs(evaluator.baseline.clean - evaluator.baseline.corrupted)
    gaps = [
        abs(
            hand_patched_metric(model, spec, prepared, circuit & ~half)
            - hand_patched_metric(model, spec, prepared, spec.edge_mask & ~half)
        )
        for half in halves
    ]
    expected = 1.0 - min(sum(gaps) / 3 / span, 1.0)
    whole = spec.edge_mask.clone()
    found = completeness(evaluator, torch.stack([circuit, whole, torch.zeros_like(whole)]), draws=3, seed=5)
    assert found[0] == pytest.approx(expected, abs=1e-9)
    assert found[1] == pytest.approx(1.0, abs=1e-9)  # the whole model is complete by definition
    assert found[2] != found[2]  # an empty circuit has no half to remove: NaN


def test_the_shortfall_sentence_counts_one_circuits_paraphrases_and_is_silent_when_none_exist(
    every_gap_clear,
):
    """One circuit short of the count: how many were measured and why, in one sentence (here the
    source gave only two, both passing: not "2 passed", which would suggest three failed). No
    paraphrase to check at all (no template family knows the prompt): the source's sentence alone,
    not a second one about checks nothing went through."""
    model = _gemma_with_spread_post_norms(0)
    spec = GraphSpec.from_model(model)
    circuits = {"only": spec.edge_mask.clone()}
    found = transfer.held_out_transfer(model, IOI_TASK, circuits, count=5, paraphrases=PARAPHRASES[:2])
    assert found.note == (
        "Measured on 2 held-out paraphrases, not the 5 asked for: the source gave 2 besides the prompt."
    )
    odd = IOI_TASK.__class__("xyzzy plugh frob", "xyzzy plugh grue", " Mary", (" John",))
    found = transfer.held_out_transfer(model, odd, circuits, count=5)
    assert found.ndf["only"] == [] and "template" in found.note.lower()
    assert "Measured on" not in found.note


def test_the_template_checks_refusals_are_kept_in_the_record_too(every_gap_clear, monkeypatch):
    """A template paraphrase the template check refuses (the model answers otherwise) is counted in
    the template's sentence and kept, with its reason, in ``left_out``: nothing is only a number."""
    from types import SimpleNamespace

    from circuitviz.methods import paraphrase_pairs

    def pair(task, reason=""):
        return SimpleNamespace(clean=task.clean, reason=reason, usable=lambda: not reason, task=lambda: task)

    made = [pair(PARAPHRASES[0]), pair(PARAPHRASES[1], "the model answers ' the' here"), pair(PARAPHRASES[2])]
    monkeypatch.setattr(paraphrase_pairs, "template_paraphrases", lambda *args, **kwargs: made)
    model = _gemma_with_spread_post_norms(0)
    spec = GraphSpec.from_model(model)
    found = transfer.held_out_transfer(model, IOI_TASK, {"only": spec.edge_mask}, count=3)
    assert found.texts["only"] == [PARAPHRASES[0].clean, PARAPHRASES[2].clean]
    assert "2 of the 3 template paraphrases asked for passed the check" in found.note
    assert found.left_out == [(PARAPHRASES[1].clean, "the model answers ' the' here")]
    record = transfer.transfer_record(found, {"only": 10})
    assert record["left_out"] == [
        {"paraphrase": PARAPHRASES[1].clean, "reason": "the model answers ' the' here"}
    ]
    # enough passed for the count asked: the template says nothing, so the note names the refused one
    enough = transfer.held_out_transfer(model, IOI_TASK, {"only": spec.edge_mask}, count=2)
    assert enough.texts["only"] == [PARAPHRASES[0].clean, PARAPHRASES[2].clean]
    assert "passed the check" not in enough.note
    assert f"1 of 3 paraphrases left out, 2 kept: {PARAPHRASES[1].clean!r}: the model answers" in enough.note


def test_the_paraphrases_a_method_used_are_said_when_none_is_short():
    """A Best-of-N circuit measured on 5 of 15 kept paraphrases, 9 of them its own, said only "15
    kept" beside "the mean over 5"."""
    from circuitviz.measure.transfer import Transfer, used_note

    found = Transfer(ndf={"bon": [0.5] * 5}, texts={"bon": ["p"] * 5}, excluded={"bon": 9})
    assert used_note(found) == "Not held out, as used to fit or select: 9 by bon."
    assert used_note(Transfer(ndf={"eap": []}, texts={"eap": []}, excluded={"eap": 0})) == ""


def test_a_transfer_that_measured_nothing_says_so_in_whole_sentences():
    """Explore's button on a prompt no template family knows read "Nothing was measured: The prompt
    matches none ...": the measurement's note is a sentence of its own."""
    from circuitviz.ui.measure_offers import nothing_measured_sentence

    said = nothing_measured_sentence("The prompt matches none of the built-in template families.")
    assert said.startswith(
        "Nothing was measured. The prompt matches none of the built-in template families. "
    )
    assert nothing_measured_sentence(None).startswith(
        "Nothing was measured. No paraphrase of this prompt passed the checks. On the command line"
    )


def test_a_given_pair_that_is_the_prompt_is_said_so_and_not_counted_besides_it(every_gap_clear):
    """A reviewer's file of six pairs, the first the prompt, read "the source gave 6 besides the
    prompt; 5 failed a check", the prompt's pair refused as "it repeats the prompt or an earlier
    paraphrase" (2026-12-07): the pair is named as the prompt itself and counted apart."""
    from circuitviz.query.checks import validate_pairs
    from circuitviz.query.pairs import PROMPT_ITSELF, parse_paraphrases

    model = _gemma_with_spread_post_norms(0)
    first = PARAPHRASES[0]
    text = "\n".join(
        f"{clean}\t{corrupted}"
        for clean, corrupted in [
            (IOI_TASK.clean, IOI_TASK.corrupted),
            (first.clean, first.corrupted),
            (first.clean, first.corrupted),
        ]
    )
    checked = validate_pairs(model, IOI_TASK, parse_paraphrases(text, IOI_TASK))
    assert PROMPT_ITSELF in checked[0].problems and PROMPT_ITSELF == "it repeats the prompt itself"
    assert "it repeats an earlier paraphrase" in checked[2].problems
    assert not any("repeats" in problem for problem in checked[1].problems)
    spec = GraphSpec.from_model(model)
    refused = [(IOI_TASK.clean, PROMPT_ITSELF), (first.clean, "it repeats an earlier paraphrase")]
    found = transfer.held_out_transfer(
        model,
        IOI_TASK,
        {"only": spec.edge_mask},
        count=3,
        paraphrases=[first],
        left_out=refused,
        sought="given",
    )
    assert found.note.endswith(
        "Measured on 1 held-out paraphrase, not the 3 given: the source gave 2 besides the prompt and the "
        "prompt itself; 1 failed a check."
    ), found.note
