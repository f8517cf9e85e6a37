"""What the Signals page's drawing and tables say of ACC++'s figures: each sentence true of the
number beside it (an audit on Gemma-3-270M and SmolLM2-135M, 2026-12-06)."""

from __future__ import annotations

import html
from types import SimpleNamespace

from circuitviz.render.acc_graph import position_graph_html


def _decision(index: int, node: str, destination: int, source: int, weight: float) -> dict:
    layer, head = (int(part) for part in node.split("@")[0][1:].split(".h"))
    side = {"reached": True, "curve": [weight, weight / 4], "removals": [{}]}
    return {
        "index": index,
        "node": node,
        "layer": layer,
        "head": head,
        "destination": destination,
        "source": source,
        "destination_token": " of",
        "source_token": " Wall",
        "weight": weight,
        "threshold": 0.2,
        "depth": 1,
        "query": side,
        "key": side,
    }


def acc_details():
    """An ACC++ result's details in the shape ``acc.circuit.circuit_json`` writes: a12.h2 at ' of'
    attends ' Wall', its query written by m11 there, its key by m3 at ' Wall'; a12.h2 is a seed of
    the answer (an edge into the logits, its share of the seeds' direct effect)."""
    tokens = ["<bos>", "The", " Great", " Wall", " is", " in", " of"]
    nodes = [
        {"id": "a12.h2@6", "component": "a12.h2", "kind": "head", "layer": 12, "head": 2, "position": 6},
        {"id": "m11@6", "component": "m11", "kind": "mlp", "layer": 11, "head": None, "position": 6},
        {"id": "m3@3", "component": "m3", "kind": "mlp", "layer": 3, "head": None, "position": 3},
        {"id": "logits@6", "component": "logits", "kind": "logits", "layer": 18, "head": None, "position": 6},
    ]

    def signal(source: str, side: str, ig: float) -> dict:
        return {
            "source": source,
            "target": "a12.h2@6",
            "side": side,
            "decision": 0,
            "directions": [24, 6],
            "rank": 2,
            "attribution": ig,
            "weight_drop": ig + 0.03,
            "via_source": None,
        }

    edges = [
        {
            "source": "a12.h2@6",
            "target": "logits@6",
            "side": "logits",
            "decision": None,
            "directions": [],
            "rank": 0,
            "attribution": 0.16,
            "direct_effect": 0.9,
            "weight_drop": 0.0,
            "via_source": 3,
        },
        signal("m11@6", "q", 0.4166),
        signal("m3@3", "k", 0.1581),
    ]
    return SimpleNamespace(
        tokens=tokens, nodes=nodes, edges=edges, decisions=[_decision(0, "a12.h2@6", 6, 3, 0.762)]
    )


def test_the_signals_drawing_says_its_scores_are_acc_own_and_what_its_bold_links_are():
    drawing = position_graph_html(acc_details(), title="t", highlight_decision=0)
    vis = drawing.vis
    titles = {node["id"]: node.get("title", "") for node in vis.nodes}
    head = titles["a12.h2@6"]
    # the hover read "contribution: +0.5766 (estimated rise of the metric it carries)" beside a card
    # saying "the method's own scores, not an effect on the metric"
    assert "estimated rise of the metric" not in head
    assert "the method's own scores, not an effect on the metric" in head
    links = [edge["title"] for edge in vis.edges]
    # a signal's IG to an attention weight read "weight +0.4166 (supports the answer)"
    assert not any("supports the answer" in t or "works against the answer" in t for t in links)
    query = next(t for t in links if "m11@6 → a12.h2@6" in t)
    assert "IG +0.4166 to the attention weight" in query and "score +0.4166 (the method's own score" in query
    # bold: decision #0's signals (it read "bold: strongest paths" under "decision #0 highlighted")
    assert "bold: decision #0&#x27;s signals" in vis.legend or "bold: decision #0's signals" in vis.legend
    assert "strongest paths" not in vis.legend and "strongest paths" not in vis.legend_more
    assert "raises the answer's metric" not in vis.legend_more and "works against" not in vis.legend_more
    lit = {edge["id"].split("#")[0] for edge in vis.edges if edge["color"]["opacity"] == 1.0}
    assert lit == {"m11@6->a12.h2@6", "m3@3->a12.h2@6"}  # the bold ones are the decision's signals
    # a drawing with no decision chosen keeps the strongest paths
    assert "bold: strongest paths" in position_graph_html(acc_details()).vis.legend


