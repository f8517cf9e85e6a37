"""A link whose metric the app does not have (a typo, '<script>') and no foil: the metric is
replaced by logit_diff before the inputs are completed, so the foil is proposed as for a link
that names no metric. It was replaced after, and the page refused the run for a missing foil
that the link had never been asked for."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
from explore_session import LINK  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

pytestmark = pytest.mark.usefixtures("tiny_app")  # the tiny model; results under tmp_path (conftest)


def _opened(**query) -> AppTest:
    at = AppTest.from_file("../app.py", default_timeout=300)
    for name, value in query.items():
        at.query_params[name] = value
    return at.run()


def test_an_unknown_metric_in_a_link_gets_the_foil_a_link_without_one_gets():
    link = {name: value for name, value in LINK.items() if name != "foil"}
    plain = _opened(**link)
    assert not plain.exception, plain.exception
    proposed = plain.session_state["foil"]
    assert proposed
    at = _opened(**link, metric="<script>")
    assert not at.exception, at.exception
    assert [w.value for w in at.warning if "a metric" in w.value], [w.value for w in at.warning]
    assert at.session_state["metric"] == "logit_diff"
    assert at.session_state["foil"] == proposed
    assert not [e.value for e in at.error if "needs at least one foil" in e.value]
