"""Every page of the app driven through streamlit's AppTest, on a tiny random model.

The model loader is injected (``circuitviz.ui.loaders.MODEL_LOADER``), so no page loads the
embedded model; results go to a temporary store. The checks compare what a user sees with the
result objects the page holds, recomputed independently where they can be: the next-token
probabilities against the model's own softmax, NDF/NFS/edges kept against the result's curve
point, the graph's edges against the circuit mask, the chart's points against the curve,
Compare's Jaccard and shared counts against set arithmetic on the circuits' edge names, the
Best-of-N candidate NDFs and UpSet counts against the result's details and candidate circuits.
"""

from __future__ import annotations

import copy
import json
import re
from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("streamlit")
from graph_data import graph_data, nodes_and_edges  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from circuitviz import render  # noqa: E402
from circuitviz.bench.toy_models import IOI_TASK, tiny_app_model  # noqa: E402
from circuitviz.core.text import markdown_text, shown_token  # noqa: E402
from circuitviz.entry.api import evaluate_circuits  # noqa: E402
from circuitviz.models.adapter import adapter_of  # noqa: E402
from circuitviz.services import assets
from circuitviz.ui import compare, result_view

TIMEOUT = 300  # the first run imports torch and transformer_lens
TINY_PROMPT = IOI_TASK.clean
TINY_CORRUPTED = IOI_TASK.corrupted


pytestmark = pytest.mark.usefixtures("tiny_app")  # the tiny model; results under tmp_path (conftest)
_tiny_loader = tiny_app_model


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


def _graph_pages(at: AppTest) -> list[dict]:
    """The data of every circuit drawing on the page (``ui.graph_view``'s components)."""
    return graph_data(at)


def _nodes_and_edges(data: dict) -> tuple[list[dict], list[dict]]:
    return nodes_and_edges(data)


def _run(at: AppTest) -> AppTest:
    next(b for b in at.button if b.label in ("Run", "Run Best-of-N", "Run the comparison")).click()
    return at.run()


def _run_button(at: AppTest):
    return next(b for b in at.button if b.label == "Run")


def _charts(at: AppTest) -> list[dict]:
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def _one_sentence(text: str) -> None:
    assert "\n" not in text and len(text) <= 300, text


# ----- Explore: the numbers a user sees are the result's --------------------------------------------
def test_explore_shows_the_results_own_numbers():
    from circuitviz.labels.logit_lens import next_token_probabilities

    at = _explore()
    assert not at.exception
    # the next-token choices: the model's own softmax, as percentages with one decimal
    expected = next_token_probabilities(_tiny_loader("", ""), TINY_PROMPT, 8)
    # (each token in Unicode isolates, so a right-to-left token keeps the label's order)
    assert [f"\u2068{token!r}\u2069 {100 * p:.1f}%" for token, p in expected] == list(at.pills[0].options)
    assert any("Both prompts are 15 tokens; 3 positions differ." == s.value for s in at.success)
    at = _run(at)
    assert not at.exception, at.exception
    result = at.session_state["results"]["eap"]
    budget = at.session_state["budget"]
    assert budget == render.readable_budget(result.curve)  # a new result opens at a readable budget
    point = next(p for p in result.curve if p.budget == budget)
    share = 100 * point.n_edges / result.graph.n_edges
    assert {m.label: m.value for m in at.metric} == {
        "clean L(M(q))": f"{result.baseline.clean:+.3f}",
        "corrupted L(M(q'))": f"{result.baseline.corrupted:+.3f}",
        "NDF": f"{point.ndf:.3f}",
        "necessity": f"{point.necessity:.3f}",
        "NFS": f"{point.nfs:.3f}",
        "edges kept": f"{point.n_edges:,} ({share:.2f}%)",
    }
    # edges kept is the circuit's own size, and the graph draws exactly the circuit's edges
    circuit = result.circuit(budget)
    assert point.n_edges == int(circuit.sum())
    nodes, edges = _nodes_and_edges(_graph_pages(at)[0])
    names = set(result.graph.edge_names_of(circuit))
    assert len(edges) == len(names)
    drawn = {(e["from"], e["to"]) for e in edges}
    assert drawn == {(n.split("->")[0], n.split("->")[1].split("<")[0]) for n in names}
    # each drawn node is captioned on the canvas by the caption rule: its logit-lens token where the
    # answer or foil is among its top tokens, else its effect in words over all its edges out (recomputed here)
    from circuitviz.core.graph import GraphSpec
    from circuitviz.core.tasks import prepare_task
    from circuitviz.labels.captions import node_caption
    from circuitviz.labels.logit_lens import logit_lens_labels
    from circuitviz.render import canvas_caption_of, circuit_edges
    from circuitviz.render.graph_html import node_scores

    model = _tiny_loader("", "")
    lens = logit_lens_labels(
        model, GraphSpec.from_model(model), prepare_task(model, result.task, need_corrupted=False)
    )
    totals = node_scores(circuit_edges(result.graph, result.scores, result.graph.edge_mask))  # all edges out
    task = result.task
    for node in nodes:
        if node["id"] not in ("input", "logits"):
            caption = node_caption(
                lens[node["id"]], -totals[node["id"]], task.answer, task.foils, task.metric, short=True
            )
            assert node["label"] == canvas_caption_of(node["id"], caption), node["label"]
    # the curve: one point per budget, NDF values from the result, the current budget marked
    chart = _charts(at)[0]
    assert chart["data"][0]["x"] == [5, 10, 20, 40]
    assert chart["data"][0]["y"] == pytest.approx([p.ndf for p in result.curve])
    marker = next(trace for trace in chart["data"] if trace.get("name") == "shown now")
    assert marker["x"] == [budget] and marker["y"] == pytest.approx([point.ndf])
    # the edges table: the circuit's strongest edges with their scores
    rows = at.dataframe[0].value
    expected_rows = render.edge_rows(result.graph, result.scores, circuit, limit=50)
    assert list(rows["edge"]) == [row["edge"] for row in expected_rows]
    assert list(rows["score"]) == pytest.approx([row["score"] for row in expected_rows])
    assert at.query_params["method"] == "eap"
    # at every budget the metrics are that budget's point; pruning makes "edges kept" differ from
    # the budget asked at some of them (so the two cannot be confused unnoticed)
    assert any(p.n_edges != p.budget for p in result.curve)
    for other in result.curve:
        at.select_slider(key="w.budget").set_value(other.budget).run()
        shown = {m.label: m.value for m in at.metric}
        assert shown["NDF"] == f"{other.ndf:.3f}" and shown["NFS"] == f"{other.nfs:.3f}"
        assert shown["edges kept"] == f"{other.n_edges:,} ({100 * other.n_edges / result.graph.n_edges:.2f}%)"


def test_explain_this_circuit_says_the_strongest_edges():
    from circuitviz.core.text import markdown_text

    at = _run(_explore())
    result = at.session_state["results"]["eap"]
    budget = at.session_state["budget"]
    edges = render.circuit_edges(result.graph, result.scores, result.circuit(budget))
    shown = [m.value for m in at.markdown if m.value.startswith("- ")]
    assert len(shown) == min(5, len(edges))
    for line, edge in zip(shown, sorted(edges, key=lambda e: -abs(e.score))):
        source = "token embeddings" if edge.source == "input" else markdown_text(edge.source)
        assert source in line and markdown_text(f"{edge.score:+.3g}") in line, line


