"""Sentences the Paraphrases page writes beside its figures when Best-of-N had one candidate or
one paraphrase, checked against what the run holds (an audit found them untrue)."""

from __future__ import annotations

import types

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402


def _shared_edges_page(shared):
    """``paraphrase_view.shared_edges`` over the run's stored shared-edge entry ``shared``, as the
    page draws it (the candidates' edge sets: the test's)."""
    import types

    from circuitviz.ui import paraphrase_view

    details = types.SimpleNamespace(shared=[shared])
    result = types.SimpleNamespace(model_id="none", method="bon", any_budget=False, details=details)
    paraphrase_view.shared_edges(None, result, 10, set())


def _captions(monkeypatch, sets, shared) -> list[str]:
    """The captions drawn, the candidates' edge sets being ``sets`` (None: no score matrix kept)."""
    from circuitviz.ui import bon

    monkeypatch.setattr(bon, "candidate_edge_sets", lambda *args, **kwargs: sets)
    at = AppTest.from_function(_shared_edges_page, args=(shared,)).run()
    assert not at.exception, at.exception
    return [caption.value for caption in at.caption]


def test_one_candidate_is_not_said_to_share_edges_with_others(monkeypatch):
    """No usable paraphrase left the prompt as the only candidate: the page said "188 edges are
    common to all candidates (their score matrices were not kept)", with the scores kept."""
    shared = {"budget": 10, "n_common": 188, "set_sizes": [188]}
    for sets in ({"q": {"a", "b"}}, None):
        said = " ".join(_captions(monkeypatch, sets, shared))
        assert "were not kept" not in said and "common to all" not in said, said
        assert "one candidate at budget 10, the prompt itself" in said, said


def test_candidates_without_kept_scores_still_say_what_they_share(monkeypatch):
    said = " ".join(_captions(monkeypatch, None, {"budget": 10, "n_common": 40, "set_sizes": [50, 60]}))
    assert "40 edges are common to all candidates (their score matrices were not kept)" in said


def test_a_dip_under_best_of_n_with_one_candidate_says_so():
    """With no usable paraphrase the curve's note read "the most faithful of its 1 candidates'
    circuits (each the top edges of one wording's own scores, the prompt's or a paraphrase's)"."""
    import torch

    from circuitviz.core.curves import Baseline, CurvePoint
    from circuitviz.details.query import QueryCircuitDetails
    from circuitviz.ui.result_view import curve_notes

    details = QueryCircuitDetails(
        variant="bon",
        pairs=[{"index": 0, "clean": "The capital of France is"}],
        candidates=[0],
        budgets=[20, 100, 500],
        anchor_budgets=[20, 100, 500],
        per_budget=[
            {"budget": b, "winner": 0, "candidates": [{"ndf": ndf}]}
            for b, ndf in ((20, 0.69), (100, 0.999), (500, 0.784))
        ],
        anchor_winners={"20": 0, "100": 0, "500": 0},
    )
    mask = torch.zeros(8, dtype=torch.bool, device="cpu")
    result = types.SimpleNamespace(
        method="bon",
        curve=[
            CurvePoint(b, k, 0.0, ndf, ndf)
            for b, k, ndf in ((20, 10, 0.69), (100, 86, 0.999), (500, 491, 0.784))
        ],
        details=details,
        circuits={20: mask, 100: mask, 500: mask},
        scores=torch.zeros(8, device="cpu"),
        baseline=Baseline(clean=-0.823, corrupted=-5.673),
    )
    (note,) = curve_notes(result)
    assert "1 candidates" not in note and "or a paraphrase's" not in note, note
    assert "Best-of-N had one candidate, the prompt itself" in note, note


@pytest.mark.usefixtures("tiny_app")
def test_the_file_source_without_pairs_is_said_before_run():
    """With the file source and no pairs, Run stayed enabled and only a press said "give a file
    (--paraphrases FILE) or type them in"; the form says it first, and Run waits for them."""
    from circuitviz.bench.toy_models import IOI_TASK

    at = AppTest.from_file("../app.py", default_timeout=300)
    for name, value in dict(
        prompt=IOI_TASK.clean, corrupted=IOI_TASK.corrupted, answer=" Mary", foil=" John"
    ).items():
        at.query_params[name] = value
    at = at.switch_page("pages/paraphrases.py").run()
    at.selectbox(key="bon.method.bon.paraphrase_source").set_value("file").run()
    assert not at.exception, at.exception
    said = [error.value.replace("\\", "") for error in at.error]  # markdown-escaped on screen
    assert any("The file source needs paraphrases: give them in 'paraphrases'" in text for text in said), said
    assert at.button(key="bon.run").disabled


