"""Paraphrase pruning's opt-in thresholds (``cut`` fill and git, ``methods.mask_thresholds``)
on a tiny Gemma: the default learns what it learned before, a filled mask keeps at most its
budget's edges once pruned, and the git cut is chosen on the prompt and the fit share only."""

from __future__ import annotations

import pytest
import torch

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.core.curves import ndf, necessity
from circuitviz.core.graph import prune
from circuitviz.measure.evaluate import complements
from circuitviz.methods import RunContext, get_method, mask_learning
from circuitviz.methods import mask_thresholds as mt
from circuitviz.methods import paraphrase_pruning as pp
from tests.test_paraphrase_pruning import PARAPHRASES, _Pair


@pytest.fixture
def every_paraphrase_valid(monkeypatch):
    """The tiny random model answers its paraphrases differently, so the checks would refuse them."""
    monkeypatch.setattr(pp, "gather_configured", lambda *args, **kwargs: [_Pair(t) for t in PARAPHRASES])
    monkeypatch.setattr(pp, "gap_problem", lambda *args, **kwargs: None)


def test_the_filled_count_is_the_largest_top_n_that_fits_the_budget_once_pruned():
    spec = RunContext(tiny_model("gemma", seed=0), IOI_TASK).spec
    generator = torch.Generator().manual_seed(3)
    logits = torch.randn(spec.n_edges, generator=generator, device="cpu")  # the generator's device
    for target in (5, 12, 30):
        count = mt.filled_count(spec, logits, target)
        assert count >= target
        assert mt.pruned_size(spec, logits, count) <= target
        assert count == spec.n_edges - 1 or mt.pruned_size(spec, logits, count + 1) > target
        # the top-N circuit is the learning's hard mask (ties in edge order)
        hard, _ = mask_learning.top_counts(logits[None], torch.tensor([count], device=logits.device))
        circuit = mt.top_n_circuits(spec, logits, [count])[0]
        assert int(circuit.sum()) == count == int(hard.sum())
        forward, backward = spec.tensors(logits.device).edge_index
        assert torch.equal(circuit[forward, backward], hard[0].bool())


def test_the_count_cut_is_the_default_and_learns_what_it_learned_before(every_paraphrase_valid):
    model = tiny_model("gemma", seed=2)
    method = get_method("paraphrase-pruning")
    config = method.make_config({"steps": 3})
    assert config.cut == "count" and not mask_learning.Schedule(1, 1.0, 1.0, 0.0).fill
    plain = method.run_on(model, IOI_TASK, config, budgets=[12])
    named = method.run_on(model, IOI_TASK, method.make_config({"steps": 3, "cut": "count"}), budgets=[12])
    assert torch.equal(plain.circuit(12), named.circuit(12)) and torch.equal(plain.scores, named.scores)
    assert plain.details.budgets == named.details.budgets and "cut" not in plain.details.budgets[0]
    with pytest.raises(ValueError, match="cut must be one of"):
        method.make_config({"cut": "median"})


def test_a_filled_mask_keeps_at_most_its_budget_once_pruned_at_every_step(
    every_paraphrase_valid, monkeypatch
):
    """fill: every step's hard mask is the largest top-N whose pruned circuit fits the budget, so
    the circuit kept never exceeds it and the learning ran more than N edges where pruning
    dropped some."""
    model = tiny_model("gemma", seed=0)
    seen: list[list[int]] = []
    counts = mt.filled_counts

    def spy(spec, logits, targets):
        found = counts(spec, logits, targets)
        seen.append(found)
        for row, target, count in zip(logits, targets, found):
            assert mt.pruned_size(spec, row, count) <= target
        return found

    monkeypatch.setattr(mask_learning, "filled_counts", spy)
    method = get_method("paraphrase-pruning")
    result = method.run_on(model, IOI_TASK, method.make_config({"steps": 3, "cut": "fill"}), budgets=[12, 30])
    assert len(seen) == 4  # the warm start's step and three more
    assert any(count > budget for step in seen for count, budget in zip(step, [12, 30]))
    for budget in (12, 30):
        assert 0 < int(result.circuit(budget).sum()) <= budget
        assert torch.equal(result.circuit(budget), prune(result.graph, result.circuit(budget)))


def test_the_git_cut_is_chosen_on_the_fit_set_alone(every_paraphrase_valid, monkeypatch):
    """git: the cut is scored on the prompt and the fit share (never a held-out paraphrase), and
    the circuit kept is the candidate whose worse of sufficiency and necessity there is highest,
    as the evaluator measures them."""
    model = tiny_model("gemma", seed=0)
    scored: dict[str, object] = {}
    cut = mt.git_cut

    def spy(spec, evaluators, logits, learned, budget):
        scored["tasks"] = [e.prepared.task.clean for e in evaluators]
        scored["evaluators"] = list(evaluators)
        scored["logits"], scored["learned"] = logits.clone(), learned.clone()
        return cut(spec, evaluators, logits, learned, budget)

    monkeypatch.setattr(pp, "git_cut", spy)
    method = get_method("paraphrase-pruning")
    result = method.run_on(model, IOI_TASK, method.make_config({"steps": 3, "cut": "git"}), budgets=[30])
    details = result.details
    assert scored["tasks"] == [IOI_TASK.clean, *details.fit]
    assert not set(details.held_out) & set(scored["tasks"])
    (row,) = details.budgets
    record = row["cut"]
    circuit = result.circuit(30)
    assert int(circuit.sum()) == record["edges"] <= 30 and record["score"] >= record["learned_score"]
    # the candidates again, each measured on its own by the evaluator
    spec, evaluators = result.graph, scored["evaluators"]
    logits = scored["logits"]
    counts = sorted({mt.filled_count(spec, logits, max(1, round(s * 30))) for s in mt.GIT_SHARES})
    candidates = [scored["learned"], *prune(spec, mt.top_n_circuits(spec, logits, counts))]

    def score(candidate):
        both = torch.stack([candidate, complements(spec, candidate[None])[0]])
        values = [e.metrics(both).tolist() for e in evaluators]
        suff = [ndf(v[0], e.baseline) for e, v in zip(evaluators, values)]
        need = [necessity(v[1], e.baseline) for e, v in zip(evaluators, values)]
        mean = lambda xs: sum(xs[1:]) / len(xs[1:])  # noqa: E731
        return min(min(suff[0], mean(suff)), min(need[0], mean(need)))

    scores = [score(c) for c in candidates]
    assert record["learned_score"] == pytest.approx(scores[0], abs=1e-6)
    assert record["score"] == pytest.approx(max(scores), abs=1e-6)
    assert any(
        torch.equal(circuit.cpu(), c.cpu())
        for c, s in zip(candidates, scores)
        if s == pytest.approx(max(scores), abs=1e-6)
    )


def test_the_git_cut_is_priced_as_each_candidate_and_its_complement_on_every_fitted_task():
    from circuitviz.core.graph import GraphSpec

    spec = GraphSpec.from_model(tiny_model("gemma", seed=0))
    method = get_method("paraphrase-pruning")
    settings = {"n_paraphrases": 4, "held_out": 0.5, "steps": 3}
    fitted = 1 + round(4 * (1 - 0.5))  # the prompt and the paraphrases not held out
    counted = method.estimate(method.make_config(settings), spec, 15, 3).passes
    filled = method.estimate(method.make_config({**settings, "cut": "fill"}), spec, 15, 3).passes
    cut = method.estimate(method.make_config({**settings, "cut": "git"}), spec, 15, 3).passes
    assert filled == counted
    assert cut - counted == pytest.approx(2 * (len(mt.GIT_SHARES) + 1) * fitted * 3)
