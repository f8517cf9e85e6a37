"""Explore's metrics say how the circuit carries over when that is known: paraphrase pruning's own
held-out share, or a transfer measured on request (Compare, the command line), with every
held-out paraphrase named beside its NDF and the run's notes on what it left out."""

from __future__ import annotations

import statistics
from types import SimpleNamespace

import pytest

from circuitviz.core.curves import Baseline, CurvePoint
from circuitviz.details.base import MethodDetails
from circuitviz.details.paraphrase_pruning import ParaphrasePruningDetails
from circuitviz.ui import measure_offers, result_figures, result_view

POINT = CurvePoint(budget=103, n_edges=92, metric=1.0, nfs=0.9, ndf=0.95, necessity=0.9)


def _result(method: str, details=None, transfer=None):
    return SimpleNamespace(
        method=method,
        details=details,
        transfer=transfer,
        baseline=Baseline(2.0, -1.0),
        graph=SimpleNamespace(n_edges=10342),
        task=SimpleNamespace(corrupted="When Alice and Bob went to the store, Carl gave a drink to"),
    )


def test_paraphrase_prunings_own_held_out_share_is_shown_and_named():
    details = ParaphrasePruningDetails(
        fit=["fitted"],
        held_out=["The *Louvre* stands in", "Visitors see it in"],
        held_out_ndf={"103": [0.9, 0.5], "10342": [1.0, 1.0]},
        notes=["1 of 4 paraphrases left out, 3 kept: 'x': a repeat."],
    )
    result = _result("paraphrase-pruning", details)
    values = result_figures.metric_values(result, POINT)
    assert values["NDF held out"] == "0.700"  # the mean of the budget's own two
    caption = result_figures.held_out_caption(result, 103)
    assert caption == (
        "NDF held out: the mean over 2 paraphrases of the prompt that this method never fitted to "
        "nor selected on: 'The *Louvre* stands in' 0.900, 'Visitors see it in' 0.500."
    )
    assert details.page_notes() == [f"The method's own paraphrases: {note}" for note in details.notes]
    assert "NDF held out" in result_figures.METRIC_HELP


def test_a_transfer_measured_on_request_is_shown_at_its_budget_only():
    transfer = {"budgets": {"103": {"paraphrases": ["a", "b", "c"], "ndf": [0.2, 0.4, 0.6]}}}
    result = _result("eap-ig", MethodDetails(), transfer)
    assert result_figures.metric_values(result, POINT)["NDF held out"] == "0.400"
    assert result_figures.held_out_caption(result, 103).startswith(
        "NDF held out: the mean over 3 paraphrases"
    )
    other = CurvePoint(budget=50, n_edges=40, metric=1.0, nfs=0.5, ndf=0.5)
    assert "NDF held out" not in result_figures.metric_values(result, other)
    assert result_figures.held_out_caption(result, 50) == ""


@pytest.mark.parametrize("details", [None, MethodDetails()], ids=["no details", "no held-out share"])
def test_nothing_held_out_shows_nothing(details):
    result = _result("eap-ig", details)
    assert "NDF held out" not in result_figures.metric_values(result, POINT)
    assert result_figures.held_out_caption(result, 103) == ""
    assert MethodDetails().page_notes() == []


@pytest.mark.usefixtures("tiny_app")  # the tiny model; results under tmp_path (conftest)
def test_a_transfer_measured_on_explore_is_kept_past_a_reload():
    """The figure the button measures is stored with the result: a new session (a reload, or the
    server restarted: nothing remembered in the process) shows it without measuring again."""
    pytest.importorskip("streamlit")

    from explore_session import explore_session, run_it

    from circuitviz.ui import loaders

    def held_out(at) -> list[str]:
        return [m.value for m in at.metric if m.label == "NDF held out"]

    at = run_it(explore_session())
    assert not at.exception, at.exception
    assert held_out(at) == []
    at.button(key="explore.transfer").click().run()
    assert not at.exception, at.exception
    (shown,) = held_out(at)
    result = at.session_state["results"]["eap"]
    stored = loaders.get_store().get(at.session_state["results.requests"]["eap"])
    assert stored is not None and stored.transfer == result.transfer
    assert f"{statistics.mean(_only_budget(result.transfer)['ndf']):.3f}" == shown
    loaders._REMEMBERED.clear()  # as after a restart: the entry is read from its file
    again = explore_session()
    assert not again.exception, again.exception
    assert held_out(again) == [shown]
    assert not [b for b in again.button if b.key == "explore.transfer"]  # nothing left to measure