def knocked(clean, found, random, weights=(0.345, 0.087, 0.345), draws=5):
    """Details whose knockout moved the metric clean -> found (random: ``random``)."""
    return SimpleNamespace(
        faithfulness={
            "knockout": {
                "n_signals": 155,
                "n_random_draws": draws,
                "clean": {"metric": clean, "mean_weight": weights[0]},
                "found": {"metric": found, "mean_weight": weights[1], "cosine": 0.99, "norm_ratio": 1.0},
                "random": {"metric": random, "mean_weight": weights[2], "cosine": 1.0, "norm_ratio": 1.0},
            }
        }
    )


def test_the_knockout_names_its_metric_and_says_which_way_its_figures_went():
    from circuitviz.acc.tables import knockout_caption, knockout_rows, knockout_verdict, metric_words
    from circuitviz.core.tasks import PromptTask

    task = PromptTask(clean="When Mary and John went", corrupted="", answer=" Mary", foils=(" John",))
    metric = metric_words(task)
    assert metric == "logit difference"
    assert (
        metric_words(PromptTask(clean="a", corrupted="", answer=" b", metric="logprob")) == "log-probability"
    )
    # Gemma-3-270M's IOI prompt: removing the found signals raised the logit difference 5.708 -> 8.414;
    # the page called the table "the paper's check that the signals found carry ... the answer" and
    # its first row "metric"
    details = knocked(5.708, 8.414, 5.714)
    assert knockout_rows(details, metric)[0]["measure"] == "logit difference"
    assert "logit difference: the task's logit difference after the removal" in knockout_caption(
        details, metric
    )
    said = knockout_verdict(details, metric)
    assert said == (
        "Removing the 155 signals found takes the traced decisions' mean attention from 0.345 to 0.087 "
        "(as many random signals: 0.345): they carry the attention. It moves the logit difference by "
        "+2.706, from 5.708 to 8.414 (random signals: +0.006): taken together they work against the "
        "answer on this metric, not for it."
    )
    # the factual prompt: both fall, more than without random signals
    said = knockout_verdict(knocked(2.908, 0.661, 2.906, (0.472, 0.157, 0.471)), metric)
    assert said.endswith(
        "by -2.247, from 2.908 to 0.661 (random signals: -0.002): taken together they "
        "support the answer on this metric, by that much."
    )
    # Japanese on Gemma-3-270M: a fall of 0.083 from 2.874 was said to show they "carry the answer"
    said = knockout_verdict(knocked(2.874, 2.791, 2.874, (0.769, 0.187, 0.768)), metric)
    assert "carry the answer" not in said and "by -0.083, from 2.874 to 2.791" in said
    # random signals that lower the attention and the metric more: said so
    said = knockout_verdict(knocked(2.0, 1.5, 1.0, (0.5, 0.4, 0.2)), metric)
    assert "no more of the attention than random signals do" in said
    assert said.endswith("(random signals: -1.000): no more than random signals move it.")
    # no random draws: nothing said of them, in the sentence or the caption ("the mean of 0 draws")
    none = knocked(2.0, 1.0, None, (0.5, 0.6, None), draws=0)
    said = knockout_verdict(none, metric)
    assert "random" not in said and "they do not lower the attention" in said
    assert "random removed: not run (n random is 0)" in knockout_caption(none, metric)
    assert knockout_verdict(SimpleNamespace(faithfulness={}), metric) == ""


