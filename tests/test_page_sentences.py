"""Sentences the pages write beside their figures, checked against the figures (an audit found each
of these untrue or unclear): the Gallery's held-out note, About's fitted-to-the-prompt sentence and
the planted-circuit table's heading."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from circuitviz.entry.api import transfer_lines, transfer_note  # noqa: E402
from circuitviz.ui.caveats import fitted_methods_sentence  # noqa: E402

TIMEOUT = 300
pytestmark = pytest.mark.usefixtures("tiny_app")  # the tiny model; results under tmp_path (conftest)

OLD = "Fewer than 5 held-out paraphrases passed both checks (4 for some circuits)."


def test_an_old_shortfall_note_names_its_one_circuit():
    note = transfer_note({"note": OLD, "budgets": {"100": {"ndf": [0.1, 0.2, 0.3, 0.4]}}})
    assert "some circuits" not in note
    assert (
        note
        == "Fewer than 5 held-out paraphrases passed both checks, so the circuit at budget 100 was measured on 4."
    )


def test_an_old_shortfall_note_names_each_circuits_count():
    record = {
        "note": OLD,
        "budgets": {
            "20": {"ndf": [1, 2, 3]},
            "100": {"ndf": [1, 2, 3, 4]},
            "50": {"ndf": [1, 2, 3, 4]},
            "9": {"ndf": []},
        },
    }
    note = transfer_note(record)
    assert note.endswith(
        "so the circuits at budgets 50, 100 were measured on 4 and the circuit at budget 20 was measured on 3."
    )
    lines = transfer_lines(
        {**record, "budgets": {k: {**v, "mean_ndf": 0.5} for k, v in record["budgets"].items()}}
    )
    assert lines[-1] == note  # the command line says it the same way


def test_a_current_note_is_left_as_it_is():
    note = "Measured on 4 held-out paraphrases, not the 5 asked for: the source gave 5 besides the prompt."
    assert transfer_note({"note": note, "budgets": {}}) == note


def test_the_gallery_held_out_note_is_true_of_its_one_circuit():
    import circuitviz.ui.loaders as loaders

    at = AppTest.from_file("../app.py", default_timeout=TIMEOUT)
    at.switch_page("pages/gallery.py").run()
    at.segmented_control(key="gallery.slug").set_value("arithmetic").run()
    assert not at.exception, at.exception
    result, _ = loaders.gallery_example("arithmetic")
    measured = {int(b): len(e["ndf"]) for b, e in result.transfer["budgets"].items() if e["ndf"]}
    captions = " ".join(c.value for c in at.caption)
    assert "some circuits" not in captions
    if len(measured) == 1:  # its count named, as the stored note says it (rebuilt in today's words)
        ((_, count),) = measured.items()
        assert f"measured on {count} held-out paraphrases" in captions.replace("\\", "").lower(), captions


# ----- About ----------------------------------------------------------------------------------------
FITTED = {
    "edge-pruning": ("Edge Pruning", "Edge Pruning learns its mask on this prompt"),
    "bon": ("Best-of-N", "Best-of-N keeps the candidate of highest NDF on this prompt"),
}


def test_the_fitted_sentence_counts_and_names_every_fitted_method():
    sentence = fitted_methods_sentence(FITTED)
    assert sentence.startswith("Two methods fit their circuits to the prompt itself")
    assert "Edge Pruning learns its mask on the prompt" in sentence and "Best-of-N keeps" in sentence
    assert "both" not in sentence


def test_the_fitted_sentence_names_the_tables_variants_and_missing_rows():
    table = (
        "| method | NDF |\n|---|---|\n| edge-pruning (fitted to the prompt) | 0.9 |\n"
        "| edge-pruning-from-eap (fitted to the prompt) | 0.8 |\n| eap | 0.2 |\n"
    )
    sentence = fitted_methods_sentence(FITTED, table)
    assert "Table (a) also marks edge-pruning-from-eap, a variant of Edge Pruning." in sentence
    assert "Table (a) has no row for Best-of-N." in sentence


def test_about_says_how_many_methods_are_fitted_as_the_registry_and_table_do():
    from circuitviz.methods import available_methods
    from circuitviz.services import assets

    at = AppTest.from_file("../app.py", default_timeout=TIMEOUT)
    at.switch_page("pages/about.py").run()
    assert not at.exception, at.exception
    fitted = [m for m in available_methods().values() if m.fitted_to_prompt]
    texts = [m.value for m in at.markdown]
    sentence = next(t for t in texts if "marked *fitted to the prompt*" in t)
    assert "both" not in sentence.split("Their NDF")[0]
    for method in fitted:
        assert method.fitted_to_prompt.replace("this prompt", "the prompt") in sentence
    table = (assets.gallery_dir().parent / "faithfulness.md").read_text(encoding="utf-8")
    marked = {
        line.split("(fitted")[0].strip("| ").strip()
        for line in table.splitlines()
        if "(fitted to the prompt)" in line
    }
    registered = set(available_methods())
    for name in marked - registered:
        assert name in sentence  # every row table (a) marks is accounted for


def test_about_titles_the_planted_table_and_says_shd_and_t_before_it():
    at = AppTest.from_file("../app.py", default_timeout=TIMEOUT)
    at.switch_page("pages/about.py").run()
    order = [(e.type, getattr(e, "value", "")) for e in at.main]
    heading = next(i for i, (_, v) in enumerate(order) if str(v).startswith("Planted circuits"))
    table = next(i for i, (_, v) in enumerate(order) if "| method | cases | SHD |" in str(v))
    explained = next(
        i
        for i, (_, v) in enumerate(order)
        if "SHD (structural Hamming distance)" in str(v) and "|T|" in str(v)
    )
    assert heading < explained < table


# ----- Compare's measured table at 1,000 px -----------------------------------------------------------
def test_compares_measured_table_fits_a_1000_px_page_with_four_methods():
    """The held-out table with four methods, the longest names the registry has: its last column
    was pushed out at 1,000 px, its header cut to 'completer' and every value to '0' (an audit)."""
    import json

    from circuitviz.bench.toy_models import IOI_TASK
    from circuitviz.ui import compare

    prompt, corrupted = IOI_TASK.clean, IOI_TASK.corrupted
    at = AppTest.from_file("../app.py", default_timeout=TIMEOUT)
    for name, value in dict(
        prompt=prompt, corrupted=corrupted, answer=" Mary", foil=" John", budgets="5,10"
    ).items():
        at.query_params[name] = value
    at.switch_page("pages/compare.py").run()
    methods = ["eap", "eap-ig", "edge-pruning", "paraphrase-pruning"]
    at.multiselect(key="compare.methods").set_value(methods).run()
    at.button(key="compare.run").click().run()
    at.toggle(key="compare.transfer").set_value(True).run()
    assert not at.exception, at.exception
    grid = at.dataframe[-1]
    assert "completeness" in grid.value.columns
    config = json.loads(grid.proto.columns)
    # completeness right after the NDFs, before the two counts of paraphrases
    order = list(grid.proto.column_order)
    assert order.index("completeness") < order.index("held out") and order.index(
        "completeness"
    ) < order.index("used by it")
    widths = {name: config[name]["width"] for name in order}
    assert sum(widths[name] for name in order) <= compare.PAGE_PX_AT_1000, widths
    for name in order:  # each header and each value shown whole
        label = config[name].get("label") or name
        longest = max(
            [label, *(f"{v:.3f}" if isinstance(v, float) else str(v) for v in grid.value[name])], key=len
        )
        assert widths[name] >= compare._header_px(longest), (name, widths[name], longest)
        assert config[name].get("help") or name == "method"


def test_the_measured_table_fits_with_the_registrys_four_longest_names():
    from circuitviz.methods import available_methods
    from circuitviz.ui import compare

    longest = sorted(available_methods(), key=len)[-4:]
    assert compare.measured_widths(longest) <= compare.PAGE_PX_AT_1000


# ----- Paraphrases: the edited pairs handed to the next run, and the offer to learn on Explore --------
def _row(pair: str, text: str, candidate: bool) -> dict:
    return {"pair": pair, "paraphrase": text, "corrupted": text.upper(), "candidate": candidate}


def test_a_pair_the_run_left_out_is_not_handed_over_unless_edited():
    from circuitviz.ui import bon

    before = [_row("q", "q", True), _row("p1", "a", True), _row("p2", "b", False), _row("p3", "c", False)]
    reasons = ["", "", "the model answers ' the' here", ""]  # p3: not scored, but no reason given
    kept, left_out = bon.rows_for_next_run([dict(r) for r in before], before, reasons)
    assert kept == [1, 3] and left_out == [("p2", "the model answers ' the' here")]
    edited = [dict(r) for r in before]
    edited[2]["paraphrase"] = "b, edited"
    assert bon.rows_for_next_run(edited, before, reasons) == ([1, 2, 3], [])


def test_the_next_run_sentence_counts_what_is_handed_over_and_says_what_is_not():
    from circuitviz.ui import bon

    said = bon.next_run_sentence(9, [("p4", "the model answers ' the' here")])
    assert said.startswith("The form above now holds 9 paraphrases (source: file); p4 is not among them")
    assert "(the model answers ' the' here)" in said and said.endswith("press Run Best-of-N to score them.")
    none = bon.next_run_sentence(0, [("p4", "x"), ("p5", "y")])
    assert "0 paraphrases" in none and "p4 and p5 are not among them" in none and "press Run" not in none
    assert (
        bon.next_run_sentence(3, [])
        == "The form above now holds 3 paraphrases (source: file); press Run Best-of-N to score them."
    )


def _paraphrases_page() -> AppTest:
    """The app on the Paraphrases page with the IOI task in its link."""
    from circuitviz.bench.toy_models import IOI_TASK

    at = AppTest.from_file("../app.py", default_timeout=TIMEOUT)
    for name, value in dict(
        prompt=IOI_TASK.clean, corrupted=IOI_TASK.corrupted, answer=" Mary", foil=" John"
    ).items():
        at.query_params[name] = value
    return at.switch_page("pages/paraphrases.py").run()


def test_use_edited_pairs_hands_over_what_the_estimate_counts(tmp_path):
    """A run whose check leaves one listed pair out (the tiny model answers something else after a
    row of 'the'); the button hands over the others, and the estimate above Run counts the same."""
    import json

    at = _paraphrases_page()
    lines = [
        (
            "When Mary and John went to the shop, John gave a drink to",
            "When Alice and Bob went to the shop, Carl gave a drink to",
        ),
        (
            "When Mary and John went to the park, John gave a ball to",
            "When Alice and Bob went to the park, Carl gave a ball to",
        ),
        ("the the the the the the the the the the the the the", "a a a a a a a a a a a a a"),
    ]
    at.selectbox(key="bon.method.bon.paraphrase_source").set_value("file").run()
    at.text_area(key="bon.method.bon.paraphrases").set_value(
        "\n".join(json.dumps({"clean": c, "corrupted": k}) for c, k in lines)
    ).run()  # Run waits for the pairs
    at.number_input(key="bon.method.bon.ig_steps").set_value(1)
    at.text_input(key="w.bon.budgets").set_value("5,10")
    at.button(key="bon.run").click().run()
    assert not at.exception, at.exception
    pairs = at.session_state["results"]["bon"].details.pairs
    left = [f"p{i}" for i, pair in enumerate(pairs) if i and pair.get("reason")]
    if not left:
        pytest.skip("the tiny model answered alike on every listed pair")
    at.button(key="bon.use_pairs").click().run()
    assert not at.exception, at.exception
    handed = at.session_state["bon.method.bon.paraphrases"].splitlines()
    assert len(handed) == len(lines) - len(left)
    estimate = next(c.value for c in at.caption if c.value.startswith("Estimate"))
    assert f", {len(handed)} paraphrases" in estimate, estimate
    said = next(m.value for m in at.success if "now holds" in m.value)
    assert f"holds {len(handed)} paraphrases" in said and left[0] in said


def test_the_learn_offer_says_it_leaves_for_explore_and_how_long():
    from circuitviz.ui import bon

    said = bon.learn_offer_sentence("Paraphrase pruning", 68.0)
    assert "opens the Explore page and runs Paraphrase pruning there" in said and "68 s" in said
    assert "estimate" not in bon.learn_offer_sentence("Paraphrase pruning", None)
    # a range where Explore's estimate is one: it said "about 37 s" beside Explore's "16 s to 48 s"
    ranged = bon.learn_offer_sentence("Paraphrase pruning", 37.0, (16.0, 48.0))
    assert "16 s to 48 s on this machine by its estimate" in ranged and "37 s" not in ranged


def test_paraphrases_says_under_the_learn_offer_where_it_runs_and_for_how_long():
    at = _paraphrases_page()
    at.number_input(key="bon.method.bon.n_paraphrases").set_value(2)
    at.number_input(key="bon.method.bon.ig_steps").set_value(1)
    at.text_input(key="w.bon.budgets").set_value("5,10")
    at.button(key="bon.run").click().run()
    assert not at.exception, at.exception
    offered = [b for b in at.button if b.label.startswith("Learn a small circuit that carries over")]
    said = [c.value for c in at.caption if c.value.startswith("The button above opens the Explore page")]
    assert len(said) == len(offered)  # said exactly where the offer is drawn
    if not offered:
        pytest.skip("the tiny model's curve opens at a faithful circuit: no offer to learn one")
    assert "by its estimate" in said[0] and ("about" in said[0] or " to " in said[0]), said


def _learn_offer_page(ndfs, method, budget):
    """A result of ``method`` whose curve over budgets 5, 10, 20 has ``ndfs``: the Explore slider's
    offer to learn a small circuit (at ``budget``, or where the slider opens when None) and the
    Paraphrases page's caption under it, drawn as the two pages draw them."""
    from types import SimpleNamespace

    from circuitviz.core.curves import CurvePoint
    from circuitviz.core.tasks import PromptTask
    from circuitviz.ui import paraphrase_view, result_view

    curve = [CurvePoint(b, b, 1.0, ndf, ndf) for b, ndf in zip((5, 10, 20), ndfs)]
    task = PromptTask("The capital of France is", "The capital of Italy is", " Paris", (" Rome",))
    result = SimpleNamespace(
        method=method, model_id="tiny", budgets=[5, 10, 20], curve=curve, any_budget=False, task=task
    )
    if budget is None:
        budget = result_view.budget_slider(result, "budget")  # draws the offer where it opens
    else:
        result_view.transferable_offer(result, "budget", budget)
    paraphrase_view.learn_offer_caption(None, result, budget)


