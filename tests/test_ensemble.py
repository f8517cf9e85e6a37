"""The score ensemble against brute-force recomputation: normalisation, averaging, bootstrap stability."""

from __future__ import annotations

import pytest
import torch

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.core.graph import GraphSpec, top_n
from circuitviz.methods import get_method
from circuitviz.methods.ensemble import EnsembleDetails, bootstrap_stability, normalised

BUDGETS = [3, 8, 20, 60]


def _rank_by_hand(values: list[float]) -> list[float]:
    """Each value's place among all (ties sharing the mean of their places) over n - 1."""
    n = len(values)
    out = []
    for v in values:
        below = sum(other < v for other in values)
        equal = sum(other == v for other in values)
        out.append((below + (equal - 1) / 2) / (n - 1) if v > 0 else 0.0)
    return out


def test_rank_and_scale_normalisation_by_hand():
    spec = GraphSpec(n_layers=1, n_heads=2)
    generator = torch.Generator().manual_seed(0)
    scores = torch.randn(spec.n_forward, spec.n_backward, generator=generator, device="cpu").round(decimals=1)
    scores = scores * spec.edge_mask
    scores[0, :4] = 0.0  # edges a member finds no effect on stay at 0
    forward, backward = spec.edge_index
    values = scores[forward, backward].abs().tolist()
    ranked = normalised(spec, scores, "rank")
    assert ranked[forward, backward].tolist() == pytest.approx(_rank_by_hand(values))
    assert float(ranked[~spec.edge_mask].abs().sum()) == 0.0
    scaled = normalised(spec, scores, "scale")
    assert scaled[forward, backward].tolist() == pytest.approx([v / max(values) for v in values])
    batch = torch.stack([scores, 2 * scores])  # a batch normalises each matrix alone
    assert torch.equal(normalised(spec, batch, "rank")[1], ranked)


def test_the_ensemble_is_the_mean_of_its_members_normalised_scores():
    model = tiny_model("gemma", seed=1)
    spec = GraphSpec.from_model(model)
    members = {
        name: get_method(name).run_on(model, IOI_TASK, budgets=BUDGETS).scores for name in ("eap", "eap-ig")
    }
    for how in ("rank", "scale"):
        result = get_method("ensemble").run_on(
            model, IOI_TASK, {"members": "eap,eap-ig", "normalise": how}, budgets=BUDGETS
        )
        expected = (normalised(spec, members["eap"], how) + normalised(spec, members["eap-ig"], how)) / 2
        assert torch.allclose(result.scores, expected, atol=1e-6)
        for budget in BUDGETS:  # circuits are its top-N, pruned and measured like every method's
            assert int(result.circuit(budget).sum()) == result.point(budget).n_edges <= budget
        eap_top = top_n(spec, members["eap"], 8)
        ig_top = top_n(spec, members["eap-ig"], 8)
        jaccard = int((eap_top & ig_top).sum()) / int((eap_top | ig_top).sum())
        assert result.details.agreement["8"] == pytest.approx(jaccard)


def test_one_member_ranked_gives_that_member_s_circuits():
    model = tiny_model("gpt2", seed=0)
    alone = get_method("eap").run_on(model, IOI_TASK, budgets=BUDGETS)
    ensemble = get_method("ensemble").run_on(model, IOI_TASK, {"members": "eap"}, budgets=BUDGETS)
    for budget in BUDGETS:
        assert torch.equal(ensemble.circuit(budget), alone.circuit(budget))
        assert ensemble.point(budget).metric == pytest.approx(alone.point(budget).metric, abs=1e-9)


def test_bootstrap_stability_by_hand():
    spec = GraphSpec(n_layers=2, n_heads=2)
    generator = torch.Generator().manual_seed(5)
    per_prompt = (
        torch.rand(4, spec.n_forward, spec.n_backward, generator=generator, device="cpu") * spec.edge_mask
    )
    budgets = [5, 30]
    stability = bootstrap_stability(spec, per_prompt, budgets, resamples=37, seed=11)
    # the same draws, one resample at a time
    draws = torch.randint(4, (37, 4), generator=torch.Generator().manual_seed(11))
    counts = torch.zeros(len(budgets), spec.n_forward, spec.n_backward, device="cpu")  # beside the spec's
    for draw in draws:
        mean = per_prompt[draw].mean(0)
        for index, budget in enumerate(budgets):
            counts[index] += top_n(spec, mean, budget).float()
    assert torch.allclose(stability, counts / 37, atol=1e-6)
    assert stability.sum(dim=(1, 2)).tolist() == pytest.approx(budgets)  # N edges per resample
    same = bootstrap_stability(spec, per_prompt[:1].expand(4, -1, -1), budgets, resamples=9, seed=0)
    assert torch.equal(same[0].bool(), top_n(spec, per_prompt[0], 5)) and set(same.unique().tolist()) <= {
        0.0,
        1.0,
    }


def test_bootstrap_over_paraphrases_picks_the_stable_edges():
    model = tiny_model("gpt2", seed=0)
    config = {"members": "eap,eap-ig", "n_paraphrases": 3, "resamples": 20}
    result = get_method("ensemble").run_on(model, IOI_TASK, config, budgets=BUDGETS)
    details = result.details
    assert isinstance(details, EnsembleDetails) and details.resamples == 20
    assert details.prompts[0] == IOI_TASK.clean and len(details.prompts) == 4
    for budget in BUDGETS:
        assert int(result.circuit(budget).sum()) == result.point(budget).n_edges <= budget
        entry = details.stability[str(budget)]
        assert 0.0 <= entry["chosen_mean"] <= 1.0 and entry["stable"] >= 0
    assert any("resamples" in line for line in details.report_lines(result))


def test_members_are_checked_in_one_sentence():
    method = get_method("ensemble")
    with pytest.raises(ValueError, match="'acc\\+\\+' cannot be a member"):
        method.make_config({"members": "eap,acc++"})
    with pytest.raises(ValueError, match="'ensemble' cannot be a member"):
        method.make_config({"members": "ensemble"})
    with pytest.raises(ValueError, match="members is empty"):
        method.make_config({"members": " , "})
    with pytest.raises(ValueError, match="normalise must be rank or scale"):
        method.make_config({"normalise": "zscore"})


def test_an_ensemble_can_warm_start_edge_pruning():
    model = tiny_model("llama", seed=0)
    result = get_method("edge-pruning").run_on(
        model, IOI_TASK, {"warm_start": "ensemble", "steps": 5}, budgets=[8, 20]
    )
    assert result.details.warm_start == "ensemble" and result.details.budgets