def test_the_removal_chart_counts_whole_signals_and_shows_a_small_fall_across_tau():
    from circuitviz.render.acc_graph import removal_figure

    # '<b>x</b> **y** $z$ and then' on Gemma-3-270M: a17.h3's one query and one key signal take its
    # weight 0.1716 below tau 0.1667; the chart ticked 0, 0.2, ... 1 "signals removed" and drew both
    # lines and tau on one another at the foot of a 0 to 1 axis
    one = {
        "reached": True,
        "curve": [0.1716, 0.1602],
        "removals": [{"node": "m15@11", "direction": 14, "attribution": 0.01}],
    }
    decision = {"query": one, "key": {**one, "curve": [0.1716, 0.1580]}, "threshold": 0.1667}
    layout = removal_figure(decision).to_plotly_json()["layout"]
    assert (layout["xaxis"]["tick0"], layout["xaxis"]["dtick"]) == (0, 1)
    top = layout["yaxis"]["range"][1]
    assert 0.1716 < top < 0.25
    # a long removal: plotly's own ticks, whole numbers; a weight near 1: the axis stops at 1.02
    many = {
        "reached": True,
        "curve": [0.99 - 0.04 * i for i in range(25)],
        "removals": [one["removals"][0]] * 24,
    }
    layout = removal_figure({"query": many, "key": many, "threshold": 0.2}).to_plotly_json()["layout"]
    assert layout["xaxis"].get("tickformat") == "d" and "dtick" not in layout["xaxis"]
    assert layout["yaxis"]["range"] == [0, 1.02]


def test_the_counts_help_says_what_this_result_counts():
    from circuitviz.acc.tables import SIGNAL_HELP, summary_help

    details = acc_details()
    details.nodes.append({"id": "input@3", "component": "input", "kind": "input", "layer": -1, "position": 3})
    details.summary = {"n_nodes": 5, "n_edges": 3, "n_signal_edges": 2, "rank1_fraction": 0.0}
    helps = summary_help(details)
    # "Edges: the signals, grouped by upstream node and side" stood over 44 edges, 10 of them into the
    # logits, beside a rank-1 share of the other 34
    assert "2 signal edges" in helps["edges"] and "1 edge into the logits" in helps["edges"]
    assert helps["rank-1 edges"].startswith("The share of the 2 signal edges of rank 1")
    # "a component (head or MLP)": the embeddings and the logits are nodes too
    assert helps["nodes"] == (
        "Nodes: a component at a token position: 1 head, 2 MLPs, 1 embedding, and the answer's logits."
    )
    # a run with no decision above its threshold: no signal edge, no share ("rank-1 edges 0%")
    from circuitviz.acc.tables import rank1_shown

    assert rank1_shown({"n_signal_edges": 0, "rank1_fraction": 0.0}) == "—"
    assert rank1_shown({"n_signal_edges": 34, "rank1_fraction": 21 / 34}) == "62%"
    # a row's drop is its part of the side's fall, one removal after another: they add up to it
    assert (
        "add up to its whole fall" in SIGNAL_HELP["drop"]
        and "summed over its directions" in SIGNAL_HELP["IG"]
    )


class Page:
    """What ``node_card`` writes with streamlit, kept as (kind, text)."""

    def __init__(self):
        self.said = []

    def __getattr__(self, kind):
        return lambda text, **_: self.said.append((kind, text))


