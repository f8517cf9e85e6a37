"""A Gallery link reopens the example its user was looking at (``example`` in the URL,
``state.Session.gallery_slug``): until 2026-12-06 the Gallery's address stayed a bare ``/gallery``,
so a shared example opened as the first one (and a link's graph view, ``view``, was read against
the first example's nodes). An example the gallery does not have gets one sentence, the first shown."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from circuitviz.ui import loaders  # noqa: E402
from circuitviz.ui.gallery_view import unknown_example_sentence  # noqa: E402


def _gallery(**query) -> AppTest:
    at = AppTest.from_file("../app.py", default_timeout=300)
    for name, value in query.items():
        at.query_params[name] = value
    at.switch_page("pages/gallery.py")  # the link's page on the session's first run, as a browser opens it
    return at.run()


def _examples() -> list[dict]:
    examples = loaders.gallery_index()
    if len(examples) < 2:
        pytest.skip("the gallery is not built")
    return examples


def test_a_gallery_link_reopens_its_example():
    examples = _examples()
    second = examples[1]
    at = _gallery()
    assert not at.exception, at.exception
    assert at.query_params["example"] == examples[0]["slug"]
    at.segmented_control(key="gallery.slug").set_value(second["slug"]).run()
    assert at.query_params["example"] == second["slug"]
    again = _gallery(example=second["slug"])  # the link in a new browser
    assert not again.exception, again.exception
    assert again.segmented_control(key="gallery.slug").value == second["slug"]
    assert again.subheader[0].value == second["title"]
    assert not [i.value for i in again.info if "link's example" in i.value]


def test_an_example_the_gallery_lacks_is_said_and_the_first_shown():
    examples = _examples()
    for text in ("nonsense", "[x](https://example.com) **b**"):
        at = _gallery(example=text)
        assert not at.exception, (text, at.exception)
        said = [i.value for i in at.info if "link's example" in i.value]
        assert said == [unknown_example_sentence(text, examples)], text
        assert at.subheader[0].value == examples[0]["title"]
        assert at.query_params["example"] == examples[0]["slug"]
    assert "\\[x\\]" in unknown_example_sentence("[x](https://example.com)", examples)  # escaped
    assert unknown_example_sentence(None, examples) == ""


def test_a_gallery_link_reopens_its_examples_budget():
    """``example_budget``: the budget the example was shown at (its slider), for the link's example
    only; one the example was not evaluated at opens its readable budget with one sentence."""
    from circuitviz.ui.gallery_view import unknown_example_budget_sentence
    from circuitviz.ui.result_view import demo_budget

    examples = _examples()
    second = examples[1]
    result, _ = loaders.gallery_example(second["slug"])
    opening = demo_budget(result)
    other = next(b for b in sorted(result.budgets) if b != opening)
    at = _gallery(example=second["slug"])
    assert at.query_params["example_budget"] == str(opening)
    at.select_slider(key=f"w.gallery.{second['slug']}.budget").set_value(other).run()
    assert not at.exception, at.exception
    assert at.query_params["example_budget"] == str(other)
    again = _gallery(example=second["slug"], example_budget=str(other))  # the link in a new browser
    assert again.select_slider(key=f"w.gallery.{second['slug']}.budget").value == other
    assert any(f"This link opened it at budget {other:,}." in c.value for c in again.caption)
    # the budget is the link's example's: a link naming none (another page's address) leaves the
    # example shown at its own readable budget
    first, _ = loaders.gallery_example(examples[0]["slug"])
    unnamed = _gallery(example_budget=str(other))
    assert unnamed.session_state[f"gallery.{examples[0]['slug']}.budget"] == demo_budget(first)
    # another example chosen in the same session opens at its own readable budget, not the one
    # the slider showed for the example before (it opened arithmetic at ioi's 30, 'This link opened')
    third, _ = loaders.gallery_example(examples[2]["slug"])
    again.segmented_control(key="gallery.slug").set_value(examples[2]["slug"]).run()
    assert again.session_state[f"gallery.{examples[2]['slug']}.budget"] == demo_budget(third)
    assert not any("This link opened" in c.value for c in again.caption)
    lacking = _gallery(example=second["slug"], example_budget="7777")
    said = [i.value for i in lacking.info if "link's budget" in i.value]
    assert said == [unknown_example_budget_sentence(7777, sorted(result.budgets), opening)]
    assert lacking.select_slider(key=f"w.gallery.{second['slug']}.budget").value == opening
