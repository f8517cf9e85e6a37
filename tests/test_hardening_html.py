"""Untrusted text (prompts, answers, tokens, paraphrase names, labels) in every HTML we make:
escaped in the graph page's hovers and legend, the token chips, the UpSet and curve figures, the
SAE context snippets and the downloaded pages; and Chromium loading those pages runs none of it.
"""

from __future__ import annotations

import dataclasses
import re
import types
from pathlib import Path

import pytest

from circuitviz import render
from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.core.tasks import PromptTask
from circuitviz.core.text import shown_token
from circuitviz.entry.api import discover
from circuitviz.render import context_html
from circuitviz.ui import bon

PAYLOADS = [
    "<img src=x onerror=alert(1)>",
    "</script><script>alert(2)</script>",
    '"><svg onload=alert(3)>',
    "<iframe src=javascript:alert(4)>",
    "'-alert(5)-'",
    "{{7*7}} ${alert(6)} %s",
    "<a href=javascript:alert(7)>x</a>",
]
HOSTILE = " ".join(PAYLOADS)
RAW_MARKERS = [
    "<img",
    "<svg",
    "<iframe",
    "<script",
    "</script><script>alert",
    "<a href=javascript",
]


def assert_inert(page: str, benign: str = "") -> None:
    """No payload survives as markup: each marker occurs no more often than in a benign page of
    the same kind (plotly.js itself contains '<svg' and '<script' in its source)."""
    lowered, plain = page.lower(), benign.lower()
    for marker in RAW_MARKERS:
        assert lowered.count(marker) == plain.count(marker), f"unescaped {marker!r} in the page"


@pytest.fixture(scope="module")
def results():
    model = tiny_model("gpt2", seed=2)
    result, _ = discover(model, IOI_TASK, "eap", budgets=(10, 30))
    hostile_task = PromptTask(HOSTILE, HOSTILE, HOSTILE, (HOSTILE,))
    hostile = dataclasses.replace(
        result,
        task=hostile_task,
        model_id=PAYLOADS[0],
        method=PAYLOADS[1],
        tokens={"clean": PAYLOADS, "corrupted": PAYLOADS},
    )
    return result, hostile


def hostile_labels(result):
    nodes = {edge.source for edge in render.circuit_edges(result.graph, result.scores, result.circuit(30))}
    return {name: {"logit lens": HOSTILE, PAYLOADS[2]: PAYLOADS[0], "top": PAYLOADS} for name in nodes}


def test_graph_page_escapes_prompt_title_labels_and_hovers(results):
    benign, hostile = results
    clean_page = render.result_graph_html(benign, 30).html
    drawing = render.result_graph_html(hostile, 30, labels=hostile_labels(hostile))
    assert_inert(drawing.html, clean_page)
    assert "&lt;img src=x onerror=alert(1)&gt;" in drawing.html  # shown, as text
    titled = render.circuit_graph_html(
        hostile.graph, hostile.scores, hostile.circuit(30), title=HOSTILE, labels=hostile_labels(hostile)
    )
    assert_inert(titled.html, clean_page)


def test_token_chips_and_sae_contexts_escape_tokens():
    strip = render.token_strip_html(PAYLOADS, [True] * len(PAYLOADS))
    assert_inert(strip)
    assert strip.count("<span") == len(PAYLOADS) + 1  # a chip per token, in one left-to-right strip
    snippet = context_html({"tokens": PAYLOADS, "source": 0, "target": 1})
    assert_inert(snippet)
    assert set(re.findall(r"</?(\w+)", snippet)) <= {"u", "mark"}


def test_upset_and_curve_pages_escape_set_and_curve_names(results):
    benign, hostile = results
    sets = {PAYLOADS[0]: {"a", "b"}, PAYLOADS[1]: {"b", "c"}, PAYLOADS[2]: {"c"}}
    figure, _ = render.upset_figure(sets)
    plain, _ = render.upset_figure({"one": {"a", "b"}, "two": {"b", "c"}, "three": {"c"}})
    assert_inert(render.figure_html(figure), render.figure_html(plain))
    curves = render.curve_figure(
        {PAYLOADS[0]: hostile.curve, PAYLOADS[1]: benign.curve}, benign.graph.n_edges, title=HOSTILE
    )
    plain_curves = render.curve_figure({"a": benign.curve}, benign.graph.n_edges, title="t")
    assert_inert(render.figure_html(curves), render.figure_html(plain_curves))