def test_a_heads_card_on_signals_explains_the_decision_at_its_own_position(monkeypatch):
    from circuitviz.ui import node_card

    details = acc_details()
    # a12.h2 decides twice: at ' of' (6), attending ' Wall' with 0.762 (m11@6 writes its query), and
    # at ' in' (5), attending ' Wall' with 0.770 (m11@5 writes its query)
    details.decisions.append(_decision(1, "a12.h2@5", 5, 3, 0.7703))
    details.decisions[1]["destination_token"] = " in"
    details.edges.append({**details.edges[1], "source": "m11@5", "target": "a12.h2@5", "decision": 1})
    result = SimpleNamespace(method="acc++", details=details, model_id="m", task=None)
    page = Page()
    monkeypatch.setattr(node_card, "st", page)
    node_card._acc_signals(None, result, "a12.h2", "k", 5)
    said = "\n".join(text for _, text in page.said).replace("\\", "")  # markdown's escapes
    # the card of a12.h2@5 showed a12.h2@6's decision (0.762, m11@6) "at the answer position"
    assert "with weight 0.770" in said and "m11@5 +0.417" in said
    assert "0.762" not in said and "m11@6" not in said
    assert "ACC++ at ' in' (position 5)" in said and "answer position" not in said
    page.said.clear()
    node_card._acc_signals(None, result, "a12.h2", "k", 6)  # the last token: the answer's position
    said = "\n".join(text for _, text in page.said).replace("\\", "")  # markdown's escapes
    assert "with weight 0.762" in said and "ACC++ at the answer position" in said
    page.said.clear()
    node_card._acc_signals(None, result, "a12.h2", "k", 2)
    assert page.said == [
        (
            "caption",
            "ACC++ traced no attention decision of a12.h2 at ' Great' (position 2) above its threshold.",
        )
    ]


def test_one_heads_two_decisions_make_one_link_and_one_card_row_per_writer():
    from circuitviz.render.cards import card_data

    details = acc_details()
    # a12.h2 at ' of' decides twice (attends ' Wall' and ' of'), m11 there writing both queries; it is
    # a seed twice (reading ' Wall' and ' of'): two links on one line, two rows alike on its card
    details.decisions.append({**_decision(1, "a12.h2@6", 6, 6, 0.2575), "source_token": " of"})
    details.edges.append({**details.edges[1], "decision": 1, "attribution": 0.0267})
    details.edges.append({**details.edges[0], "attribution": 0.0779, "via_source": 6})
    drawing = position_graph_html(details, highlight_decision=1)
    pairs = [(edge.source, edge.target, edge.kind) for edge in drawing.edges]
    assert len(pairs) == len(set(pairs)) == 3
    scores = {(edge.source, edge.kind): round(edge.score, 4) for edge in drawing.edges}
    assert scores[("m11@6", "q")] == round(0.4166 + 0.0267, 4) and scores[("a12.h2@6", "logits")] == 0.2379
    query = next(edge for edge in drawing.vis.edges if edge["from"] == "m11@6")
    title = html.unescape(query["title"])  # user text escaped in the hover
    assert "decision ' of' → ' Wall'" in title and "decision ' of' → ' of'" in title
    assert query["color"]["opacity"] == 1.0  # decision #1's signal drawn bold
    card = card_data(drawing.vis.nodes, drawing.edges, estimates_metric=False, noun="link")["nodes"][
        "a12.h2@6"
    ]
    rows = [text for _, text in card["in"]["rows"] + card["out"]["rows"]]
    assert len(rows) == len(set(rows)) == 3, rows


def test_discover_splits_acc_edges_as_the_page_does():
    from circuitviz.details.acc import report_lines

    details = SimpleNamespace(
        summary={"n_nodes": 26, "n_edges": 44, "n_signal_edges": 34, "n_signals": 81, "rank1_fraction": 21 / 34,
                 "n_decisions": 6},
        limits={},
        faithfulness={},
    )  # fmt: skip
    # it printed "44 edges (81 signals, 62% of signal edges rank 1)", 10 of the 44 being into the logits
    assert report_lines(details)[0] == (
        "ACC++ circuit: 26 nodes (component@position), 44 edges: 34 signal edges (81 signals, 62% of them "
        "rank 1) and 10 into the logits; 6 attention decisions"
    )


