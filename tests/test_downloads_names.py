"""The Explore page's downloads: the curve CSV's columns, the files' names and the curve images' title."""

from __future__ import annotations

import csv
import io
import math
import re
from types import SimpleNamespace

import pytest

from circuitviz import render
from circuitviz.core.curves import CurvePoint
from circuitviz.core.tasks import PromptTask
from circuitviz.ui import downloads as dl

SAFE = re.compile(r"[A-Za-z0-9._-]+")
DEFAULT_PROMPT = "When Mary and John went to the store, John gave a drink to"


def points() -> list[CurvePoint]:
    return [
        CurvePoint(20, 7, 1.87, 0.2226, 0.2226, necessity=0.0123456789, completeness=math.nan),
        CurvePoint(200, 171, 0.81, -0.024, 0.0, necessity=0.51, completeness=0.8765432198765),
        CurvePoint(500, 452, 3.6, 0.63, 0.63),  # necessity not measured either
    ]


def result(prompt: str = DEFAULT_PROMPT, method: str = "eap-ig", model: str = "gpt2", curve=None):
    curve = points() if curve is None else curve
    return SimpleNamespace(
        model_id=model,
        method=method,
        task=PromptTask(
            prompt, "When Alice and Bob went to the store, Carl gave a drink to", " Mary", (" John",)
        ),
        curve=curve,
        graph=SimpleNamespace(n_edges=10_342),
        point=lambda budget: next((p for p in curve if p.budget == int(budget)), None),
    )


# ----- 1: the curve CSV ------------------------------------------------------------------------------
def test_curve_csv_has_necessity_and_completeness_of_each_point():
    rows = list(csv.DictReader(io.StringIO(render.curves_csv({"eap-ig": points()}, 10_342))))
    assert list(rows[0]) == [
        "curve", "budget", "edges_kept", "percent_of_edges", "metric", "nfs", "ndf", "necessity", "completeness"
    ]  # fmt: skip
    for row, point in zip(rows, points()):
        for name in ("metric", "nfs", "ndf", "necessity", "completeness"):
            value = getattr(point, name)
            if math.isnan(value):  # not measured: an empty cell, never 'nan'
                assert row[name] == "", (name, row)
            else:  # the very float of the point (and of the JSON download's curve)
                assert float(row[name]) == value, (name, row)
    assert rows[0]["necessity"] == "0.0123456789" and rows[1]["completeness"] == "0.8765432198765"
    assert rows[0]["completeness"] == "" and rows[2]["necessity"] == ""
    assert "nan" not in render.curves_csv({"eap-ig": points()}, 10_342).lower()
    # curves given as dicts (a stored curve before necessity existed) write empty cells too
    old = [{"budget": 10, "n_edges": 8, "metric": 1.0, "nfs": 0.2, "ndf": 0.2}]
    assert render.curves_csv({"a": old}, 200).splitlines()[1] == "a,10,8,4.0000,1.0,0.2,0.2,,"


# ----- 2: the names --------------------------------------------------------------------------------
HOSTILE = [
    "../../etc/passwd",
    "..\\..\\windows\\system32",
    "<script>alert(1)</script>",
    "\u202eevil\u202c.exe",
    "a" * 5000,
    "Mary " * 1000,
    "\U0001f600\U0001f389\U0001f525",
    "!!!???...",
    "...",
    "",
    "Москва — столица России",
    "東京は日本の首都です",
    "name\x00with\nnul /slash\\ and: colon*?",
    "Ünïcödé ﬁ ligature",
]


@pytest.mark.parametrize("prompt", HOSTILE)
@pytest.mark.parametrize(
    "model", ["gpt2", "EleutherAI/pythia-70m", "/home/me/models/../secret/m.gguf", "../x"]
)
def test_a_name_is_safe_and_bounded_for_any_prompt(prompt, model):
    r = result(prompt, model=model)
    for kind, ext, budget in (("circuit", "json", 200), ("curve", "csv", None), ("curve", "png", 200)):
        name = dl.file_name(r, kind, ext, budget)
        assert SAFE.fullmatch(name), name
        assert len(name) <= dl.NAME_LIMIT
        assert "/" not in name and "\\" not in name and ".." not in name
        assert not name.startswith((".", "-")) and name.endswith(f".{ext}")
        assert name.count(".") >= 1 and name.split("_")[0] == kind
    assert "home" not in dl.file_name(r, "circuit", "json", 200)  # no folder of the server's disk