def test_moving_the_budget_changes_the_graph_and_its_numbers():
    at = _run(_explore(budget="5"))
    at.select_slider(key="w.budget").set_value(5).run()
    before = _nodes_and_edges(_graph_pages(at)[0])[1]
    at.select_slider(key="w.budget").set_value(40).run()
    assert not at.exception
    after = _nodes_and_edges(_graph_pages(at)[0])[1]
    result = at.session_state["results"]["eap"]
    assert len(after) == int(result.circuit(40).sum()) > len(before) == int(result.circuit(5).sum())
    assert next(m.value for m in at.metric if m.label == "NDF") == f"{result.point(40).ndf:.3f}"
    assert at.query_params["budget"] == "40"


def test_the_budget_follows_the_user_across_pages():
    at = _run(_explore())
    at.select_slider(key="w.budget").set_value(10).run()
    at.switch_page("pages/compare.py").run()
    assert not at.exception, at.exception
    assert at.text_area(key="w.prompt").value == TINY_PROMPT
    assert at.text_input(key="w.answer").value == " Mary" and at.text_input(key="w.foil").value == " John"
    at.switch_page("pages/explore.py").run()
    assert not at.exception, at.exception
    assert at.select_slider(key="w.budget").value == 10
    assert next(m.value for m in at.metric if m.label == "NDF") == (
        f"{at.session_state['results']['eap'].point(10).ndf:.3f}"
    )


# ----- inputs: errors beside the input, before Run ----------------------------------------------------
def test_a_new_prompt_proposes_its_own_answer_foil_and_corrupted_prompt():
    from circuitviz.labels.logit_lens import next_token_probabilities

    at = _run(_explore())
    new = "When Anna and Tom went to the park , Tom gave a ball to"
    at.text_area(key="w.prompt").set_value(new).run()
    assert not at.exception, at.exception
    top = next_token_probabilities(_tiny_loader("", ""), new, 8)[0][0]
    assert at.text_input(key="w.answer").value == top  # the model's own top token
    # the other name of the IOI prompt, as the tiny model's word-level tokenizer has it (no space)
    assert at.text_input(key="w.foil").value == "Tom"
    corrupted = at.text_area(key="w.corrupted").value
    assert corrupted and corrupted != new and "Tom" not in corrupted
    assert any("indirect object" in c.value for c in at.caption)
    assert at.session_state["results"] == {}  # the old prompt's result is gone
    assert not graph_data(at)


def test_the_proposed_corrupted_prompts_note_goes_when_the_user_writes_another():
    """'Proposed by the ... template' stayed under a corrupted prompt the user had typed (an audit)."""
    at = _run(_explore())
    at.text_area(key="w.prompt").set_value("When Anna and Tom went to the park , Tom gave a ball to").run()
    proposed = at.text_area(key="w.corrupted").value
    assert any("indirect object" in c.value for c in at.caption)
    at.text_area(key="w.corrupted").set_value(
        "When Anna and Tom went to the park , Anna gave a ball to"
    ).run()
    assert not at.exception, at.exception
    assert not any("indirect object" in c.value for c in at.caption)
    at.text_area(key="w.corrupted").set_value(proposed).run()  # back to what was proposed: said again
    assert any("indirect object" in c.value for c in at.caption)


def test_a_token_typed_into_the_answer_box_is_picked_among_the_pills_at_once():
    """The pills are drawn above the box: they showed the answer before the one just typed (an
    audit: the foil typed as the answer left the answer's row with nothing picked)."""
    from circuitviz.labels.logit_lens import next_token_probabilities

    at = _run(_explore())
    top = [token for token, _ in next_token_probabilities(_tiny_loader("", ""), TINY_PROMPT, 8)]
    typed = next(token for token in top if token != at.text_input(key="w.answer").value)
    at.text_input(key="w.answer").set_value(typed).run()
    assert not at.exception, at.exception
    assert at.pills(key="pick.answer").value == typed


def test_a_prompt_no_template_knows_says_so_and_disables_run():
    at = _explore()
    at.text_area(key="w.prompt").set_value("The cat sat on the mat").run()
    assert not at.exception, at.exception
    assert at.text_area(key="w.corrupted").value == ""
    warning = next(w.value for w in at.warning if "No corrupted prompt could be proposed" in w.value)
    _one_sentence(warning)
    assert _run_button(at).disabled


def test_a_prompt_no_template_knows_is_no_warning_for_a_method_that_needs_no_corrupted_prompt():
    """Signals (ACC++) said "No corrupted prompt could be proposed ... write it with the key word
    replaced" in a warning, and under it "This method needs no corrupted prompt": the box is
    hidden now (tests/test_corrupted_hidden.py), with what the figures use instead; shown, the
    note is a caption."""
    from circuitviz.methods import method_traits
    from circuitviz.ui.corrupted_box import hidden_sentence

    at = _explore(method="acc++")
    at.text_area(key="w.prompt").set_value("The cat sat on the mat").run()
    assert not at.exception, at.exception
    assert not any("No corrupted prompt could be proposed" in w.value for w in at.warning)
    assert hidden_sentence(method_traits("acc++")) in [c.value for c in at.caption]
    assert not _run_button(at).disabled
    at.toggle(key="corrupted.own.switch").set_value(True).run()
    assert not any("No corrupted prompt could be proposed" in w.value for w in at.warning)
    captions = [c.value for c in at.caption]
    assert any("No corrupted prompt could be proposed" in c for c in captions)
    assert any(c.startswith("Left empty, the box is ignored") for c in captions)
    assert not _run_button(at).disabled


def test_a_known_word_is_swapped_when_no_template_matches():
    at = _explore()
    prompt = "The capital city of France is the city of"  # no factual template has this wording
    at.text_area(key="w.prompt").set_value(prompt).run()
    assert not at.exception, at.exception
    corrupted = at.text_area(key="w.corrupted").value
    assert corrupted.startswith("The capital city of ") and "France" not in corrupted
    assert corrupted.replace(corrupted.split()[4], "France") == prompt
    assert any("swapping 'France'" in c.value for c in at.caption)


def test_a_multi_token_answer_is_one_sentence_beside_it_before_run():
    at = _explore(answer=" Mary John")
    assert not at.exception, at.exception
    error = next(e.value for e in at.error if "is 2 tokens" in e.value)
    assert "use a single token" in error
    _one_sentence(error)
    assert _run_button(at).disabled
    assert not at.get("status")  # nothing ran: the problem is said before Run


def test_a_prompt_over_the_token_limit_is_the_only_error(monkeypatch):
    monkeypatch.setenv("CIRCUITVIZ_MAX_TOKENS", "10")
    at = _explore()
    assert not at.exception, at.exception
    assert [e.value for e in at.error] == [  # shown as plain text (it may quote the user's)
        markdown_text(
            "The prompt is 15 tokens, over the limit of 10; shorten it or raise the limit with CIRCUITVIZ_MAX_TOKENS."
        )
    ]
    assert not any("<span" in m.value for m in at.markdown)  # no token chips for a prompt that cannot run
    assert _run_button(at).disabled


def test_unequal_token_lengths_are_one_sentence():
    at = _explore(corrupted="When Alice went to the store , Carl gave a drink to")
    assert not at.exception
    error = next(e.value for e in at.error if "edit the corrupted prompt" in e.value)
    _one_sentence(error)
    assert _run_button(at).disabled


def test_settings_form_comes_from_the_config():
    at = _explore(method="eap-ig")
    assert not at.exception
    steps = at.number_input(key="method.eap-ig.ig_steps")
    assert steps.value == 20
    steps.set_value(0).run()
    assert any("ig\\_steps must be between" in e.value for e in at.error)  # shown as plain text
    assert _run_button(at).disabled


