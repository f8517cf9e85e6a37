"""Do the figures the checkout ships still hold under today's evaluator?

The Gallery's examples (``assets/gallery``) and the atlases (``assets/atlas``) are computed once
and shown many times; a change to the evaluator since they were built would leave the app showing
figures the code no longer makes (the IOI atlas once stayed two evaluator changes behind for five
days, unnoticed). Each stored circuit is evaluated again here, exactly as stored (its kept edges,
no pruning), and its NDF and necessity compared with the stored ones. Discovery is not rerun:
what is checked is what each number means, not whether a method would find the same circuit.

Used by ``tests/test_stored_figures.py`` (every Gallery example, two prompts of each atlas) and by
``scripts/build_atlas.py --check`` (every prompt); ``scripts/build_gallery.py --check`` prints the
Gallery's curves stored and now side by side.

The yardstick (``assets/faithfulness.json``, the About page's tables) is different: it stores
curves, not circuits, so ``yardstick_figures`` runs a row's method again on a stored prompt and
compares its curve. That checks the methods too (a change that makes Edge Pruning learn another
mask moves its row), so it is kept to the rows whose runs are deterministic and short.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch

from ..core.curves import CurvePoint
from ..core.results import CircuitResult
from ..core.tasks import PromptTask
from ..services.assets import gallery_dir, root

ATLAS_ROOT = root() / "atlas"
TOLERANCE = 1e-3  # NDF and necessity: stored against now (float32 passes batched differently)


@dataclass(frozen=True)
class Figure:
    """One stored figure and the same figure evaluated now."""

    where: str  # "gallery ioi" or "atlas ioi, ioi-00000"
    what: str  # "NDF" or "necessity"
    budget: int
    n_edges: int
    stored: float
    now: float

    @property
    def moved(self) -> float:
        if math.isnan(self.stored) and math.isnan(self.now):
            return 0.0
        return abs(self.now - self.stored)

    def line(self) -> str:
        digits = 0 if self.what == "edges kept" else 4
        return (
            f"{self.where}: {self.what} at budget {self.budget} ({self.n_edges} edges) "
            f"stored {self.stored:.{digits}f}, now {self.now:.{digits}f}"
        )


def _number(value) -> float:
    return float("nan") if value is None else float(value)


def _compared(where: str, budgets, stored_points, points) -> list[Figure]:
    """Edges kept, NDF and necessity of each budget's circuit, stored against now."""
    figures = []
    for budget, stored, now in zip(budgets, stored_points, points):
        n_stored = float(stored["n_edges"])
        figures.append(Figure(where, "edges kept", int(budget), now.n_edges, n_stored, float(now.n_edges)))
        figures.append(
            Figure(where, "NDF", int(budget), now.n_edges, _number(stored["ndf"]), _number(now.ndf))
        )
        if stored.get("necessity") is not None and now.necessity is not None:
            figures.append(
                Figure(
                    where,
                    "necessity",
                    int(budget),
                    now.n_edges,
                    _number(stored["necessity"]),
                    _number(now.necessity),
                )
            )
    return figures


def gallery_figures(model, slugs=None, folder: Path | None = None) -> list[Figure]:
    """Every stored Gallery example's curve (all of ``slugs``, default every one), evaluated now."""
    import json

    from ..entry.api import evaluate_circuits

    folder = folder or gallery_dir()
    figures = []
    for entry in json.loads((folder / "index.json").read_text(encoding="utf-8")):
        if slugs is not None and entry["slug"] not in slugs:
            continue
        state = torch.load(folder / f"{entry['slug']}.pt", map_location="cpu", weights_only=True)
        result = CircuitResult.from_state(state["result"])
        budgets = sorted(result.budgets)
        _, points = evaluate_circuits(model, result.task, [result.circuit(b) for b in budgets], budgets)
        stored = [
            {"n_edges": p.n_edges, "ndf": p.ndf, "necessity": p.necessity}
            for p in (result.point(b) for b in budgets)
        ]
        figures += _compared(f"gallery {entry['slug']}", budgets, stored, points)
    return figures