def _only_budget(transfer: dict) -> dict:
    (entry,) = transfer["budgets"].values()
    return entry


def test_every_paraphrase_left_out_is_listed_beside_the_sentence_that_names_the_first_few():
    """The run's own (paraphrase pruning's split) and the measured transfer's, each with its reason
    and where it was left out; nothing when neither left any out."""
    details = ParaphrasePruningDetails(left_out=[{"paraphrase": "a", "reason": "a repeat"}])
    transfer = {"budgets": {}, "left_out": [{"paraphrase": "b", "reason": "the gap is too small"}]}
    rows = result_view.left_out_rows(_result("paraphrase-pruning", details, transfer))
    assert rows == [
        {"paraphrase": "a", "reason": "a repeat", "where": "the method's own paraphrases"},
        {"paraphrase": "b", "reason": "the gap is too small", "where": "held-out transfer"},
    ]
    assert result_view.left_out_rows(_result("eap-ig", MethodDetails())) == []
    assert result_view.left_out_rows(_result("eap-ig", None, {"budgets": {}})) == []


def test_a_held_out_figure_on_few_paraphrases_offers_a_wider_one_and_shows_the_wider():
    """Paraphrase pruning holds out one to three paraphrases, so one can decide its mean: the
    button offers up to five more it never saw, and once measured the figure on more paraphrases
    is the one shown (its own, when the measurement found no more); no button once measured, nor
    for a figure already on five or more, nor without a corrupted prompt."""
    task = SimpleNamespace(corrupted="When Alice and Bob went to the store, Carl gave a drink to")
    own = ParaphrasePruningDetails(held_out=["a", "b"], held_out_ndf={"103": [0.9, 0.5]})
    result = _result("paraphrase-pruning", own)
    result.task = task
    assert measure_offers.transfer_label(result, 103) == (
        "Measure its NDF on up to 5 paraphrases it never saw; the figure above has 2 (runs the model)"
    )
    result.transfer = {"budgets": {"103": {"paraphrases": ["a", "c", "d"], "ndf": [0.9, 0.7, 0.8]}}}
    assert result_figures.held_out_at(result, 103) == [("a", 0.9), ("c", 0.7), ("d", 0.8)]
    assert measure_offers.transfer_label(result, 103) is None
    result.transfer = {"budgets": {"103": {"paraphrases": ["c"], "ndf": [0.1]}}}
    assert result_figures.held_out_at(result, 103) == [("a", 0.9), ("b", 0.5)]  # its own: on more
    assert measure_offers.transfer_label(result, 103) is None
    wide = ParaphrasePruningDetails(held_out=list("abcde"), held_out_ndf={"103": [0.9] * 5})
    many = _result("paraphrase-pruning", wide)
    many.task = task
    assert measure_offers.transfer_label(many, 103) is None
    nothing = _result("eap-ig", MethodDetails())
    nothing.task = task
    assert (
        measure_offers.transfer_label(nothing, 103)
        == "Measure its NDF on paraphrases it never saw (runs the model)"
    )
    nothing.transfer = {"budgets": {"103": {"paraphrases": [], "ndf": []}}, "note": "None passed."}
    assert measure_offers.measured_nothing(nothing, 103)  # measured once, on nothing: no second click
    assert measure_offers.transfer_label(nothing, 103) is None
    assert measure_offers.transfer_label(nothing, 52) is not None  # another budget: not yet measured
    nothing.task = SimpleNamespace(corrupted="")
    assert measure_offers.transfer_label(nothing, 103) is None


def test_a_wider_measurement_on_no_more_paraphrases_says_why_the_own_figure_stays():
    """The sentence when the wider measurement found no more paraphrases than the run held out:
    how many it measured, and the measurement's own reason (not "passed the checks" when none
    failed: the template source may simply have run out, or the method used them)."""
    note = "Measured on 2 held-out paraphrases, not the 5 asked for: the source gave 5 besides the prompt; the method used 3 to fit or select (paraphrase-pruning@103)."
    sentence = measure_offers.no_wider_sentence(2, 3, note)
    assert sentence.startswith("Only 2 paraphrases it never saw could be measured, no more than the 3")
    assert sentence.endswith(note) and "passed the checks" not in sentence
    assert measure_offers.no_wider_sentence(1, 1, None).endswith("the figure above stays its own.")


