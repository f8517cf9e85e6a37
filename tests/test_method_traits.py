"""What a method is lives on its class and is read through the registry's traits, never by name."""

from __future__ import annotations

from circuitviz.methods import available_methods, method_traits, methods_with
from circuitviz.methods.base import ScoringMethod

# the caveats the product wrote by name before the traits (transfer.FITTED_TO_PROMPT)
FITTED = {
    "edge-pruning": "Edge Pruning learns its mask on this prompt",
    "bon": "Best-of-N keeps the candidate of highest NDF on this prompt",
    "ibon": "iBoN keeps, per budget, the candidate of highest NDF on this prompt",
    "bon-csm": "BoN-CSM merges the sub-circuits of highest NDF on this prompt",
    "paraphrase-pruning": "Paraphrase pruning learns its mask on this prompt and a share of its paraphrases",
    # added with ACDC's yardstick row: each removal is judged by the patched circuit on the prompt
    "acdc": "ACDC removes an edge only where the patched circuit's metric on this prompt moves by less than "
    "its threshold",
}


def test_the_fitted_to_the_prompt_caveat_is_each_methods_own():
    for name in available_methods():
        traits = method_traits(name)
        assert traits.fitted_to_prompt == FITTED.get(name)
        assert bool(traits.fitted_note) == (name in FITTED)
    note = method_traits("edge-pruning").fitted_note
    assert (
        note.startswith("Edge Pruning learns its mask")
        and "fitted to the prompt" in note
        and "may flatter it" in note
    )


def test_a_flat_curve_is_explained_for_the_methods_that_can_give_one():
    assert {n for n in available_methods() if method_traits(n).flat_curve_note} == {"acc++", "circuit-lasso"}
    lasso = method_traits("circuit-lasso")
    assert lasso.notes([0.0, 0.0]) == [f"NDF is 0 at every budget: {lasso.flat_curve_note}"]
    # discover said "NDF is 0 at every budget" under a table whose budget 100 read 0.031 (2026-12-07)
    assert lasso.notes([0.0, 0.031, 0.0]) == [
        f"NDF is near 0 at every budget (at most 0.03): {lasso.flat_curve_note}"
    ]
    assert lasso.notes([0.0, 0.4]) == []  # a curve that rises says nothing about flatness
    assert method_traits("eap-ig").notes([0.0, 0.0]) == []
    bon = method_traits("bon")
    assert bon.notes([0.9]) == [bon.fitted_note]


def test_the_other_traits():
    assert methods_with("has_signals_view") == ["acc++"]
    assert methods_with("has_paraphrases_view") == ["bon", "ibon", "bon-csm"]
    assert not method_traits("acc++").needs_corrupted
    # positions: exactly the methods that give position-resolved scores
    resolved = {
        name
        for name, method in available_methods().items()
        if getattr(type(method), "score_positions", ScoringMethod.score_positions)
        is not ScoringMethod.score_positions
    }
    assert methods_with("positions_capable") == sorted(resolved) == ["eap", "eap-ig", "eap-ig-activations"]
    assert (
        not method_traits("edge-pruning").scores_estimate_metric
        and method_traits("eap").scores_estimate_metric
    )
    assert method_traits("ibon").calibration_family == ("single", "average", "bon", "ibon", "bon-csm")
    # the method a page offers when no small circuit is faithful: the one that holds paraphrases out
    assert methods_with("holds_out_paraphrases") == ["paraphrase-pruning"]


def test_a_name_the_registry_does_not_know_has_no_caveats():
    traits = method_traits("a-method-this-install-lacks")
    assert traits.notes([0.0]) == [] and not traits.has_signals_view and traits.label == traits.name


def test_every_method_says_what_its_edge_scores_are():
    """The edge table's "score" column held a learned mask's 0.998 and attribution patching's
    -1.2 under one word: each method now says what its score is, and a method whose scores
    estimate the metric's change says that one, the others something else."""
    for name in available_methods():
        traits = method_traits(name)
        assert len(traits.score_meaning) > 40, name
        says_change = "estimate" in traits.score_meaning and "of the metric's change" in traits.score_meaning
        if name != "atp-star":  # a size with GradDrop (its default), the estimate without
            assert says_change == (traits.scores_estimate_metric and name not in {"exact", "acdc"}), name
    assert "measured by patching" in method_traits("exact").score_meaning
    assert "a size, not the metric's change" in method_traits("atp-star").score_meaning
    for learned in ("edge-pruning", "paraphrase-pruning"):
        assert "relaxed mask (0 to 1)" in method_traits(learned).score_meaning
    assert method_traits("not-a-method").score_meaning == ""


def test_a_method_that_needs_no_corrupted_prompt_says_what_its_figures_use_without_one():
    """The Explore form hides the corrupted box for these and says this sentence instead: each
    must have one (and only these), naming what the curve is measured against."""
    without = {n: method_traits(n).without_corrupted for n in available_methods()}
    needs_none = {n for n in available_methods() if not method_traits(n).needs_corrupted}
    assert (
        {n for n, sentence in without.items() if sentence} == needs_none >= {"flow-routes", "cd-t", "acc++"}
    )
    for name in needs_none:
        sentence = without[name]
        assert sentence.startswith("Without one, ") and sentence.endswith(".") and "necessity" in sentence
    assert "neutral prompt" in without["flow-routes"] and "neutral prompt" in without["cd-t"]
    assert "knocks signals out" in without["acc++"] and "necessity is not measured" in without["acc++"]
