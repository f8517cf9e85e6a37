"""A batch of IOI prompts on a tiny random model, written to a folder as the Dataset page's tests
open it: the app's model loader stubbed to the same tiny model, so the page never loads a real one."""

from __future__ import annotations

from circuitviz.batch import DatasetTask, run
from circuitviz.bench.toy_models import tiny_model
from circuitviz.core.tasks import PromptTask
from circuitviz.models.catalog import EMBEDDED_MODEL
from circuitviz.services.store import ResultStore


def tiny_loader(model_id, device):
    return tiny_model("gpt2", n_layers=2, n_heads=2)


def ioi_batch(tmp_path, monkeypatch, names, methods, settings, budgets, keep_edges, **options):
    """The folder of a batch of one IOI prompt per (answer, foil) name pair of ``names``."""
    import circuitviz.ui.loaders as loaders

    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(loaders, "MODEL_LOADER", tiny_loader)
    tasks = [
        DatasetTask(
            f"p{i}",
            PromptTask(
                f"When {a} and {b} went to the store , {b} gave a drink to",
                "When Alice and Bob went to the park , Carl gave a ball to",
                f" {a}",
                (f" {b}",),
            ),
            family="ioi",
        )
        for i, (a, b) in enumerate(names)
    ]
    model = tiny_loader("tiny", None)
    model.cfg.model_name = EMBEDDED_MODEL  # the app's loader is stubbed: this id loads the tiny model
    run(
        tmp_path / "batch",
        tasks=tasks,
        methods=methods,
        settings=settings,
        budgets=budgets,
        model=model,
        model_id=EMBEDDED_MODEL,
        store=ResultStore(tmp_path / "cache" / "results"),
        keep_edges=keep_edges,
        **options,
    )
    return tmp_path / "batch"