def test_a_cards_acc_trace_is_the_signals_pages_own_request(monkeypatch):
    from circuitviz.ui import budget_box, node_card

    # Explore's card traced ACC++ with budgets 10 and 100; Signals asks for its default budgets, so it
    # showed that run under "The result below is for earlier inputs" though no input differed
    asked = {}
    page = Page()
    page.button = lambda label, **_: True  # "Why does a3.h3 attend there?" pressed
    monkeypatch.setattr(node_card, "st", page)
    monkeypatch.setattr(node_card.kept_results, "result_for", lambda *args: None)
    monkeypatch.setattr(budget_box, "graph_edge_total", lambda model: 10_342)
    monkeypatch.setattr(
        node_card.loaders,
        "request_for",
        lambda model, model_id, task, method, settings, budgets: asked.update(
            settings=settings, budgets=list(budgets)
        ),
    )
    monkeypatch.setattr(node_card.run, "run_with_status", lambda model, request: None)
    result = SimpleNamespace(
        method="eap-ig", details=None, model_id="gemma-3-270m", task=SimpleNamespace(clean="x")
    )
    node_card._acc_signals(object(), result, "a3.h3", "k")
    assert asked == {"settings": {}, "budgets": list(budget_box.default_budgets(10_342))}


def test_the_signal_table_gives_each_signals_rank_beside_its_directions():
    from circuitviz.acc.tables import SIGNAL_HELP, signal_rows

    # at 1,000 px the directions of a rank-13 signal were cut ("24, 6, 0, 40, 2, 18, 4"), its rank unsaid
    details = acc_details()
    details.edges[1]["directions"] = [24, 6, 0, 40, 2, 18, 43, 109, 125, 23, 15, 3, 54]
    rows = signal_rows(details, 0)
    assert [(row["component"], row["rank"]) for row in rows] == [("m11", 13), ("m3", 2)]
    assert list(rows[0]) == [*SIGNAL_HELP]  # every column explained, in the table's order


def test_the_directions_column_holds_a_rank_13_rows_list():
    """The signal table's columns were shared out evenly, and a rank-13 row's 13 directions ('251,
    4, 123, 1, 174, 176, 14, 31, 19, 11, ...', Gemma-3-270M) were cut even at 2,000 px: the
    directions column is as wide as its longest list (the row whole at 1,500 and 2,000 px in
    Chromium; at 1,000 px the table scrolls sideways, every column in view), the others sized to
    their text; a list too long for a 1,500 px page stops at its widest."""
    from circuitviz.acc.tables import signal_rows
    from circuitviz.ui.signals_view import DIRECTIONS_PX, signal_config

    details = acc_details()
    details.edges[1]["directions"] = [251, 4, 123, 1, 174, 176, 14, 31, 19, 11, 225, 60, 137]
    rows = signal_rows(details, 0)
    config = signal_config(rows)
    longest = max(len(row["directions"]) for row in rows)  # 53 characters
    assert longest * 5.6 + 16 <= config["directions"]["width"] <= DIRECTIONS_PX[1]
    assert [name for name, column in config.items() if column["width"] is not None] == ["directions"]
    assert all(column["help"] for column in config.values())
    details.edges[1]["directions"] = list(range(100, 180))
    assert signal_config(signal_rows(details, 0))["directions"]["width"] == DIRECTIONS_PX[1]
    details.edges[1]["directions"] = [3]
    assert signal_config(signal_rows(details, 0))["directions"]["width"] == DIRECTIONS_PX[0]


def test_a_first_runs_svd_does_not_price_the_next_runs(monkeypatch):
    from circuitviz.details.acc import ACCDetails
    from circuitviz.entry import calibration
    from circuitviz.ui import run

    # a first ACC++ run of Gemma-3-270M took 15.9 s, 12.6 s of it the heads' SVD, stored on disk and
    # read by the next runs in 0.1 s; kept whole, it priced the next run at "about 24 s" for 3.2 s
    kept = []
    monkeypatch.setattr(
        calibration, "record", lambda device, method, flops, seconds, *rest: kept.append(seconds)
    )
    estimate = SimpleNamespace(device="cpu", model="m", flops_done=lambda method, result: 1e9)
    first = SimpleNamespace(
        timings={"svd_s": 12.6}, details=ACCDetails(svd={"cached": False, "seconds": 12.6})
    )
    later = SimpleNamespace(timings={"svd_s": 0.1}, details=ACCDetails(svd={"cached": True, "seconds": 0.1}))
    run.record_run(estimate, "acc++", first, 15.9, {})
    run.record_run(estimate, "acc++", later, 3.2, {})
    run.record_run(estimate, "eap-ig", SimpleNamespace(timings={}, details=None), 6.0, {})
    assert [round(seconds, 6) for seconds in kept] == [3.3, 3.2, 6.0]