@pytest.mark.parametrize(
    "ndfs, method, budget, shown",
    [
        ((0.2, 0.3, 0.5), "eap", None, True),  # opens at 20, not faithful: offered
        ((0.2, 0.9, 0.95), "eap", None, False),  # opens at a faithful 10: none
        ((0.2, 0.3, 0.5), "paraphrase-pruning", None, False),  # the offered method itself: none
        ((0.2, 0.3, 0.5), "eap", 20, True),
        ((0.2, 0.3, 0.5), "eap", 10, False),  # not the opening budget: none
    ],
)
def test_the_learn_offers_caption_is_drawn_exactly_where_its_button_is(
    ndfs, method, budget, shown, monkeypatch
):
    """The Paraphrases page's caption under "Learn a small circuit that carries over" repeated the
    rule that draws the button in its own code; both ask ``result_view.learn_offer`` now."""
    from types import SimpleNamespace

    import circuitviz.ui.loaders as loaders

    monkeypatch.setattr(loaders, "request_for", lambda *args: SimpleNamespace(estimate=None))
    at = AppTest.from_function(_learn_offer_page, args=(ndfs, method, budget)).run()
    assert not at.exception, at.exception
    buttons = [b for b in at.button if b.label.startswith("Learn a small circuit that carries over")]
    said = [c for c in at.caption if c.value.startswith("The button above opens the Explore page")]
    assert len(buttons) == len(said) == int(shown), (buttons, said)