def test_a_measured_transfers_left_out_paraphrase_is_said_under_its_figure():
    """An audit found a paraphrase the measurement left out ("the model answers ' the' here") kept in
    the JSON and said nowhere on the page: the measurement's sentence now sits under the figure."""
    from streamlit.testing.v1 import AppTest

    def page():
        from types import SimpleNamespace

        from circuitviz.core.curves import Baseline, CurvePoint
        from circuitviz.details.base import MethodDetails
        from circuitviz.ui import result_view

        note = "1 of 4 paraphrases left out, 3 kept: 'Yesterday Mary': the model answers ' the' here."
        transfer = {
            "note": note,
            "budgets": {"103": {"paraphrases": ["a", "b", "c"], "ndf": [0.2, 0.4, 0.6]}},
        }
        point = CurvePoint(budget=103, n_edges=92, metric=1.0, nfs=0.9, ndf=0.95, necessity=0.9)
        result = SimpleNamespace(
            method="eap-ig",
            details=MethodDetails(),
            transfer=transfer,
            baseline=Baseline(2.0, -1.0),
            graph=SimpleNamespace(n_edges=10342),
            task=SimpleNamespace(corrupted="When Alice and Bob went to the store, Carl gave a drink to"),
            curve=[point],
        )
        result_view.metrics_row(result, 103, point)
        other = CurvePoint(budget=50, n_edges=40, metric=1.0, nfs=0.5, ndf=0.5)
        result.curve.append(other)
        result_view.metrics_row(result, 50, other)  # no figure at this budget: no sentence either

    at = AppTest.from_function(page).run()
    assert not at.exception, at.exception
    said = [c.value.replace("\\", "") for c in at.caption]
    assert sum("the model answers ' the' here" in c for c in said) == 1, said
    assert any(c.startswith("NDF held out: the mean over 3 paraphrases") for c in said), said


def test_the_held_out_measurements_note_reads_as_one_sentence():
    """The measured transfer's note followed "The held-out measurement:" with its capital ("The
    held-out measurement: Fewer than 5 ...", the Gallery's arithmetic example); its first word is
    now lower case there, an acronym or a number left as it is."""
    note = "Measured on 2 held-out paraphrases, not the 5 asked for: the source gave 2 besides the prompt."
    said = _held_out_captions(note, ["a", "b"], [0.2, 0.4])
    assert said == [
        "The held-out measurement: measured on 2 held-out paraphrases, not the 5 asked for: "
        "the source gave 2 besides the prompt."
    ], said


@pytest.mark.parametrize(
    "note, shown",
    [
        ("Fewer than 5 held-out paraphrases passed both checks.", "fewer than 5 held-out"),
        ("Not held out, as used to fit or select: 3 by bon.", "not held out,"),
        ("1 of 4 paraphrases left out, 3 kept.", "1 of 4"),
        ("NDF was measured on 2.", "NDF was"),
        ("Gemma-3 gave 2.", "Gemma-3 gave"),
    ],
)
def test_a_note_after_a_colon_starts_in_lower_case_unless_an_acronym_or_a_number(note, shown):
    from circuitviz.core.text import after_colon

    assert after_colon(note).startswith(shown)


@pytest.mark.parametrize("older", [False, True], ids=["as-stored", "older-words"])
@pytest.mark.parametrize("slug, answer", [("ioi", "' Mary'"), ("arithmetic", "' three'")])
def test_the_gallerys_held_out_note_names_the_answer_once(slug, answer, older):
    """The Gallery's IOI and arithmetic examples were stored before a left-out paraphrase's reason
    named the prompt's answer once, and their pages said "neither the answer ' Mary' nor its answer
    on the original prompt (' Mary')", one token named twice as though two. They are rebuilt in
    today's words (2026-12-07, ``tests/test_gallery_words.py``); a result a user's cache stored in
    the older words (``older``: the examples' notes as they were stored) is shown in today's."""
    from streamlit.testing.v1 import AppTest

    def page(slug: str, older: bool):
        import re
        from pathlib import Path

        import torch

        from circuitviz.core.results import CircuitResult
        from circuitviz.ui import result_view

        def as_before(text: str) -> str:  # the words a result stored before they changed holds
            text = re.sub(
                r"not the answer ('[^']*') it gives on the original prompt",
                r"neither the answer \1 nor its answer on the original prompt (\1)",
                text,
            )
            return text.replace(": the corruption lowers", ": The corruption lowers")

        path = Path("assets") / "gallery" / f"{slug}.pt"
        state = torch.load(path, map_location="cpu", weights_only=True)
        result = CircuitResult.from_state(state["result"])
        if older:
            transfer = result.transfer
            left_out = [{**row, "reason": as_before(row["reason"])} for row in transfer["left_out"]]
            result.transfer = {**transfer, "note": as_before(transfer["note"]), "left_out": left_out}
            assert "nor its answer on the original prompt" in result.transfer["note"]
        budget = 100 if slug == "arithmetic" else 30  # where the Gallery opens each
        result_view.metrics_row(result, budget, result.point(budget))

    at = AppTest.from_function(page, args=(slug, older)).run(timeout=60)
    assert not at.exception, at.exception
    said = " ".join(c.value.replace("\\", "") for c in at.caption)
    assert "nor its answer on the original prompt" not in said, said
    assert f"not the answer {answer} it gives on the original prompt" in said, said
    assert ": The corruption" not in said, said  # the arithmetic example's weak pair, stored so
    if slug == "arithmetic":
        assert "The result is': the corruption lowers the logit difference of ' three' by only" in said, said


