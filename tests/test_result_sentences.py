"""Sentences beside a result, checked against what the result holds (an audit found each of these
untrue, misleading or unreadable on the factual prompt): the slider's label of the Best-of-N
baselines, the cause given for a dip in a curve, a circuit that stops growing, a link's budget
the slider lacks, a token of spaces quoted in a message, and an answer that is not the model's
own top token."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("streamlit")

from circuitviz import render  # noqa: E402
from circuitviz.core.curves import Baseline, CurvePoint  # noqa: E402
from circuitviz.core.tasks import PromptTask  # noqa: E402
from circuitviz.details.query import QueryCircuitDetails  # noqa: E402

TASK = PromptTask("The capital of France is", "The capital of Italy is", " Paris", (" the",))
PAIRS = [
    {"index": 0, "clean": "The capital of France is"},
    {"index": 7, "clean": "The capital of France is the city of"},
    {"index": 11, "clean": "France has its capital in"},
]


def _points(*rows):
    return [CurvePoint(budget, kept, 0.0, ndf, ndf) for budget, kept, ndf in rows]


def _mask(*on):
    mask = torch.zeros(8, dtype=torch.bool, device="cpu")
    mask[list(on)] = True
    return mask


class Result:
    """A stand-in result: what the page's sentences read."""

    def __init__(self, method, curve, details=None, circuits=None, scores=None):
        self.method, self.curve, self.details = method, curve, details
        self.circuits = circuits or {}
        self.scores = torch.zeros(8, device="cpu") if scores is None else scores
        self.baseline = Baseline(clean=-0.823, corrupted=-5.673)
        self.task = TASK


def _details(variant: str) -> QueryCircuitDetails:
    # candidates 0, 1, 2 are the pairs 0 (the prompt), 7 and 11; BoN's winner is candidate 2 at
    # budget 100 and candidate 1 at budget 500 (the audit's p11 and p7)
    return QueryCircuitDetails(
        variant=variant,
        pairs=PAIRS,
        candidates=[0, 7, 11],
        budgets=[20, 100, 500],
        anchor_budgets=[20, 100, 500],
        per_budget=[
            {"budget": 20, "winner": 2, "candidates": [{"ndf": 0.5}, {"ndf": 0.6}, {"ndf": 0.69}]},
            {"budget": 100, "winner": 2, "candidates": [{"ndf": 0.8}, {"ndf": 0.9}, {"ndf": 0.999}]},
            {"budget": 500, "winner": 1, "candidates": [{"ndf": 0.66}, {"ndf": 0.784}, {"ndf": 0.7}]},
        ],
        anchor_winners={"20": 2, "100": 2, "500": 1},
    )


DIPPED = _points((20, 10, 0.69), (100, 86, 0.999), (500, 491, 0.784))


# ----- 1. the slider's label says what each variant builds its circuits from ------------------------
@pytest.mark.parametrize(
    "variant, says",
    [
        ("single", "from the prompt's own scores (its top edges by |score|, then pruned)"),
        ("average", "from the scores averaged over the prompt and its paraphrases"),
        ("ibon", "from the Best-of-N circuits at its anchor budgets"),
        ("bon-csm", "from the Best-of-N circuits at its anchor budgets"),
    ],
)
def test_the_any_budget_slider_says_what_the_variant_builds_from(variant, says):
    """Single and average were labelled "builds a circuit at any budget from the Best-of-N
    circuits", though ``variant_circuit`` builds them from their own scores."""
    from circuitviz.methods import method_traits
    from circuitviz.ui.result_view import budget_label

    label = budget_label(Result(variant, DIPPED, _details(variant)), True)
    assert label.startswith(f"edge budget ({method_traits(variant).label} builds a circuit at any budget ")
    assert says in label and label.endswith("a budget the run did not evaluate costs one patched pass)")
    if variant in ("single", "average"):
        assert "Best-of-N" not in label
    assert budget_label(Result("eap-ig", DIPPED), False).startswith("edge budget (moving it redraws")


