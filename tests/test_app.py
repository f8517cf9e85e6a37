"""Every page of the app driven through streamlit's AppTest, on a tiny random model.

The model loader is injected (``circuitviz.ui.loaders.MODEL_LOADER``), so no page loads the
embedded model; results go to a temporary store. The checks read what a user would see: the
metrics, the chart's data, the graph page's nodes and edges, the error sentence for bad input.
"""

from __future__ import annotations

import json
import re

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from circuitviz.testing import IOI_TASK, tiny_model  # noqa: E402

TIMEOUT = 300  # the first run imports torch and transformer_lens
TINY_PROMPT = IOI_TASK.clean
TINY_CORRUPTED = IOI_TASK.corrupted


def _tiny_loader(model_id, device):
    return tiny_model("gpt2", n_layers=2, n_heads=2)


@pytest.fixture(autouse=True)
def tiny_app(tmp_path, monkeypatch):
    """Every AppTest in this file loads the tiny model and stores results under tmp_path."""
    import circuitviz.ui.loaders as loaders

    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(loaders, "MODEL_LOADER", _tiny_loader)
    yield


def _app(**query) -> AppTest:
    at = AppTest.from_file("../app.py", default_timeout=TIMEOUT)
    for name, value in query.items():
        at.query_params[name] = value
    return at


def _explore(**query) -> AppTest:
    base = {
        "prompt": TINY_PROMPT,
        "corrupted": TINY_CORRUPTED,
        "answer": " Mary",
        "foil": " John",
        "method": "eap",
        "budgets": "5,10,20,40",
    }
    base.update(query)
    return _app(**base).run()


def _graph_pages(at: AppTest) -> list[str]:
    """The HTML of every st.iframe on the page (our graphs)."""
    return [element.proto.srcdoc for element in at.get("iframe")]


def _nodes_and_edges(page: str) -> tuple[list[dict], list[dict]]:
    nodes = json.loads(re.search(r"nodes = new vis\.DataSet\((.*?)\);", page, re.S).group(1))
    edges = json.loads(re.search(r"edges = new vis\.DataSet\((.*?)\);", page, re.S).group(1))
    return nodes, edges


def _run(at: AppTest) -> AppTest:
    at.button[0].click()
    return at.run()


def test_explore_runs_and_draws_the_circuit():
    at = _explore()
    assert not at.exception
    assert at.title[0].value.startswith("Explore")
    # the model's next tokens are offered as choices for answer and foil
    assert len(at.pills) == 2 and len(at.pills[0].options) >= 2
    assert any("Both prompts are" in s.value for s in at.success)
    at = _run(at)
    assert not at.exception, at.exception
    labels = {m.label: m.value for m in at.metric}
    assert {"clean L(M(q))", "corrupted L(M(q'))", "NDF", "NFS", "edges kept"} <= set(labels)
    pages = _graph_pages(at)
    assert pages, "no graph drawn"
    nodes, edges = _nodes_and_edges(pages[0])
    names = {n["id"] for n in nodes}
    assert {"input", "logits"} <= names and edges
    assert all(edge["from"] in names and edge["to"] in names for edge in edges)
    # the curve has one point per budget and the current budget is marked
    chart = json.loads(at.get("plotly_chart")[0].proto.spec)
    curve = chart["data"][0]
    assert curve["x"] == [5, 10, 20, 40]
    assert any(trace.get("name") == "shown now" for trace in chart["data"])
    assert at.query_params["method"] == "eap"


def test_moving_the_budget_changes_the_graph():
    at = _run(_explore(budget="5"))
    before = _nodes_and_edges(_graph_pages(at)[0])[1]
    at.select_slider(key="budget").set_value(40).run()
    assert not at.exception
    after = _nodes_and_edges(_graph_pages(at)[0])[1]
    assert len(after) > len(before)
    assert at.query_params["budget"] == "40"


def test_sae_labels_toggle_says_why_when_there_are_none():
    at = _run(_explore())
    at.toggle(key="explore.sae").set_value(True).run()
    assert not at.exception, at.exception
    assert any(c.value.startswith("No SAE labels") or "SAE labels need" in c.value for c in at.caption)
    assert _graph_pages(at)  # the graph is still drawn, with its logit-lens labels


def test_unequal_token_lengths_are_one_sentence():
    at = _explore(corrupted="When Alice went to the store , Carl gave a drink to")
    assert not at.exception
    assert any("edit the corrupted prompt" in e.value for e in at.error)
    assert at.button[0].disabled


def test_a_multi_token_answer_is_one_sentence_after_run():
    at = _run(_explore(answer=" Mary John"))
    assert not at.exception, at.exception
    assert any("is 2 tokens" in e.value and "use a single token" in e.value for e in at.error)
    assert not at.get("iframe")


def test_settings_form_comes_from_the_config():
    at = _explore(method="eap-ig")
    assert not at.exception
    steps = at.number_input(key="method.eap-ig.ig_steps")
    assert steps.value == 20
    steps.set_value(0).run()
    assert any("ig_steps must be between" in e.value for e in at.error)


def test_a_shared_url_reopens_the_stored_result():
    at = _run(_explore(budget="10"))
    assert _graph_pages(at)
    again = _explore(budget="10")  # a new session with the same URL
    assert not again.exception
    assert _graph_pages(again), "the stored result was not shown"
    assert again.select_slider(key="budget").value == 10


