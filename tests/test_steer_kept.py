"""What the Steer page keeps when another page opens and the user comes back: the SAE folder
typed (Streamlit drops a widget's value when a page without it runs, so the page stopped at an
empty folder box) and the last zeroing's figures while its inputs stand."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402
from test_labels import _steer_folder_inputs, _steer_setup  # noqa: E402


@pytest.fixture
def steer_page(tmp_path, monkeypatch):
    _steer_setup(tmp_path, monkeypatch)
    at = AppTest.from_file("../app.py", default_timeout=300)
    at.switch_page("pages/steer.py").run()
    _steer_folder_inputs(at, tmp_path, "a0.h0, m0")
    assert not at.exception, at.exception
    return at


def test_the_sae_folder_typed_survives_a_page_switch(steer_page, tmp_path):
    at = steer_page
    at.switch_page("pages/explore.py").run()
    at.switch_page("pages/steer.py").run()
    assert not at.exception, at.exception
    assert at.text_input(key="steer.folder").value == str(tmp_path / "sae")
    assert at.multiselect(key="steer.features").options  # the nodes labelled again, not a stop
    assert "sae" in at.query_params and str(tmp_path) not in str(dict(at.query_params))  # no path


def test_the_zeroings_figures_stay_while_what_was_zeroed_stands(steer_page):
    """The figures were one press's: a switch to another page and back, or any other click on the
    page, emptied them with nothing said."""
    at = steer_page
    at.multiselect(key="steer.features").select(at.multiselect(key="steer.features").options[0]).run()
    at.button(key="steer.zero").click().run()
    assert not at.exception, at.exception
    figures = [t.value for t in at.table if "zeroed" in t.value.columns]
    assert len(figures) == 1
    at.switch_page("pages/explore.py").run()
    at.switch_page("pages/steer.py").run()
    assert not at.exception, at.exception
    again = [t.value for t in at.table if "zeroed" in t.value.columns]
    assert len(again) == 1 and again[0].equals(figures[0])
    at.text_input(key="steer.foil").set_value(" Paris").run()  # another metric: those figures are not its
    assert not [t for t in at.table if "zeroed" in t.value.columns]