def test_a_weak_corruptions_reason_follows_its_paraphrases_colon_in_lower_case():
    """The reason a weak corruption is left out is a sentence of its own ("The corruption lowers
    ..."): a left-out note wrote it after the paraphrase's colon with its capital, mid-sentence."""
    from circuitviz.query.pairs import left_out_note

    weak = (
        "The corruption lowers the logit difference of ' three' by only 0.15 (+1.524 clean, +1.374 corrupted)"
    )
    note = left_out_note([("a", weak), ("b", "NDF repeats")], 6)
    assert note == (
        "2 of 6 paraphrases left out, 4 kept: 'a': the corruption lowers the logit difference of ' three' by "
        "only 0.15 (+1.524 clean, +1.374 corrupted); 'b': NDF repeats."
    )


def test_every_left_out_line_writes_its_reason_on_after_the_colon():
    """The list "Every paraphrase left out" put a reason that is a sentence of its own after the colon with
    its capital ("'...' (held out): The corruption lowers ..."), as the held-out note did."""
    from circuitviz.ui.result_view import paraphrase_left_out_line

    line = paraphrase_left_out_line(
        "'a b c' (held out)", "The corruption lowers the logit difference by 0.15."
    )
    assert line == "'a b c' (held out): the corruption lowers the logit difference by 0.15."
    assert paraphrase_left_out_line("x", "NDF is undefined here.") == "x: NDF is undefined here."


def test_an_older_shortfall_note_a_cache_stored_reads_in_todays_words():
    """A result stored between 2026-12-02 and 12-05 says "Fewer than 5 held-out paraphrases passed
    both checks (4 for some circuits)." of circuits each measured on its own count; only the Gallery
    said it again from the record's counts (``entry.api.transfer_note``), and no Gallery example
    holds it since its rebuild (``tests/test_gallery_words.py``): the result view says it so, for a
    result a user's cache kept from then (Explore, Compare)."""
    note = "Fewer than 5 held-out paraphrases passed both checks (4 for some circuits)."
    said = _held_out_captions(note, list("abcd"), [0.2, 0.4, 0.6, 0.8])
    assert said == [
        "The held-out measurement: fewer than 5 held-out paraphrases passed both checks, so the circuit "
        "at budget 103 was measured on 4."
    ], said


def _held_out_captions(note: str, paraphrases: list[str], ndf: list[float]) -> list[str]:
    """The captions starting "The held-out measurement" that the result view's figures row shows for
    an EAP-IG result at budget 103 whose stored transfer has this ``note`` and per-paraphrase NDFs."""
    from streamlit.testing.v1 import AppTest

    def page(note, paraphrases, ndf):
        from types import SimpleNamespace

        from circuitviz.core.curves import Baseline, CurvePoint
        from circuitviz.details.base import MethodDetails
        from circuitviz.ui import result_view

        transfer = {"note": note, "budgets": {"103": {"paraphrases": paraphrases, "ndf": ndf}}}
        point = CurvePoint(budget=103, n_edges=92, metric=1.0, nfs=0.9, ndf=0.95, necessity=0.9)
        result = SimpleNamespace(
            method="eap-ig",
            details=MethodDetails(),
            transfer=transfer,
            baseline=Baseline(2.0, -1.0),
            graph=SimpleNamespace(n_edges=10342),
            task=SimpleNamespace(corrupted="When Alice and Bob went to the store, Carl gave a drink to"),
            curve=[point],
        )
        result_view.metrics_row(result, 103, point)

    at = AppTest.from_function(page, args=(note, paraphrases, ndf)).run()
    assert not at.exception, at.exception
    said = [c.value.replace("\\", "") for c in at.caption]  # markdown's escapes taken out
    return [caption for caption in said if caption.startswith("The held-out measurement")]