# ----- 2. a dip's cause is the method's ----------------------------------------------------------
def test_a_dip_under_best_of_n_names_the_winner_at_each_budget():
    """BoN's circuit at 100 and at 500 are different candidates' (p11's and p7's): the note said
    "edges are added by |score|" and counted the prompt's own scores' edges against the answer."""
    from circuitviz.ui.result_view import curve_notes

    circuits = {20: _mask(0), 100: _mask(0, 1, 2), 500: _mask(3, 4, 5, 6)}  # not nested
    scores = torch.tensor([1.0, 2.0, 3.0, -1.0, -2.0, 0.0, 0.0, 0.0], device="cpu")
    (note,) = curve_notes(Result("bon", DIPPED, _details("bon"), circuits, scores))
    assert note.startswith(
        "The curve is not monotone: at 491 edges (budget 500) NDF is 0.78, below 1.00 at 86"
    )
    assert "the most faithful of its 3 candidates' circuits" in note
    assert "the winner at budget 100 is p11 ('France has its capital in'), at budget 500 p7 " in note
    assert "against the answer" not in note and "added by |score|" not in note


def test_a_dip_under_ibon_says_each_budget_is_an_anchors_winner():
    from circuitviz.ui.result_view import curve_notes

    circuits = {20: _mask(0), 100: _mask(0, 1, 2), 500: _mask(3, 4, 5, 6)}
    (note,) = curve_notes(Result("ibon", DIPPED, _details("ibon"), circuits))
    assert "budget 100 is an anchor, won by p11 ('France has its capital in')" in note
    assert "budget 500 is an anchor, won by p7 ('The capital of France is the city of')" in note
    assert "is not the one at budget 100 with edges added" in note and "against the answer" not in note


def test_a_dip_under_bon_csm_says_its_one_order():
    from circuitviz.ui.result_view import curve_notes

    circuits = {20: _mask(0), 100: _mask(0, 1, 2), 500: _mask(0, 1, 2, 3, 4)}  # nested, as BoN-CSM's are
    (note,) = curve_notes(Result("bon-csm", DIPPED, _details("bon-csm"), circuits))
    assert (
        "BoN-CSM adds edges in one order" in note
        and "budget 20, won by p11 ('France has its capital in'); then those" in note
    )
    assert "against the answer" not in note


def test_a_dip_between_circuits_that_are_not_nested_says_so():
    """A method that is not of the Best-of-N family, whose stored circuits show the larger budget
    dropped edges of the smaller one: the note says so, not that edges were added."""
    from circuitviz.ui.result_view import curve_notes

    circuits = {20: _mask(0), 100: _mask(0, 1, 2), 500: _mask(0, 3, 4, 5)}
    (note,) = curve_notes(Result("eap-ig", DIPPED, None, circuits))
    assert (
        "The circuit at budget 500 is not the one at budget 100 with edges added: it leaves out 2 of" in note
    )
    assert "against the answer" not in note


def test_a_dip_between_nested_top_n_circuits_keeps_its_sentence():
    from circuitviz.ui.result_view import curve_notes

    circuits = {20: _mask(0), 100: _mask(0, 1, 2), 500: _mask(0, 1, 2, 3, 4)}
    scores = torch.tensor([-3.0, -2.0, 1.0, 0.5, -0.1, 0.0, 0.0, 0.0], device="cpu")
    (note,) = curve_notes(Result("eap-ig", DIPPED, None, circuits, scores))
    assert "Edges are added by |score| whatever their sign, and by the scores' estimate 2 edges work" in note
    for variant in ("single", "average"):  # top edges by their own scores: the same sentence
        (note,) = curve_notes(Result(variant, DIPPED, _details(variant), circuits, scores))
        assert "Edges are added by |score| whatever their sign" in note


# ----- 3. a circuit that stops growing -----------------------------------------------------------------
ACC_CURVE = _points(
    (20, 20, 0.017), (50, 50, 0.014), (100, 100, 0.006), (196, 196, 0.199), (200, 196, 0.199),
    (500, 196, 0.199), (1000, 196, 0.199), (10342, 196, 0.199),
)  # fmt: skip