def test_paraphrase_settings_show_only_for_the_sources_they_apply_to():
    """The pairs box for a file source, the LLM's name for openai, how many and the seed for the
    generated ones; a value typed before a switch is there again when its box comes back."""
    at = _app(prompt=TINY_PROMPT, corrupted=TINY_CORRUPTED, answer=" Mary", foil=" John")
    at.switch_page("pages/paraphrases.py").run()
    at.selectbox(key="w.bon.method").set_value("ibon").run()
    prefix = "bon.method.ibon."

    def shown():
        widgets = [*at.text_input, *at.text_area, *at.number_input]
        return {w.key.removeprefix(prefix) for w in widgets if w.key and w.key.startswith(prefix)}

    assert {"n_paraphrases", "seed"} <= shown() and not {"paraphrases", "llm_model"} & shown()
    at.selectbox(key=prefix + "paraphrase_source").set_value("openai").run()
    assert {"n_paraphrases", "seed", "llm_model"} <= shown() and "paraphrases" not in shown()
    at.text_input(key=prefix + "llm_model").set_value("my-llm").run()
    at.selectbox(key=prefix + "paraphrase_source").set_value("file").run()
    assert "paraphrases" in shown() and not {"n_paraphrases", "seed", "llm_model"} & shown()
    assert not at.exception, at.exception
    at.selectbox(key=prefix + "paraphrase_source").set_value("openai").run()
    assert at.text_input(key=prefix + "llm_model").value == "my-llm"


def test_neuron_top_k_shows_only_with_neurons_on():
    """'neuron top k' beside an unticked 'neurons' box read as if it changed the run; a value typed
    before the box is unticked is there again when it is ticked."""
    at = _explore(method="eap-ig")
    keys = lambda: {w.key for w in at.number_input}  # noqa: E731
    assert "method.eap-ig.neuron_top_k" not in keys()
    at.checkbox(key="method.eap-ig.neurons").check().run()
    assert "method.eap-ig.neuron_top_k" in keys()
    at.number_input(key="method.eap-ig.neuron_top_k").set_value(5).run()
    at.checkbox(key="method.eap-ig.neurons").uncheck().run()
    assert "method.eap-ig.neuron_top_k" not in keys() and not at.exception
    at.checkbox(key="method.eap-ig.neurons").check().run()
    assert at.number_input(key="method.eap-ig.neuron_top_k").value == 5


def test_settings_with_fixed_values_are_choices():
    at = _explore(method="acc++")
    assert not at.exception, at.exception
    assert at.number_input(key="method.acc++.max_depth").label == "max depth (0 = no limit)"
    at = _app(prompt=TINY_PROMPT, corrupted=TINY_CORRUPTED, answer=" Mary", foil=" John")
    at.switch_page("pages/paraphrases.py").run()
    assert not at.exception, at.exception
    at.selectbox(key="w.bon.method").set_value("ibon").run()
    source = at.selectbox(key="bon.method.ibon.paraphrase_source")
    assert list(source.options) == ["template", "openai", "file"] and source.value == "template"
    assert "eap-ig" in at.selectbox(key="bon.method.ibon.base_method").options
    anchors = at.multiselect(key="bon.method.ibon.anchor_budgets")
    budgets = [int(b) for b in at.session_state["bon.budgets"].split(",")]
    assert [int(o.replace(",", "")) for o in anchors.options] == budgets
    assert at.selectbox(key="bon.method.ibon.reference").options == ["none"]
    assert any(c.value.startswith("Estimate: about") for c in at.caption)


def test_a_shared_url_reopens_the_stored_result():
    at = _run(_explore(budget="10"))
    assert _graph_pages(at)
    again = _explore(budget="10")  # a new session with the same URL
    assert not again.exception
    assert _graph_pages(again), "the stored result was not shown"
    assert again.select_slider(key="w.budget").value == 10


# ----- forward passes: a stored view runs none, a fresh run passes each prompt through once --------
class _PassCounter:
    """Every forward pass of the models it wraps, outside a model's loading thread (a load times
    one probe pass): the token rows each pass carried and whether gradients were on."""

    def __init__(self):
        self.passes: list[tuple[list[tuple[int, ...]], bool]] = []
        self.models: list = []

    def loader(self, model_id, device):
        import threading

        model = _tiny_loader(model_id, device)
        forward = model.forward

        def counted(*args, **kwargs):
            tokens = args[0] if args else kwargs.get("input")
            loading = threading.current_thread().name.startswith("load ")
            if not loading and isinstance(tokens, torch.Tensor) and not tokens.is_floating_point():
                self.passes.append(([tuple(row) for row in tokens.tolist()], torch.is_grad_enabled()))
            return forward(*args, **kwargs)

        model.forward = counted  # the instance's own forward, counted; the model is otherwise untouched
        self.models.append(model)
        return model

    def plain_runs_of(self, text: str) -> int:
        """Passes without gradients that carried ``text`` as one of at most two rows: the prompt's
        own run (a batch of patched circuits carries one row per circuit, a gradient pass has
        gradients on)."""
        ids = tuple(adapter_of(self.models[0]).to_tokens(text)[0].tolist())
        return sum(1 for rows, grad in self.passes if not grad and len(rows) <= 2 and ids in rows)


def test_a_fresh_eap_ig_run_passes_the_clean_and_corrupted_prompts_once(monkeypatch):
    """The next tokens, the evaluator's clean run and the logit-lens labels share one clean pass."""
    import circuitviz.ui.loaders as loaders

    counter = _PassCounter()
    monkeypatch.setattr(loaders, "MODEL_LOADER", counter.loader)
    # a model of its own, loaded through the counter: the loader is part of the model cache's key
    at = _run(_explore(method="eap-ig"))
    assert not at.exception, at.exception
    assert at.session_state["results"]["eap-ig"].curve and _graph_pages(at)
    assert counter.plain_runs_of(TINY_PROMPT) == 1
    assert counter.plain_runs_of(TINY_CORRUPTED) == 1


def test_a_stored_view_runs_no_forward_pass_and_recomputes_no_circuit(monkeypatch):
    import streamlit as st

    import circuitviz.core.results as results
    import circuitviz.ui.loaders as loaders
    from circuitviz.measure.evaluate import forget_prompt_runs

    counter = _PassCounter()
    monkeypatch.setattr(loaders, "MODEL_LOADER", counter.loader)
    # a model of its own, loaded through the counter: the loader is part of the model cache's key
    first = _run(_explore(budget="10"))
    assert _graph_pages(first) and counter.passes
    # what a new process would hold: no cached next tokens, labels or clean runs; the store only
    st.cache_data.clear()
    for model in counter.models:
        forget_prompt_runs(model)
    counter.passes.clear()
    # each circuit the run chose is in its result: no view recomputes top-N or prunes
    for name in ("top_n", "prune"):
        monkeypatch.setattr(results, name, lambda *a, **k: pytest.fail("a stored circuit was recomputed"))
    again = _explore(budget="10")  # a new session with the same URL
    assert not again.exception, again.exception
    assert _graph_pages(again), "the stored result was not shown"
    again.select_slider(key="w.budget").set_value(20).run()
    assert not again.exception, again.exception
    assert again.select_slider(key="w.budget").value == 20 and _graph_pages(again)
    assert counter.passes == []


