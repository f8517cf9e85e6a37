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
    if len(measured) == 1:
        ((budget, count),) = measured.items()
        assert f"the circuit at budget {budget:,} was measured on {count}" in captions, captions


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
