"""Best-of-N's candidates at any budget, below the UI (``query.candidates``, ``api.bon_candidates``):
rebuilt from the stored score matrices and evaluated now, they reproduce the run's own figures
where the run evaluated them; elsewhere the winner is the most faithful candidate."""

from __future__ import annotations

import math

import pytest

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.entry.api import bon_candidate_masks, bon_candidates, discover, evaluate_circuits
from circuitviz.query.candidates import evaluated_candidates, ranked_candidates
from circuitviz.services.store import ResultStore


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    store = ResultStore(tmp_path_factory.mktemp("store"))
    model = tiny_model("gpt2", n_layers=2, n_heads=2)
    result, _ = discover(
        model,
        IOI_TASK,
        "bon",
        {"n_paraphrases": 3, "ig_steps": 1, "compare": False},
        budgets=[5, 10, 20],
        model_id="tiny",
        store=store,
    )
    return model, result, store


def test_rebuilt_candidates_reproduce_the_runs_own_evaluation(run):
    model, result, store = run
    for budget in (5, 10, 20):
        recorded = evaluated_candidates(result, budget)
        assert recorded and sum(row["winner"] for row in recorded) == 1
        assert bon_candidates(model, result, budget, store) == recorded  # the run's own figures
        masks = bon_candidate_masks(model, result, budget, store)
        baseline, points = evaluate_circuits(model, result.task, list(masks.values()), [budget] * len(masks))
        again = ranked_candidates(list(masks), baseline, points)
        assert [row["name"] for row in again] == [row["name"] for row in recorded]
        assert [row["n_edges"] for row in again] == [row["n_edges"] for row in recorded]
        assert [row["winner"] for row in again] == [row["winner"] for row in recorded]
        for ours, theirs in zip(again, recorded):
            assert math.isclose(ours["ndf"], theirs["ndf"], abs_tol=1e-5)


def test_at_a_budget_the_run_did_not_evaluate_the_winner_is_the_most_faithful(run):
    model, result, store = run
    rows = bon_candidates(model, result, 13, store)
    assert evaluated_candidates(result, 13) == [] and len(rows) == len(result.details.candidates)
    (best,) = [row for row in rows if row["winner"]]
    assert best["ndf"] == max(row["ndf"] for row in rows)
    assert all(row["n_edges"] <= 13 for row in rows)


def test_without_stored_scores_only_the_recorded_figures_are_known(run):
    model, result, _ = run
    assert bon_candidate_masks(model, result, 13, None) is None
    assert bon_candidates(model, result, 13, None) == []
    assert bon_candidates(None, result, 10, None) == evaluated_candidates(result, 10)