# ----- Compare ---------------------------------------------------------------------------------------
def test_compare_shows_each_methods_ndf_and_the_true_overlap():
    at = _app(prompt=TINY_PROMPT, corrupted=TINY_CORRUPTED, answer=" Mary", foil=" John", budgets="5,10,20")
    at.switch_page("pages/compare.py").run()
    assert not at.exception
    at.multiselect(key="compare.methods").set_value(["eap", "eap-ig"]).run()
    at.button(key="compare.run").click().run()
    assert not at.exception, at.exception
    results = at.session_state["results"]
    budget = at.session_state["budget"]
    pages = _graph_pages(at)
    assert len(pages) == 2
    # each column's NDF is that method's curve point at the shared budget
    assert [m.value for m in at.metric if m.label == "NDF"] == [
        f"{results[name].point(budget).ndf:.3f}" for name in ("eap", "eap-ig")
    ]
    # side by side in one layout: a node sits at the same place in both graphs
    placed = [{n["id"]: (n["x"], n["y"]) for n in _nodes_and_edges(page)[0]} for page in pages]
    assert all(placed[0][n] == placed[1][n] for n in set(placed[0]) & set(placed[1]))
    # the overlap table: sizes, shared edges and Jaccard recomputed from the circuits' edge names
    a, b = (set(results[n].graph.edge_names_of(results[n].circuit(budget))) for n in ("eap", "eap-ig"))
    table = at.dataframe[0].value
    row = table.iloc[0]
    assert (row["edges A"], row["edges B"], row["shared"]) == (len(a), len(b), len(a & b))
    assert (row["only A"], row["only B"]) == (len(a - b), len(b - a))
    assert row["Jaccard"] == pytest.approx(len(a & b) / len(a | b))
    assert any(c.value == f"{len(a & b):,} edges are in every circuit." for c in at.caption)
    # unique edges in colour: exactly the edges the other method lacks
    lit = {(e["from"], e["to"]) for e in _nodes_and_edges(pages[0])[1] if e["color"]["opacity"] == 1.0}
    assert lit == {(n.split("->")[0], n.split("->")[1].split("<")[0]) for n in a - b}
    chart = _charts(at)[0]
    assert {trace["name"] for trace in chart["data"]} >= {"eap", "eap-ig"}
    # the line under each name counts what its graph draws bold (never "the 0 edges ... bold")
    for name, mine, theirs in (("eap", a, b), ("eap-ig", b, a)):
        expected = compare.graph_caption(name, results[name], results[name].point(budget), len(mine - theirs))
        assert any(c.value == expected for c in at.caption), expected
    # each graph is headed by the name its picker showed, not the short one the tables use
    assert [h.value for h in at.subheader] == ["EAP", "EAP-IG (inputs)"]
    # under the slider: which circuits are faithful here, and where each method's first is
    assert any(c.value == compare.faithful_line(results, budget) for c in at.caption)


def test_compares_faithful_line_reads_each_curve():
    def result(points):
        curve = [SimpleNamespace(budget=b, n_edges=k, ndf=v) for b, k, v in points]
        return SimpleNamespace(
            curve=curve,
            point=lambda budget: next((p for p in curve if p.budget == budget), None),
            graph=SimpleNamespace(n_edges=10342),
        )

    results = {
        "eap": result([(20, 11, 0.24), (2000, 1995, 0.85), (5000, 4990, 0.93)]),
        "eap-ig": result([(20, 7, 0.22), (2000, 2000, 0.57), (5000, 5000, float("nan"))]),
    }
    assert compare.faithful_line(results, 20) == (
        "At budget 20 no method's circuit reaches NDF 0.8. The smallest circuit of each method that does: "
        "eap: 1,995 edges (budget 2,000); eap-ig: none of its budgets, up to 2,000 edges."
    )
    assert compare.faithful_line(results, 2000).startswith("At budget 2,000 eap reaches NDF 0.8.")
    # the whole model is faithful by construction: not a circuit a method found (an audit)
    results["relp"] = result([(20, 16, 0.0), (10000, 10000, 0.62), (10342, 10342, 1.0)])
    assert compare.faithful_line(results, 20).endswith("; relp: only the whole model (10,342 edges).")


def test_compares_line_under_a_graph_says_when_no_edge_or_every_edge_is_bold():
    point = SimpleNamespace(ndf=0.5, n_edges=7)
    result = SimpleNamespace(method="eap")
    assert compare.graph_caption("eap", result, point, 0).endswith(
        "another method found each of them too, so all are drawn thin."
    )
    assert compare.graph_caption("eap", result, point, 7).endswith(
        "no other method found any of them, so all are drawn bold."
    )
    assert "; the 1 edge no other method found is drawn bold," in compare.graph_caption(
        "eap", result, point, 1
    )
    assert compare.graph_caption("eap", result, point, 3) == (
        "eap: NDF 0.500 with 7 edges; the 3 edges no other method found are drawn bold, the shared ones thin."
    )


def test_compare_says_nothing_of_the_answer_from_scores_that_do_not_estimate_the_metric():
    """Every sentence beside a method's figures on Compare is true of them: ACC++'s scores
    (signal attributions to attention decisions) are not changes of the answer's metric, so its
    legend, its node captions, its curve's notes and its explanation say no edge carries the
    answer or works against it and put no number on a node's effect; EAP's, which estimate the
    metric, do (its trait in the registry decides, not the method's name)."""
    from circuitviz.core.curves import CurvePoint
    from circuitviz.methods import method_traits
    from circuitviz.ui.result_view import curve_notes

    assert not method_traits("acc++").scores_estimate_metric and method_traits("eap").scores_estimate_metric
    at = _app(prompt=TINY_PROMPT, corrupted=TINY_CORRUPTED, answer=" Mary", foil=" John", budgets="5,10,20")
    at.switch_page("pages/compare.py").run()
    at.multiselect(key="compare.methods").set_value(["acc++", "eap"]).run()
    at.button(key="compare.run").click().run()
    assert not at.exception, at.exception
    by_method = {page["title"].split(", ")[0]: page for page in _graph_pages(at)}
    acc, eap = by_method["acc++"], by_method["eap"]
    said = " ".join([acc["legend"], acc["legend_more"]])
    assert "carries the answer" not in said and "against the answer" not in said
    assert "does not estimate the change of the answer's metric" in acc["legend_more"]
    assert "dashed: works against the answer" in eap["legend"] and "carries the answer" in eap["legend_more"]
    # under a name: a lens token at most, never an estimated effect ("+1.2") for ACC++
    captions = [n["label"].split("\n")[1] for n in acc["nodes"] if "\n" in str(n.get("label", ""))]
    assert not [c for c in captions if re.fullmatch(r"[+-][\d.e+-]+", c.strip())]
    assert "estimated" not in acc["legend_more"]
    result = at.session_state["results"]["acc++"]
    # a dip in ACC++'s curve is explained without saying any edge works against the answer
    dipped = copy.copy(result)
    dipped.curve = [
        CurvePoint(5, 5, 0, 0.5, 0.5),
        CurvePoint(10, 10, 0, 0.1, 0.1),
        CurvePoint(20, 20, 0, 0.6, 0.6),
    ]
    (note,) = curve_notes(dipped)
    assert "not monotone" in note and "against the answer" not in note and "ACC++'s own score" in note
    # a budget keeps fewer edges once the dangling ones are pruned: the note counts the edges kept
    dipped.curve = [CurvePoint(5, 4, 0, 0.5, 0.5), CurvePoint(10, 8, 0, 0.1, 0.1)]
    (note,) = curve_notes(dipped)
    assert "at 8 edges (budget 10) NDF is 0.10, below 0.50 at 4 edges (budget 5)." in note, note
    sentences = render.explain_circuit(
        render.circuit_edges(result.graph, result.scores, result.circuit(10)),
        task=result.task,
        estimates_metric=False,
    )
    assert sentences and all("the method's score" in s and "raises" not in s for s in sentences)


