"""Demo mode's sentence about its drawing is true of the drawing: what ranks the coloured paths
(an effect, or only the method's own score), and purple boxes only where groups are drawn."""

from __future__ import annotations

from circuitviz.render.demo import lead_sentence, legend_sentence


def test_a_method_whose_scores_are_not_effects_is_not_said_to_carry_the_most():
    """The Gallery's Edge Pruning circuits (mask values 0.99-1.0) read 'The coloured paths carry
    the most', and every edge is coloured there: the others are only faded."""
    sentence = legend_sentence(3, False, "Edge Pruning (learned masks)", "proposed")
    assert "carry the most" not in sentence
    assert sentence.startswith(
        "The 3 paths drawn in full colour have the highest scores (Edge Pruning's own score, not a "
        "measured effect); the other connections are faded."
    )  # it read "(Edge Pruning (learned masks)'s own score", a gloss inside a gloss, before an audience
    # EAP's strongest paths may run through a head that promotes the foil: an effect of either sign
    assert "largest estimated effects on the answer (for it or against it" in legend_sentence(
        3, True, "EAP", None
    )


def test_purple_boxes_are_said_only_where_there_are_groups_and_as_what_they_are():
    """'purple boxes are groups of parts that work together' was said with no box drawn, and of a
    box of late heads grouped by their depth alone."""
    assert "urple" not in legend_sentence(2, True, "EAP", None)
    assert "not a measured one" in legend_sentence(2, True, "EAP", "proposed")
    assert "work together" not in legend_sentence(2, True, "EAP", "proposed")
    assert legend_sentence(1, True, "EAP", "user").endswith("Purple boxes are the groups named on this page.")
    assert legend_sentence(0, True, "EAP", None) == ""


def test_the_gallerys_rerun_button_is_a_control_demo_mode_hides():
    """Demo mode on the Gallery left "Re-run live on the Explore page" before the audience."""
    from pathlib import Path

    from circuitviz.ui.demo import CONTROLS_KEY

    page = (Path(__file__).resolve().parents[1] / "pages" / "gallery.py").read_text()
    assert f'st.container(key="{CONTROLS_KEY}gallery-rerun")' in page


def test_a_circuit_is_said_to_carry_the_answer_only_where_its_ndf_says_so():
    """Demo mode called an EAP circuit of NDF 0.43 'the part of the model that carries this answer'."""
    from circuitviz.ui import demo, result_view

    assert demo.GOOD_NDF == result_view.GOOD_NDF  # the demo's threshold is the opening rule's
    low = lead_sentence(168, 0.43, 0.8)
    assert "carries this answer" not in low
    assert "its faithfulness (NDF) is 0.43 (below 0.8: it carries only part of it)" in low
    assert "carries this preference" in lead_sentence(29, 0.85, 0.8, "preference")
    assert lead_sentence(29, 0.85, 0.8).startswith(
        "The circuit below is the part of the model that carries this answer: 29 connections; "
        "its faithfulness (NDF) is 0.85"
    )
    assert "NDF" not in lead_sentence(29, None, 0.8)


def test_ndfs_zero_is_what_the_run_measured_it_on():
    """A flow routes' run with no corrupted prompt (the box hidden on Explore) read "0 that it does
    no better than the corrupted prompt" in demo mode: its 0 is a neutral prompt, ACC++'s the
    model with its found signals knocked out."""
    from circuitviz.details.base import NEUTRAL_PROMPT

    assert lead_sentence(29, 0.5, 0.8).endswith("no better than the corrupted prompt")
    neutral = lead_sentence(29, 0.5, 0.8, reference=NEUTRAL_PROMPT)
    assert neutral.endswith("no better than a neutral prompt (the prompt's words replaced by padding)")
    knocked = lead_sentence(29, 0.5, 0.8, reference="signals knocked out")
    assert "corrupted" not in knocked and knocked.endswith("every signal the method found knocked out")


def test_the_headline_says_which_token_the_model_prefers_not_what_it_answers():
    """Demo mode said "The nurse said that" "answers ' she' rather than ' he'": its top next token
    is ' the' (27.6 %); the logit difference only says ' she' is above ' he'."""
    from circuitviz.core.tasks import PromptTask
    from circuitviz.render.demo import prompt_sentence

    task = PromptTask("The nurse said that", "The pilot said that", " she", (" he",), "logit_diff")
    assert prompt_sentence(task, 2.124) == 'The model reads "The nurse said that" and prefers "she" to "he".'
    assert prompt_sentence(task, -0.5) == (
        'The model reads "The nurse said that" and prefers "he" to "she"; the circuit is of what raises "she".'
    )
    alone = PromptTask("The nurse said that", "The pilot said that", " she", (), "logprob")
    assert (
        prompt_sentence(alone)
        == 'The model reads "The nurse said that"; the circuit is of its next token "she".'
    )