def test_two_prompts_never_share_a_name():
    names = {dl.file_name(result(prompt), "circuit", "json", 50) for prompt in HOSTILE}
    assert len(names) == len(HOSTILE)
    # prompts a slug reads alike: only the hash tells them apart
    alike = ["What is 2+2?", "What is 2-2?", "What is 2*2?", "\U0001f600", "\U0001f389"]
    assert len({dl.file_name(result(p), "curve", "csv") for p in alike}) == len(alike)
    # the same prompt with another corrupted prompt or answer is another task
    other = result()
    other.task = PromptTask(
        DEFAULT_PROMPT, "When Alice and Bob went to the shop, Carl gave a drink to", " Mary"
    )
    assert dl.file_name(other, "curve", "csv") != dl.file_name(result(), "curve", "csv")
    # the Gallery's "Factual recall" and "Gender bias" (both Edge Pruning at 50) once shared one name
    recall = result("The Eiffel Tower is located in the city of", method="edge-pruning")
    bias = result("The nurse said that", method="edge-pruning")
    assert dl.file_name(recall, "circuit", "json", 50) != dl.file_name(bias, "circuit", "json", 50)


def test_a_name_says_what_it_holds():
    name = dl.file_name(result(model="EleutherAI/pythia-70m"), "curve", "png", 200)
    assert name.startswith("curve_eap-ig_budget-200_EleutherAI_pythia-70m_when-mary-and-john-went-to")
    assert re.search(r"_[0-9a-f]{8}\.png$", name)
    assert dl.file_name(result(), "curve", "png", 200) != dl.file_name(result(), "curve", "png", 500)
    assert "budget" not in dl.file_name(result(), "curve", "csv")
    assert dl.run_hash(result()) == dl.run_hash(result())  # one run, one hash
    assert dl.run_hash(result()) != dl.run_hash(result(method="eap"))
    other_settings = result()
    other_settings.config = {"ig_steps": 5}  # the same prompt, method and model, other settings
    assert dl.file_name(other_settings, "curve", "csv") != dl.file_name(result(), "curve", "csv")


# ----- every button of the row, as the page makes it ----------------------------------------------------
class Row:
    def __init__(self):
        self.buttons = []

    def download_button(self, label, data, file_name, mime, key, **_):
        self.buttons.append(SimpleNamespace(label=label, data=data, file_name=file_name, mime=mime))


def page_downloads(monkeypatch, r, budget, mask=None):
    row = Row()
    fake = SimpleNamespace(container=lambda **_: row, caption=lambda *_a, **_k: None)
    monkeypatch.setattr(dl, "st", fake)
    monkeypatch.setattr(dl, "_browser_for_images", lambda: True)
    images = []

    def image(figure, kind):
        images.append((kind, figure))
        return b"image"

    monkeypatch.setattr(dl.render, "figure_image", image)
    dl.downloads(r, budget, SimpleNamespace(html="<html></html>"), key="k", mask=mask)
    return {b.label: b for b in row.buttons}, images


def test_every_download_has_its_own_name_and_curve_figures_carry_the_budget(monkeypatch):
    buttons, _ = page_downloads(monkeypatch, result(), 200)
    assert set(buttons) == {
        "Circuit (JSON)", "Graph (HTML)", "Edges (CSV)", "Curve (CSV)",
        "Curve (interactive HTML)", "Curve (PNG)", "Curve (SVG)",
    }  # fmt: skip
    names = [b.file_name for b in buttons.values()]
    assert len(set(names)) == len(names) and all(SAFE.fullmatch(n) for n in names)
    stamp = dl.run_hash(result())
    assert all(stamp in n and "gpt2" in n and "eap-ig" in n for n in names)
    for label in ("Circuit (JSON)", "Graph (HTML)", "Edges (CSV)", "Curve (interactive HTML)", "Curve (PNG)"):
        assert "budget-200" in buttons[label].file_name, label
    assert "budget" not in buttons["Curve (CSV)"].file_name  # every budget's point
    other, _ = page_downloads(monkeypatch, result(), 500)
    for label in ("Curve (interactive HTML)", "Curve (PNG)", "Curve (SVG)"):  # they mark the budget shown
        assert other[label].file_name != buttons[label].file_name
    assert other["Curve (CSV)"].file_name == buttons["Curve (CSV)"].file_name
    # the curve CSV the page offers has the new columns
    assert buttons["Curve (CSV)"].data.splitlines()[0].endswith(",ndf,necessity,completeness")


# ----- 3: the downloaded curve's title -------------------------------------------------------------
def test_curve_png_and_svg_have_a_title_naming_model_method_and_prompt(monkeypatch):
    buttons, images = page_downloads(monkeypatch, result(model="EleutherAI/pythia-70m"), 200)
    for label in ("Curve (PNG)", "Curve (SVG)"):
        assert buttons[label].data() == b"image"
    assert [kind for kind, _ in images] == ["png", "svg"]
    for _, figure in images:
        title = figure.layout.title.text
        assert "EleutherAI/pythia-70m" in title and "eap-ig" in title and DEFAULT_PROMPT in title
        assert "shortened" not in title and "\u2026" not in title
    html = buttons["Curve (interactive HTML)"].data()  # the downloaded interactive page has it too
    assert "pythia-70m" in html and "Mary and John" in html