def test_compare_shows_each_methods_held_out_transfer_and_completeness():
    from circuitviz.core.tasks import prepare_task
    from circuitviz.measure.completeness import completeness
    from circuitviz.measure.evaluate import Evaluator

    at = _app(prompt=TINY_PROMPT, corrupted=TINY_CORRUPTED, answer=" Mary", foil=" John", budgets="5,10,20")
    at.switch_page("pages/compare.py").run()
    at.multiselect(key="compare.methods").set_value(["eap", "eap-ig"]).run()
    at.button(key="compare.run").click().run()
    at.toggle(key="compare.transfer").set_value(True).run()
    assert not at.exception, at.exception
    results = at.session_state["results"]
    budget = at.session_state["budget"]
    first = results["eap"]
    model = tiny_app_model()  # the same weights the app's loader built (a seeded tiny model)
    evaluator = Evaluator(model, first.graph, prepare_task(model, first.task))
    expected = completeness(evaluator, torch.stack([results[n].circuit(budget) for n in ("eap", "eap-ig")]))
    shown = [m.value for m in at.metric if m.label == "completeness"]
    assert shown == [f"{value:.3f}" for value in expected]
    assert len([m for m in at.metric if m.label == "NDF held out"]) == 2
    table = at.dataframe[-1].value
    assert list(table["completeness"]) == pytest.approx(expected)
    # each table's heading names the budget its figures are at (the slider is screens above)
    headings = [m.value for m in at.markdown]
    assert f"**Overlap at budget {budget:,}**" in headings
    assert (
        f"**NDF on the prompt and on held-out paraphrases, and completeness, at budget {budget:,}**"
        in headings
    )
    # the methods by the names their graphs carry, every figure in a short column
    assert list(table["method"]) == ["eap", "eap-ig"]
    assert list(table.columns)[1:5] == ["prompt NDF", "held-out NDF", "held out", "used by it"]
    # the transfer measured is each result's own record, which its JSON carries
    assert all(str(budget) in results[n].to_eap_json()["transfer"]["budgets"] for n in ("eap", "eap-ig"))
    # and is stored with it: a reload (a new session) reads it back without measuring again
    from circuitviz.ui import loaders

    keys = at.session_state["results.requests"]
    for name in ("eap", "eap-ig"):
        assert loaders.get_store().get(keys[name]).transfer == results[name].transfer
    # its completeness too, in the curve point Explore and the JSON read
    for name, value in zip(("eap", "eap-ig"), expected):
        assert loaders.get_store().get(keys[name]).point(budget).completeness == pytest.approx(value)
        assert results[name].to_eap_json()["curve"][[5, 10, 20].index(budget)][
            "completeness"
        ] == pytest.approx(value)


def test_signals_shows_the_acc_result_computed_on_compare():
    at = _app(prompt=TINY_PROMPT, corrupted=TINY_CORRUPTED, answer=" Mary", foil=" John", budgets="5,10,20")
    at.switch_page("pages/compare.py").run()
    at.multiselect(key="compare.methods").set_value(["acc++", "eap"]).run()
    at.button(key="compare.run").click().run()
    assert not at.exception, at.exception
    acc = at.session_state["results"]["acc++"]
    at.switch_page("pages/signals.py").run()
    assert not at.exception, at.exception
    assert not any("Run ACC++ above" in info.value for info in at.info)
    assert at.metric[2].value == str(acc.details.summary["n_decisions"])


def test_acc_zero_ndf_is_explained_where_it_shows():
    from circuitviz.core.curves import CurvePoint
    from circuitviz.details.acc import ACCDetails
    from circuitviz.ui.result_view import curve_notes

    class Result:
        method = "acc++"
        curve = [CurvePoint(10, 8, 0.0, -0.4, 0.0), CurvePoint(20, 17, 0.1, -0.3, 0.0)]
        details = ACCDetails()
        scores = torch.zeros(2, device="cpu")  # a stand-in result's scores

    notes = curve_notes(Result())
    assert len(notes) == 1 and "ACC++ traces queries and keys only" in notes[0] and "value paths" in notes[0]


def test_a_dip_in_the_curve_is_explained():
    from circuitviz.core.curves import CurvePoint
    from circuitviz.ui.result_view import curve_notes

    class Result:
        method = "eap-ig"
        curve = [
            CurvePoint(150, 140, 0, 0.74, 0.74),
            CurvePoint(200, 190, 0, 0.2, 0.2),
            CurvePoint(300, 290, 0, 0.78, 0.78),
        ]
        details = None
        scores = torch.tensor([1.0, 2.0, -3.0], device="cpu")  # a stand-in result's scores

    (note,) = curve_notes(Result())
    assert "at 190 edges (budget 200) NDF is 0.20, below 0.74 at 140 edges (budget 150)." in note, note
    assert "2 edges work against the answer (a positive score" in note  # no baseline: every positive one
    # with the gap known, an edge counts only when its score is at least 1 % of it (the audit's
    # default prompt: 5,068 positive scores said to work against the answer, median 0.0014)
    from circuitviz.core.curves import Baseline

    Result.baseline = Baseline(clean=2.0, corrupted=-98.0)  # a gap of 100: the floor is 1.0
    (note,) = curve_notes(Result())
    assert "estimate 1 edge works against the answer (a score above 1, 1% of the clean" in note, note
    Result.scores = torch.tensor([0.5, 0.9, -3.0], device="cpu")
    (note,) = curve_notes(Result())
    assert "against the answer" not in note and "effects together differ" in note, note


def test_budgets_that_pruning_empties_are_said_so_on_the_page_and_the_command_line():
    """ACC++'s top 20 and 103 edges held no input-to-logits path on a factual prompt: its rows read
    0 edges and NDF 0 with nothing saying why. One sentence now says it, and where a path starts."""
    from circuitviz.core.curves import Baseline, CurvePoint
    from circuitviz.entry.cli import format_table
    from circuitviz.ui.result_view import curve_notes

    class Result:
        method = "acc++"
        curve = [
            CurvePoint(20, 0, -3.8, 0.0, 0.0),
            CurvePoint(103, 0, -3.8, 0.0, 0.0),
            CurvePoint(1000, 1000, 1.3, 0.31, 0.31),
        ]
        details = None
        scores = torch.tensor([1.0, 2.0, -3.0], device="cpu")

    expected = "At budgets 20 and 103 the method's top-ranked edges hold no path from the input to the logits"
    (note,) = [n for n in curve_notes(Result()) if "no path" in n]
    assert note.startswith(expected) and "the first budget that keeps a path is 1,000" in note
    assert expected in format_table(Baseline(12.6, -3.8), Result.curve, 10_342)
    kept = [CurvePoint(20, 18, 1.0, 0.3, 0.3)]
    assert "no path" not in format_table(Baseline(12.6, -3.8), kept, 10_342)


def test_a_first_view_that_is_not_faithful_offers_the_method_that_holds_paraphrases_out():
    from circuitviz.methods import methods_with

    at = _run(_explore(budgets="4,5"))
    assert not at.exception, at.exception
    result = at.session_state["results"]["eap"]
    view = render.opening_view(result.curve, good_ndf=0.8)
    assert any(c.value == view.reason for c in at.caption)
    assert not view.faithful, result.curve  # the tiny model's circuits of 4-5 edges stay below NDF 0.8
    (offer,) = [b for b in at.button if b.key == "budget.transferable"]
    offer.click().run()
    assert not at.exception, at.exception
    (name,) = methods_with("holds_out_paraphrases")
    assert at.session_state["method"] == name and at.session_state["prompt"] == result.task.clean