def test_the_p_of_best_of_ns_line_is_defined_as_the_forms_field():
    """The method line says 'p paraphrases' above a field 'n paraphrases': the page says which p is."""
    from circuitviz.methods import available_methods

    summary = available_methods()["bon"].summary
    at = AppTest.from_file("../app.py", default_timeout=TIMEOUT)
    at.switch_page("pages/paraphrases.py").run()
    assert not at.exception, at.exception
    field = at.number_input(key="bon.method.bon.n_paraphrases").label
    top = at.caption[0].value
    if " p paraphrases" in summary:
        assert "p paraphrases" in top and f"p: the form's “{field}”" in top, top
    about = AppTest.from_file("../app.py", default_timeout=TIMEOUT)
    about.switch_page("pages/about.py").run()
    if " p paraphrases" in summary:
        assert any(
            f"(p: the\n  setting “{field}”" in m.value or f"(p: the setting “{field}”" in m.value
            for m in about.markdown
        )


def test_the_gallery_says_whose_example_it_is_when_the_sidebar_holds_another_model():
    """``/gallery?model=smollm2-135m`` showed Gemma-3-270M's circuits beside a sidebar saying
    SmolLM2-135M, and "Re-run live" switched the sidebar to Gemma-3-270M, unsaid (an audit)."""
    import json

    from circuitviz.services import assets

    entry = json.loads((assets.gallery_dir() / "index.json").read_text())[0]
    at = AppTest.from_file("../app.py", default_timeout=TIMEOUT)
    at.query_params["model"] = "smollm2-135m"
    at.switch_page("pages/gallery.py").run()
    assert not at.exception, at.exception
    said = [info.value for info in at.info]
    assert any(
        text.startswith(f"The sidebar's model is smollm2-135m; this example is {entry['model_id']}'s")
        and f"runs it on {entry['model_id']} and switches the sidebar to it" in text
        for text in said
    ), said
    at = AppTest.from_file("../app.py", default_timeout=TIMEOUT)
    at.query_params["model"] = entry["model_id"]
    at.switch_page("pages/gallery.py").run()
    assert not at.exception, at.exception
    assert not any("sidebar's model" in info.value for info in at.info)