def test_tables_carry_text_not_markup(results):
    """The app's tables (``st.dataframe``/``st.data_editor``) show cell values as text, so a
    table row must hold the user's text itself: not markup around it (which would show as tags),
    not escaped (which would show '&lt;'). Hostile text reaches the paraphrase table (pasted or
    LLM-written paraphrases, the model's answers) and the overlap table (circuit names)."""
    _, hostile = results
    pairs = [
        {
            "clean": IOI_TASK.clean,
            "corrupted": IOI_TASK.corrupted,
            "source": "prompt",
            "model_answer": " Mary",
        },
        *(
            {"clean": payload, "corrupted": PAYLOADS[-1 - i], "source": payload, "model_answer": payload}
            for i, payload in enumerate(PAYLOADS)
        ),
    ]
    paraphrased = types.SimpleNamespace(details=types.SimpleNamespace(pairs=pairs, candidates=[0, 2]))
    rows = bon.paraphrase_rows(paraphrased)
    assert len(rows) == len(pairs)
    for row, pair in zip(rows, pairs):
        assert (row["paraphrase"], row["corrupted"], row["source"], row["model's answer"]) == (
            pair["clean"],
            pair["corrupted"],
            pair["source"],
            shown_token(pair["model_answer"]),  # a token quoted, its leading space seen
        )
    assert [row["candidate"] for row in rows] == [True, False, True] + [False] * (len(PAYLOADS) - 2)
    sets = {PAYLOADS[0]: {"a"}, PAYLOADS[1]: {"a", "b"}, PAYLOADS[2]: {"b"}}
    overlap = render.overlap_rows(sets)
    assert [(row["circuit A"], row["circuit B"]) for row in overlap] == [
        (PAYLOADS[0], PAYLOADS[1]),
        (PAYLOADS[0], PAYLOADS[2]),
        (PAYLOADS[1], PAYLOADS[2]),
    ]
    # every cell is a plain value a dataframe shows as it is (edge rows are built from edge
    # names, which the graph spells itself: no user text reaches them)
    edges = render.edge_rows(hostile.graph, hostile.scores, hostile.circuit(30))
    assert edges and {row["edge"] for row in edges} <= set(hostile.graph.edge_names)
    for row in [*rows, *overlap, *edges]:
        assert all(isinstance(value, (str, int, float, bool)) for value in row.values())


# ----- in a real browser ------------------------------------------------------------------------
CHROMIUM = "/usr/bin/chromium"


@pytest.mark.browser
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed")
def test_chromium_runs_no_injected_script_in_the_pages(results, tmp_path):
    playwright_api = pytest.importorskip("playwright.sync_api")
    _, hostile = results
    pages = {
        "graph.html": render.result_graph_html(hostile, 30, labels=hostile_labels(hostile)).html,
        "upset.html": render.figure_html(
            render.upset_figure({PAYLOADS[0]: {"a"}, PAYLOADS[1]: {"a", "b"}})[0]
        ),
        "tokens.html": "<html><body>"
        + render.token_strip_html(PAYLOADS)
        + context_html({"tokens": PAYLOADS, "source": 0, "target": 1})
        + "</body></html>",
    }
    dialogs, errors = [], []
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"]
        )
        try:
            page = browser.new_page()
            page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
            page.on("console", lambda message: message.type == "error" and errors.append(message.text))
            page.on("pageerror", lambda error: errors.append(str(error)))
            for name, text in pages.items():
                path = tmp_path / name
                path.write_text(text, encoding="utf-8")
                page.goto(path.as_uri())
                page.wait_for_timeout(600)
                if name == "graph.html":
                    # the hovers are built from the titles at load; hover the canvas's middle too
                    assert page.locator("canvas").count() == 1
                    box = page.locator("canvas").bounding_box()
                    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
                    page.wait_for_timeout(300)
                    assert page.evaluate("document.querySelectorAll('img, svg, iframe').length") == 0
        finally:
            browser.close()
    assert dialogs == []
    assert [e for e in errors if "alert" in e or "javascript:" in e] == []
