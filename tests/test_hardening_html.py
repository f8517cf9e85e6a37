"""Untrusted text (prompts, answers, tokens, paraphrase names, labels) in every HTML we make:
escaped in the graph page's hovers and legend, the token chips, the UpSet and curve figures, the
SAE context snippets and the downloaded pages; and Chromium loading those pages runs none of it.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from circuitviz import render
from circuitviz.api import discover
from circuitviz.labels.sae import context_html
from circuitviz.tasks import PromptTask
from circuitviz.testing import IOI_TASK, tiny_model

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
    assert strip.count("<span") == len(PAYLOADS)
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
    _, hostile = results
    rows = render.edge_rows(hostile.graph, hostile.scores, hostile.circuit(30))
    assert rows and all(isinstance(value, (str, int, float, bool)) for row in rows for value in row.values())
    overlap = render.overlap_rows({PAYLOADS[0]: {"a"}, PAYLOADS[1]: {"a", "b"}})
    assert overlap


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