def test_tokens_of_scripts_many_fonts_lack_are_named_in_the_signals_tables():
    from circuitviz.acc.tables import decision_label, decision_rows, signal_rows

    # `日本の首都は` on Gemma-3-270M: Chromium without CJK fonts drew each token as empty boxes in the
    # decision table, the picker and the signal table, as it did Steer's labels before they named them
    details = acc_details()
    details.tokens = ["<bos>", "日本", "の", "首都", "は", " of", " of"]
    details.decisions[0].update(destination_token="は", destination=4, source_token="日本", source=1)
    row = decision_rows(details)[0]
    assert (row["destination"], row["source"]) == ("'は' (4) [Hiragana]", "'日本' (1) [CJK ×2]")
    assert "'は' (4) [Hiragana] attends '日本' (1) [CJK ×2]" in decision_label(details.decisions[0])
    details.edges[2]["source"] = "m3@1"
    assert [r["position"] for r in signal_rows(details, 0)] == ["' of' (6)", "'日本' (1) [CJK ×2]"]


def test_discover_says_how_to_find_decisions_when_none_reached_the_threshold():
    from circuitviz.details.acc import report_lines

    # k 50 on Gemma-3-270M: "0 attention decisions" and a knockout of 0 signals, with no word of why
    details = SimpleNamespace(
        summary={"n_nodes": 10, "n_edges": 10, "n_signal_edges": 0, "n_signals": 0, "rank1_fraction": 0.0,
                 "n_decisions": 0},
        limits={},
        faithfulness={},
    )  # fmt: skip
    lines = report_lines(details)
    assert "0 signal edges (0 signals, none of rank 1)" in lines[0]
    assert lines[1].startswith("  no attention decision of the answer's components reached the threshold")
    assert lines[1].endswith("lower k (--set k=1.5)")
    details.summary["n_decisions"] = 6
    assert not any("no attention decision" in line for line in report_lines(details))


def test_every_count_over_the_tables_has_its_help():
    """The count "attention decisions" was the one of the four without a help: what a decision is
    (the threshold tau) was only in the decision table's column help."""
    from circuitviz.acc.tables import summary_help

    details = acc_details()
    details.summary = {"n_nodes": 4, "n_edges": 3, "n_signal_edges": 2, "rank1_fraction": 0.5}
    helps = summary_help(details)
    assert set(helps) == {"nodes", "edges", "attention decisions", "rank-1 edges"}
    assert "tau = k / the positions it attends over" in helps["attention decisions"]


def test_a_signal_is_one_direction_on_every_part_of_the_page():
    """The decision table, the removal chart ("signals removed") and the knockout ("the 628 signals
    found") count a signal as one singular direction, but the table between them was "Its signals",
    a row "a signal" of rank 13 (a fresh prompt on Gemma-3-270M: two query rows of ranks 13 and 1
    beside a chart whose query line ran to 14 signals removed), and the drawing's hover said "query
    side signal, singular direction(s) ... (rank 13)". A row is a signal edge: its signals grouped."""
    from circuitviz.acc.tables import SIGNAL_HELP
    from circuitviz.render.acc_graph import acc_attribution_graph
    from circuitviz.ui.signals_view import DECISION_COLUMNS, SIGNAL_TABLE_TITLE

    assert (
        SIGNAL_TABLE_TITLE.startswith("**Its signal edges**")
        and "one singular direction each" in SIGNAL_TABLE_TITLE
    )
    assert SIGNAL_HELP["rank"].startswith("how many signals it groups, one singular direction each")
    assert "a signal here is one singular direction" in DECISION_COLUMNS["query signals"][2]
    side = [link.unit for link in acc_attribution_graph(acc_details()).links if link.kind in ("q", "k")]
    assert side and all(
        text.startswith(("query side signal edge of rank 2: ", "key side signal edge of rank 2: "))
        for text in side
    )
