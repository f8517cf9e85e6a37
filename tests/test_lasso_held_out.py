"""CircuitLasso regresses on its template paraphrases' token positions, so a measure of transfer
must hold them out: its "NDF on held-out paraphrases (never fitted to or selected on by the
method)" was measured on 5 of the 8 paraphrases it had observed (the Brandenburg Gate prompt on
Gemma-3-270M, 2026-12-07), as the same template draw gave both."""

from __future__ import annotations

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.details.lasso import LassoDetails
from circuitviz.entry.api import discover
from circuitviz.lasso.observations import paraphrase_pairs
from circuitviz.measure.transfer import paraphrases_used


def test_the_paraphrases_it_observed_are_not_held_out():
    model = tiny_model("gpt2")
    result, _ = discover(model, IOI_TASK, "circuit-lasso", config={"n_paraphrases": 4}, budgets=[10])
    observed = [clean for clean, _ in paraphrase_pairs(IOI_TASK, 4, 0)[0]]
    assert len(observed) == 4
    assert result.details.paraphrases == observed, result.details.observations
    assert paraphrases_used(result) == frozenset(observed)  # what held_out_transfer leaves out


def test_a_result_stored_before_reads_none():
    assert LassoDetails().paraphrases_used() == []
    assert LassoDetails(paraphrases=["a b"]).paraphrases_used() == ["a b"]
