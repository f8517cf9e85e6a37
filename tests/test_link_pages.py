"""A link names the view of the page it was copied on, and nothing of the other pages': each URL
field knows the pages that read it (``state.Field.pages``), and the URL writer keeps those of the
page shown and the app-wide ones (model, device, the task). Until 2026-12-06 a field, once set,
stayed in every page's URL: the Gallery's "Re-run live" opened Explore with ``example_budget=30``,
Signals' ``decision`` and Steer's ``zero`` rode along on Explore's and Compare's links. Switching
pages keeps what the user had on the page left (the session holds it; only the URL drops it)."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
from explore_session import LINK  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from circuitviz.ui import loaders  # noqa: E402

pytestmark = pytest.mark.usefixtures("tiny_app")  # the tiny model; results under tmp_path (conftest)

# other pages' fields, as a link hand-made from several pages' would give them
OTHERS = {
    "decision": "2",  # Signals
    "acc_settings": '{"k": 2.0}',
    "zero": "L6/1",  # Steer
    "nodes": "m5",
    "example_budget": "30",  # Gallery
    "highlight": "a",  # Paraphrases
    "bon_method": "bon",
    "compare": "eap,eap-ig",  # Compare
}


def _app(**query) -> AppTest:
    at = AppTest.from_file("../app.py", default_timeout=300)
    for name, value in query.items():
        at.query_params[name] = value
    return at


def test_other_pages_fields_leave_the_link_and_stay_in_the_session():
    at = _app(**LINK, method="eap", **OTHERS).run()
    assert not at.exception, at.exception
    assert not set(OTHERS) & set(at.query_params), dict(at.query_params)
    assert {name: at.query_params[name] for name in LINK} == LINK  # Explore's own view stays
    assert at.query_params["method"] == "eap"
    at.switch_page("pages/compare.py").run()  # Compare reads its methods from the session
    assert not at.exception, at.exception
    assert at.multiselect(key="compare.methods").value == ["eap", "eap-ig"]
    assert at.query_params["compare"] == "eap,eap-ig"
    assert "method" not in at.query_params and "decision" not in at.query_params  # Explore's, Signals'
    assert at.query_params["budgets"] == LINK["budgets"]  # Compare runs with Explore's budgets
    at.switch_page("pages/explore.py").run()
    assert at.query_params["method"] == "eap" and "compare" not in at.query_params
    assert at.session_state["compare.chosen"] == ["eap", "eap-ig"]  # kept for Compare


def test_the_gallerys_rerun_opens_explore_without_the_gallerys_fields():
    examples = loaders.gallery_index()
    if len(examples) < 2:
        pytest.skip("the gallery is not built")
    at = _app().run()
    at.switch_page("pages/gallery.py").run()
    at.segmented_control(key="gallery.slug").set_value(examples[1]["slug"]).run()
    assert at.query_params["example"] == examples[1]["slug"] and "example_budget" in at.query_params
    at.button(key="gallery.rerun").click().run()
    assert not at.exception, at.exception
    assert at.title[0].value.startswith("Explore")
    assert "example" not in at.query_params and "example_budget" not in at.query_params
    assert at.query_params["prompt"] == examples[1]["task"]["clean"]
    at.switch_page("pages/gallery.py").run()  # the example left is the one shown again
    assert at.segmented_control(key="gallery.slug").value == examples[1]["slug"]
    assert at.query_params["example"] == examples[1]["slug"]


def test_every_url_field_names_pages_the_app_has():
    from circuitviz.ui.pagelist import PAGES
    from circuitviz.ui.state import VIEW_FIELDS

    for field in VIEW_FIELDS:
        assert field.pages is None or set(field.pages) <= set(PAGES), field.key
    app_wide = {field.url for field in VIEW_FIELDS if field.pages is None}
    assert app_wide == {"model", "device", "prompt", "corrupted", "answer", "foil", "metric"}


def test_an_edit_on_explores_graph_is_not_said_of_the_paraphrases_page():
    """Paraphrases has no graph of its own to edit: the caption saying its measure buttons measure
    the method's circuit, "not your edit", read Explore's graph view (a link's ``view`` with an
    edit, or one made on Explore) and was said under Best-of-N's metrics too."""
    at = _app(**LINK, bon_method="ibon", view='{"edit": {"removed_edges": ["a0.h0->logits"]}}')
    at.switch_page("pages/paraphrases.py").run()
    at.number_input(key="bon.method.ibon.n_paraphrases").set_value(3)
    at.number_input(key="bon.method.ibon.ig_steps").set_value(1)
    at.button(key="bon.run").click().run()
    assert not at.exception, at.exception
    assert any(b.label.startswith("Measure its") for b in at.button)  # the offers are there
    assert not [c.value for c in at.caption if "not your edit" in c.value]


def test_about_keeps_only_the_app_wide_fields_of_a_hand_made_link():
    """About read none of a link's page fields and never wrote its URL: ``/about?decision=2`` kept
    Signals' decision (and any other page's field) in the address a reader copied from About."""
    at = _app(**LINK, **OTHERS)
    at.switch_page("pages/about.py").run()
    assert not at.exception, at.exception
    assert at.title[0].value.startswith("About")
    assert not set(OTHERS) & set(at.query_params), dict(at.query_params)
    assert "budgets" not in at.query_params  # Explore's, Compare's and Steer's
    assert at.query_params["prompt"] == LINK["prompt"]  # the task is the app's, on every page
