"""Since the Dataset page's open tab is in its link (``tab``, 2026-12-06), a tab click reruns the
page, which draws all four tabs: each click rebuilt the band chart, the cluster map, the
similarity heatmap, the UpSet chart and the consensus drawing, and a switch between tabs on a
stored atlas took about 0.8 s in Chromium where it had taken 0.1 s. The figures are kept per atlas
and choice (``ui/dataset_figures``): a tab click builds none of them again."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
from test_link_choices import _page  # noqa: E402

from circuitviz import render  # noqa: E402
from circuitviz.render import atlas as drawings  # noqa: E402
from circuitviz.ui import link_choices  # noqa: E402

pytestmark = pytest.mark.usefixtures("tiny_app")  # the tiny model; results under tmp_path (conftest)

BUILDERS = [
    (drawings, "band_figure"),
    (drawings, "consensus_graph_html"),
    (drawings, "cluster_map_figure"),
    (drawings, "similarity_figure"),
    (render, "upset_figure"),
]


def test_a_tab_click_builds_no_figure_again(monkeypatch):
    at = _page("pages/dataset.py", atlas="ioi")  # every tab drawn once: the figures built
    assert not at.exception
    built = []
    for module, name in BUILDERS:
        original = getattr(module, name)

        def counted(*args, _original=original, _name=name, **kwargs):
            built.append(_name)
            return _original(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)
    for name, label in [*list(link_choices.DATASET_TABS.items())[1:], ("curves", "Curves")]:
        at.session_state["dataset.tab"] = label  # a click on the tab (AppTest has no tab to click)
        at.run()
        assert not at.exception
        assert at.query_params.get("tab", "curves") == name  # still in the link
    assert built == []
    assert len(at.get("plotly_chart")) >= 3  # the charts are still drawn, from what was kept


def test_another_score_or_budget_draws_its_own_chart():
    """Kept by atlas and choice: the NFS chart is not the NDF one kept before it."""
    at = _page("pages/dataset.py", atlas="ioi")
    first = at.get("plotly_chart")[0].proto.spec
    at.session_state["dataset.score"] = "nfs"
    at.run()
    assert not at.exception
    assert at.get("plotly_chart")[0].proto.spec != first


def test_the_prompts_table_is_built_only_while_its_tab_is_open(monkeypatch):
    """The Prompts tab's table (its rows read into pandas, each row's validity check, the styling
    and the CSV) was half of every tab click's rerun, for a table out of sight: it runs only while
    its tab is open, and its rows are built once per atlas and choice."""
    from circuitviz.ui import dataset, dataset_rows

    at = _page("pages/dataset.py", atlas="ioi")  # Curves open
    assert not at.exception
    drawn, checked = [], []
    original, refusal = dataset.prompts, dataset_rows.refusal
    monkeypatch.setattr(dataset, "prompts", lambda *a, **k: drawn.append(1) or original(*a, **k))
    monkeypatch.setattr(dataset_rows, "refusal", lambda row: checked.append(1) or refusal(row))
    for label in ("Consensus circuit", "Clusters", "Curves"):
        at.session_state["dataset.tab"] = label
        at.run()
        assert not at.exception and not drawn
    at.session_state["dataset.tab"] = "Prompts"
    at.run()
    assert not at.exception and drawn == [1]
    assert "ioi-00000" in at.dataframe[-1].value["id"].tolist()  # the table is drawn
    rows = len(checked)  # the first time at this budget: each row checked (or kept by another test)
    at.session_state["dataset.tab"] = "Curves"
    at.run()
    at.session_state["dataset.tab"] = "Prompts"
    at.run()
    assert drawn == [1, 1] and len(checked) == rows  # drawn again from the rows kept
    assert at.query_params.get("tab") == "prompts"
