"""The circuit as an instrument, in Chromium as a user drives it: every drawing fits its frame at
1,000, 1,500 and 2,000 px with no two node boxes overlapping (the boxes read from vis-network
itself), a click opens the node's card, removing a node gives exactly the NDF and necessity that
``circuitviz evaluate --circuit`` prints for the edited circuit, and a group made on the page is
in the URL, which a fresh browser context opens to the same group.

Slow (runs methods on the embedded model in the app); screenshots go to test-output/.
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.parse
from pathlib import Path

import pytest
from browser_page import (
    IOI_LINK,
    OUTPUT,
    button_ready,
    click_node,
    graph_count,
    graph_node_ids,
    graph_problems,
    metrics,
    serve_app,
    settled,
    stop_app,
    stored_results,
    wait_for,
)
from fresh_cache import fresh_cache

CHROMIUM = "/usr/bin/chromium"
pytestmark = [
    pytest.mark.browser,
    pytest.mark.embedded,
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed"),
]
playwright_api = pytest.importorskip("playwright.sync_api")
WIDTHS = (1000, 1500, 2000)
WAIT_MS = 15 * 60 * 1000
IOI = IOI_LINK


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    """(URL, cache) of the app on a fresh cache that reuses the converted models."""
    root = fresh_cache(tmp_path_factory.mktemp("cache"))
    url, server = serve_app(root, "streamlit-instrument.log")
    yield url, root
    stop_app(server)


@pytest.fixture(scope="module")
def browser():
    with playwright_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox"])
        yield chromium
        chromium.close()


def _open(browser, url: str, button: str | None = None, graphs: int = 1):
    page = browser.new_page(viewport={"width": 1500, "height": 1000})
    page.goto(url)
    if button:
        wait_for(page, button_ready(button), WAIT_MS)
        settled(page)
        page.get_by_role("button", name=button, exact=True).first.click()
    wait_for(page, f"() => document.querySelectorAll('.cv-root canvas').length >= {graphs}", WAIT_MS)
    settled(page)
    return page


# the smallest label of each drawing on screen, in px: its font in layout units times the fit's scale
LABEL_PX = """() => [...document.querySelectorAll('.cv-root')].map(root => {
  const network = root.cvNetwork;
  const sizes = network.body.data.nodes.get().map(node => (node.font && node.font.size) || 14);
  return Math.min(...sizes) * network.getScale(); })"""


def _fits_at_every_width(page, name: str, min_label_px: float | None = None) -> None:
    """Every drawing's node boxes inside their frames, none overlapping, at every width (and, with
    ``min_label_px``, no label drawn smaller than that many pixels: readable)."""
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 1000})
        page.wait_for_timeout(1500)
        problems = graph_problems(page)
        assert not problems, f"{name} at {width} px: {problems[:5]}"
        if min_label_px is not None:
            smallest = page.evaluate(LABEL_PX)
            assert min(smallest) >= min_label_px, f"{name} at {width} px: labels at {smallest} px"
        page.locator(".cv-root").first.evaluate("e => e.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(300)
        page.screenshot(path=str(OUTPUT / f"instrument-{name}-{width}.png"))
    page.set_viewport_size({"width": 1500, "height": 1000})
    page.wait_for_timeout(800)


def _view(url: str) -> dict:
    query = urllib.parse.parse_qs(urllib.parse.urlparse(url).query)
    return json.loads(query["view"][0]) if "view" in query else {}


def test_the_gallery_drawing_fits_at_every_width(app, browser):
    url, _ = app
    page = _open(browser, f"{url}/gallery")
    _fits_at_every_width(page, "gallery")
    page.close()


# the open card's box and its graph's frame, px, and the smallest label drawn
CARD_FRAME = """() => { const root = document.querySelector('.cv-root');
  const box = (e) => { const r = e.getBoundingClientRect(); return {l: r.left, t: r.top, r: r.right, b: r.bottom, w: r.width}; };
  const network = root.cvNetwork;
  const sizes = network.body.data.nodes.get().map(node => (node.font && node.font.size) || 14);
  return {root: box(root), canvas: box(root.querySelector('.cv-canvas')), card: box(root.querySelector('.cv-card')),
          label: Math.min(...sizes) * network.getScale()}; }"""


def test_an_open_card_leaves_the_graph_readable_at_every_width(app, browser):
    """At 1,000 px a card beside the graph squeezed it to 300 px and its labels to 4-5 px: below
    760 px of frame the card now opens under the graph, which keeps its whole width (and the labels
    it has with no card open); wider, the card stands beside it as before."""
    url, _ = app
    page = _open(browser, f"{url}/gallery")
    page.set_viewport_size({"width": 1000, "height": 1000})
    page.wait_for_timeout(1500)
    closed = page.evaluate(LABEL_PX)[0]  # the labels at 1,000 px with no card open
    node = next(n for n in graph_node_ids(page) if n not in ("input", "logits"))
    click_node(page, node)
    wait_for(page, "() => document.body.innerText.includes('close the card')", 60_000)
    settled(page)
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 1000})
        page.wait_for_timeout(1500)
        frame = page.evaluate(CARD_FRAME)
        if frame["root"]["w"] < 760:  # under the graph, the graph as wide as its frame
            assert frame["card"]["t"] >= frame["canvas"]["b"] - 1, (width, frame)
            assert frame["canvas"]["w"] >= frame["root"]["w"] - 2, (width, frame)
            assert frame["label"] >= closed - 0.01, (width, frame, closed)
        else:  # beside it, the graph keeping most of the width
            assert frame["card"]["l"] >= frame["canvas"]["r"], (width, frame)
            assert frame["canvas"]["w"] >= 0.6 * frame["root"]["w"], (width, frame)
        assert frame["label"] >= 7, (width, frame)  # 4-5 px before
        assert not graph_problems(page), width
        page.locator(".cv-root").first.evaluate("e => e.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(300)
        page.screenshot(path=str(OUTPUT / f"instrument-card-{width}.png"))
    page.close()


def test_click_edit_measure_group_and_share_on_explore(
    app, browser, embedded_model, tmp_path, monkeypatch, capsys
):
    from circuitviz.entry import cli
    from circuitviz.measure.edit import CircuitEdit, edited_mask

    url, cache = app
    page = _open(browser, f"{url}/?{urllib.parse.urlencode({**IOI, 'method': 'eap'})}", "Run")
    _fits_at_every_width(page, "explore")
    node = next(n for n in graph_node_ids(page) if n not in ("input", "logits"))
    started = time.perf_counter()
    click_node(page, node)
    wait_for(page, "() => document.body.innerText.includes('close the card')", 60_000)
    figures = {"click_to_card_s": round(time.perf_counter() - started, 2), "load_average": os.getloadavg()}
    settled(page)
    assert "in this circuit: scores summing to" in page.locator("body").inner_text()
    assert _view(page.url)["clicked"] == node
    assert not graph_problems(page)  # the graph beside the card fits its narrower frame
    page.screenshot(path=str(OUTPUT / "instrument-card.png"))
    # remove the node: the edited circuit's NDF is the command line's for the same edge list
    started = time.perf_counter()
    page.get_by_role("button", name="remove this node").click()
    wait_for(page, "() => document.body.innerText.includes('edited NDF')", WAIT_MS)
    figures["first_edit_to_ndf_s"] = round(time.perf_counter() - started, 2)
    settled(page)
    (OUTPUT / "instrument-figures.json").write_text(json.dumps(figures))
    shown = metrics(page)
    view = _view(page.url)
    assert view["edit"]["removed_nodes"] == [node]
    (result,) = [r for r in stored_results(cache) if r.method == "eap"]
    budget = int(urllib.parse.parse_qs(urllib.parse.urlparse(page.url).query)["budget"][0])
    mask = edited_mask(result.graph, result.circuit(budget), CircuitEdit(removed_nodes=(node,)))
    path = tmp_path / "edited.txt"
    path.write_text("\n".join(result.graph.edge_names_of(mask)))
    monkeypatch.setattr(cli, "_load", lambda args: (embedded_model, "gemma-3-270m", 0.0))
    arguments = [
        "--prompt",
        IOI["prompt"],
        "--corrupted",
        IOI["corrupted"],
        "--answer",
        " Mary",
        "--foil",
        " John",
    ]
    assert cli.main(["evaluate", "--circuit", str(path), *arguments]) == 0
    printed = capsys.readouterr().out.splitlines()
    row = [line for line in printed if re.match(r"\s*in_graph\s+\d+\s", line)][0]  # the file's circuit
    assert shown["edited NDF"] == row.split()[-2] and shown["edited necessity"] == row.split()[-1]
    assert shown["edited edges"] == f"{int(mask.sum()):,}"
    # pin two nodes (Ctrl-click) and group them; the URL opened in a fresh context shows the group
    page.get_by_role("button", name="back to the method's circuit").click()
    settled(page)
    members = [n for n in graph_node_ids(page) if n not in ("input", "logits")][:2]
    for member in members:
        click_node(page, member, modifiers=["Control"])
        settled(page)
    assert _view(page.url)["pins"] == members
    page.get_by_text("Groups (supernodes)").click()
    page.get_by_role("button", name="group the pinned nodes").click()
    settled(page)
    assert _view(page.url)["groups"] == {"group 1": members}
    assert "group:group 1" in graph_node_ids(page)
    assert not graph_problems(page)
    shared = page.url
    page.close()
    fresh = browser.new_context(viewport={"width": 1500, "height": 1000})
    again = fresh.new_page()
    again.goto(shared)
    wait_for(again, "() => document.querySelectorAll('.cv-root canvas').length >= 1", WAIT_MS)
    settled(again)
    assert "group:group 1" in graph_node_ids(again) and not set(members) & set(graph_node_ids(again))
    again.screenshot(path=str(OUTPUT / "instrument-group-fresh.png"))
    # a link with a broken view: one sentence, and the view without it
    broken = (
        shared.split("&view=")[0] + "&view=" + urllib.parse.quote('{"groups": {"x": ["nope"]}, "pins": 7}')
    )
    again.goto(broken)
    wait_for(again, "() => document.querySelectorAll('.cv-root canvas').length >= 1", WAIT_MS)
    settled(again)
    text = again.locator("body").inner_text()
    assert "holds no node of this circuit" in text and "pinned nodes are not a list" in text
    assert not again.locator('[data-testid="stException"]').count()
    fresh.close()


def test_compare_and_signals_drawings_fit_at_every_width(app, browser):
    url, _ = app
    query = urllib.parse.urlencode({**IOI, "compare": "eap,eap-ig"})
    page = _open(browser, f"{url}/compare?{query}", "Run the comparison", graphs=2)
    assert graph_count(page) == 2
    assert all("logits" in graph_node_ids(page, i) for i in range(2))  # the logit is drawn in each
    # readable in every column: below two columns' readable width they stack (at 1,000 px two
    # side by side drew their labels at 5 px)
    _fits_at_every_width(page, "compare", min_label_px=10)
    # one layout: the logit at the same place of each frame, at one zoom (each drawing fitted to
    # the union of their boxes, not to its own nodes)
    views = page.evaluate(
        """() => [...document.querySelectorAll('.cv-root')].map(root => { const n = root.cvNetwork;
        const p = n.canvasToDOM(n.getPositions(['logits']).logits); return [n.getScale(), p.x, p.y]; })"""
    )
    assert len(views) == 2 and abs(views[0][0] - views[1][0]) < 1e-6, views
    assert abs(views[0][1] - views[1][1]) < 0.5 and abs(views[0][2] - views[1][2]) < 0.5, views
    page.close()
    page = _open(browser, f"{url}/signals?{urllib.parse.urlencode(IOI)}", "Run ACC++")
    _fits_at_every_width(page, "signals")
    # a head's card says which token it attends to and who wrote the signal (ACC++'s decision)
    head = page.evaluate(  # a head that makes a decision (its hover says what it attends)
        """() => { const data = document.querySelector('.cv-root').cvNetwork.body.data.nodes;
        return data.getIds().map(String).find(id => /^a\\d+\\.h\\d+@\\d+$/.test(id)
            && String((data.get(id).title || {}).innerText || '').includes('attends')); }"""
    )
    click_node(page, head)
    wait_for(page, "() => document.body.innerText.includes('close the card')", 60_000)
    settled(page)
    text = page.locator("body").inner_text()
    assert "Why it attends there" in text and "attends '" in text
    page.screenshot(path=str(OUTPUT / "instrument-signals-card.png"))
    page.close()


def test_the_dataset_consensus_fits_at_every_width(app, browser):
    url, _ = app
    page = browser.new_page(viewport={"width": 1500, "height": 1000})
    page.goto(f"{url}/dataset")
    settled(page)
    page.get_by_role("tab", name="Consensus circuit").click()
    wait_for(page, "() => document.querySelectorAll('.cv-root canvas').length >= 1", WAIT_MS)
    settled(page)
    _fits_at_every_width(page, "dataset")
    page.close()


def test_the_paraphrases_drawing_fits_at_every_width(app, browser):
    """Paraphrases draws the winning candidate's circuit with the edges the candidates share: a
    Best-of-N run at the page's defaults (9 template paraphrases, 5 IG steps a pair), the
    cheapest run that puts the page's drawing on screen."""
    url, _ = app
    page = _open(browser, f"{url}/paraphrases?{urllib.parse.urlencode(IOI)}", "Run Best-of-N")
    assert "Paraphrases" in page.locator("body").inner_text()
    _fits_at_every_width(page, "paraphrases")
    page.close()