def test_a_long_or_hostile_prompt_is_shortened_and_shown_as_plain_text(monkeypatch):
    prompt = "<b>bold</b> $x$ & <br> \u202e <a href='javascript:x'>link</a> " + "word " * 1000
    buttons, images = page_downloads(monkeypatch, result(prompt), 200)
    buttons["Curve (PNG)"].data()
    title = images[0][1].layout.title.text
    line = title.split("<br>")[1]  # the one <br> is the title's own, between its two lines
    assert title.count("<br>") == 1
    assert "<" not in line and ">" not in line and "$" not in line and "\u202e" not in line
    assert "&lt;b&gt;bold&lt;/b&gt;" in line and "&#36;x&#36;" in line and "&amp;" in line
    assert "\u2026" in line and "shortened from" in line
    assert len(line) < 250
    # wide characters count twice: a title of Japanese is cut at half as many characters
    jp, _ = render.curves.shortened("東京は日本の首都です" * 20)
    en, _ = render.curves.shortened("abcdefghij" * 20)
    assert len(jp) < len(en) * 0.6


def test_plotly_draws_the_title_as_plain_text():
    """Plotly renders '<b>' and typesets '$x$' in a title; the SVG kaleido writes shows them as written."""
    figure = render.curve_figure(
        {"eap-ig": points()}, 10_342, current_budget=200, marker_value=0.0,
        title=render.curves.image_title("gpt2", "eap-ig", "<b>bold</b> $x$ & done"),
    )  # fmt: skip
    svg = render.figure_image(figure, "svg")
    if svg is None:
        pytest.skip("kaleido or a Chrome/Chromium is missing")
    text = svg.decode()
    title = text[text.index('class="gtitle"') :][:1200]
    assert "font-weight" not in title.split("prompt")[1][:200]  # no <b> taken as bold
    assert (
        "&#60;b&#62;bold&#60;/b&#62; $x$ &amp; done" in title
        or "&lt;b&gt;bold&lt;/b&gt; $x$ &amp; done" in title
    )
    assert "mathjax" not in title.lower()


# ----- 4: the marker's label off the line ---------------------------------------------------------------
def default_run_curve() -> list[dict]:
    """EAP-IG's default run (Gemma 3 270M): NDF falls to 0 at 100 and 200, then rises steeply."""
    ndf = {20: 0.2226, 50: 0.1094, 100: 0.0, 200: 0.0, 500: 0.628, 1000: 0.712, 2000: 0.568, 5000: 0.927}
    ndf |= {10_000: 0.998, 10_342: 1.0}
    return [{"budget": b, "n_edges": b, "metric": v, "nfs": v, "ndf": v} for b, v in ndf.items()]


def label_box(figure, plot_w, plot_h):
    """The marker's label's box in plot pixels, and the curve's points, as plotly places them."""
    marker = figure.data[-1]
    x_range, y_range = figure.layout.xaxis.range, figure.layout.yaxis.range

    def px(x, y):
        u = (math.log10(x) - x_range[0]) / (x_range[1] - x_range[0]) * plot_w
        return u, (y - y_range[0]) / (y_range[1] - y_range[0]) * plot_h

    mx, my = px(marker.x[0], marker.y[0])
    width, gap = 7.2 * len(marker.text[0]), 14 / 2 / 0.8 + 1
    if figure.layout.annotations:  # lifted off the marker, on a white ground
        (note,) = figure.layout.annotations
        assert note.text == marker.text[0] and note.bgcolor and marker.mode == "markers"
        left, bottom = mx + note.ax - width / 2 - 3, my - note.ay - 10
        width += 6
    else:
        vertical, side = marker.textposition.split()
        left = mx + gap if side == "right" else mx - gap - width
        bottom = my + gap if vertical == "top" else my - gap - 14 if vertical == "bottom" else my - 7
    line = [px(x, y) for x, y in zip(figure.data[0].x, figure.data[0].y)]
    return (left, bottom, left + width, bottom + 14), line


@pytest.mark.parametrize("budget", [20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000])
# the chart at a 1,000 px page (552 px since its margins shrank: it was 450), at 1,500 px; the PNG
@pytest.mark.parametrize("size", [(552, 290), (940, 300), (810, 330)])
def test_the_shown_budget_label_keeps_off_the_curve(budget, size):
    curve = default_run_curve()
    value = next(p["ndf"] for p in curve if p["budget"] == budget)
    figure = render.curve_figure({"eap-ig": curve}, 10_342, current_budget=budget, marker_value=value)
    box, line = label_box(figure, *size)
    for (x0, y0), (x1, y1) in zip(line, line[1:]):
        for step in range(101):  # points along each segment of the curve
            x, y = x0 + (x1 - x0) * step / 100, y0 + (y1 - y0) * step / 100
            assert not (box[0] <= x <= box[2] and box[1] <= y <= box[3]), (
                budget,
                figure.data[-1].textposition,
            )
    assert box[1] >= 0 and box[3] <= size[1], "inside the plot's floor and ceiling"
    if budget == 200:  # the audit's case: '0.00 at 200' sat above-right, on the line rising to 500
        assert figure.data[-1].textposition != "top right"
