"""The Gallery's "NDF held out" is stored at each example's headline budget only: moved to another
budget, the figure vanished with nothing said (an audit, 2026-12-07). One sentence says where it was
measured and how to measure it at the budget shown."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from circuitviz.ui import loaders  # noqa: E402
from circuitviz.ui.measure_offers import measured_elsewhere_sentence  # noqa: E402


def test_the_sentence_names_the_budgets_measured_and_none_where_the_figure_shows():
    stored = {"30": {"ndf": [0.6, 0.7], "paraphrases": ["a", "b"]}, "50": {"ndf": [0.9]}}
    result = SimpleNamespace(details=None, transfer={"budgets": stored})
    assert measured_elsewhere_sentence(result, 30) == ""
    assert measured_elsewhere_sentence(result, 100) == (
        "NDF on held-out paraphrases was measured when this result was stored at budgets 30 and 50 "
        "only, not at 100; measuring it here runs the model: re-run the example live on the Explore "
        "page, which offers it."
    )
    assert measured_elsewhere_sentence(SimpleNamespace(details=None, transfer=None), 100) == ""


def test_a_gallery_example_moved_off_its_headline_budget_says_where_held_out_was_measured():
    examples = loaders.gallery_index()
    if not examples:
        pytest.skip("the gallery is not built")
    entry = examples[0]
    result, _ = loaders.gallery_example(entry["slug"])
    at = AppTest.from_file("../app.py", default_timeout=300)
    at.query_params["example"] = entry["slug"]
    at.switch_page("pages/gallery.py")
    at.run()
    assert not at.exception, at.exception
    headline = entry["headline"]["budget"]
    assert any(m.label == "NDF held out" for m in at.metric)
    assert not [c.value for c in at.caption if c.value.startswith("NDF on held-out paraphrases was")]
    other = next(b for b in sorted(result.budgets) if b != headline)
    at.select_slider(key=f"w.gallery.{entry['slug']}.budget").set_value(other).run()
    assert not at.exception, at.exception
    assert not any(m.label == "NDF held out" for m in at.metric)
    said = [c.value for c in at.caption if c.value.startswith("NDF on held-out paraphrases was")]
    assert said == [measured_elsewhere_sentence(result, other)], said
    assert f"at budget {headline:,} only, not at {other:,}" in said[0]
