"""Datasets: batch discovery over many prompts (locally or on Ray) and the circuit atlas.

``run`` is the Python form of ``circuitviz batch``::

    from circuitviz.batch import run
    report = run("out/ioi", generate=("ioi", 500, 0), methods=["eap-ig"], budgets="mib")
    report = run("out/mmlu", generate=("mmlu", 10, 0), subjects="marketing,astronomy", methods=["bon"])

``atlas`` reads the folder back (``atlas.BatchTable.load``) and computes what the prompts'
circuits share. docs/datasets.md describes the folder, the executors and the atlas.
"""

from __future__ import annotations

from pathlib import Path

from ..methods import get_method
from ..models import EMBEDDED_MODEL
from ..services.store import ResultStore
from .dataset import Dataset, DatasetError, DatasetTask, read_dataset, read_tasks
from .executors import EXECUTORS, ExecutorError, LocalExecutor, RayExecutor, make_executor
from .generate import GENERATED_FAMILIES, generate_tasks
from .mmlu import resolve_subjects
from .runner import BatchReport, BatchRequest, BatchState, MethodRun, ProgressBar, run_batch
from .work import ModelSource

__all__ = [
    "EXECUTORS",
    "GENERATED_FAMILIES",
    "BatchReport",
    "BatchRequest",
    "BatchState",
    "Dataset",
    "DatasetError",
    "DatasetTask",
    "ExecutorError",
    "LocalExecutor",
    "MethodRun",
    "ModelSource",
    "ProgressBar",
    "RayExecutor",
    "generate_tasks",
    "make_executor",
    "read_dataset",
    "read_tasks",
    "run",
    "run_batch",
]


def run(
    out: str | Path,
    *,
    dataset: str | Path | None = None,
    tasks: list[DatasetTask] | None = None,
    generate: tuple[str, int, int] | None = None,
    subjects=(),
    methods=("eap-ig",),
    settings: dict | None = None,
    budgets="mib",
    model_id: str | None = None,
    device: str | None = None,
    dtype: str | None = None,
    model=None,
    source: ModelSource | None = None,
    executor: str = "local",
    store=None,
    progress=None,
    log=None,
    ray_options: dict | None = None,
    **options,
) -> BatchReport:
    """Run a batch: a dataset file, ``tasks`` or ``generate=(family, n, seed)`` x ``methods``
    (names; ``settings`` apply to every method that has them) x ``budgets`` into ``out``.
    ``generate=("mmlu", n, seed)`` draws n valid MMLU questions of each of ``subjects`` (names
    comma separated or a list, or "all"; ``batch.mmlu_tasks``).

    ``model`` runs on an already loaded model (local executor only); else ``source`` or
    (``model_id``, ``device``, ``dtype``) say what to load. ``store`` defaults to the shared
    result store. ``options`` are ``BatchRequest`` fields (batch_tasks, keep_edges, top_edges,
    consensus, max_tokens, command).
    """
    problems, origin = [], ""
    if subjects:
        subjects = tuple(resolve_subjects(subjects))
    if dataset is not None:
        loaded = read_dataset(dataset)
        tasks, problems, origin = loaded.tasks, loaded.problems, str(dataset)
    settings = dict(settings or {})
    runs = []
    unused = set(settings)
    for name in methods:
        method = get_method(name)
        fields = {f for f in method.Config.__dataclass_fields__}
        runs.append(MethodRun(method.name, {k: v for k, v in settings.items() if k in fields}))
        unused -= fields
    if unused:
        raise ValueError(
            f"No method of the batch has the setting {', '.join(sorted(unused))}; "
            "see `circuitviz methods` for each method's settings."
        )
    if source is None:
        model_id = model_id or (
            str(getattr(model.cfg, "model_name", "")) if model is not None else EMBEDDED_MODEL
        )
        source = ModelSource(model_id=model_id, device=device, dtype=dtype)
    store = store if store is not None else ResultStore()
    if model is not None and executor != "local":
        raise ValueError("A loaded model can only run the local executor; give model_id for Ray.")
    chosen = make_executor(executor, source, store=store, model=model, **(ray_options or {}))
    request = BatchRequest(
        out=Path(out),
        methods=runs,
        budgets=budgets,
        tasks=tasks,
        generate=generate,
        subjects=tuple(subjects),
        source=origin,
        problems=problems,
        **options,
    )
    try:
        return run_batch(request, chosen, store, progress=progress, log=log)
    finally:
        chosen.close()