def test_the_headline_of_a_prompt_of_several_lines_is_one_line():
    """The headline is a heading: markdown ends it at a line break, so an MMLU prompt's options and
    cue, or a typed blank line and indented line (a code block), were drawn below it (seen in
    Chromium in demo mode, 2026-12-06); each line break is drawn '↵', as the token chips draw it."""
    from circuitviz.core.tasks import PromptTask
    from circuitviz.core.text import markdown_text
    from circuitviz.render.demo import prompt_sentence

    task = PromptTask("Big\n===\n\n    code\r\nThe cat", "Big\n===\n\n    code\r\nThe dog", " sat", (" ran",))
    said = prompt_sentence(task, 1.0)
    assert said == 'The model reads "Big ↵ === ↵  ↵     code ↵ The cat" and prefers "sat" to "ran".'
    assert "\n" not in markdown_text(said) and "\r" not in markdown_text(said)


def test_a_methods_label_is_made_possessive_without_its_gloss():
    from circuitviz.core.text import possessive

    assert possessive("Edge Pruning (learned masks)") == "Edge Pruning's"
    assert possessive("ACC++") == "ACC++'s"
    assert possessive("Flow routes") == "Flow routes'"
    assert possessive("CircuitLasso") == "CircuitLasso's"


def test_one_path_is_said_in_the_singular():
    """ACC++ on the IOI prompt has one path into the logit: "The path drawn in full colour have the
    highest scores" (seen in Chromium)."""
    assert legend_sentence(1, False, "ACC++", None).startswith(
        "The path drawn in full colour has the highest score (ACC++'s own score, not a measured effect);"
    )
    assert legend_sentence(1, True, "EAP", None).startswith(
        "The path drawn in full colour has the largest estimated effect on the answer (for it or against"
    )


def test_the_gallerys_opening_caption_promises_no_sentence_demo_mode_hides():
    """The Gallery's caption said the view opens at a budget "and says which": the sentence that
    says so stands under the budget slider, which demo mode hides."""
    from pathlib import Path

    page = (Path(__file__).resolve().parents[1] / "pages" / "gallery.py").read_text()
    assert "and says which" not in page


def test_writers_are_explained_only_where_a_group_of_writers_is_drawn():
    """ACC++ on the IOI prompt drew 'early movers' and 'early MLPs' beside "'writers' write to the
    answer" (seen in Chromium)."""
    assert "'writers'" not in legend_sentence(1, False, "ACC++", "proposed", writers=False)
    assert "(their name says which), a grouping by position" in legend_sentence(
        1, False, "ACC++", "proposed", writers=False
    )
    assert "'writers' write to the answer" in legend_sentence(1, False, "ACC++", "proposed", writers=True)


def test_hidden_controls_leave_no_blank_band(tmp_path):
    """Demo mode hid each keyed block of controls but not the layout wrapper around it, the
    column's flex item: each kept the column's 16 px gap, an 80 px blank band over Explore's
    circuit. Drawn in Chromium on Streamlit 1.67's structure (a flex column of wrappers, each
    holding a keyed vertical block), the first visible item below three hidden ones starts one gap
    below the heading."""
    from pathlib import Path

    import pytest

    from circuitviz.ui.demo import _HIDE, CONTROLS_KEY

    chromium = "/usr/bin/chromium"
    if not Path(chromium).exists():
        pytest.skip("Debian's chromium is not installed")
    playwright_api = pytest.importorskip("playwright.sync_api")
    column = "display:flex;flex-direction:column;gap:16px"
    hidden = "".join(
        f'<div data-testid="stLayoutWrapper"><div data-testid="stVerticalBlock" '
        f'class="st-key-{CONTROLS_KEY}{name}" style="{column}"><p>control</p></div></div>'
        for name in ("task", "method", "run")
    )
    page_html = (
        f'<html><body style="margin:0">{_HIDE}<div data-testid="stVerticalBlock" style="{column}">'
        f'<h1 id="head" style="margin:0;height:50px">Explore</h1>{hidden}'
        '<p id="next" style="margin:0">the circuit</p></div></body></html>'
    )
    path = tmp_path / "demo.html"
    path.write_text(page_html, encoding="utf-8")
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--headless", "--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1000, "height": 600})
            page.goto(path.as_uri())
            gap = page.evaluate(
                "() => document.getElementById('next').getBoundingClientRect().top"
                " - document.getElementById('head').getBoundingClientRect().bottom"
            )
            assert page.get_by_text("control").first.is_hidden()
        finally:
            browser.close()
    assert gap == 16  # one gap; 64 with the wrappers left in the column
