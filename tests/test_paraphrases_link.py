"""A Paraphrases link reopens the intersection its user highlighted in the candidates' UpSet
(``highlight`` in the URL, ``state.Session.bon_intersection``): until 2026-12-06 the link carried
the method, its settings, budgets and budget but not the highlight, so a shared view opened with
nothing highlighted. One the UpSet does not have at the link's budget gets one sentence; nothing
highlighted (the default) stays out of the URL."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
pytest.importorskip("circuitviz.methods.bon")
from explore_session import LINK  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from circuitviz.ui.paraphrase_view import missing_intersection_sentence  # noqa: E402

pytestmark = pytest.mark.usefixtures("tiny_app")  # the tiny model; results under tmp_path (conftest)
HIGHLIGHT = "bon.intersection"


def _paraphrases(**query) -> AppTest:
    at = AppTest.from_file("../app.py", default_timeout=300)
    for name, value in {**LINK, **query}.items():
        at.query_params[name] = value
    at.switch_page("pages/paraphrases.py")  # the link's page on the session's first run
    return at.run()


def test_a_paraphrases_link_reopens_the_highlighted_intersection():
    at = _paraphrases(bon_method="ibon")
    at.number_input(key="bon.method.ibon.n_paraphrases").set_value(3)
    at.number_input(key="bon.method.ibon.ig_steps").set_value(1)
    at.button(key="bon.run").click().run()
    assert not at.exception, at.exception
    options = at.selectbox(key=HIGHLIGHT).options
    assert len(options) >= 2 and options[0] == "none"
    assert "highlight" not in at.query_params  # nothing highlighted: the default, unsaid
    at.selectbox(key=HIGHLIGHT).set_value(options[1]).run()
    assert not at.exception, at.exception
    assert at.query_params["highlight"] == options[1]
    link = {name: at.query_params[name] for name in at.query_params}
    again = _paraphrases(**link)  # the link in a new browser: the stored run, its bar highlighted
    assert not again.exception, again.exception
    assert again.selectbox(key=HIGHLIGHT).value == options[1]
    assert any("of this intersection's" in c.value for c in again.caption)
    assert not [i.value for i in again.info if "highlighted intersection" in i.value]
    # one the UpSet lacks (another budget's, a typo, markup): one sentence, nothing highlighted
    text = "[x](https://example.com) (3 edges)"
    lacking = _paraphrases(**{**link, "highlight": text})
    assert not lacking.exception, lacking.exception
    said = [i.value for i in lacking.info if "highlighted intersection" in i.value]
    assert said == [missing_intersection_sentence(text, int(link["budget"]))]
    assert "\\[x\\]" in said[0]
    assert lacking.selectbox(key=HIGHLIGHT).value == "none" and "highlight" not in lacking.query_params
    lacking.run()  # said once
    assert not [i.value for i in lacking.info if "highlighted intersection" in i.value]
