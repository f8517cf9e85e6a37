"""The choices a link reopens that live in widgets of their own (``ui/link_choices``): Explore's
result-view toggles (``grey``, ``sae_labels``, ``feature_names``), Compare's held-out toggle
(``held_out``), Steer's SAE source (``sae``), the Dataset page's atlas (``atlas``), method
(``dataset_method``), budget (``dataset_budget``), consensus share (``consensus``), score
(``score``) and refused prompts alone (``refused``). Until 2026-12-06 none was in the URL, so a
copied link opened each at its default, and a page switch and back lost them too (Streamlit drops
a widget's value when a page without it runs). A link's value the page does not offer gets one
sentence and the page's own."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
from explore_session import QUERY, explore_session, run_it  # noqa: E402
from ioi_batch_folder import ioi_batch  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402
from test_dataset_page import NAMES, _checked  # noqa: E402

from circuitviz.ui import link_choices  # noqa: E402
from circuitviz.ui.link_values import FLAG, SHARE, link_choice_sentence, parsed_link_value  # noqa: E402
from circuitviz.ui.state import VIEW_FIELDS  # noqa: E402

pytestmark = pytest.mark.usefixtures("tiny_app")  # the tiny model; results under tmp_path (conftest)


def _page(page: str, **query) -> AppTest:
    at = AppTest.from_file("../app.py", default_timeout=300)
    for name, value in query.items():
        at.query_params[name] = value
    at.switch_page(page)  # the link's page on the session's first run, as a browser opens it
    return at.run()


def _said(at, words: str) -> list[str]:
    shown = [w.value.replace("\\", "") for w in at.warning]  # markdown's escapes off
    return [value for value in shown if words in value]


def test_explores_view_toggles_are_in_its_link_and_survive_a_page_switch():
    at = run_it(explore_session())
    assert not at.exception, at.exception
    assert "grey" not in at.query_params  # off, the default: left out
    at.toggle(key="explore.faded").set_value(True).run()
    assert at.query_params["grey"] == "1"
    at.switch_page("pages/compare.py").run()
    assert "grey" not in at.query_params  # Explore's alone
    at.switch_page("pages/explore.py").run()
    assert at.toggle(key="explore.faded").value and at.query_params["grey"] == "1"
    again = explore_session({**QUERY, "grey": "1"})  # the link in a new browser: the stored result
    assert not again.exception, again.exception
    assert again.toggle(key="explore.faded").value
    bad = explore_session({**QUERY, "grey": "yes"})
    assert _said(bad, "The link's grey 'yes' is not 1 (on) or 0 (off)")
    assert not bad.toggle(key="explore.faded").value


def test_compares_held_out_toggle_is_in_its_link():
    at = _page("pages/compare.py", **QUERY, compare="eap,eap-ig", held_out="1")
    assert not at.exception, at.exception
    at.button(key="compare.run").click().run()
    assert not at.exception, at.exception
    assert at.toggle(key="compare.transfer").value
    assert at.query_params["held_out"] == "1"
    at.toggle(key="compare.transfer").set_value(False).run()
    assert "held_out" not in at.query_params


def test_steers_sae_source_is_in_its_link_and_a_source_it_lacks_is_said():
    at = _page("pages/steer.py", **QUERY, sae="hub")
    assert not at.exception, at.exception
    assert at.radio(key="steer.source").value == "hub"
    assert at.query_params["sae"] == "hub"
    at.radio(key="steer.source").set_value("embedded").run()
    assert "sae" not in at.query_params  # the default: left out
    for text in ("nonsense", "[x](https://example.com)"):
        wrong = _page("pages/steer.py", **QUERY, sae=text)
        assert not wrong.exception, wrong.exception
        assert wrong.radio(key="steer.source").value == "embedded"
        said = _said(wrong, "The link's sae")
        assert len(said) == 1 and "the page shows 'embedded'" in said[0], said
        assert not [w.value for w in wrong.warning if "[x](" in w.value]  # escaped: never a live link


def test_the_dataset_pages_atlas_and_view_are_in_its_link():
    at = _page("pages/dataset.py")
    assert not at.exception, at.exception
    first = at.segmented_control(key="dataset.source").value
    assert at.query_params["atlas"] == first
    at.segmented_control(key="dataset.source").set_value("ioi").run()
    budgets = at.select_slider(key="dataset.budget").options
    other = int(str(budgets[1]).replace(",", ""))  # AppTest gives the options as shown
    at.select_slider(key="dataset.budget").set_value(other).run()
    threshold = next(s for s in at.slider if s.key and s.key.startswith("dataset.threshold."))
    threshold.set_value(0.7).run()
    at.segmented_control(key="dataset.score").set_value("nfs").run()
    assert not at.exception, at.exception
    link = {name: at.query_params[name] for name in ("atlas", "dataset_budget", "consensus", "score")}
    assert link == {"atlas": "ioi", "dataset_budget": str(other), "consensus": "0.7", "score": "nfs"}
    assert "dataset_method" in at.query_params
    at.switch_page("pages/explore.py").run()
    assert "atlas" not in at.query_params
    at.switch_page("pages/dataset.py").run()  # the view left is the one shown again
    assert at.segmented_control(key="dataset.source").value == "ioi"
    assert at.select_slider(key="dataset.budget").value == other
    again = _page("pages/dataset.py", **link)  # the link in a new browser
    assert not again.exception, again.exception
    assert again.segmented_control(key="dataset.source").value == "ioi"
    assert again.select_slider(key="dataset.budget").value == other
    assert next(s for s in again.slider if s.key.startswith("dataset.threshold.")).value == 0.7
    assert again.segmented_control(key="dataset.score").value == "nfs"
    assert not again.warning, [w.value for w in again.warning]


@pytest.fixture
def batch_folder(tmp_path, monkeypatch):  # test_dataset_page's: six IOI tasks of the tiny model
    return ioi_batch(
        tmp_path, monkeypatch, NAMES, ["eap-ig"], {"ig_steps": 3}, [4, 10, 25, 60], 60, batch_tasks=4
    )


def test_the_dataset_pages_refused_prompts_toggle_is_in_its_link(batch_folder, monkeypatch):
    import pyarrow.parquet as pq

    table = pq.read_table(batch_folder / "results.parquet")
    ids, clean = table.column("task_id").to_pylist(), table.column("clean_metric").to_pylist()
    raised = [c + 0.5 if i in ("p0", "p3") else c - 2.0 for i, c in zip(ids, clean)]  # two refused
    at = _checked(batch_folder, monkeypatch, table, raised)
    at.toggle(key="dataset.refused").set_value(True).run()
    assert not at.exception, at.exception
    assert at.query_params["refused"] == "1"
    again = AppTest.from_file("../app.py", default_timeout=300)  # the link in a new browser
    for name, value in at.query_params.items():
        again.query_params[name] = value
    again.session_state["dataset.folder"] = str(batch_folder)  # a typed folder is never in a link
    again.switch_page("pages/dataset.py").run()
    assert not again.exception, again.exception
    assert again.toggle(key="dataset.refused").value
    assert list(again.dataframe[-1].value["id"]) == ["p0", "p3"]


def test_a_dataset_link_naming_what_the_page_lacks_says_so_and_shows_its_own():
    at = _page("pages/dataset.py", atlas="nonsense", dataset_budget="7", score="ndf2", consensus="2")
    assert not at.exception, at.exception
    atlas = at.segmented_control(key="dataset.source").value
    assert _said(at, "The link's atlas 'nonsense' is not one of this page's choices")
    assert _said(at, "The link's dataset_budget '7' is not one of this page's choices")
    assert _said(at, "The link's score 'ndf2'")
    assert _said(at, "The link's consensus '2' is not a number from 0 to 1")
    assert at.segmented_control(key="dataset.score").value == "ndf"
    assert at.query_params["atlas"] == atlas and "score" not in at.query_params


def test_every_link_choice_is_a_url_field_of_its_page():
    fields = {field.key: field for field in VIEW_FIELDS}
    for key, field in link_choices.TOGGLES.items():
        assert field.key in fields and field.kind == FLAG and field.pages == (key.split(".")[0],)
    assert parsed_link_value(FLAG, "1") is True and parsed_link_value(FLAG, "0") is False
    assert parsed_link_value(FLAG, "yes") is None
    assert parsed_link_value(SHARE, "0.35") == 0.35
    assert all(parsed_link_value(SHARE, text) is None for text in ("nan", "inf", "-0.1", "1.5", "x"))
    sentence = link_choice_sentence("sae", "**b**", ["embedded", "hub"], "embedded")
    assert "\\*\\*b\\*\\*" in sentence  # the link's text escaped
    assert sentence.replace("\\", "") == (
        "The link's sae '**b**' is not one of this page's choices ('embedded', 'hub'): the page shows 'embedded'."
    )


def test_the_dataset_pages_tab_and_count_of_clusters_are_in_its_link():
    """Until 2026-12-06 the tab open and the count of clusters were the browser's alone: a copied
    link opened Curves at 'auto', and so did a switch to Explore and back."""
    at = _page("pages/dataset.py", atlas="ioi")
    assert not at.exception, at.exception
    assert "tab" not in at.query_params and "clusters" not in at.query_params  # the defaults: left out
    at.session_state["dataset.tab"] = "Clusters"  # a click on the tab (AppTest has no tab to click)
    at.run()
    (count,) = [c for c in at.segmented_control if c.key.startswith("dataset.k.")]
    count.set_value(3).run()
    assert not at.exception, at.exception
    assert at.query_params["tab"] == "clusters" and at.query_params["clusters"] == "3"
    at.switch_page("pages/explore.py").run()
    assert "tab" not in at.query_params and "clusters" not in at.query_params  # the Dataset page's alone
    at.switch_page("pages/dataset.py").run()  # the view left is the one shown again
    assert at.session_state["dataset.tab"] == "Clusters"
    assert [c.value for c in at.segmented_control if c.key.startswith("dataset.k.")] == [3]
    again = _page("pages/dataset.py", atlas="ioi", tab="clusters", clusters="3")  # the link in a new browser
    assert not again.exception, again.exception
    assert again.session_state["dataset.tab"] == "Clusters"
    assert [c.value for c in again.segmented_control if c.key.startswith("dataset.k.")] == [3]
    assert not again.warning, [w.value for w in again.warning]
    again.session_state["dataset.tab"] = "Curves"  # back to the defaults: out of the link
    (count,) = [c for c in again.segmented_control if c.key.startswith("dataset.k.")]
    count.set_value("auto").run()
    assert "tab" not in again.query_params and "clusters" not in again.query_params


def test_a_dataset_link_naming_a_tab_or_count_the_page_lacks_says_so_in_one_sentence():
    at = _page("pages/dataset.py", atlas="ioi", tab="[x](https://example.com)", clusters="99")
    assert not at.exception, at.exception
    (tab,) = _said(at, "The link's tab")
    assert tab.startswith("The link's tab '[x](") and "is not one of this page's choices ('curves', " in tab
    assert tab.endswith("the page shows 'curves'.")
    assert not [w.value for w in at.warning if "[x](" in w.value]  # escaped: never a live link
    (count,) = _said(at, "The clusters count 99 is not offered here")
    assert count.endswith("the page shows auto.")
    assert at.session_state["dataset.tab"] == "Curves"
    assert [c.value for c in at.segmented_control if c.key.startswith("dataset.k.")] == ["auto"]
    assert "tab" not in at.query_params and "clusters" not in at.query_params
    bad = _page("pages/dataset.py", atlas="ioi", clusters="two")
    assert _said(bad, "The link's clusters 'two' is not a whole number")
    assert not bad.exception, bad.exception


def test_another_atlas_opened_after_one_is_not_said_to_be_a_links(batch_folder):
    """The page's method and budget kept from the stored atlas open first are not a link's values
    when another batch (its methods and budgets others) opens after it: until 2026-12-07 the page
    warned "The link's dataset_method 'eap-ig (ig_steps=20)' is not one of this page's choices"
    with no link opened, and the same of the budget."""
    at = _page("pages/dataset.py")
    assert not at.exception, at.exception
    assert at.query_params.get("dataset_method"), "the stored atlas keeps its method"
    at.session_state["dataset.folder"] = str(batch_folder)
    at.segmented_control(key="dataset.source").set_value("a batch folder…").run()
    assert not at.exception, at.exception
    assert not _said(at, "The link's"), [w.value for w in at.warning]
    assert at.query_params["dataset_method"] == "eap-ig (ig_steps=3)"  # the batch's own, in its link
    link = dict(at.query_params)
    again = AppTest.from_file("../app.py", default_timeout=300)  # a link's value still reopens
    for name, value in link.items():
        again.query_params[name] = value
    again.session_state["dataset.folder"] = str(batch_folder)
    again.switch_page("pages/dataset.py").run()
    assert not again.warning, [w.value for w in again.warning]
