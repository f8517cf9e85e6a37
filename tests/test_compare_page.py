"""The Compare page as a user meets it (an audit, 2026-12-06): a link naming more methods than
the page compares, what the methods that need no corrupted prompt are measured against, and the
sentences beside the figures. AppTest on the tiny model; the sentences also as plain functions."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
from explore_session import LINK  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

TIMEOUT = 300
BASE = dict(LINK)  # the tiny IOI task's link (explore_session)

pytestmark = pytest.mark.usefixtures("tiny_app")  # the tiny model; results under tmp_path (conftest)


def _compare(**query) -> AppTest:
    at = AppTest.from_file("../app.py", default_timeout=TIMEOUT)
    for name, value in {**BASE, **query}.items():
        at.query_params[name] = value
    at.run()
    return at.switch_page("pages/compare.py").run()


def test_a_link_naming_five_methods_keeps_four_and_says_so():
    """compare=a,b,c,d,e raised Streamlit's max-selections error, shown as a traceback."""
    at = _compare(compare="eap,eap-ig,relp,cd-t,flow-routes")
    assert not at.exception, at.exception
    assert at.multiselect(key="compare.methods").value == ["eap", "eap-ig", "relp", "cd-t"]
    said = [w.value for w in at.warning if "compares at most 4" in w.value]
    assert len(said) == 1 and "leaves out Information flow routes" in said[0], said
    at = _compare(compare="eap,eap,eap-ig")  # a repeated name: once
    assert not at.exception, at.exception
    assert at.multiselect(key="compare.methods").value == ["eap", "eap-ig"]


def test_compare_says_what_the_methods_without_a_corrupted_prompt_are_measured_against():
    """Flow routes and CD-T find their circuits without the corrupted prompt; their curves were
    drawn beside the others' with nothing said of what they are measured against."""
    from types import SimpleNamespace

    from circuitviz.ui import compare

    def results(*names):
        return {name: SimpleNamespace(method=name) for name in names}

    assert compare.corruption_line(results("eap", "eap-ig")) == ""
    one = compare.corruption_line(results("cd-t", "eap"))
    assert one.startswith("CD-T needs no corrupted prompt to find its circuit; its NDF, necessity and curve")
    assert "against the corrupted prompt above" in one
    two = compare.corruption_line(results("flow-routes", "eap", "cd-t"))
    assert two.startswith("Information flow routes and CD-T need no corrupted prompt to find their circuits;")
    at = _compare(compare="cd-t,eap")
    at.button(key="compare.run").click().run()
    assert not at.exception, at.exception
    assert [c.value for c in at.caption if c.value.startswith("CD-T needs no corrupted prompt to")] == [one]


def test_the_form_says_why_the_corrupted_prompt_is_needed_for_a_method_that_needs_none():
    """Explore hides the corrupted box for flow routes, CD-T and ACC++ (issue 33); Compare measures
    every method against it and said only "The corrupted prompt is empty" when it was."""
    from circuitviz.ui import compare

    assert compare.form_corruption_line(["eap", "eap-ig"]) == ""
    one = compare.form_corruption_line(["cd-t", "eap"])
    assert one == (
        "CD-T needs no corrupted prompt, but Compare measures every method against the one above, so "
        "the curves share one yardstick; Explore runs it without one."
    )
    assert compare.form_corruption_line(["flow-routes", "acc++"]).startswith(
        "Information flow routes and ACC++ need no corrupted prompt"
    )
    at = _compare(compare="cd-t,eap", corrupted="")
    assert not at.exception, at.exception
    assert one in [c.value for c in at.caption]
    assert any("The corrupted prompt is empty" in e.value for e in at.error)  # still needed here


def test_the_pages_caption_says_how_the_edges_only_one_method_found_are_drawn():
    """It said they are 'in colour'; every edge is in colour (the input it feeds), and those only
    one method found are bold, as each graph's title and caption say."""
    at = _compare(compare="eap,eap-ig")
    head = next(c.value for c in at.caption if c.value.startswith("The same prompt and budget"))
    assert "in colour" not in head
    assert "(the edges only that method found drawn bold, the shared ones thin)" in head


