"""A presenter's demo link (``demo=1``) on a page without demo mode drew every control and the
sidebar without a word, and Explore's form under it before any circuit was drawn said nothing of
when the controls go: each is one sentence now (seen in Chromium at 1,000-2,000 px, 2026-12-06)."""

from __future__ import annotations

import pytest

from circuitviz.ui.link_values import DEMO_WAITING, demo_not_here_sentence

pytest.importorskip("streamlit")
from explore_session import QUERY  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

pytestmark = pytest.mark.usefixtures("tiny_app")


def test_the_sentence_names_where_demo_mode_is_and_only_for_pages_with_controls():
    said = demo_not_here_sentence("Compare", "1")
    assert said == (
        "Demo mode (demo=1 in the link) hides the controls around one circuit on Explore and the "
        "Gallery; Compare has no demo mode, so its controls are shown."
    )
    assert demo_not_here_sentence("Explore", "1") is None and demo_not_here_sentence("Gallery", "1") is None
    assert demo_not_here_sentence("About", "1") is None  # text only: nothing is shown that demo would hide
    assert demo_not_here_sentence("Compare", None) is None


def _app(page: str | None, **query) -> AppTest:
    at = AppTest.from_file("../app.py", default_timeout=300)
    for name, value in query.items():
        at.query_params[name] = value
    if page:
        at.switch_page(page)
    return at.run()


def test_a_demo_link_to_a_page_without_demo_mode_says_so():
    for page, title in (("pages/compare.py", "Compare"), ("pages/dataset.py", "Dataset")):
        at = _app(page, demo="1")
        assert not at.exception, at.exception
        assert [i.value for i in at.info if i.value.startswith("Demo mode")] == [
            demo_not_here_sentence(title, "1")
        ]
    plain = _app("pages/compare.py")
    assert not any(i.value.startswith("Demo mode") for i in plain.info)


def test_explore_under_a_demo_link_says_when_its_controls_go():
    at = _app(None, demo="1", **QUERY)
    assert not at.exception, at.exception
    assert DEMO_WAITING in [i.value for i in at.info]
    next(b for b in at.button if b.label == "Run").click()
    at.run()  # the circuit drawn: demo mode on, the sentence gone
    assert not at.exception, at.exception
    assert at.toggle(key="explore.demo").value
    assert DEMO_WAITING not in [i.value for i in at.info]


def test_a_demo_link_on_a_circuit_over_positions_says_it_has_no_demo_view():
    """Demo mode is the edge view's: on EAP-IG over positions (the README's Explore picture) a demo
    link showed every control and no switch, without a word."""
    from circuitviz.ui.link_values import DEMO_NO_POSITIONS

    query = {**QUERY, "budgets": "10,40,100", "settings": '{"positions": true}'}
    at = _app(None, demo="1", **query)
    next(b for b in at.button if b.label == "Run").click()
    at.run()
    assert not at.exception, at.exception
    assert DEMO_NO_POSITIONS in [i.value for i in at.info]
    plain = _app(None, **query)
    assert not plain.exception, plain.exception
    assert DEMO_NO_POSITIONS not in [i.value for i in plain.info]


def test_demo_mode_on_a_circuit_of_no_edge_says_so_without_the_hidden_budget():
    """EAP-IG at budget 1 keeps no edge (its one edge is on no path from the input to the logits):
    demo mode said "0 connections; its faithfulness (NDF) is 0.00 (below 0.8: it carries only part of
    it)" over an empty frame noted "raise the budget", a control it hides (seen in Chromium)."""
    from graph_data import graph_data

    from circuitviz.render.demo import empty_sentence

    at = _app(None, demo="1", **{**QUERY, "budgets": "1"})
    next(b for b in at.button if b.label == "Run").click()
    at.run()
    assert not at.exception, at.exception
    said = [m.value for m in at.markdown]
    assert empty_sentence(1) in said
    assert not any("carries only part" in text or "0 connections" in text for text in said)
    assert not graph_data(at)  # no empty frame, so no "raise the budget" under it
    assert not any(c.value.startswith("Of the circuit's 0 edges") for c in at.caption)
    plain = _app(None, **{**QUERY, "budgets": "1"})  # the page's own view: no caption on nothing
    next(b for b in plain.button if b.label == "Run").click()
    plain.run()
    assert not plain.exception, plain.exception
    assert any(m.value == "The circuit has no edges at this budget." for m in plain.markdown)
    assert not any(c.value.startswith("Of the circuit's 0 edges") for c in plain.caption)


def test_a_demo_link_draws_the_groups_its_view_names_and_says_its_edit_is_not_drawn():
    """Demo mode drew only the groups the page had saved in this session: a shared demo link naming
    its groups (``view=``) opened with the proposed grouping instead, unsaid (the Gallery in
    Chromium); and a view's edit is said not to be what the demo draws."""
    import json

    from explore_session import explore_session, run_it
    from graph_data import graph_data

    first = run_it(explore_session())
    assert not first.exception, first.exception
    nodes = [n["id"] for n in graph_data(first)[0]["nodes"] if n["id"] not in ("input", "logits")][:2]
    view = {"groups": {"my heads": nodes}}
    at = _app(None, demo="1", view=json.dumps(view), **QUERY)  # the stored circuit, a new session
    assert not at.exception, at.exception
    drawn = [n["id"] for n in graph_data(at)[0]["nodes"]]
    assert "group:my heads" in drawn and not set(nodes) & set(drawn)
    assert any("Purple boxes are the groups named on this page." in m.value for m in at.markdown)
    edited = _app(None, demo="1", view=json.dumps({"edit": {"removed_nodes": nodes[:1]}}), **QUERY)
    assert not edited.exception, edited.exception
    said = [c.value.replace("\\", "") for c in edited.caption if "not the view's edit" in c.value]
    assert said == [
        f"Demo mode draws the method's circuit and its figures, not the view's edit (removed {nodes[0]}): "
        "turn demo mode off to see the edit measured."
    ]


def test_a_link_to_a_circuit_this_server_has_not_stored_says_so():
    """A link copied from a drawn circuit (it names its budget) opened on a server that has no
    result for it (the code changed since, and results are kept per version of it; or another
    server) showed the form with nothing said, Run its only cue (seen in Chromium after a restart
    on changed code, SmolLM2-135M)."""
    from circuitviz.ui.link_values import LINK_NOT_STORED

    at = _app(None, budget="20", **QUERY)
    assert not at.exception, at.exception
    assert LINK_NOT_STORED in [i.value for i in at.info]
    next(b for b in at.button if b.label == "Run").click()
    at.run()  # its circuit drawn: nothing left to say
    assert not at.exception, at.exception
    assert LINK_NOT_STORED not in [i.value for i in at.info]
    assert LINK_NOT_STORED not in [i.value for i in _app(None, **QUERY).info]  # a link naming no view
