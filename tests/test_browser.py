"""End to end in headless Chromium: the real app, the embedded model, a real browser, at 1500 px.

Starts the app as ``make app`` does (``python -m circuitviz.ui.serve``: the default model starts
loading with the server) on a free local port with a fresh result store and calibration (the
converted model is reused), then drives what a new user does, page by page (``browser_page``
holds the helpers): Explore from a shared URL (model ready timed from opening the page), EAP-IG on
the 15-token IOI prompt (its run, click to graph, and ``benchmarks/bench_engine.py`` in the same
test), the numbers on screen against the result the app stored, the view it opens at and why,
the wheel scrolling the page, the budget across a page switch; Compare (EAP and EAP-IG, then its
URL in a new browser, then ACC++, CircuitLasso and Edge Pruning with each estimate against its
run and Edge Pruning's progress looked at every second); Signals (ACC++ leaves the budget); a
new prompt and the inputs' sentences (a multi-token answer, 'Mary' without its space, the
corrupted prompt equal to the prompt, bad budgets, a right-to-left prompt); IG steps 60 kept
across a page switch and a reload during the run (its progress, then its result); Paraphrases
(its URL from the first paint, Best-of-N then iBoN with their estimates, an UpSet click); Steer,
Gallery, Dataset, About. Screenshots and figures go to ``test-output/`` (look at them);
``CIRCUITVIZ_UPDATE_SCREENSHOTS=1`` also writes ``docs/images/explore.png``.

Needs Debian's chromium (``scripts/install-test-deps.sh``) and playwright; never ``playwright install``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from browser_page import (
    bench_engine_total,
    body_text,
    budget_shown,
    button_ready,
    choose,
    computed_seconds,
    drawn_edge_count,
    estimate_seconds,
    estimates,
    gallery_result,
    graph_drawn,
    graph_frame,
    input_value,
    metric_values,
    metrics,
    open_page,
    progress_texts,
    readable,
    result_of,
    settled,
    shot,
    stored_results,
    type_into,
    wait_for,
)
from fresh_cache import fresh_cache

CHROMIUM = "/usr/bin/chromium"
ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "test-output"
DOCS_SCREENSHOT = ROOT / "docs" / "images" / "explore.png"
BROWSER_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",  # a container's small /dev/shm would crash the renderer on long pages
]
WIDTH = 1500
MODEL_WAIT_MS = 15 * 60 * 1000  # the first load of the embedded model converts its GGUF
RUN_WAIT_MS = 15 * 60 * 1000

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect
pytestmark = [
    pytest.mark.browser,
    pytest.mark.embedded,  # the app it drives loads the embedded model
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed"),
]

IOI_PROMPT = "When Mary and John went to the store, John gave a drink to"
IOI_VIEW = {"prompt": IOI_PROMPT, "method": "eap-ig"}
NEW_PROMPT = "When Tom and Anna went to the park, Anna gave a ball to"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """A fresh cache (results, calibration) that reuses the converted models: a warm start that
    has computed nothing yet."""
    return fresh_cache(tmp_path_factory.mktemp("cache"))


BENCH_ENV = "CIRCUITVIZ_BROWSER_BENCH"


@pytest.fixture(scope="module")
def bench_seconds():
    """``benchmarks/bench_engine.py``'s EAP-IG time, measured in this test run before the app
    starts (so the two never share the CPU or hold two models at once), when the figures are
    being taken (``CIRCUITVIZ_BROWSER_BENCH=1``): the walk's timings read against the engine's at
    the same load. ``None`` otherwise; it is a figure the walk reports, never asserts, and took
    half a minute of every suite."""
    return bench_engine_total() if os.environ.get(BENCH_ENV) == "1" else None


@contextlib.contextmanager
def _serve(cache: Path, log_name: str = "streamlit.log", **environment: str):
    """A streamlit server of this checkout on 127.0.0.1 (``make app``'s launcher), its URL;
    stopped (with its children) at the end. ``environment``: variables of its own."""
    port = _free_port()
    OUTPUT.mkdir(exist_ok=True)
    log = open(OUTPUT / log_name, "w")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "CIRCUITVIZ_CACHE": str(cache)}
    env.update(environment)
    command = [sys.executable, "-m", "circuitviz.ui.serve", "--server.port", str(port)]
    command += ["--server.address", "127.0.0.1", "--server.headless", "true"]
    command += ["--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"]
    server = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"streamlit did not start; see {OUTPUT / log_name}")
            time.sleep(0.5)
        yield url
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
        log.close()


@pytest.fixture(scope="module")
def app_url(cache, bench_seconds):
    """The server of the new user's walk (started after the benchmark, never beside it)."""
    with _serve(cache) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    with playwright_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        yield chromium
        chromium.close()


# ----- helpers ---------------------------------------------------------------------------------------
# ----- the test ---------------------------------------------------------------------------------------
CORRUPTED_LABEL = "Corrupted prompt (the key fact or name replaced; same number of tokens)"
ANSWER_LABEL = "answer token (with its leading space)"
BUDGETS_LABEL = "edge budgets (the slider's steps; each is evaluated once)"
RTL_PROMPT = "The capital city of مدينة is the city of"
RTL_CORRUPTED = "The capital city of مدينة is the city in"


# ----- every way into Explore ------------------------------------------------------------------------
OPEN_WIDTHS = (1000, 1500)
FINISHED = "() => document.body.innerText.includes('edges kept') || document.body.innerText.includes('could not run')"


@pytest.fixture
def opening_app(tmp_path, monkeypatch):
    """A server of its own with a fresh store (the converted models reused) and the task validity
    check on, as a user has it (the suite turns it off for its random models); stopped before the
    new user's walk starts its own."""
    from circuitviz.measure.task_validity import CHECK_ENV

    monkeypatch.setenv(CHECK_ENV, "on")
    root = fresh_cache(tmp_path / "cache")
    with _serve(root, "streamlit-opening.log", **{CHECK_ENV: "on"}) as url:
        yield url


def _inside_the_app(page) -> None:
    """Explore is on screen inside the app: its sidebar holds the model and device, its page list
    the pages' titles (not the raw file names of a page run alone)."""
    page.get_by_text("Explore a prompt's circuit").first.wait_for(timeout=120_000)
    sidebar = page.locator('[data-testid="stSidebar"]')
    sidebar.get_by_text("Model", exact=True).wait_for(timeout=120_000)
    links = page.locator('[data-testid="stSidebarNav"] a').all_inner_texts()
    titles = [link.split("\n")[-1].strip() for link in links]
    assert {"Explore", "Compare", "Dataset", "Gallery"} <= set(titles) and "app" not in titles, titles


def _run_to_the_end(page, task, refused: str | None, name: str, width: int) -> str:
    """The opened task's inputs in their boxes, then its run (started on opening, or by Run) to
    its result; a task the validity check refuses shows the refusal, Run disabled. Returns what
    the page ended with."""
    settled(page)
    # on a busy machine the rerun that fills the boxes can end after the page looks settled: wait
    # for each box to hold the task's text (a box that never does still fails, after 30 s)
    expect(page.get_by_label("Prompt", exact=True)).to_have_value(task["clean"], timeout=30_000)
    if "answer" in task:
        expect(page.get_by_label(ANSWER_LABEL, exact=True)).to_have_value(task["answer"], timeout=30_000)
        expect(page.get_by_label(CORRUPTED_LABEL, exact=True)).to_have_value(
            task["corrupted"], timeout=30_000
        )
    settled(page)
    if refused:
        page.get_by_text(refused[:60]).first.wait_for(timeout=120_000)
        expect(page.get_by_role("button", name="Run", exact=True)).to_be_disabled(timeout=30_000)
        ended = "refused"
    else:
        if (
            not page.evaluate("() => document.body.innerText.includes('Running ')")
            and page.get_by_role("button", name="Run", exact=True).is_enabled()
        ):
            page.get_by_role("button", name="Run", exact=True).click()
        wait_for(page, FINISHED, RUN_WAIT_MS)
        settled(page)
        ended = "result" if "edges kept" in body_text(page) else "error"
    page.get_by_text("Explore a prompt's circuit").first.evaluate("e => e.scrollIntoView({block: 'start'})")
    page.screenshot(path=str(OUTPUT / f"open-{name}-{width}.png"))
    if ended == "result":
        shot(page, f"open-{name}-{width}-result.png", page.get_by_text("edge budget (").first)
    return ended


def _open_atlas_row(page, app_url: str, atlas_name: str, row: int, only_refused: bool = False) -> None:
    page.goto(f"{app_url}/dataset")
    wait_for(page, "() => document.body.innerText.includes('CPR (MIB)')", 300_000)
    settled(page)
    page.locator('[data-testid="stButtonGroup"] button').filter(has_text=atlas_name).first.click()
    settled(page)
    page.get_by_role("tab", name="Prompts").click()
    page.wait_for_timeout(1500)
    settled(page)  # the table is drawn by the rerun the click starts (it runs only while open)
    if only_refused:  # the table's switch: the rows the validity check refuses, alone
        page.get_by_text("the check refuses").first.click()
        page.wait_for_timeout(1500)
        settled(page)
    grid = page.locator('[data-testid="stDataFrame"]').last
    grid.scroll_into_view_if_needed()
    page.wait_for_timeout(500)
    box = grid.bounding_box()  # the grid is a canvas: its row-selection column, row by row
    from circuitviz.ui.prompt_table import ROW_PX  # the rows are tall: a prompt wraps on three lines

    page.mouse.click(box["x"] + 18, box["y"] + 36 + ROW_PX * row + ROW_PX // 2)


def test_every_way_into_explore_opens_inside_the_app(opening_app, browser):
    """A prompt opened from each stored atlas's table (IOI, arithmetic, MMLU), from the Gallery
    and from Explore's MMLU picker lands in Explore inside the app (its sidebar, its page list),
    with its own inputs, and runs: no traceback, at 1,000 and 1,500 px. Every stored atlas is
    drawn valid now (the IOI atlas, built before the validity check, held three rows it refuses
    until it was built again on 2026-12-05): a refused row's sentences are checked on a weakened
    copy (test_dataset_page, test_atlas)."""
    from circuitviz.batch.atlas import BatchTable
    from circuitviz.ui.dataset import refusal, stored_atlases

    OUTPUT.mkdir(exist_ok=True)
    atlases = stored_atlases()
    ended, errors = {}, []
    for width in OPEN_WIDTHS:
        page = browser.new_page(viewport={"width": width, "height": 1000})
        page.on("pageerror", lambda error, seen=errors: seen.append(str(error)))
        for atlas_name in ("ioi", "arithmetic", "mmlu"):
            batch = BatchTable.load(atlases[atlas_name])
            rows = batch.rows(batch.labels[0]).to_pylist()
            refused = [i for i, r in enumerate(rows) if refusal(r)]
            picks = [(0, False)]
            assert not refused, (atlas_name, refused)  # every stored atlas is drawn valid
            for row, only_refused in picks:
                _open_atlas_row(page, opening_app, atlas_name, 0 if only_refused else row, only_refused)
                if refusal(rows[row]) and width == OPEN_WIDTHS[0]:
                    assert "fail the validity check" in body_text(page)
                _inside_the_app(page)
                task = {key: rows[row][key] for key in ("clean", "corrupted", "answer")}
                ended[f"{atlas_name}-{row}-{width}"] = _run_to_the_end(
                    page, task, refusal(rows[row]), f"{atlas_name}-{row}", width
                )
        page.goto(f"{opening_app}/gallery")  # the Gallery's first example, re-run live
        page.get_by_role("button", name="Re-run live on the Explore page").click(timeout=180_000)
        _inside_the_app(page)
        example = json.loads((ROOT / "assets" / "gallery" / "index.json").read_text())[0]
        ended[f"gallery-{width}"] = _run_to_the_end(page, example["task"], None, "gallery", width)
        from circuitviz.batch.mmlu import load_mmlu, mmlu_subjects

        question = load_mmlu().of_subject(mmlu_subjects()[0])[0]
        _use_the_mmlu_question(page, question.prompt())
        _inside_the_app(page)
        refused = "refused as a task" in body_text(page)
        ended[f"mmlu-picker-{width}"] = _run_to_the_end(
            page,
            {"clean": question.prompt()},
            "This MMLU question" if refused else None,
            "mmlu-picker",
            width,
        )
        # /explore, as every other page is at /<name>: it opened Streamlit's "Page not found"
        # dialog over the default page, the link's prompt with it; now it leads to "/" with them
        typed = "The capital of France is"
        page.goto(f"{opening_app}/explore?prompt={urllib.parse.quote(typed)}")
        _inside_the_app(page)
        settled(page)
        expect(page.get_by_label("Prompt", exact=True)).to_have_value(typed, timeout=60_000)
        assert urllib.parse.urlparse(page.url).path == "/" and "Page not found" not in body_text(page)
        assert not errors, errors
        page.close()
    (OUTPUT / "opening-figures.json").write_text(json.dumps(ended, indent=1))
    assert set(ended.values()) <= {"result", "refused"}, ended


def _use_the_mmlu_question(page, prompt: str) -> None:
    """Explore's MMLU picker: open it, let the page settle, use the first question; then wait for
    the prompt box to hold it. Under load a click once landed while the page redrew the button
    and did nothing (the box kept the Gallery's prompt for 30 s, twice in about eight full runs):
    the test clicks once more, as a user would, and fails if that one does nothing too."""
    page.get_by_text("Or pick an MMLU question").first.click()
    settled(page)
    box = page.get_by_label("Prompt", exact=True)
    for attempt in range(2):
        page.get_by_role("button", name="Use this question").click(timeout=180_000)
        settled(page)
        try:
            expect(box).to_have_value(prompt, timeout=30_000)
            return
        except AssertionError:
            if attempt:
                raise
            print("the MMLU picker's first click did nothing; clicking again")  # in the test's output
            if not page.get_by_role("button", name="Use this question").is_visible():
                page.get_by_text("Or pick an MMLU question").first.click()  # drawn closed again
                settled(page)


def test_a_new_user_in_chromium(app_url, browser, cache, bench_seconds):
    figures: dict[str, object] = {"bench_engine_eap_ig_s": bench_seconds, "load_average": _load_average()}
    page = browser.new_page(viewport={"width": WIDTH, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    result = _explore_first_run(page, app_url, cache, figures)
    _budget_across_pages(page, result)
    _compare(page, browser, app_url, cache, figures, result)
    _signals_leaves_the_budget(page, figures)
    answer = _new_prompt_and_its_inputs(page, figures)
    _settings_and_a_reload(page, cache, figures)
    _paraphrases(page, cache, figures)
    _steer(page, figures)
    _gallery(page)
    _dataset_and_about(page)
    _positions_picture(page, figures)
    assert not errors, errors
    figures.update(load_average_end=_load_average(), new_prompt_answer=answer)
    (OUTPUT / "browser-figures.json").write_text(json.dumps(figures, indent=1, default=str))
    print("browser figures:", json.dumps(figures, default=str))  # timings are reported, never asserted


def _load_average() -> str:
    return Path("/proc/loadavg").read_text().split(" ", 3)[:3] if Path("/proc/loadavg").exists() else "?"


def _explore_first_run(page, app_url, cache, figures):
    """Open Explore from a shared URL, wait for the model, run EAP-IG; the numbers are the stored result's."""
    start = time.perf_counter()
    page.goto(f"{app_url}/?{urllib.parse.urlencode(IOI_VIEW)}")
    page.get_by_text("Explore a prompt's circuit").wait_for(timeout=60_000)
    figures["first_paint_s"] = time.perf_counter() - start
    page.get_by_label("Prompt", exact=True).wait_for(timeout=60_000)
    figures["prompt_box_s"] = time.perf_counter() - start
    wait_for(page, button_ready("Run"), MODEL_WAIT_MS)
    figures["model_ready_s"] = time.perf_counter() - start
    settled(page)
    assert input_value(page, ANSWER_LABEL) == " Mary"
    assert input_value(page, "foil token") == " John"  # the other name, not the next token
    corrupted = input_value(page, CORRUPTED_LABEL)
    assert corrupted and "Mary" not in corrupted and "John" not in corrupted
    assert page.get_by_text("Both prompts are 15 tokens").count() == 1
    assert "the token: ·Mary" in body_text(page)  # the leading space shown
    estimate_text = page.get_by_text("Estimate: about").first.inner_text()
    figures["estimate_first_run"] = estimate_text
    shot(page, "explore-inputs.png")

    started = time.perf_counter()
    page.get_by_role("button", name="Run", exact=True).click()
    figures["eap_ig_click_to_graph_s"] = graph_drawn(page, started)
    settled(page)
    figures["eap_ig_click_to_settled_s"] = time.perf_counter() - started
    figures["eap_ig_computed_s"] = computed_seconds(page, "eap-ig")[-1]
    figures["estimate_first_run_s"] = estimate_seconds(estimate_text)

    result = result_of(cache, "eap-ig", IOI_PROMPT)
    budget = budget_shown(page)
    point = result.point(budget)
    assert point is not None and budget == readable(result)
    shown = metrics(page)
    assert shown["NDF"] == f"{point.ndf:.3f}" and shown["NFS"] == f"{point.nfs:.3f}"
    assert shown["edges kept"] == f"{point.n_edges:,} ({100 * point.n_edges / result.graph.n_edges:.2f}%)"
    assert shown["clean L(M(q))"] == f"{result.baseline.clean:+.3f}"
    reason = next(
        text for text in ("Opened at the smallest", "No circuit of at most") if text in body_text(page)
    )
    figures["explore_shown"] = {"budget": budget, "opened": reason, **shown}
    frame = graph_frame(page)
    frame.locator("canvas").wait_for(timeout=30_000)
    assert drawn_edge_count(page) == min(point.n_edges, 1500)
    labels = frame.evaluate("() => network.body.data.nodes.get().map(n => n.label)")
    assert any("\n" in label for label in labels), labels[:6]  # captions where they say something
    chart = page.locator(".js-plotly-plot").first
    ticks = chart.evaluate("c => [...c.querySelectorAll('.xtick text')].map(t => t.textContent)")
    # every budget with a point is ticked, the whole graph in full (10k, beside it, is left out)
    assert {"20", "100", "1k", "10,342"} <= set(ticks) and not {"2", "5"} & set(ticks), ticks
    assert "NDF (clipped at 0)" in chart.inner_text()

    iframe = page.locator(".cv-root").first  # the wheel over the graph scrolls the page, not the graph
    iframe.scroll_into_view_if_needed()
    box = iframe.bounding_box()
    scale_before = frame.evaluate("() => network.getScale()")
    scroller = "document.querySelector('[data-testid=\"stMain\"]') || document.scrollingElement"
    top_before = page.evaluate(f"() => ({scroller}).scrollTop")
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + min(box["height"] - 20, 300))
    page.mouse.wheel(0, 500)
    page.wait_for_timeout(800)
    assert frame.evaluate("() => network.getScale()") == scale_before
    figures["wheel_scrolled_px"] = page.evaluate(f"() => ({scroller}).scrollTop") - top_before
    assert figures["wheel_scrolled_px"] > 0
    page.evaluate(
        "() => document.querySelectorAll('div.vis-tooltip').forEach(t => { t.style.visibility = 'hidden'; })"
    )  # no hover box
    shot(page, "explore-graph.png", iframe, full=True)
    page.get_by_text("Explain this circuit").first.click()
    page.wait_for_timeout(600)
    shot(page, "explore-result.png", page.get_by_text("edge budget (").first, height=2400)
    _held_out_on_request(page, figures)
    return result


def _held_out_on_request(page, figures) -> None:
    """One click measures the circuit on paraphrases its method never used: the metric is the mean
    of the NDFs the sentence under it gives, one per paraphrase it names."""
    assert "NDF held out" not in metrics(page)  # nothing known before the click
    page.get_by_role("button", name="Measure its NDF on paraphrases it never saw (runs the model)").click()
    wait_for(page, "() => document.body.innerText.includes('NDF held out:')", RUN_WAIT_MS)
    settled(page)
    sentence = page.get_by_text("NDF held out:").first.inner_text()
    each = [float(value) for value in re.findall(r"['\")] (\d\.\d{3})(?=, |\.$)", sentence)]
    assert len(each) == int(re.search(r"the mean over (\d+) paraphrase", sentence).group(1)) > 0, sentence
    shown = float(metrics(page)["NDF held out"])
    assert shown == pytest.approx(sum(each) / len(each), abs=2e-3), sentence  # the values are rounded
    figures["explore_held_out"] = {"ndf": shown, "paraphrases": len(each)}


def _budget_across_pages(page, result) -> None:
    slider = page.get_by_role("slider").first
    slider.focus()
    page.keyboard.press("ArrowRight")
    settled(page)
    moved = budget_shown(page)
    assert f"budget={moved}" in page.url
    assert metric_values(page, "NDF") == [f"{result.point(moved).ndf:.3f}"]
    open_page(page, "Compare")
    page.get_by_text("Compare methods").first.wait_for(timeout=60_000)
    settled(page)
    assert input_value(page, "Prompt") == IOI_PROMPT
    open_page(page, "Explore")
    wait_for(page, "() => document.body.innerText.includes('edges kept')", 120_000)
    settled(page)
    assert budget_shown(page) == moved


def _compare(page, browser, app_url, cache, figures, result) -> None:
    """EAP and EAP-IG side by side; the URL in a new browser; then ACC++, CircuitLasso and Edge
    Pruning, each estimate against its run, Edge Pruning's progress looked at every second."""
    open_page(page, "Compare")
    wait_for(page, button_ready("Run the comparison"), 120_000)
    page.get_by_role("button", name="Run the comparison").click()
    wait_for(page, "() => document.querySelectorAll('.cv-root canvas').length >= 2", RUN_WAIT_MS)
    settled(page)
    shown_budget = budget_shown(page)
    eap = result_of(cache, "eap", IOI_PROMPT)
    assert metric_values(page, "NDF") == [
        f"{eap.point(shown_budget).ndf:.3f}",
        f"{result.point(shown_budget).ndf:.3f}",
    ]
    a = set(eap.graph.edge_names_of(eap.circuit(shown_budget)))
    b = set(result.graph.edge_names_of(result.circuit(shown_budget)))
    shared = len(a & b)
    assert (
        page.get_by_text(
            f"{shared:,} edge{'' if shared == 1 else 's'} {'is' if shared == 1 else 'are'} in every circuit."
        ).count()
        == 1
    )
    # one line under each graph, whichever of its three forms the circuits call for (the page's own
    # caption says "drawn bold, the shared ones thin" too, without the "NDF ... with N edges" head)
    drawn = re.compile(
        r"NDF [\d.-]+ with .*(drawn bold, the shared ones thin|so all are drawn (bold|thin))\."
    )
    assert page.get_by_text(drawn).count() == 2
    figures["compare_shown"] = {
        "budget": shown_budget,
        "shared": len(a & b),
        "jaccard": len(a & b) / len(a | b),
    }
    right = page.evaluate(
        "() => Math.max(...[...document.querySelectorAll('.cv-root')].map(f => f.getBoundingClientRect().right))"
    )
    main_right = page.evaluate(
        "() => document.querySelector('[data-testid=\"stMainBlockContainer\"]').getBoundingClientRect().right"
    )
    assert right <= main_right + 1, (right, main_right)
    shot(page, "compare.png", page.get_by_text("edge budget (").first, height=2000)
    assert "compare=eap%2Ceap-ig" in page.url or "compare=eap,eap-ig" in page.url, page.url

    fresh = browser.new_page(viewport={"width": WIDTH, "height": 1000})  # the URL in a new browser
    fresh.goto(page.url)
    wait_for(fresh, "() => document.querySelectorAll('.cv-root canvas').length >= 2", 180_000)
    # both graphs drawn is not the page finished: the second column's figures may still be on
    # their way (CI once read one NDF of two here), so wait for the run to end and both to show
    settled(fresh)
    wait_for(
        fresh,
        """() => [...document.querySelectorAll('[data-testid="stMetricLabel"]')]
            .filter(l => l.innerText.trim() === 'NDF').length >= 2""",
        60_000,
    )
    assert metric_values(fresh, "NDF") == metric_values(page, "NDF")
    query = urllib.parse.parse_qs(urllib.parse.urlparse(page.url).query)
    query["compare"] = ["acc++,circuit-lasso,edge-pruning"]
    # three budgets (and the one on screen), not Explore's ten: Edge Pruning learns one mask a
    # budget, and its run at ten was the walk's longest wait (63 s of about 300); what this part
    # checks (three runs to three drawings, their estimates, the progress line) needs no more
    query["budgets"] = [",".join(str(b) for b in sorted({20, 50, 200, shown_budget}))]
    fresh.goto(f"{app_url}/compare?{urllib.parse.urlencode(query, doseq=True)}")
    wait_for(fresh, button_ready("Run the comparison"), 180_000)
    settled(fresh)
    fresh.get_by_role("button", name="Run the comparison").click()
    figures["edge_pruning_progress"] = progress_texts(fresh, "edge-pruning on gemma-3-270m: computed", 900)
    wait_for(fresh, "() => document.querySelectorAll('.cv-root canvas').length >= 3", RUN_WAIT_MS)
    settled(fresh)
    measured = dict(zip(("acc++", "circuit-lasso", "edge-pruning"), computed_seconds(fresh)))
    priced = dict(zip(("acc++", "circuit-lasso", "edge-pruning"), estimates(fresh)))
    figures["compare_estimate_vs_measured_s"] = {m: (priced.get(m), measured.get(m)) for m in measured}
    assert "fitted to the prompt" in body_text(fresh)
    shot(fresh, "compare-three.png", fresh.get_by_text("edge budget (").first, height=2000)
    fresh.close()


def _signals_leaves_the_budget(page, figures) -> None:
    open_page(page, "Explore")
    wait_for(page, "() => document.body.innerText.includes('edges kept')", 120_000)
    settled(page)
    before = budget_shown(page)
    open_page(page, "Signals")
    page.get_by_text("Signals: why a head attends").first.wait_for(timeout=60_000)
    settled(page)
    if (
        page.get_by_role("button", name="Run ACC++").count()
        and page.get_by_role("button", name="Run ACC++").is_visible()
    ):
        page.get_by_role("button", name="Run ACC++").click()
    wait_for(page, "() => document.body.innerText.includes('Attention decisions')", RUN_WAIT_MS)
    settled(page)
    assert "NDF by patching" not in body_text(page)  # no orphan caption under the knockout table
    shot(page, "signals.png", page.get_by_text("Attention decisions").first, height=2000)
    open_page(page, "Explore")
    wait_for(page, "() => document.body.innerText.includes('edges kept')", 120_000)
    settled(page)
    assert budget_shown(page) == before
    figures["budget_after_signals"] = before


def _new_prompt_and_its_inputs(page, figures) -> str:
    type_into(page, "Prompt", NEW_PROMPT)
    expect(page.get_by_label("foil token", exact=True)).to_have_value(" Anna", timeout=120_000)
    new_corrupted = input_value(page, CORRUPTED_LABEL)
    assert new_corrupted and "Anna" not in new_corrupted and "Tom" not in new_corrupted
    answer = input_value(page, ANSWER_LABEL)
    assert answer and answer != " Mary"
    assert page.locator(".cv-root").count() == 0  # the old prompt's result is gone
    shot(page, "explore-new-prompt.png")
    run_button = page.get_by_role("button", name="Run", exact=True)
    type_into(page, ANSWER_LABEL, " Mary-Jane Watson")  # a multi-token answer: its error, Run disabled
    page.get_by_text("use a single token").first.wait_for(timeout=120_000)
    expect(run_button).to_be_disabled(timeout=30_000)
    shot(page, "explore-multi-token-answer.png")
    type_into(page, ANSWER_LABEL, answer.strip())  # the word without the model's leading space
    page.get_by_text("with a leading space").first.wait_for(timeout=60_000)
    shot(page, "explore-missing-space.png")
    page.get_by_role("button", name=f"Use {answer!r}").click()
    settled(page)
    assert input_value(page, ANSWER_LABEL) == answer
    type_into(page, CORRUPTED_LABEL, NEW_PROMPT)  # the corrupted prompt is the prompt: refused
    page.get_by_text("is the prompt itself").first.wait_for(timeout=60_000)
    expect(run_button).to_be_disabled(timeout=30_000)
    shot(page, "explore-identical-corrupted.png")  # then the corrupted prompt back, bad budgets
    type_into(page, CORRUPTED_LABEL, new_corrupted)
    budgets = input_value(page, BUDGETS_LABEL)
    type_into(page, BUDGETS_LABEL, "abc,-5,99999999")
    wait_for(
        page,
        "() => document.body.innerText.includes(\"'abc'\") && document.body.innerText.includes('-5, a negative budget')",
        60_000,
    )
    assert "99,999,999 is over the" in body_text(page)
    expect(run_button).to_be_disabled(timeout=30_000)
    shot(page, "explore-bad-budgets.png", page.get_by_text("'abc'").first)
    type_into(page, BUDGETS_LABEL, budgets)
    type_into(page, "Prompt", RTL_PROMPT)  # right to left: the chips keep the prompt's order
    page.get_by_text("Corrupted prompt").first.wait_for(timeout=120_000)
    type_into(page, CORRUPTED_LABEL, RTL_CORRUPTED)
    chips = page.locator('span[dir="auto"]')
    figures["rtl_chips"] = chips.count()
    assert chips.count() > 0
    shot(page, "explore-right-to-left.png")
    type_into(page, "Prompt", NEW_PROMPT)
    expect(page.get_by_label("foil token", exact=True)).to_have_value(" Anna", timeout=120_000)
    expect(run_button).to_be_enabled(timeout=120_000)
    return answer


def _settings_and_a_reload(page, cache, figures) -> None:
    """IG steps 60 kept across a page switch and in the URL; a reload during the run shows its
    progress and then its result."""
    type_into(page, "ig steps", "60")
    open_page(page, "Gallery")
    page.get_by_text("Indirect object").first.wait_for(timeout=60_000)
    open_page(page, "Explore")
    page.get_by_label("ig steps", exact=True).wait_for(timeout=120_000)
    settled(page)
    assert input_value(page, "ig steps") == "60"
    # the URL follows the widgets one script run later: wait for it rather than read it at once
    page.wait_for_url(lambda url: "settings=" in url, timeout=60_000)
    settings = json.loads(urllib.parse.parse_qs(urllib.parse.urlparse(page.url).query)["settings"][0])
    assert settings["ig_steps"] == 60  # in the URL as typed, before any run
    estimate_text = page.get_by_text("Estimate: about").first.inner_text()
    started = time.perf_counter()
    page.get_by_role("button", name="Run", exact=True).click()
    page.get_by_text("Running eap-ig").first.wait_for(timeout=60_000)
    page.wait_for_timeout(1500)
    page.reload()
    seen = progress_texts(page, "edges kept", RUN_WAIT_MS / 1000, every_s=0.5)
    figures["reload_progress_seen"] = seen[:3] + seen[-2:]
    assert seen, "the reloaded page showed no progress of the run in flight"
    graph_drawn(page, started)
    settled(page)
    figures["ig60_estimate"] = estimate_text
    figures["ig60_estimate_s"] = estimate_seconds(estimate_text)
    figures["ig60_seconds_click_to_result_after_reload"] = time.perf_counter() - started
    stored = [r for r in stored_results(cache) if r.method == "eap-ig" and r.config.get("ig_steps") == 60]
    assert stored and metric_values(page, "NDF") == [f"{stored[-1].point(budget_shown(page)).ndf:.3f}"]
    figures["ig60_computed_s"] = stored[-1].timings
    type_into(page, "ig steps", "20")
    estimate_text = page.get_by_text("Estimate: about").first.inner_text()  # a second 20-step run: timed
    assert "is for earlier inputs" in body_text(page)  # the 60-step result is still on screen
    page.evaluate("() => { window.cvGraphBefore = document.querySelector('.cv-root').cvDrawing; }")
    started = time.perf_counter()
    page.get_by_role("button", name="Run", exact=True).click()
    new_graph = "() => { const f = document.querySelector('.cv-root'); return f && f.cvDrawing !== window.cvGraphBefore; }"
    wait_for(page, new_graph, RUN_WAIT_MS)  # the graph of this run, not the 60-step one
    figures["second_run_click_to_graph_s"] = graph_drawn(page, started)
    settled(page)
    figures["estimate_second_run_s"] = estimate_seconds(estimate_text)
    figures["second_run_computed_s"] = computed_seconds(page, "eap-ig")[-1]


def _paraphrases(page, cache, figures) -> None:
    open_page(page, "Paraphrases")
    page.get_by_text("Paraphrases and Best-of-N").first.wait_for(timeout=60_000)
    settled(page)
    assert "bon_method=" in page.url and "prompt=" in page.url, page.url  # never a bare /paraphrases
    type_into(page, "Prompt", IOI_PROMPT)
    expect(page.get_by_label("foil token", exact=True)).to_have_value(" John", timeout=120_000)
    page.get_by_text("Both prompts are 15 tokens").first.wait_for(timeout=60_000)
    runs = {}
    for method in ("bon", "ibon"):  # iBoN after BoN finds BoN's scores stored
        choose(page, "method", f"({method})")
        page.get_by_text("Estimate: about").first.wait_for(timeout=60_000)
        settled(page)
        estimate_text = page.get_by_text("Estimate: about").first.inner_text()
        started = time.perf_counter()
        page.get_by_role("button", name="Run Best-of-N").click()
        wait_for(
            page, f"() => document.body.innerText.includes('{method} on gemma-3-270m: computed')", RUN_WAIT_MS
        )
        settled(page)
        runs[method] = {
            "estimate_s": estimate_seconds(estimate_text),
            "computed_s": computed_seconds(page, method)[-1],
            "click_to_view_s": time.perf_counter() - started,
            "priced": estimate_text,
        }
    figures["paraphrases_runs"] = runs
    budget = budget_shown(page)
    assert (
        f"at budget {budget:,}" in page.locator(".js-plotly-plot").first.inner_text()
    )  # candidates at the slider's
    shot(page, "paraphrases.png", page.get_by_role("heading", name="Paraphrases", exact=True), height=2400)
    upset = page.locator(".js-plotly-plot").nth(1)
    upset.scroll_into_view_if_needed()
    bar = upset.locator(".barlayer .point path").first.bounding_box()  # plotly's drag layer takes the click
    page.mouse.click(bar["x"] + bar["width"] / 2, bar["y"] + bar["height"] / 2)
    settled(page)
    chosen = page.get_by_role(
        "combobox", name="highlight the edges of one intersection in the graph (or click its bar above)"
    )
    expect(chosen).to_have_value(re.compile(r"\(\d+ edges\)$"), timeout=60_000)
    figures["upset_clicked"] = chosen.input_value()
    shot(
        page,
        "paraphrases-upset.png",
        page.get_by_text("Edges shared across candidate circuits").first,
        height=2000,
    )


def _steer(page, figures) -> None:
    open_page(page, "Steer")
    page.get_by_text("Steer with SAE features").first.wait_for(timeout=60_000)
    wait_for(page, "() => document.body.innerText.includes('Features to zero')", RUN_WAIT_MS)
    settled(page)
    caption = page.get_by_text(re.compile(r"circuit at budget [\d,]+")).first.inner_text()
    figures["steer_caption"] = caption
    budget_now = int(re.search(r"circuit at budget ([\d,]+)", caption).group(1).replace(",", ""))
    assert budget_now == int(re.search(r"budget=(\d+)", page.url).group(1))
    # (the table's "node's part of it" column is drawn on a canvas: tests/test_app_state.py checks it)
    picker = page.locator('[data-testid="stMultiSelect"]').first
    picker.evaluate("element => element.scrollIntoView({block: 'center'})")  # as a user scrolls to it
    picker.locator("input").first.click()
    page.locator('[role="option"]').first.wait_for(timeout=30_000)
    options = page.locator('[role="option"]').all_inner_texts()
    assert options and not any("Select all" in text for text in options), options[:3]
    page.keyboard.press("Escape")
    # Pick two features and press "Zero them" once, the way a hand does: the picker still has the
    # focus and its menu is open, the press takes the focus away, and the release must land on
    # the same button (a picker that shrinks on losing the focus moved a button below it; at
    # 1,000 px two features' labels fill the picker's line, so it shrank by one).
    page.set_viewport_size({"width": 1000, "height": 1000})
    settled(page)
    # the features table fits the page at 1,000 px (the grid it was ran 230 px past its 540)
    widths = page.evaluate(
        """() => [document.querySelector('.st-key-steer-features table'),
                  document.querySelector('.st-key-steer-features')].map(e => e.getBoundingClientRect().width)"""
    )
    assert widths[0] <= widths[1] + 1, widths
    for option in range(2):
        picker.evaluate("element => element.scrollIntoView({block: 'center'})")
        picker.locator("input").first.click()
        page.locator('[role="option"]').nth(option).click(timeout=30_000)
        page.wait_for_timeout(800)
        settled(page)
    button = page.locator('button:has-text("Zero them")').first.bounding_box()
    page.mouse.move(button["x"] + button["width"] / 2, button["y"] + button["height"] * 0.8)
    page.mouse.down()
    page.mouse.up()
    wait_for(page, "() => document.body.innerText.includes('after zeroing')", 180_000)
    settled(page)
    page.set_viewport_size({"width": WIDTH, "height": 1000})
    shot(page, "steer.png", page.get_by_text("Loaded:").first, height=1800)


def _gallery(page) -> None:
    open_page(page, "Gallery")
    page.get_by_text("Indirect object").first.wait_for(timeout=60_000)
    page.locator(".cv-root").first.wait_for(timeout=60_000)
    settled(page)
    graph_frame(page).locator("canvas").wait_for(timeout=60_000)
    settled(page)
    gallery = gallery_result("ioi")
    gallery_budget = budget_shown(page)
    assert gallery_budget == readable(gallery)
    assert metric_values(page, "NDF") == [f"{gallery.point(gallery_budget).ndf:.3f}"]
    assert "scoring_s" not in body_text(page)
    shot(page, "gallery.png", page.get_by_text("edge budget (").first, height=2400)


def _dataset_and_about(page) -> None:
    open_page(page, "Dataset")
    page.get_by_text("Dataset atlas").first.wait_for(timeout=60_000)
    wait_for(page, "() => document.body.innerText.includes('CPR (MIB)')", 180_000)
    settled(page)
    buttons = page.evaluate(
        """() => [...document.querySelectorAll('[data-testid="stButtonGroup"] button')].map(b =>
            [b.innerText.trim(), b.getAttribute('kind') || '', b.getAttribute('data-testid') || '',
             b.getAttribute('aria-checked') || b.getAttribute('aria-pressed') || ''])"""
    )
    active = [b[0] for b in buttons if "Active" in b[1] or "Active" in b[2] or b[3] == "true"]
    assert active, f"the atlas picker shows no atlas as open: {buttons[:4]}"
    page.get_by_role("tab", name="Consensus circuit").click()
    page.wait_for_timeout(1500)
    settled(page)
    assert (
        "width: the share of prompts" in graph_frame(page).element.inner_text()
    )  # the legend, in the component
    shot(page, "dataset-consensus.png", page.get_by_text("Dataset atlas").first, height=2000)
    page.get_by_role("tab", name="Prompts").click()
    page.wait_for_timeout(1000)
    settled(page)  # the table and its caption are drawn by the rerun the click starts
    assert "CPR is the area under the prompt's NFS curve" in body_text(page)
    open_page(page, "About")
    page.get_by_text("About circuitviz").first.wait_for(timeout=60_000)
    settled(page)
    assert "-0.000" not in body_text(page)
    shot(page, "about.png", page.get_by_text("How faithful each method").first, height=1600)
    open_page(page, "Explore")  # the README's picture: the first result's view
    wait_for(page, "() => document.body.innerText.includes('Explore a prompt')", 60_000)


def _positions_picture(page, figures) -> None:
    """EAP-IG over token positions on the IOI prompt: the README's picture of the Explore page."""
    page.get_by_text("Explore a prompt's circuit").first.wait_for(timeout=60_000)
    wait_for(page, button_ready("Run"), 180_000)
    settled(page)
    assert input_value(page, "Prompt") == IOI_PROMPT
    page.get_by_text("positions", exact=True).first.click()
    settled(page)
    started = time.perf_counter()
    page.get_by_role("button", name="Run", exact=True).click()
    wait_for(page, "() => document.body.innerText.includes('units kept')", RUN_WAIT_MS)
    settled(page)
    figures["positions_click_to_view_s"] = time.perf_counter() - started
    iframe = page.locator(".cv-root").first
    iframe.scroll_into_view_if_needed()
    page.wait_for_timeout(1500)
    graph_frame(page).get_by_role("button", name="fit").first.click()  # the whole graph in its frame
    shot(page, "explore-positions.png", iframe, full=True)
    if os.environ.get("CIRCUITVIZ_UPDATE_SCREENSHOTS") == "1":
        iframe.screenshot(path=str(DOCS_SCREENSHOT))