def test_a_circuit_that_stops_growing_is_said_so_not_offered_as_larger():
    """ACC++ kept 196 edges at every budget from 196 to 10,342, and the opening sentence said
    "Larger budgets are on the slider and the curve"."""
    from circuitviz.ui.result_view import curve_notes

    view = render.opening_view(ACC_CURVE)
    assert "Larger budgets are on the slider" not in view.reason
    assert view.reason.endswith(
        "Larger budgets add nothing: the circuit stops growing at 196 edges (every budget from 196 to 10,342 "
        "keeps 196)."
    )
    notes = curve_notes(Result("acc++", ACC_CURVE))
    assert (
        "ACC++'s circuit stops growing at 196 edges: every budget from 196 to 10,342 keeps 196 edges (NDF 0.20 "
        "at each), so larger budgets add nothing."
    ) in notes
    growing = _points((20, 20, 0.1), (50, 48, 0.2), (100, 97, 0.3), (500, 480, 0.4))
    assert render.opening_view(growing).reason.endswith("Larger budgets are on the slider and the curve.")
    assert render.growth_stop(growing) is None
    # a circuit of every edge of the graph is whole, not stopped
    assert render.growth_stop(_points((40, 32, 1.0), (50, 32, 1.0)), total=32) is None


# ----- 4. a link's budget the slider lacks ---------------------------------------------------------
def test_a_links_budget_that_is_not_on_the_slider_is_said():
    from circuitviz.ui.link_values import link_budget_sentence

    budgets = [20, 50, 100, 200, 500, 10342]
    run = "the budgets this run evaluated"
    assert link_budget_sentence(300, 200, budgets, 10342, run, "opened at") == (
        "The link asks for budget 300, which is not one of the budgets this run evaluated: opened at 200, "
        "the nearest on a log scale."
    )
    assert link_budget_sentence(99999, 10342, budgets, 10342, run, "opened at") == (
        "The link asks for budget 99,999, more than the largest of the budgets this run evaluated, 10,342 "
        "(every edge of the graph): opened at 10,342."
    )
    # The smallest budget is named, as on Compare (Explore's sentence left it out).
    assert link_budget_sentence(5, 20, budgets, 10342, "the slider's steps", "opened at") == (
        "The link asks for budget 5, less than the smallest of the slider's steps, 20: opened at 20."
    )
    # Not the whole graph: no "(every edge of the graph)".
    assert "every edge" not in link_budget_sentence(999, 500, [20, 500], 10342, run, "opened at")


# ----- 5. a token of spaces -----------------------------------------------------------------------
def test_a_token_of_spaces_is_shown_with_its_spaces_counted():
    """Three spaces read "' '" in a message: HTML collapses the spaces of "'   '"."""
    from circuitviz.core.refusals import foil_is_answer
    from circuitviz.core.text import shown_token
    from circuitviz.query.proposals import unlikely_answer_sentence

    assert shown_token("   ") == "'\u2423\u2423\u2423' (3 spaces)"
    assert shown_token("  Paris") == "'\u2423\u2423Paris' (2 spaces)"
    assert shown_token(" Paris") == "' Paris'" and shown_token(" ") == "' '"
    # a piece that begins with a combining mark sat on the opening quote ("' Jo' | '̶' | 'hn'")
    assert shown_token("\u0336") == "'\\u0336'" and shown_token("\u0336hn") == "'\\u0336hn'"
    assert shown_token("e\u0301") == "'e\u0301'"  # a mark on its letter stays as written
    sentence = unlikely_answer_sentence("   ", 0.0, " the", 0.191, "pick another")
    assert sentence.startswith("The model gives '\u2423\u2423\u2423' (3 spaces) only 0.0% after this prompt")
    assert "'   '" not in foil_is_answer("   ")
    from circuitviz.labels.captions import role_caption

    assert role_caption(1.2, "   ", [" the"]) == "raises '\u2423\u2423\u2423' (3 spaces) over ' the' by 1.2"