def test_the_offered_method_runs_with_its_own_defaults_not_the_first_methods_settings():
    """EAP-IG's IG steps share a name with paraphrase pruning's warm-start IG steps (5 by default):
    the one click runs the offered method as measured, not with the first view's 2 (or 20)."""
    from circuitviz.methods import get_method, methods_with

    at = _run(_explore(method="eap-ig", settings=json.dumps({"ig_steps": 2}), budgets="4,5"))
    assert not at.exception, at.exception
    assert at.session_state["results"]["eap-ig"].config["ig_steps"] == 2
    (offer,) = [b for b in at.button if b.key == "budget.transferable"]
    offer.click().run()
    assert not at.exception, at.exception
    (name,) = methods_with("holds_out_paraphrases")
    default = get_method(name).make_config({}).ig_steps
    assert default != 2 and at.session_state["settings"]["ig_steps"] == default


# ----- Gallery and About -----------------------------------------------------------------------------
def test_gallery_opens_without_a_model_at_a_readable_budget():
    import circuitviz.ui.loaders as loaders

    def refuse(model_id, device):
        raise AssertionError("the gallery must not load a model")

    loaders.MODEL_LOADER = refuse
    at = _app()
    at.switch_page("pages/gallery.py").run()
    assert not at.exception, at.exception
    result, _ = loaders.gallery_example(at.session_state["gallery.slug"])
    budget = at.session_state[f"gallery.{at.session_state['gallery.slug']}.budget"]
    assert budget == render.readable_budget(result.curve, good_ndf=0.8)
    assert next(m.value for m in at.metric if m.label == "NDF") == f"{result.point(budget).ndf:.3f}"
    assert not any("scoring_s" in t.value for t in at.text)  # the build machine's timings are not shown
    nodes, edges = _nodes_and_edges(_graph_pages(at)[0])
    assert len(edges) == int(result.circuit(budget).sum())
    assert any("promotes" in (n.get("title") or "") for n in nodes)
    # the circuit's download names its format, not another method (the example is not EAP-IG's)
    buttons = at.get("download_button")
    labels = [b.proto.label for b in buttons]
    assert "Circuit (JSON)" in labels and not any("EAP-IG" in label for label in labels), labels
    helps = [b.proto.help for b in buttons if b.proto.label == "Circuit (JSON)"]
    assert helps and helps[0].startswith(f"This {result.method} circuit in the EAP-IG library's"), helps


def test_about_page_renders():
    at = _app()
    at.switch_page("pages/about.py").run()
    assert not at.exception, at.exception
    assert any("NDF" in m.value for m in at.markdown)
    # the Gallery's figures name each example's own model and method (the header said "EAP-IG, 20
    # steps" over five Edge Pruning results)
    examples = json.loads((assets.gallery_dir() / "index.json").read_text())
    ours = next(t.value for t in at.table if "model, method" in t.value.columns)
    assert list(ours["model, method"]) == [f"{e['model_id']}, {e['method']}" for e in examples]
    assert not any("EAP-IG" in column for column in ours.columns)


def test_gallery_rerun_live_runs_the_example_on_explore():
    at = _app()
    at.switch_page("pages/gallery.py").run()
    at.segmented_control(key="gallery.slug").set_value("ioi").run()
    at.button(key="gallery.rerun").click().run()
    assert not at.exception, at.exception
    assert at.title[0].value.startswith("Explore")
    assert at.session_state["prompt"].startswith("When Mary and John")
    examples = json.loads((assets.gallery_dir() / "index.json").read_text())
    method = next(e for e in examples if e["slug"] == "ioi")["method"]  # the example's own method
    result = at.session_state["results"].get(method)
    assert result is not None, [e.value for e in at.error]
    assert result.task.corrupted == at.text_area(key="w.corrupted").value  # the example's, not a proposal
    assert any(m.label == "NDF" for m in at.metric)


def test_gallery_rerun_live_uses_the_examples_settings_not_the_last_typed():
    examples = json.loads((assets.gallery_dir() / "index.json").read_text())
    entry = next(e for e in examples if e["slug"] == "ioi")
    at = _app(method=entry["method"]).run()
    at.number_input(key=f"method.{entry['method']}.ig_steps").set_value(3).run()
    at.switch_page("pages/gallery.py").run()
    at.segmented_control(key="gallery.slug").set_value("ioi").run()
    at.button(key="gallery.rerun").click().run()
    assert not at.exception, at.exception
    result = at.session_state["results"].get(entry["method"])
    assert result.config["ig_steps"] == entry["config"]["ig_steps"] != 3