def test_the_held_out_caption_says_which_paraphrases_each_mean_rests_on():
    """The caption said '1 of 9 paraphrases left out, 8 kept' beside n = 5 for every method and
    nothing of which five: each method takes the first five it never used, so paraphrase pruning
    (which used three) was measured partly on other paraphrases than the rest."""
    from circuitviz.ui import compare

    first, later = [f"p{i}" for i in range(5)], ["p0", "p1", "p5", "p6", "p7"]
    measured = {name: {"texts": first} for name in ("eap-gp", "atp-star", "edge-pruning")}
    measured["paraphrase-pruning"] = {"texts": later}
    assert compare.held_out_sets_sentence(measured) == (
        "Each held-out NDF is the mean over the first n kept paraphrases its method never used, so the "
        "means rest on different paraphrases: eap-gp, atp-star and edge-pruning on the same 5; "
        "paraphrase-pruning's 5 share 2 with theirs."
    )
    alike = {name: {"texts": first} for name in ("eap", "eap-ig")}
    assert compare.held_out_sets_sentence(alike) == (
        "Every method's held-out NDF is the mean over the same 5 paraphrases."
    )
    assert compare.held_out_sets_sentence({"eap": {"texts": []}, "eap-ig": {"texts": first}}) == ""
    at = _compare(compare="eap,eap-ig", budgets="5,10,20")
    at.button(key="compare.run").click().run()
    at.toggle(key="compare.transfer").set_value(True).run()
    assert not at.exception, at.exception
    caption = next(c.value for c in at.caption if c.value.startswith("Held out: template paraphrases"))
    assert "held-out NDF is the mean over" in caption, caption


def test_a_chosen_method_without_a_result_is_said_beside_the_others_comparison():
    """Two methods run, a third chosen after: the page compared the two and said nothing of it."""
    at = _compare(compare="eap,eap-ig")
    at.button(key="compare.run").click().run()
    assert not [i for i in at.info if "no result for this prompt yet" in i.value]
    at.multiselect(key="compare.methods").set_value(["eap", "eap-ig", "cd-t"]).run()
    assert not at.exception, at.exception
    said = [i.value.replace("\\", "") for i in at.info if "no result for this prompt yet" in i.value]
    assert said == [
        "CD-T has no result for this prompt yet, so the comparison below leaves it out; run the "
        "comparison to add it."
    ], said
    assert [h.value for h in at.subheader] == ["EAP", "EAP-IG (inputs)"]


def test_the_comparison_downloads_hold_what_the_page_shows():
    """Compare had no download of its own: a user who compared methods could keep each circuit only
    by opening it on Explore. The JSON holds every method's circuit at the budget shown (as
    Explore's circuit JSON), the overlap table and the edges in every circuit; the CSV every curve."""
    import csv
    import io
    import json

    from circuitviz.ui import compare
    from circuitviz.ui.compare_downloads import comparison_json, comparison_name

    at = _compare()
    at.multiselect(key="compare.methods").set_value(["eap", "eap-ig"]).run()
    at.button(key="compare.run").click().run()
    assert not at.exception, at.exception
    labels = [b.proto.label for b in at.get("download_button")]
    assert "Comparison (JSON)" in labels and "Curves (CSV)" in labels, labels
    results = {name: at.session_state["results"][name] for name in ("eap", "eap-ig")}
    budget = at.session_state["budget"]
    shown = compare.compare_at(results, budget)
    data = json.loads(json.dumps(comparison_json(results, shown)))  # plain JSON, no NaN
    assert data["budget"] == budget and set(data["methods"]) == {"eap", "eap-ig"}
    for name, result in results.items():
        mine = data["methods"][name]
        kept = {f"{e_name}" for e_name, edge in mine["edges"].items() if edge["in_graph"]}
        assert (
            kept
            == set(result.graph.edge_names_of(result.circuit(budget)))
            == set(data["edges_in_circuit"][name])
        )
        assert mine["budget"] == budget and mine["method"] == name
    table = at.dataframe[0].value.iloc[0]
    (row,) = data["overlap"]
    assert (row["shared"], row["only A"], row["only B"]) == (
        table["shared"],
        table["only A"],
        table["only B"],
    )
    assert row["Jaccard"] == pytest.approx(table["Jaccard"])
    a, b = (set(data["edges_in_circuit"][n]) for n in ("eap", "eap-ig"))
    assert set(data["in_every_circuit"]) == a & b
    assert "held_out_and_completeness" not in data  # not measured: not written
    measured = {  # as compare._measured returns it; a NaN completeness is written as null
        n: {"held_out": 0.5, "n": 2, "texts": ("p1", "p2"), "completeness": float("nan"), "note": ""}
        for n in results
    }
    kept = json.loads(json.dumps(comparison_json(results, shown, measured), allow_nan=False))
    assert kept["held_out_and_completeness"]["eap"] == {
        "held_out_mean_ndf": 0.5, "n_paraphrases": 2, "paraphrases": ["p1", "p2"], "completeness": None, "note": ""
    }  # fmt: skip
    rows = list(csv.DictReader(io.StringIO(render_curves(results))))
    assert {r["curve"] for r in rows} == {"eap", "eap-ig"}
    name = comparison_name(results, "comparison", "json", budget)
    assert name.startswith(f"comparison_eap-vs-eap-ig_budget-{budget}_") and name.endswith(".json")