# ----- 6. an answer that is not the model's own top token -----------------------------------------------
def test_an_answer_that_is_not_the_models_top_token_is_said(monkeypatch):
    """' Paris' (8.4 %) was proposed as the answer and ' the' (19.1 %), the model's own top
    token, as the foil: clean L(M(q)) was -0.823, and no sentence said the model prefers the foil."""
    from circuitviz.models import adapter, tokens
    from circuitviz.ui import loaders
    from circuitviz.ui.result_view import own_answer_note

    top = [(" the", 0.191), (" a", 0.111), (" Paris", 0.084)]
    monkeypatch.setattr(loaders, "next_tokens", lambda model, model_id, prompt, top_k=8: top)
    # a tokenizer whose tokens keep their leading space (Gemma's): the model stands in for it
    monkeypatch.setattr(adapter, "adapter_of", lambda model: model)
    monkeypatch.setattr(tokens, "own_text", lambda _, text: text)
    result = Result("eap-ig", DIPPED)
    result.model_id = "gemma-3-270m"
    assert own_answer_note(result, model=object()) == (
        "The model's own top next token here is ' the' (19.1%), not the answer ' Paris' (8.4%): the circuit "
        "explains what raises ' Paris' over ' the', not the model's own answer."
    )
    # the answer is the model's top token: nothing to say
    monkeypatch.setattr(loaders, "next_tokens", lambda model, model_id, prompt, top_k=8: [(" Paris", 0.5)])
    assert own_answer_note(result, model=object()) is None
    # a stored result without its model: the clean logit difference below 0 says the foil comes first
    assert own_answer_note(result) == (
        "On the clean prompt the model itself puts the foil ' the' above the answer ' Paris' (logit "
        "difference -0.823): the circuit explains what raises ' Paris' over ' the', not the model's own answer."
    )
    result.baseline = Baseline(clean=3.0, corrupted=-1.0)
    assert own_answer_note(result) is None


def test_no_readable_circuit_at_ndf_0_is_called_the_most_faithful():
    """Every circuit of at most 200 edges at NDF 0.00 (EAP-IG on Gemma-3-270M's IOI prompt at
    budgets 50 to 200 kept 43 to 147 edges at 0.0 and 0.001): the view opened at 43 edges as "the
    most faithful circuit of at most 200 edges (NDF 0.00)". It opens at the smallest of them and
    says none is faithful at all, with the smallest budget that is."""
    from opening_check import check_opening

    curve = _points((50, 43, 0.0), (100, 82, 0.001), (200, 147, 0.0), (10000, 9883, 0.876))
    view = render.opening_view(curve)
    assert view.budget == 50 and not view.faithful
    assert view.reason == (
        "No circuit of at most 200 edges reaches NDF 0.8 (the smallest that does keeps 9,883 edges, too "
        "many to read), and none of them is faithful at all: NDF is 0.00 at each of them, deviating from "
        "the model about as much as the corruption does, or more; opened at 43 edges (budget 50), the "
        "smallest (NDF 0.00). Larger budgets are on the slider and the curve."
    )
    check_opening(curve, view)
    carries = _points((50, 43, 0.0), (100, 82, 0.2), (200, 147, 0.0), (10000, 9883, 0.876))
    assert "the most faithful circuit of at most 200 edges (NDF 0.20)" in render.opening_view(carries).reason


def test_a_flat_curve_names_its_highest_ndf_not_zero():
    """discover printed 'NDF is 0 at every budget' under a table whose one row read NDF 0.031."""
    from circuitviz.ui.result_view import curve_notes

    notes = curve_notes(Result("eap", _points((10, 3, 0.031), (20, 9, 0.012))))
    flat = next(note for note in notes if "every budget" in note)
    assert flat.startswith("NDF is near 0 at every budget (at most 0.03):")
    assert "NDF is 0" not in flat


def test_no_faithful_circuit_names_the_neutral_prompt_a_run_without_corruption_measured_against():
    """Flow routes on 'Monday, Tuesday, Wednesday,' with no corrupted prompt (Gemma-3-270M, NDF 0.00
    at 103 edges): the sentence under the slider said "deviating from the model about as much as the
    corruption does" beside "corrupted (none given)" and the figure "neutral prompt L"."""
    from circuitviz.ui.result_view import GOOD_NDF, opening_of

    result = Result("flow-routes", _points((103, 103, 0.0)))
    result.task = PromptTask("Monday, Tuesday, Wednesday,", "", " Thursday", (" and",))
    reason = opening_of(result, GOOD_NDF).reason
    assert "about as much as the neutral prompt does, or more" in reason
    assert "corruption" not in reason
    result.task = TASK  # with a corrupted prompt: the corruption, as before
    assert "about as much as the corruption does, or more" in opening_of(result, GOOD_NDF).reason