def test_fewer_usable_paraphrases_than_asked_are_said_with_the_candidates_they_leave():
    """'n paraphrases 9' stood above six candidates: the template family had 11 rewrites of a
    SmolLM2 prompt and 5 passed the checks, while the page's heading says N = p + 1 (an audit)."""
    from circuitviz.ui import bon

    def result(source, asked, candidates, drawn):
        config = {"paraphrase_source": source, "n_paraphrases": asked}  # a result's settings, as stored
        pairs = [{"clean": f"p{i}"} for i in range(drawn + 1)]  # pair 0 is the prompt
        details = types.SimpleNamespace(pairs=pairs, candidates=candidates)
        return types.SimpleNamespace(config=config, details=details)

    short = result("template", 9, [0, 2, 3, 8, 9, 10], 11)
    assert bon.fewer_than_asked_sentence(short) == (
        "The form asked for 9 paraphrases; 5 of the 11 drawn pass the checks, so Best-of-N chose "
        "among 6 candidates (the prompt and 5), not 10."
    )
    assert bon.fewer_than_asked_sentence(result("template", 3, [0, 1, 2, 3], 3)) == ""  # as asked
    assert bon.fewer_than_asked_sentence(result("file", 9, [0, 1], 2)) == ""  # the user's own pairs


def _pairs_table_page(pairs):
    """``paraphrase_view.pairs_table`` over a run whose pairs are ``pairs`` (clean, corrupted), the
    prompt first, every pair a candidate."""
    import types

    from circuitviz.ui import paraphrase_view

    rows = [{"clean": clean, "corrupted": corrupted, "source": "file"} for clean, corrupted in pairs]
    details = types.SimpleNamespace(pairs=rows, candidates=list(range(len(rows))), notes=[])
    result = types.SimpleNamespace(details=details, config={"paraphrase_source": "file"})
    paraphrase_view.pairs_table(result, "bon")


def _config_form_page(text):
    """Best-of-N's settings form with the file source and ``text`` in its paraphrases box."""
    from circuitviz.methods import get_method
    from circuitviz.ui.forms import config_form

    config_form(get_method("bon"), "t", {"paraphrase_source": "file", "paraphrases": text})


def test_invisible_characters_in_paraphrases_are_said_in_the_form_and_under_the_table():
    """A paraphrase typed with a right-to-left override before 'store,' stood in the table as 'the
    ,erots John gave' and in the form's box reordered, both unsaid, while the model read 'the store,
    John' (an audit in Chromium); the prompt's box says so of the prompt."""
    prompt = ("When Mary and John went to the store, John gave a drink to", "When Alice and Bob went ...")
    hidden = ("When Mary and John went to the \u202estore, John gave a drink to", "When Alice \u202e ...")
    plain = ("When Mary and John went to the park, John gave a drink to", "When Alice and Bob ...")
    at = AppTest.from_function(_pairs_table_page, args=([prompt, plain, hidden],)).run()
    assert not at.exception, at.exception
    said = [warning.value.replace("\\", "") for warning in at.warning]
    assert len(said) == 1 and said[0].startswith(
        "Pair p2 holds invisible characters (U+202E RIGHT-TO-LEFT"
    ), said
    assert not AppTest.from_function(_pairs_table_page, args=([prompt, plain],)).run().warning

    typed = " || ".join(plain) + "\n" + " || ".join(hidden)
    at = AppTest.from_function(_config_form_page, args=(typed,)).run()
    assert not at.exception, at.exception
    said = [warning.value.replace("\\", "") for warning in at.warning]
    assert any(
        text.startswith("The paraphrases box holds 2 invisible characters (U+202E") for text in said
    ), said
    at = AppTest.from_function(_config_form_page, args=(" || ".join(plain),)).run()
    assert not at.exception and not at.warning, at.warning


def _pairs_page(pairs):
    """``paraphrase_view.pairs_table`` over a run whose pair dicts are ``pairs``, every one a candidate."""
    import types

    from circuitviz.ui import paraphrase_view

    details = types.SimpleNamespace(pairs=pairs, candidates=list(range(len(pairs))), notes=[])
    paraphrase_view.pairs_table(
        types.SimpleNamespace(details=details, config={"paraphrase_source": "file"}), "bon"
    )


def test_a_candidate_whose_check_warned_is_said_on_the_page_and_the_command_line():
    """A pair corrupting 'zoo' into 'bar' (SmolLM2-135M: the logit difference 5.50 -> 5.25, the
    prompt's 5.29 -> -0.51) was scored and drawn as a candidate like any other; the check's "barely
    moves the metric" warning was kept in the result and said nowhere (an audit)."""
    import types

    from circuitviz.query.report import report_lines

    warning = "its corruption barely moves the metric, so its scores carry little signal"
    prompt = {
        "clean": "When Mary and John went to the store, John gave a drink to",
        "corrupted": "When Alice ...",
    }
    zoo = {
        "clean": "When Mary and John went to the zoo, John gave a drink to",
        "corrupted": "... the bar, ...",
    }
    pairs = [
        {**prompt, "source": "original", "metric_clean": 5.287, "metric_corrupted": -0.513, "warnings": []},
        {**zoo, "source": "file", "metric_clean": 5.504, "metric_corrupted": 5.253, "warnings": [warning]},
    ]
    said = (
        "A candidate was scored despite a warning: p1 'When Mary and John went to the zoo, John gave a drink "
        f"to': {warning} (it moves the metric by 0.25, the prompt's corruption by 5.80)."
    )
    at = AppTest.from_function(_pairs_page, args=(pairs,)).run()
    assert not at.exception, at.exception
    assert said in [caption.value.replace("\\", "") for caption in at.caption]
    quiet = [pairs[0], {**pairs[1], "warnings": []}]
    at = AppTest.from_function(_pairs_page, args=(quiet,)).run()
    assert not any("despite a warning" in caption.value for caption in at.caption)

    rows = [
        {**pair, "index": i, "model_answer": " Mary", "n_tokens": 15, "reason": ""}
        for i, pair in enumerate(pairs)
    ]
    details = types.SimpleNamespace(
        pairs=rows, candidates=[0, 1], base_method="eap-ig", ig_steps=5, anchor_budgets=[], per_budget=[],
        curves={}, budgets=[], shared=[], notes=[],
    )  # fmt: skip
    assert f"note: {said}" in report_lines(details)