def render_curves(results) -> str:
    from circuitviz import render

    first = next(iter(results.values()))
    return render.curves_csv({n: r.curve for n, r in results.items()}, first.graph.n_edges)


def test_a_method_over_positions_on_explore_is_compared_over_edges_and_said_so():
    """With positions ticked for EAP on Explore, Compare ran EAP over positions and showed its
    circuit of 125 (edge, position) units as 'NDF 0.693 with 125 edges' beside ACC++'s edges, its
    graph and overlap drawn from another, summed circuit (SmolLM2-135M, capital of France)."""
    at = _compare(compare="eap,acc++", method="eap", settings='{"positions": true}', budgets="5,10,20")
    next(button for button in at.button if button.label == "Run the comparison").click()
    at.run()
    assert not at.exception, at.exception
    result = at.session_state["results"]["eap"]
    assert not result.positions
    said = [c.value for c in at.caption if "over token positions" in c.value]
    assert len(said) == 1 and said[0].startswith("EAP runs over edges here"), said


def test_a_result_kept_from_explore_over_positions_is_left_out_and_said_to_be():
    """EAP run over positions on Explore, flow routes over edges, then Compare with the two: it
    compared the kept circuit over positions as if edges ('eap: NDF 0.119 with 18 edges' for 18
    units, its curve on the edge axis up to 100k; Gemma-3-270M, an audit, 2026-12-06)."""
    from explore_session import explore_session, run_it

    at = run_it(
        explore_session({**BASE, "method": "eap", "settings": '{"positions": true}', "budgets": "5,10,20"})
    )
    assert not at.exception, at.exception
    assert at.session_state["results"]["eap"].positions
    at.selectbox(key="w.method").set_value("flow-routes").run()
    at = run_it(at)
    assert not at.exception, at.exception
    at = at.switch_page("pages/compare.py").run()
    at.multiselect(key="compare.methods").set_value(["eap", "flow-routes"]).run()
    assert not at.exception, at.exception
    assert [h.value for h in at.subheader] == []  # no comparison of a circuit over positions
    said = [i.value.replace("\\", "") for i in at.info]
    assert (
        "The result of EAP for this prompt is over token positions (as run on Explore): its budgets count "
        "(edge, position) units, not edges, so the comparison below leaves it out; run the comparison to "
        "compute it over edges."
    ) in said, said
    assert not any("earlier inputs" in s for s in said), said  # none of it is below
    assert not any("EAP has no result" in s for s in said), said  # it has one, over positions
    at.button(key="compare.run").click().run()  # EAP over edges now: both compared
    assert not at.exception, at.exception
    assert [h.value for h in at.subheader] == ["EAP", "Information flow routes"]
    assert not at.session_state["results"]["eap"].positions
    assert not any("over token positions (as run" in i.value for i in at.info)


