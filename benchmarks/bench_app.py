"""How fast the app answers: first paint, a budget-slider move, opening a gallery example.

Prints figures; asserts nothing. The in-browser figures (first paint of a fresh server, slider
answer end to end, gallery open) come from the browser test, which writes them to
test-output/browser-timings.json; run it first to have them printed here too:

    .venv/bin/python -m pytest -q tests/test_browser.py
    .venv/bin/python benchmarks/bench_app.py
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

FIRST_PAINT_IMPORTS = (
    "import time, sys; start = time.perf_counter(); "
    "import streamlit, circuitviz.ui.sidebar, circuitviz.ui.state, circuitviz.ui.loaders, circuitviz.ui.inputs; "
    "print(time.perf_counter() - start, 'torch' in sys.modules)"
)


def first_paint_imports(repeats: int = 3) -> None:
    """What the app imports before its first paint and the prompt box, in a fresh interpreter (no torch)."""
    times = []
    for _ in range(repeats):
        output = subprocess.run(
            [sys.executable, "-c", FIRST_PAINT_IMPORTS], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.split()
        times.append(float(output[0]))
        torch_loaded = output[1] == "True"
    print(
        f"first paint imports (streamlit + circuitviz.ui): median {statistics.median(times):.2f} s "
        f"over {repeats}; torch imported before the first paint: {torch_loaded}"
    )


def gallery_and_slider() -> None:
    """Opening each stored example and drawing it at every budget (one slider move each)."""
    import torch

    from circuitviz import render
    from circuitviz.core.results import CircuitResult
    from circuitviz.services.assets import gallery_dir

    folder = gallery_dir()
    index = json.loads((folder / "index.json").read_text())
    for entry in index:
        start = time.perf_counter()
        state = torch.load(folder / f"{entry['slug']}.pt", weights_only=True)
        result = CircuitResult.from_state(state["result"])
        opened = time.perf_counter() - start
        moves = []
        for budget in result.budgets:
            start = time.perf_counter()
            drawing = render.result_graph_html(result, budget, labels=state["labels"])
            moves.append((time.perf_counter() - start, budget, len(drawing.edges)))
        worst = max(moves)
        print(
            f"{entry['slug']:<16} open {opened * 1000:5.0f} ms; graph redraw per budget: median "
            f"{statistics.median(m[0] for m in moves) * 1000:4.0f} ms, worst {worst[0] * 1000:4.0f} ms "
            f"(budget {worst[1]:,}, {worst[2]:,} edges drawn)"
        )


def browser_figures() -> None:
    path = ROOT / "test-output" / "browser-timings.json"
    if not path.exists():
        print("no browser figures yet (run tests/test_browser.py)")
        return
    figures = json.loads(path.read_text())
    print("in the browser (tests/test_browser.py): " + ", ".join(f"{k} {v:.2f}" for k, v in figures.items()))


if __name__ == "__main__":
    first_paint_imports()
    gallery_and_slider()
    browser_figures()