def test_an_opened_graph_file_is_drawn_and_its_name_shown_as_typed(app, browser, tmp_path):
    """Explore's "Open an attribution graph file": a graph JSON this app wrote is drawn with one
    line saying what it holds; a file that is not one says so in one sentence. The file's name
    is the user's text: markdown in it is shown as typed, never a link or bold."""
    from test_positions import SPEC, _circuit

    from circuitviz.export.neuronpedia import to_neuronpedia
    from circuitviz.positions.view import from_position_circuit

    url, _ = app
    scores, mask = _circuit()
    graph = from_position_circuit(SPEC, scores, mask, ["a", "b", "c", "d"], prompt="a b c d", model_id="tiny")
    good = tmp_path / "[good](https:example.com) **g**.json"
    good.write_text(json.dumps(to_neuronpedia(graph)), encoding="utf-8")
    bad = tmp_path / "[evil](https:example.com) **x**.json"
    bad.write_text("not json", encoding="utf-8")
    page = browser.new_page(viewport={"width": 1000, "height": 1000})
    page.goto(url)
    settled(page)
    page.get_by_text("Open an attribution graph file").first.click()
    links = "() => [...document.querySelectorAll('[data-testid=stMain] a[href*=example]')].length"
    for path, said, expected in (
        (bad, "is not valid JSON", f"{bad.name} is not valid JSON"),
        (good, "links from", f"{len(graph.nodes):,} nodes and {len(graph.links):,} links from {good.name}."),
    ):
        page.locator("input[type=file]").first.set_input_files(str(path))
        wait_for(page, f"() => document.body.innerText.includes({json.dumps(said)})", WAIT_MS)
        settled(page)
        assert expected in page.locator("body").inner_text(), path.name  # the name as typed
        assert page.evaluate(links) == 0, path.name  # its markdown is not a link
        assert not page.locator('[data-testid="stException"]').count()
    wait_for(page, "() => document.querySelectorAll('.cv-root canvas').length >= 1", WAIT_MS)
    page.close()