def _cd_t_fails(monkeypatch, message: str) -> None:
    """CD-T's runs raise ``message`` (a method that cannot run on the prompt); the others run."""
    from circuitviz.ui import loaders

    real = loaders.discover

    def failing(model, request, **kwargs):
        if request.method == "cd-t":
            raise ValueError(message)
        return real(model, request, **kwargs)

    monkeypatch.setattr(loaders, "discover", failing)


def test_a_method_whose_run_fails_is_said_to_fail_not_to_wait_for_a_run(monkeypatch):
    """Best-of-N on a prompt of no template family failed ('The run could not start: ...'), and
    under the error the page said 'Best-of-N (query circuits) has no result for this prompt yet, so
    the comparison below leaves it out; run the comparison to add it', a run that fails again."""
    _cd_t_fails(monkeypatch, "CD-T cannot run on this prompt (a test). More words here.")
    at = _compare(compare="eap,eap-ig,cd-t")
    at.button(key="compare.run").click().run()
    assert not at.exception, at.exception
    assert [h.value for h in at.subheader] == ["EAP", "EAP-IG (inputs)"]
    for _ in range(2):  # as run, and on the next rerun (the slider moved): the run is not retried
        said = [i.value.replace("\\", "") for i in [*at.info, *at.warning]]
        assert not any("CD-T has no result" in s for s in said), said
        assert (
            "CD-T could not run on this prompt (CD-T cannot run on this prompt (a test)), so the comparison "
            "below leaves it out and running the comparison again fails the same way: change its settings "
            "on the Explore page, or take it out of the box above."
        ) in said, said
        at.run()


def test_the_held_out_caption_gives_the_transfers_way_out_on_a_prompt_of_no_family(monkeypatch):
    """On a prompt of no template family (Gemma-3-270M, 'Alice lives in France, so she speaks') the
    held-out caption ended 'give paraphrases in a file or use the openai source.': the settings of
    the methods that draw paraphrases of their own; the held-out transfer draws templates only."""
    import circuitviz.entry.api as api
    from circuitviz.query.templates import NO_FAMILY
    from circuitviz.ui.measure_offers import nothing_measured_sentence

    def nothing(model, results, budgets=None, **kwargs):
        empty = {"paraphrases": [], "ndf": [], "tasks": [], "mean_ndf": None, "excluded_as_used": 0}
        return {
            name: {"source": "template", "note": NO_FAMILY, "budgets": {str(b): dict(empty) for b in budgets}}
            for name in results
        }

    monkeypatch.setattr(api, "measure_transfers", nothing)
    at = _compare(compare="eap,eap-ig")
    at.button(key="compare.run").click().run()
    at.toggle(key="compare.transfer").set_value(True).run()
    assert not at.exception, at.exception
    caption = next(c.value for c in at.caption if c.value.startswith("Held out: template paraphrases"))
    assert "openai" not in caption and "in a file" not in caption, caption
    assert caption.endswith(
        "The prompt matches none of the built-in template families (indirect object, arithmetic, factual "
        "recall such as 'The capital of France is' or 'The currency of Japan is the', occupation and "
        "pronoun, multiple choice); the held-out transfer draws template paraphrases only (on the "
        "command line, evaluate --transfer-file measures a circuit on paraphrase pairs of your own)."
    ), caption
    said = nothing_measured_sentence(NO_FAMILY)  # Explore's button: the way out once, not twice
    assert "openai" not in said and said.count("--transfer-file") == 1, said


