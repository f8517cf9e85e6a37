"""The figures the checkout ships hold under today's evaluator: every Gallery example's curve and
the first prompts of each stored atlas, their circuits evaluated again (``bench.stored_figures``);
and the yardstick's rows of the short deterministic methods, run again on one prompt.

A change to the evaluator that moves a stored figure fails here, naming the figures and the
command that rebuilds them, instead of leaving the app to show numbers the code no longer makes.
"""

from __future__ import annotations

import pytest

from circuitviz.bench.stored_figures import (
    TOLERANCE,
    atlas_figures,
    atlas_names,
    gallery_figures,
    moved,
    yardstick_figures,
)

REBUILD = {
    "ioi": "python scripts/build_atlas.py --n 200 --families ioi",
    "arithmetic": "python scripts/build_atlas.py --n 200 --families arithmetic",
    "mmlu": "python benchmarks/bench_mmlu.py --threads 1 --models gemma-3-270m --skip-others --atlas assets/atlas/mmlu",
}


def _report(figures, command: str) -> str:
    shown = moved(figures)
    lines = [f.line() for f in sorted(shown, key=lambda f: -f.moved)[:8]]
    more = f"\n  ... and {len(shown) - 8} more" if len(shown) > 8 else ""
    return (
        f"{len(shown)} stored figures moved by more than {TOLERANCE} under today's evaluator; "
        f"rebuild them with `{command}`:\n  " + "\n  ".join(lines) + more
    )


def test_the_gallery_figures_hold_under_todays_evaluator(embedded_model):
    figures = gallery_figures(embedded_model)
    assert {f.what for f in figures} == {"edges kept", "NDF", "necessity"}
    assert len({f.where for f in figures}) >= 5  # every example was evaluated
    if moved(figures):
        pytest.fail(_report(figures, "python scripts/build_gallery.py"), pytrace=False)


@pytest.mark.parametrize("name", atlas_names())
def test_an_atlas_figures_hold_under_todays_evaluator(embedded_model, name):
    figures = atlas_figures(embedded_model, name, rows=2)
    assert len({f.where for f in figures}) == 2 and len({f.budget for f in figures}) >= 5
    if moved(figures):
        command = REBUILD.get(name, f"the command in assets/atlas/{name}/manifest.json")
        pytest.fail(_report(figures, command), pytrace=False)


# the yardstick's rows whose runs are short and deterministic, on its factual prompt (prompt 1),
# in one test; the Best-of-N family's one run checks its five rows
YARDSTICK_CHECKED = (
    "eap",
    "eap-ig",
    "edge-pruning",
    "ensemble",
    "relp",
    "eap-gp",
    "atp-star",
    "circuit-lasso",
    "flow-routes",
    "bon-family",
    "acc++",
    "cd-t",
    "cd-t-corrupted",
)
# the rest, one test each (9-45 CPU s each on prompt 1: about two minutes together on one worker)
YARDSTICK_SLOW = (
    "edge-pruning-from-eap",
    "ensemble-bootstrap",
    "eap-ig-activations",
    "acdc",
    "paraphrase-pruning",
)
BON_VARIANTS = ("single", "average", "bon", "ibon", "bon-csm")
YARDSTICK_REBUILD = (
    "python benchmarks/bench_faithfulness.py --threads 1 --no-node-effects --merge assets/faithfulness.json "
    "--methods <the rows> --json assets/faithfulness.json --markdown assets/faithfulness.md"
)


def test_the_yardstick_rows_hold_under_todays_methods(embedded_model):
    """A method or evaluator change that moves the About page's yardstick fails here, not months later."""
    figures = yardstick_figures(embedded_model, YARDSTICK_CHECKED, prompts=[1])
    rows = [v for row in YARDSTICK_CHECKED for v in (BON_VARIANTS if row == "bon-family" else [row])]
    assert {f.where.split(",")[0] for f in figures} == {f"yardstick {row}" for row in rows}
    assert len({f.budget for f in figures}) == 5
    if moved(figures):
        pytest.fail(_report(figures, YARDSTICK_REBUILD), pytrace=False)


def test_every_yardstick_row_is_checked():
    """A row added to the yardstick is added to its check too."""
    from circuitviz.bench.yardstick import YARDSTICK_ROWS

    assert sorted(YARDSTICK_CHECKED + YARDSTICK_SLOW) == sorted(YARDSTICK_ROWS)


@pytest.mark.slow
@pytest.mark.parametrize("row", YARDSTICK_SLOW)
def test_a_slow_yardstick_row_holds_under_todays_methods(embedded_model, row):
    """The yardstick's longer rows (warm-started Edge Pruning, the bootstrapped ensemble,
    activation-mode EAP-IG, ACDC, paraphrase pruning) on the factual prompt."""
    figures = yardstick_figures(embedded_model, [row], prompts=[1])
    assert {f.where for f in figures} == {f"yardstick {row}, prompt 1"}
    assert len({f.budget for f in figures}) == 5
    if moved(figures):
        pytest.fail(_report(figures, YARDSTICK_REBUILD), pytrace=False)


def test_a_moved_figure_is_caught(embedded_model, tmp_path):
    """The check can fail: an example whose stored NDF is changed by 0.01 is reported."""
    import json
    import shutil

    import torch

    from circuitviz.services.assets import gallery_dir

    entry = json.loads((gallery_dir() / "index.json").read_text())[0]
    shutil.copy(gallery_dir() / "index.json", tmp_path / "index.json")
    state = torch.load(gallery_dir() / f"{entry['slug']}.pt", map_location="cpu", weights_only=True)
    point = state["result"]["curve"][0]
    point["ndf"] = float(point["ndf"]) + 0.01
    torch.save(state, tmp_path / f"{entry['slug']}.pt")
    shown = moved(gallery_figures(embedded_model, slugs={entry["slug"]}, folder=tmp_path))
    assert [(f.what, f.budget) for f in shown] == [("NDF", int(point["budget"]))]
    assert shown[0].moved == pytest.approx(0.01, abs=1e-4)


def test_the_gallery_example_re_run_live_is_the_stored_one(embedded_model):
    """The Gallery's "Re-run live" on its first example found 28 edges of NDF 0.847 at budget 30 where
    the example showed 29 edges of NDF 0.850 (and at budget 100, 77 edges against 85): the examples
    were built before a change to Edge Pruning's learning (2026-12-04) and never rebuilt, which no
    test noticed, since the evaluator alone gave the stored figures again. Today's run of the
    example's own task, method, settings and budgets must give its stored circuits; one example
    catches a change to a method's discovery (each takes about 30 s)."""
    import json

    import torch

    from circuitviz.core.results import CircuitResult
    from circuitviz.entry.api import discover
    from circuitviz.services.assets import gallery_dir

    entry = json.loads((gallery_dir() / "index.json").read_text())[0]
    state = torch.load(gallery_dir() / f"{entry['slug']}.pt", map_location="cpu", weights_only=True)
    stored = CircuitResult.from_state(state["result"])
    now, _ = discover(
        embedded_model, stored.task, stored.method, stored.config, stored.budgets, entry["model_id"]
    )
    changed = [b for b in stored.budgets if not torch.equal(stored.circuit(b), now.circuit(b))]
    assert not changed, (
        f"The Gallery's {entry['slug']} example is not what {stored.method} finds today at budgets {changed} "
        f"(stored {[int(stored.circuit(b).sum()) for b in changed]} edges, now "
        f"{[int(now.circuit(b).sum()) for b in changed]}); rebuild it with `python scripts/build_gallery.py`."
    )
