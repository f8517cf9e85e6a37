"""The Steer page's labels where a browser cannot draw them: a feature's top tokens from scripts the
fonts of many Latin-script systems lack (Chromium drew 'ことなく' and '蜍' as empty boxes) are kept and
named in words after them, with how many characters there are."""

from __future__ import annotations

import pytest

from circuitviz.ui.steer import (
    FEATURE_COLUMNS,
    FONTLESS,
    SHARE,
    feature_options,
    feature_rows,
    readable,
    readable_context,
    script_of,
)

LABEL = "L0/5: fires on 'Any', 'Ранг'; promotes 'ことなく', '蜍', '인간', 'tion'"
SHOWN = "fires on 'Any', 'Ранг'; promotes 'ことなく [Hiragana ×4]', '蜍 [CJK]', '인간 [Hangul ×2]', 'tion'"


def _labels():
    feature = {"feature": 5, "label": LABEL, "share": 1.0, "activation": 2.0, "token": " said"}
    return {"a0.h0": {"sae": "sae", "sae_layer": 0, "features": [feature], "reason": None}}


def test_a_run_of_one_script_is_named_with_its_length():
    assert readable("ことなく") == "ことなく [Hiragana ×4]"
    assert readable("人は") == "人は [CJK, Hiragana]"  # a kanji, then a kana
    assert readable("a蜍b蜍蜍") == "a蜍 [CJK]b蜍蜍 [CJK ×2]"
    assert readable("สวัสดี") == "สวัสดี [Thai ×6]"
    # the scripts the fonts hold pass unchanged: Latin, Cyrillic, Greek, Arabic, Hebrew, the app's ↵
    for text in ("café", "Ранг", "λόγος", "سلام", "שלום", "a↵b", "", "\0"):
        assert readable(text) == text


def test_the_scripts_do_not_overlap():
    ranges = sorted(FONTLESS)
    assert all(last < first for (_, last), (first, _) in zip(ranges, ranges[1:]))
    assert script_of("蜍") == "CJK" and script_of("a") is None


def test_the_table_and_the_picker_name_the_scripts():
    assert feature_rows(_labels())[0]["what it does"] == SHOWN
    assert feature_options(_labels()) == {(0, 5): f"a0.h0: L0/5: {SHOWN}"}
    context = {"tokens": ["The", " 蜍", "x"], "target": 1}
    assert readable_context(context) == {"tokens": ["The", " 蜍 [CJK]", "x"], "target": 1}


def test_the_steer_page_names_the_scripts_after_their_characters(tmp_path, monkeypatch):
    pytest.importorskip("streamlit")
    from streamlit.testing.v1 import AppTest
    from test_labels import PROMPT, _steer_setup

    from circuitviz.labels import sae_features

    _steer_setup(tmp_path, monkeypatch)
    monkeypatch.setattr(sae_features, "circuit_node_features", lambda *args, **kwargs: _labels())
    at = AppTest.from_file("../app.py", default_timeout=300)
    at.switch_page("pages/steer.py").run()
    at.radio(key="steer.source").set_value("local folder").run()
    at.text_input(key="steer.folder").set_value(str(tmp_path / "sae")).run()
    at.text_input(key="steer.prompt").set_value(PROMPT)
    at.text_input(key="steer.nodes").set_value("a0.h0").run()
    assert not at.exception, at.exception
    table = at.table[0].value  # markdown: its cells escaped
    said = [text.replace("\\", "") for text in table["what it does"]]
    assert said == [SHOWN]
    assert at.multiselect(key="steer.features").options == [f"a0.h0: L0/5: {SHOWN}"]
    # every character of those scripts is kept, and each run is named right after it
    shown = "".join(said) + "".join(at.multiselect(key="steer.features").options)
    assert shown.count("ことなく [Hiragana ×4]") == 2 and shown.count("蜍 [CJK]") == 2
    # the table of text that wraps, not the grid that scrolled sideways at 1,000 px
    assert not at.dataframe and list(table.columns) == list(FEATURE_COLUMNS)
    assert list(table[SHARE]) == ["50%"] and list(table["node"]) == [r"a0\.h0"]