def test_a_comparisons_file_name_names_every_method_or_their_count_never_some_cut():
    """Cut at Explore's 24 characters, EAP, CD-T, Edge Pruning and EAP-IG downloaded as
    'comparison_eap-vs-cd-t-vs-edge_budget-200_...json' (an audit, Gemma-3-270M), and paraphrase
    pruning beside EAP-IG as 'paraphrase-pruning-vs', one method's name."""
    import re
    from types import SimpleNamespace

    from circuitviz.ui.compare_downloads import comparison_name
    from circuitviz.ui.downloads import NAME_LIMIT

    task = SimpleNamespace(clean="Alice lives in France, so she speaks", to_dict=lambda: {})

    def results(*names, model="gemma-3-270m"):
        return {
            n: SimpleNamespace(method=n, model_id=model, task=task, config={}, scores=None) for n in names
        }

    def named(*names, **kwargs):
        return comparison_name(results(*names, **kwargs), "comparison", "json", 200)

    assert named("eap", "cd-t", "edge-pruning", "eap-ig").startswith(
        "comparison_eap-vs-cd-t-vs-edge-pruning-vs-eap-ig_budget-200_gemma-3-270m_alice-lives-in"
    )
    assert named("paraphrase-pruning", "eap-ig").startswith(
        "comparison_paraphrase-pruning-vs-eap-ig_budget-200_"
    )
    longest = ("paraphrase-pruning", "eap-ig-activations", "edge-pruning", "bon-csm")
    assert named(*longest).startswith("comparison_4-methods_budget-200_")
    wide = named("eap", "cd-t", "edge-pruning", "eap-ig", model="an-organisation/a-model-of-a-long-name-x")
    assert len(wide) <= NAME_LIMIT and re.search(r"_[0-9a-f]{8}\.json$", wide), wide  # the hash kept


def test_a_method_whose_settings_are_refused_is_not_said_to_wait_for_a_run():
    """A link's Edge Pruning settings out of bounds: the page said so and that it is left out until
    they are fixed on Explore, then under it 'Edge Pruning (learned masks) has no result for this
    prompt yet, so the comparison below leaves it out; run the comparison to add it.'"""
    at = _compare(method="edge-pruning", settings='{"steps": -5}', compare="eap,eap-ig,edge-pruning")
    at.button(key="compare.run").click().run()
    assert not at.exception, at.exception
    assert [h.value for h in at.subheader] == ["EAP", "EAP-IG (inputs)"]
    errors = [e.value.replace("\\", "") for e in at.error]
    assert any(e.startswith("Edge Pruning (learned masks): steps must be between 0 and") for e in errors), (
        errors
    )
    said = [i.value.replace("\\", "") for i in at.info]
    assert not any("has no result for this prompt yet" in s for s in said), said


def test_a_budget_over_the_graphs_edges_is_said_on_compare_too():
    """Explore with positions ticked took 3,000 as units ('Budget 3,000 is over the 592 (edge,
    position) units of this prompt's graph, so it keeps the whole graph.'); Compare runs it over
    edges and said nothing of the budget's keeping the whole graph there."""
    at = _compare(method="eap", settings='{"positions": true}', budgets="5,20,3000", compare="eap,eap-ig")
    assert not at.exception, at.exception
    said = [
        c.value.replace("\\", "") for c in at.caption if c.value.replace("\\", "").startswith("Budget 3,000")
    ]
    assert len(said) == 1 and "edges of this model's graph, so it keeps the whole graph" in said[0], said
    assert said[0].endswith("(the budgets are set on the Explore page).")


def test_each_run_says_it_goes_on_if_the_page_is_stopped_or_left():
    """Streamlit's Stop during Edge Pruning's run on Compare ended the script, not the run, and left
    'Running edge-pruning ... 6 s so far, about 42 s left' on screen 90 s later, the run long done
    (Gemma-3-270M, Chromium): each run's status says the run goes on and how to see it."""
    at = _compare(compare="eap,eap-ig")
    at.button(key="compare.run").click().run()
    assert not at.exception, at.exception
    said = [c.value for c in at.caption if c.value.startswith("The run goes on in the background")]
    assert (
        said
        == [
            "The run goes on in the background if you stop or leave the page: come back, or rerun the page, "
            "to see its progress and then its result."
        ]
        * 2
    ), said


def test_one_result_beside_a_failed_method_asks_for_another_method_not_a_run(monkeypatch):
    """EAP beside a method whose run failed: 'Fewer than two of the chosen methods have a result
    for this prompt; run the comparison.' asked for a run that fails again."""
    _cd_t_fails(monkeypatch, "CD-T cannot run on this prompt (a test).")
    at = _compare(compare="eap,cd-t")
    at.button(key="compare.run").click().run()
    assert not at.exception, at.exception
    said = [i.value for i in at.info if i.value.startswith("Fewer than two")]
    assert said == [
        "Fewer than two of the chosen methods have a result for this prompt; choose another method in the box above."
    ], said