# ----- Paraphrases --------------------------------------------------------------------------------------
def test_paraphrases_shows_the_candidates_and_their_true_overlap(monkeypatch):
    pytest.importorskip("circuitviz.methods.bon")
    from circuitviz.ui import bon

    at = _app(prompt=TINY_PROMPT, corrupted=TINY_CORRUPTED, answer=" Mary", foil=" John")
    at.switch_page("pages/paraphrases.py").run()
    assert not at.exception, at.exception
    at.selectbox(key="w.bon.method").set_value("ibon").run()
    at.number_input(key="bon.method.ibon.n_paraphrases").set_value(3)
    at.number_input(key="bon.method.ibon.ig_steps").set_value(1)
    at.text_input(key="w.bon.budgets").set_value("5,10,20,40")
    at.button(key="bon.run").click().run()
    assert not at.exception, at.exception
    result = at.session_state["results"]["ibon"]
    # the fitted caveat ends "see its NDF on paraphrases": its button is on this page too
    offered = [b.label for b in at.button if b.key == "bon.result.transfer"]
    assert offered == ["Measure its NDF on paraphrases it never saw (runs the model)"], offered
    # the paraphrase table holds the result's pairs, the two texts first
    assert len(at.data_editor) == 1, "no paraphrase table"
    table = at.data_editor[0].value
    assert list(table.columns) == list(bon.TABLE_COLUMNS)
    pairs = result.details.pairs  # each row against the stored pair it shows, not the page's own rows
    assert list(table["pair"]) == ["q"] + [f"p{i}" for i in range(1, len(pairs))]
    assert list(table["paraphrase"]) == [pair["clean"] for pair in pairs]
    assert list(table["corrupted"]) == [pair["corrupted"] for pair in pairs]
    assert list(table["source"]) == [pair["source"] for pair in pairs]
    assert table["replaced"][0] == bon.replaced_words(pairs[0]["clean"], pairs[0]["corrupted"])
    # the token quoted (a grid cell hides its leading space): "' Mary'", not "Mary"
    quoted = [shown_token(pair["model_answer"]) if pair.get("model_answer") else "" for pair in pairs]
    assert list(table["model's answer"]) == quoted and all(q.startswith("'") for q in quoted if q)
    candidates = {int(k) for k in result.details.candidates}
    assert list(table["candidate"]) == [i in candidates for i in range(len(pairs))]
    assert sum(table["candidate"]) == len(candidates) > 1
    # the candidates' NDF bars at the slider's budget: the run's own points where it evaluated the
    # candidates there, else their circuits (top edges of each stored score matrix) evaluated now
    budget = at.session_state["budget"]
    at_budget = budget
    charts = _charts(at)
    bars = charts[0]["data"][0]
    assert f"at budget {budget:,}" in charts[0]["layout"]["title"]["text"]
    entry = next((e for e in result.details.per_budget if int(e["budget"]) == budget), None)
    if entry is not None:
        expected, best = [float(p["ndf"]) for p in entry["candidates"]], int(entry["winner"])
    else:
        expected, best = _candidates_evaluated(at, result, budget)
    assert bars["y"] == pytest.approx(expected)
    ticks = charts[0]["layout"]["xaxis"]["ticktext"]  # the winner is named under its bar
    winner = [i for i, text in enumerate(ticks) if text.endswith("<b>winner</b>")]
    assert winner == [best]
    assert any(c.value.startswith("The winner among the candidates") for c in at.caption)
    # the UpSet bars count the edges in exactly those candidates' circuits
    sets = bon.candidate_edge_sets(_tiny_loader("", ""), result.model_id, result, at_budget, _store(at))
    upset = charts[1]["data"][0]
    expected_sizes = [item.size for item in render.exclusive_intersections(sets)[:20]]
    assert upset["y"] == expected_sizes
    assert sum(upset["y"]) == len(set().union(*sets.values()))
    # choosing an intersection lights its edges that the drawn circuit has, and says how many
    before = _nodes_and_edges(_graph_pages(at)[0])[1]
    options = at.selectbox(key="bon.intersection").options
    at.selectbox(key="bon.intersection").set_value(at.selectbox(key="bon.intersection").options[1]).run()
    assert not at.exception, at.exception
    chosen = render.exclusive_intersections(sets)[0]
    circuit = set(result.graph.edge_names_of(result.circuit(budget)))
    edges = _nodes_and_edges(_graph_pages(at)[0])[1]
    lit = [e for e in edges if e["color"]["opacity"] == 1.0]
    assert len(edges) == len(before) and len(options) >= 2
    inside = chosen.edges & circuit
    assert len(lit) == (len(inside) if inside else len(edges))
    assert any("of this intersection's" in c.value for c in at.caption)
    # edited paraphrases become the next run's settings (a file source with those pairs)
    at.button(key="bon.use_pairs").click().run()
    assert not at.exception, at.exception
    assert at.session_state["bon.method.ibon.paraphrase_source"] == "file"
    pairs = at.session_state["bon.method.ibon.paraphrases"].splitlines()
    assert pairs and all(json.loads(line)["clean"] and json.loads(line)["corrupted"] for line in pairs)
    said = [m.value for m in at.success if "now holds" in m.value]
    assert said == [
        f"The form above now holds {len(pairs)} paraphrases \\(source\\: file\\); press Run Best\\-of\\-N to score them\\."
    ]
    # iBoN takes any budget: one the run never evaluated, on a log-spaced slider
    slider = at.select_slider(key="w.budget")
    assert 15 in [int(str(o).replace(",", "")) for o in slider.options]
    slider.set_value(15).run()
    assert not at.exception, at.exception
    assert (
        next(m.value for m in at.metric if m.label == "NDF")
        == f"{evaluate_circuits(_tiny_loader('', ''), result.task, [result.circuit(15)], [15])[1][0].ndf:.3f}"
    )
    # an edit the form refuses is said beside the button (it said "press Run" beside a disabled Run),
    # and the result on screen says it is for earlier inputs
    monkeypatch.setattr(bon, "edited_pairs_text", lambda edited, rows: '{"clean": "When Mary"}')
    at.button(key="bon.use_pairs").click().run()
    assert not at.exception, at.exception
    assert not [m for m in at.success if "now holds" in m.value]
    assert any("which cannot run" in w.value for w in at.warning), [w.value for w in at.warning]
    assert any("fix the input above" in i.value for i in at.info), [i.value for i in at.info]
    options = [int(str(o).replace(",", "")) for o in at.select_slider(key="w.budget").options]
    at.select_slider(key="w.budget").set_value(
        next(o for o in options if o not in (15, *result.budgets))
    ).run()
    assert not at.exception, at.exception  # the earlier result still answers any budget


def _candidates_evaluated(at, result, budget: int) -> tuple[list[float], int]:
    """Each candidate's NDF at ``budget`` recomputed here: its stored score matrix's top edges,
    pruned, patched on the prompt; and the index of the most faithful (the winner)."""
    from circuitviz.core.graph import prune, top_n
    from circuitviz.core.tasks import PromptTask
    from circuitviz.entry.api import evaluate_circuits
    from circuitviz.methods.bon import QueryCircuitConfig, base_scorer
    from circuitviz.query.scoring import score_key

    model, store, spec = _tiny_loader("", ""), _store(at), result.graph
    method, config = base_scorer(QueryCircuitConfig(**result.config))
    masks = []
    for k in (int(k) for k in result.details.candidates):
        pair = result.details.pairs[k]
        task = PromptTask(
            pair["clean"], pair["corrupted"], pair["answer"], tuple(pair["foils"]), pair["metric"]
        )
        scores = store.load_state(
            score_key(model, result.model_id, spec, task, method, config), kind="scores"
        )
        masks.append(prune(spec, top_n(spec, scores["scores"].float(), budget)))
    baseline, points = evaluate_circuits(model, result.task, masks, [budget] * len(masks))
    # Best-of-N's rule: the highest NDF, then the metric closest to the model's, then the first
    best = min(range(len(points)), key=lambda i: (-points[i].ndf, abs(baseline.clean - points[i].metric), i))
    return [point.ndf for point in points], best


def _store(at):
    from circuitviz.services.store import ResultStore, default_root

    return ResultStore(default_root())


def test_an_upset_click_selects_its_intersection():
    from circuitviz.ui.bon import clicked_intersection, highlight_in_circuit

    shown = render.exclusive_intersections({"q": {"a", "b"}, "p1": {"b", "c"}})
    event = {"selection": {"points": [{"curve_number": 0, "point_index": 1}]}}
    assert clicked_intersection(event, shown) == shown[1].label
    # the bar's own label where the event carries it (a chart drawn at another budget names its own bars)
    labelled = {
        "selection": {"points": [{"curve_number": 0, "point_index": 0, "customdata": shown[1].label}]}
    }
    assert clicked_intersection(labelled, shown) == shown[1].label
    gone = {"selection": {"points": [{"curve_number": 0, "point_index": 0, "customdata": "p9"}]}}
    assert clicked_intersection(gone, shown) is None
    assert clicked_intersection({"selection": {"points": []}}, shown) is None
    assert (
        clicked_intersection({"selection": {"points": [{"curve_number": 3, "point_index": 0}]}}, shown)
        is None
    )
    lit, sentence = highlight_in_circuit({"x", "y"}, {"a"})
    assert lit is None and sentence.startswith("None of this intersection's 2 edges")
    lit, sentence = highlight_in_circuit({"a", "y"}, {"a"})
    assert lit == {"a"} and sentence.startswith("1 of this intersection's 2 edges")


# ----- runs: progress and the estimate ------------------------------------------------------------------
class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_progress_covers_every_phase_and_time_left_never_grows():
    from circuitviz.ui.run import RunProgress

    clock = Clock()
    progress = RunProgress({"prepare": 1.0, "work": 6.0, "evaluate": 3.0}, n_budgets=10, clock=clock)
    seen = []
    # the run is twice as slow as estimated; the engine reports sparsely (none during evaluation)
    for t, report in [
        (1.0, None),
        (2.0, ("score", 0.1)),
        (6.0, ("score", 0.4)),
        (10.0, ("score", 0.8)),
        (14.0, ("score", 1.0)),
        (15.0, ("evaluate", 0.0)),
        (17.0, None),
        (19.0, None),
        (20.5, ("evaluate", 1.0)),
    ]:
        clock.now = t
        if report:
            progress.report(*report)
        seen.append((progress.update(), progress.left))
    fractions = [fraction for (fraction, _), _ in seen]
    lefts = [left for _, left in seen]
    assert fractions == sorted(fractions) and fractions[-1] > 0.9
    assert lefts == sorted(lefts, reverse=True)  # never grows
    # the faithfulness phase moves on its own between reports, and is named
    (during, text), _ = seen[6]
    assert seen[5][0][0] < during < seen[7][0][0] and "measuring faithfulness at 10 budgets" in text
    assert "step 2 of 3, scoring edges" in seen[2][0][1]