def test_a_line_break_in_a_paraphrase_is_said_under_the_table():
    """SmolLM2-135M's arithmetic template gave 'one plus one is two.\\none plus two is': its row read
    exactly as the prompt's row (the table draws a line break as a space), a duplicate to the eye."""
    prompt = ("one plus one is two. one plus two is", "one plus one is two. two plus two is")
    broken = ("one plus one is two.\none plus two is", "one plus one is two.\ntwo plus two is")
    at = AppTest.from_function(_pairs_table_page, args=([prompt, broken],)).run()
    assert not at.exception, at.exception
    said = [caption.value for caption in at.caption]
    assert (
        "Pair p1 holds a line break or a tab, which the table shows as a space; the model reads it as written."
        in said
    )
    at = AppTest.from_function(_pairs_table_page, args=([prompt, prompt[::-1]],)).run()
    assert not any("line break" in caption.value for caption in at.caption)


@pytest.mark.usefixtures("tiny_app")
@pytest.mark.parametrize(
    "prompt, corrupted, source, said",
    [
        (
            "Mary and John went to the store , and then",
            "Alice and Bob went to the store , and then",
            "template",
            "The prompt matches none of the built-in template families",
        ),
        (None, None, "openai", "No OpenAI API key is set; set OPENAI_API_KEY"),
    ],
    ids=["no-family", "no-key"],
)
def test_a_source_that_cannot_give_paraphrases_is_said_before_run(
    monkeypatch, prompt, corrupted, source, said
):
    """A prompt no template family matches, and the LLM source without an API key, were said only
    once Run was pressed ("The run could not start: ..."), under an estimate of a run that could
    not start, on Gemma-3-270M and SmolLM2-135M alike (an audit); the form says it, Run waits."""
    from circuitviz.bench.toy_models import IOI_TASK

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    at = AppTest.from_file("../app.py", default_timeout=300)
    task = dict(
        prompt=prompt or IOI_TASK.clean,
        corrupted=corrupted or IOI_TASK.corrupted,
        answer=" Mary",
        foil=" John",
    )
    for name, value in task.items():
        at.query_params[name] = value
    at = at.switch_page("pages/paraphrases.py").run()
    at.selectbox(key="bon.method.bon.paraphrase_source").set_value(source).run()
    assert not at.exception, at.exception
    errors = [error.value.replace("\\", "") for error in at.error]
    assert any(text.startswith(said) for text in errors), errors
    assert at.button(key="bon.run").disabled
    at.selectbox(key="bon.method.bon.paraphrase_source").set_value("file").run()
    assert not any(text.startswith(said) for text in (error.value.replace("\\", "") for error in at.error))


def test_the_command_line_names_candidates_as_the_page_does():
    """The command line numbered the candidates 0 to 9 while the page names each by its pair (q, p1,
    ...: a left-out pair leaves a gap), so its candidate 5 was the page's p6 (SmolLM2-135M's IOI run,
    p5 left out; an audit)."""
    import types

    from circuitviz.query.report import report_lines

    pairs = [
        {"index": i, "clean": f"text {i}", "source": "template:ioi", "model_answer": " Mary", "n_tokens": 15}
        for i in range(4)
    ]
    pairs = [
        {**pair, "reason": "the model answers ' his' here" if pair["index"] == 2 else ""} for pair in pairs
    ]
    point = {"candidates": [{"ndf": 0.3}, {"ndf": 0.2}, {"ndf": 0.4}], "winner": 2, "budget": 10}
    details = types.SimpleNamespace(
        pairs=pairs, candidates=[0, 1, 3], base_method="eap-ig", ig_steps=5, anchor_budgets=[10],
        per_budget=[point], curves={}, budgets=[10], shared=[], notes=[],
    )  # fmt: skip
    lines = report_lines(details)
    listed = [line.split()[0] for line in lines if "template:ioi" in line]
    assert listed == ["q", "p1", "(p2)", "p3"], lines
    table = lines[lines.index("each candidate's NDF on the original prompt (* the winner):") + 2 :][:3]
    assert [row.split()[0] for row in table] == ["q", "p1", "p3"], table
    assert table[2].split()[1] == "0.400*"
