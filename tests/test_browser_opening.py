"""Every way into Explore, in Chromium: a prompt opened from each stored atlas's table, from the
Gallery and from the MMLU picker lands in Explore inside the app and runs (at 1,000 and 1,500 px).

A file of its own, apart from the new user's walk in test_browser.py: `make test` hands each file
whole to one worker, and the two walks (about six minutes each, most of it waiting on the app)
side by side on one worker were the longest stretch of the suite. Its server, browser and
helpers are test_browser.py's.
"""

from __future__ import annotations

import json

import pytest
from browser_page import body_text, input_value, settled, shot, wait_for
from fresh_cache import fresh_cache
from test_browser import (  # noqa: F401  (browser: the module's Chromium fixture)
    ANSWER_LABEL,
    CORRUPTED_LABEL,
    OUTPUT,
    ROOT,
    RUN_WAIT_MS,
    _serve,
    browser,
    expect,
    pytestmark,
)

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
    assert input_value(page, "Prompt") == task["clean"]
    if "answer" in task:
        assert input_value(page, ANSWER_LABEL) == task["answer"]
        assert input_value(page, CORRUPTED_LABEL) == task["corrupted"]
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


def _open_atlas_row(page, app_url: str, atlas_name: str, row: int) -> None:
    page.goto(f"{app_url}/dataset")
    wait_for(page, "() => document.body.innerText.includes('CPR (MIB)')", 300_000)
    settled(page)
    page.locator('[data-testid="stButtonGroup"] button').filter(has_text=atlas_name).first.click()
    settled(page)
    page.get_by_role("tab", name="Prompts").click()
    page.wait_for_timeout(1500)
    grid = page.locator('[data-testid="stDataFrame"]').last
    grid.scroll_into_view_if_needed()
    page.wait_for_timeout(500)
    box = grid.bounding_box()  # the grid is a canvas: its row-selection column, row by row
    page.mouse.click(box["x"] + 18, box["y"] + 35 + 35 * row + 17)


def test_every_way_into_explore_opens_inside_the_app(opening_app, browser):  # noqa: F811 (the fixture)
    """A prompt opened from each stored atlas's table (IOI, arithmetic, MMLU), from the Gallery
    and from Explore's MMLU picker lands in Explore inside the app (its sidebar, its page list),
    with its own inputs, and runs: no traceback, at 1,000 and 1,500 px. An arithmetic row the
    validity check now refuses says so, beside its row and on Explore."""
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
            picks = (
                [0]
                if atlas_name != "arithmetic"
                else [0, next(i for i, r in enumerate(rows) if not refusal(r))]
            )
            for row in picks:
                _open_atlas_row(page, opening_app, atlas_name, row)
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
        page.get_by_text("Or pick an MMLU question").first.click()  # Explore's MMLU picker
        page.get_by_role("button", name="Use this question").click(timeout=180_000)
        settled(page)
        _inside_the_app(page)
        from circuitviz.batch.mmlu import load_mmlu, mmlu_subjects

        question = load_mmlu().of_subject(mmlu_subjects()[0])[0]
        refused = "refused as a task" in body_text(page)
        ended[f"mmlu-picker-{width}"] = _run_to_the_end(
            page,
            {"clean": question.prompt()},
            "This MMLU question" if refused else None,
            "mmlu-picker",
            width,
        )
        assert not errors, errors
        page.close()
    (OUTPUT / "opening-figures.json").write_text(json.dumps(ended, indent=1))
    assert set(ended.values()) <= {"result", "refused"}, ended