def test_a_finished_run_calibrates_the_next_estimate(tmp_path, monkeypatch):
    from circuitviz.entry import calibration
    from circuitviz.entry.limits import estimate_run

    model = _tiny_loader("", "")
    first = estimate_run(model, "eap", n_tokens=15, n_budgets=4)
    assert "nominal" in first.priced
    phases = {"prepare": 0.5, "work": 1.0, "evaluate": 0.5}
    # a run of another model only: its rate stands in, and the sentence says whose it was
    calibration.record("cpu", "eap", first.flops, 8.0, phases, model="another model")
    stand_in = estimate_run(model, "eap", n_tokens=15, n_budgets=4)
    assert stand_in.seconds == pytest.approx(8.0) and "1 eap run of other models" in stand_in.priced
    calibration.record("cpu", "eap", first.flops, 2.0, phases, model=first.model)
    again = estimate_run(model, "eap", n_tokens=15, n_budgets=4)
    assert again.seconds == pytest.approx(2.0) and "1 eap run on this machine" in again.priced
    other = estimate_run(model, "eap-ig", {"ig_steps": 3}, n_tokens=15, n_budgets=4)
    assert (
        other.seconds == pytest.approx(other.flops / (first.flops / 2.0)) and "other methods" in other.priced
    )
    assert calibration.phase_shares("cpu", "eap") == {"prepare": 0.25, "work": 0.5, "evaluate": 0.25}
    assert json.loads(calibration.calibration_path().read_text())["cpu"]["eap"][1]["seconds"] == 2.0


def test_a_run_records_its_time_and_shows_the_estimate_it_priced():
    from circuitviz.entry import calibration

    at = _run(_explore())
    assert not at.exception, at.exception
    runs = json.loads(calibration.calibration_path().read_text())["cpu"]["eap"]
    assert len(runs) == 1 and runs[0]["seconds"] > 0
    at.text_input(key="w.budgets").set_value("5,10,20").run()
    estimate = next(c.value for c in at.caption if c.value.startswith("Estimate: about"))
    assert "priced from 1 eap run on this machine" in estimate


def test_the_edge_tables_line_says_all_edges_when_it_lists_them_all():
    """'The 29 strongest of the circuit's 29 edges' read as if some were left out."""
    assert (
        result_view.edges_table_caption(29, 50)
        == "The circuit's 29 edges, strongest first (also in the CSV)."
    )
    assert (
        result_view.edges_table_caption(1, 50) == "The circuit's 1 edge, strongest first (also in the CSV)."
    )
    assert result_view.edges_table_caption(120, 50) == (
        "The 50 strongest of the circuit's 120 edges (all of them in the CSV)."
    )


def test_what_applying_the_groups_left_out_is_said_after_the_page_redraws():
    """The sentence was shown and then lost to the rerun that draws the groups (seen in Chromium)."""
    at = _explore()
    next(b for b in at.button if b.label == "Run").click()
    at.run()
    node = next(
        n for n in at.session_state["results"]["eap"].graph.node_names if n not in ("input", "logits")
    )
    at.text_area(key="explore.groups_text").set_value(f"no colon here\nmine: {node}, a99.h9").run()
    at.button(key="explore.apply_groups").click().run()
    assert not at.exception, at.exception
    from circuitviz.core.text import markdown_text

    sentence = (
        "Groups: 1 line without a colon ('name: node, node'); group 'mine' names 1 node this circuit "
        "does not have; the rest is shown."
    )
    assert [i.value for i in at.info if "line without a colon" in i.value] == [markdown_text(sentence)]


def test_paraphrases_left_out_are_shown_as_typed_and_every_one_with_its_reason():
    """The sentence under the table quoted a paraphrase as markdown (a bold word, a live link to
    any site) and named five of six, the sixth with no reason anywhere (an audit in Chromium)."""
    hostile = ["**b** [l](http://evil.example) Mary and John went home", "then see www.evil.example at once"]
    lines = [*hostile, *(f"When Mary and John went out number {n}" for n in range(5))]
    text = "\n".join(f"{line}\tx" for line in lines)  # every corruption one token: each is refused
    at = _app(prompt=TINY_PROMPT, corrupted=TINY_CORRUPTED, answer=" Mary", foil=" John")
    at.switch_page("pages/paraphrases.py").run()
    at.selectbox(key="w.bon.method").set_value("bon").run()
    at.selectbox(key="bon.method.bon.paraphrase_source").set_value("file").run()
    at.text_area(key="bon.method.bon.paraphrases").set_value(text).run()  # Run waits for the pairs
    at.number_input(key="bon.method.bon.ig_steps").set_value(1)
    at.text_input(key="w.bon.budgets").set_value("5,10")
    at.button(key="bon.run").click().run()
    assert not at.exception, at.exception
    notes = [c.value for c in at.caption if "left out" in c.value]
    assert notes and all("**b**" not in n and "](http" not in n for n in notes), notes
    assert any("`www.evil.example`" in n for n in notes), notes  # an address: code, never a link
    (listed,) = [e for e in at.expander if e.label.startswith("Every paraphrase left out")]
    every = [c.value for c in listed.caption]
    assert listed.label.endswith(f"({len(lines)})") and len(every) == len(lines), every
    assert all("\\: the paraphrase has" in line for line in every), every


def test_the_winner_sentence_names_a_budget_as_a_budget():
    """'NDF 0.493 at 200 edges' stood beside 'edges kept 177' (an audit): 200 is the budget."""
    from circuitviz.core.curves import CurvePoint
    from circuitviz.query.candidates import winner_note

    result = SimpleNamespace(any_budget=False, method="bon")
    point = CurvePoint(budget=200, n_edges=177, metric=1.0, nfs=0.5, ndf=0.493)
    scores = [{"name": "p8", "ndf": 0.493, "winner": True}]
    assert winner_note(result, 200, point, scores, 200) == (
        "Best-of-N keeps the winner, p8 (NDF 0.493 at budget 200): its circuit is the one drawn below (NDF 0.493)."
    )
    assert "evaluated at budget 100, the nearest" in winner_note(result, 150, point, scores, 100)


def test_ibons_sentence_at_an_anchor_budget_is_true_of_its_circuit():
    """At an anchor iBoN draws the winner's own circuit (177 edges, NDF 0.493 both), and the
    sentence called it 'another circuit, built from the winners' edges' (an audit)."""
    from circuitviz.core.curves import CurvePoint
    from circuitviz.query.candidates import winner_note

    result = SimpleNamespace(any_budget=True, method="ibon")
    point = CurvePoint(budget=200, n_edges=177, metric=1.0, nfs=0.5, ndf=0.493)
    scores = [{"name": "p8", "ndf": 0.493, "n_edges": 177, "winner": True}]
    said = winner_note(result, 200, point, scores, 200)
    assert "another circuit" not in said and "the same NDF and the same 177 edges" in said, said
    between = CurvePoint(budget=300, n_edges=290, metric=1.0, nfs=0.5, ndf=0.61)
    assert "is another circuit, built from the winners' edges" in winner_note(
        result, 300, between, scores, 200
    )