def test_compare_overlays_methods():
    at = _app(prompt=TINY_PROMPT, corrupted=TINY_CORRUPTED, answer=" Mary", foil=" John", budgets="5,10,20")
    at.switch_page("pages/compare.py").run()
    assert not at.exception
    at.multiselect(key="compare.methods").set_value(["eap", "eap-ig"]).run()
    at.button(key="compare.run").click().run()
    assert not at.exception, at.exception
    pages = _graph_pages(at)
    assert len(pages) == 2
    # side by side in one narrow layout: a node sits at the same place in both graphs
    placed = [{n["id"]: (n["x"], n["y"]) for n in _nodes_and_edges(page)[0]} for page in pages]
    assert all(placed[0][n] == placed[1][n] for n in set(placed[0]) & set(placed[1]))
    xs = [x for x, _ in placed[0].values()]
    assert max(xs) - min(xs) <= 3 * 120 + 40  # 2 heads and the MLP, 120 px apart
    chart = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert {trace["name"] for trace in chart["data"]} >= {"eap", "eap-ig"}
    assert at.dataframe, "no overlap table"


def test_gallery_opens_without_a_model():
    import circuitviz.ui.loaders as loaders

    def refuse(model_id, device):
        raise AssertionError("the gallery must not load a model")

    loaders.MODEL_LOADER = refuse
    at = _app()
    at.switch_page("pages/gallery.py").run()
    assert not at.exception, at.exception
    pages = _graph_pages(at)
    assert pages
    nodes, edges = _nodes_and_edges(pages[0])
    assert edges and any("promotes" in (n.get("title") or "") for n in nodes)


def test_paraphrases_runs_best_of_n_and_highlights_an_intersection():
    pytest.importorskip("circuitviz.methods.bon")
    at = _app(
        prompt=TINY_PROMPT, corrupted=TINY_CORRUPTED, answer=" Mary", foil=" John", budgets="5,10,20,40"
    )
    at.switch_page("pages/paraphrases.py").run()
    assert not at.exception, at.exception
    at.selectbox(key="w.bon.method").set_value("ibon").run()
    at.number_input(key="bon.method.ibon.n_paraphrases").set_value(3)
    at.number_input(key="bon.method.ibon.ig_steps").set_value(1)
    at.button(key="bon.run").click().run()
    assert not at.exception, at.exception
    assert at.dataframe or at.get("arrow_data_frame") or at.get("data_editor") is not None
    charts = [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]
    bars = charts[0]["data"][0]
    assert "winner" in " ".join(bars["text"])  # candidates' NDF with the winner marked
    assert len(charts) >= 3  # candidates, UpSet, curves
    before = _nodes_and_edges(_graph_pages(at)[0])[1]
    options = at.selectbox(key="bon.intersection").options
    assert len(options) >= 2
    at.selectbox(key="bon.intersection").set_value(at.selectbox(key="bon.intersection").options[1]).run()
    assert not at.exception, at.exception
    edges = _nodes_and_edges(_graph_pages(at)[0])[1]
    lit = [e for e in edges if e["color"]["opacity"] == 1.0]
    assert len(edges) == len(before) and 0 < len(lit) <= len(edges)
    # edited paraphrases become the next run's settings (a file source with those pairs)
    at.button(key="bon.use_pairs").click().run()
    assert not at.exception, at.exception
    assert at.session_state["bon.method.ibon.paraphrase_source"] == "file"
    pairs = at.session_state["bon.method.ibon.paraphrases"].splitlines()
    assert pairs and all("\t" in line for line in pairs)
    # iBoN takes any budget: one the run never evaluated
    at.slider(key="bon.budget").set_value(13).run()
    assert not at.exception, at.exception
    assert any(m.label == "NDF" for m in at.metric)


def test_about_page_renders():
    at = _app()
    at.switch_page("pages/about.py").run()
    assert not at.exception, at.exception
    assert any("NDF" in m.value for m in at.markdown)


def test_gallery_rerun_live_runs_the_example_on_explore():
    at = _app()
    at.switch_page("pages/gallery.py").run()
    at.segmented_control(key="gallery.slug").set_value("ioi").run()

    at.button(key="gallery.rerun").click().run()
    assert not at.exception, at.exception
    assert at.title[0].value.startswith("Explore")
    assert at.session_state["prompt"].startswith("When Mary and John")
    assert at.session_state["explore.result"] is not None, [e.value for e in at.error]
    assert any(m.label == "NDF" for m in at.metric)


def test_progress_reports_phase_percent_and_time_left():
    from circuitviz.ui.run import ProgressReporter

    class Bar:
        def __init__(self):
            self.calls = []

        def progress(self, value, text=""):
            self.calls.append((value, text))

    now = [0.0]
    bar = Bar()
    report = ProgressReporter(bar, clock=lambda: now[0])
    report("score", 0.0)
    now[0] = 10.0
    report("score", 0.25)  # 10 s for a quarter: about 30 s left
    now[0] = 12.0
    report("evaluate", 0.5)  # a new phase starts its own clock
    assert bar.calls[1] == (0.25, "scoring edges: 25% — about 30 s left in this phase")
    assert bar.calls[2] == (0.5, "measuring faithfulness: 50%")
