"""Steer for a model no SAE ships for: "No SAEs ship for smollm2-135m; load one from a local
folder..." was a red error, though it is a state of the model, and it named a local folder where a
shared server offers none. It is an info naming the sources the page offers above it."""

from __future__ import annotations

import pytest

from circuitviz.labels import sae_features

pytest.importorskip("streamlit")


def test_no_saes_shipping_is_an_info_with_the_ways_to_saes(tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest
    from test_labels import _steer_setup

    _steer_setup(tmp_path, monkeypatch)
    monkeypatch.setattr(sae_features, "embedded_sae_folders", lambda model_id: [])
    at = AppTest.from_file("../app.py", default_timeout=300)
    at.switch_page("pages/steer.py").run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    said = [info.value.replace("\\", "") for info in at.info if "No SAEs ship" in info.value]
    assert len(said) == 1 and said[0].endswith(
        "choose 'local folder' or 'hub' above to load one, or train one with scripts/train_saes.py."
    ), said


def test_the_sentence_names_only_the_sources_offered():
    assert sae_features.no_saes_sentence("m", ("hub",)) == (
        "No SAEs ship for m; choose 'hub' above to load one, or train one with scripts/train_saes.py."
    )
    assert (
        sae_features.no_saes_sentence("m", ()) == "No SAEs ship for m; train one with scripts/train_saes.py."
    )
    with pytest.raises(sae_features.SaeUnavailable, match="^No SAEs ship for nothing-ships; load one"):
        sae_features.load_embedded_saes(None, "nothing-ships")  # elsewhere (a caption): a folder's way