def atlas_names(folder: Path | None = None) -> list[str]:
    """The atlases the checkout ships (each a folder a batch run wrote)."""
    folder = folder or ATLAS_ROOT
    return sorted(p.name for p in folder.iterdir() if (p / "manifest.json").exists())


def atlas_figures(model, name: str, rows: int | None = 2, folder: Path | None = None) -> list[Figure]:
    """The first ``rows`` finished prompts of an atlas (None: every one), each prompt's circuit at
    every budget the table keeps, evaluated now on its own task with the atlas's token limit."""
    from ..batch.atlas import BatchTable
    from ..entry.api import evaluate_circuits

    batch = BatchTable.load((folder or ATLAS_ROOT) / name)
    max_tokens = int(batch.manifest.get("max_tokens") or 256)
    spec = batch.spec
    forward, backward = spec.edge_index
    figures = []
    for label in batch.labels:
        table = batch.rows(label)
        count = table.num_rows if rows is None else min(rows, table.num_rows)
        for row in table.slice(0, count).to_pylist():
            task = PromptTask(
                clean=row["clean"],
                corrupted=row["corrupted"],
                answer=row["answer"],
                foils=tuple(row["foils"] or ()),
                metric=row["metric"],
            )
            kept = list(row["circuit_budgets"])
            edges = torch.tensor(row["circuit_edges"], dtype=torch.long, device="cpu")
            bits = torch.tensor(row["circuit_bits"], dtype=torch.long, device="cpu")
            masks = []
            for position in range(len(kept)):
                mask = torch.zeros(spec.n_forward, spec.n_backward, dtype=torch.bool, device="cpu")
                chosen = edges[(bits >> position) & 1 == 1]
                mask[forward[chosen], backward[chosen]] = True
                masks.append(mask)
            _, points = evaluate_circuits(model, task, masks, kept, max_tokens=max_tokens)
            at = {b: i for i, b in enumerate(row["budgets"])}
            stored = [
                {
                    "n_edges": row["edges_kept"][at[b]],
                    "ndf": row["ndf"][at[b]],
                    "necessity": row["necessity"][at[b]],
                }
                for b in kept
            ]
            figures += _compared(f"atlas {name}, {row['task_id']}", kept, stored, points)
    return figures


def yardstick_figures(model, rows, prompts, path: Path | None = None) -> list[Figure]:
    """The yardstick's curves of ``rows`` (names of ``bench.yardstick.YARDSTICK_ROWS``) on the
    prompts at indices ``prompts`` of ``bench.prompts.YARDSTICK_PROMPTS``, run again now at the
    stored budgets (the Best-of-N family's row names its five variants)."""
    import json

    from ..methods import get_method
    from .prompts import YARDSTICK_PROMPTS
    from .yardstick import YARDSTICK_ROWS

    report = json.loads((path or root() / "faithfulness.json").read_text(encoding="utf-8"))
    budgets = [int(b) for b in report["budgets"]]
    figures = []
    for index in prompts:
        _, task = YARDSTICK_PROMPTS[index]
        entry = report["prompts"][index]
        if entry["prompt"] != task.clean:
            raise ValueError(f"the yardstick's prompt {index} is {entry['prompt']!r}, not {task.clean!r}")
        for row in rows:
            name, settings = YARDSTICK_ROWS[row]
            result = get_method(name).run_on(model, task, dict(settings), budgets=budgets)
            if row == "bon-family":  # its variants' curves, kept as dicts
                curves = {v: [CurvePoint(**p) for p in c] for v, c in result.details.curves.items()}
            else:
                curves = {row: list(result.curve)}
            for variant, points in curves.items():
                stored = entry["curves"][variant]
                figures += _compared(f"yardstick {variant}, prompt {index}", budgets, stored, points)
    return figures


def moved(figures: list[Figure], tolerance: float = TOLERANCE) -> list[Figure]:
    """The figures that moved by more than ``tolerance``."""
    return [f for f in figures if not f.moved <= tolerance]
