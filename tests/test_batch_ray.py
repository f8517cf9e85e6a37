"""The Ray executor: a real local Ray with 2 CPUs, two workers that each load the model once,
and the same results as the local executor."""

import functools

import pyarrow.parquet as pq
import pytest
import torch

from circuitviz.batch import DatasetTask, ModelSource, run
from circuitviz.batch.executors import ExecutorError, RayExecutor
from circuitviz.bench.toy_models import tiny_model
from circuitviz.core.tasks import PromptTask
from circuitviz.services.store import ResultStore

TASKS = [
    PromptTask(
        f"When {a} and {b} went to the {place} , {b} gave a {thing} to",
        f"When Alice and Bob went to the {place} , Carl gave a {thing} to",
        f" {a}",
        (f" {b}",),
    )
    for a, b, place, thing in [
        ("Mary", "John", "store", "drink"),
        ("Tom", "Anna", "park", "ball"),
        ("John", "Mary", "store", "ball"),
        ("Anna", "Tom", "park", "drink"),
    ]
] + [
    PromptTask("The capital of France is", "The capital of Italy is", " Paris", (" Rome",)),
    PromptTask("The capital of Italy is", "The capital of France is", " Rome", (" Paris",)),
    PromptTask("The capital of Italy is", "The capital of France is", " Mary John", (" Paris",)),
]
BUDGETS = [3, 8, 20]


def _batch(tmp_path, name, executor, **options):
    source = ModelSource("tiny-gpt2-0", factory=functools.partial(tiny_model, "gpt2"))
    return run(
        tmp_path / name,
        tasks=[DatasetTask(f"t{i}", task) for i, task in enumerate(TASKS)],
        methods=["eap-ig", "eap"],
        settings={"ig_steps": 3},
        budgets=BUDGETS,
        source=source,
        executor=executor,
        store=ResultStore(tmp_path / f"store-{name}"),
        batch_tasks=2,
        keep_edges=20,
        **options,
    )


@pytest.mark.slow  # starts a local Ray and two worker processes: 3 min at load 15
def test_ray_workers_give_the_local_executors_results(tmp_path):
    import ray

    local = _batch(tmp_path, "local", "local")
    remote = _batch(tmp_path, "ray", "ray", ray_options={"workers": 2, "local_cpus": 2})
    assert not ray.is_initialized()  # the local Ray it started is stopped again
    assert remote.executor == "ray" and remote.workers == 2
    assert (remote.items, remote.failed) == (local.items, local.failed) == (14, 2)
    mine = pq.read_table(tmp_path / "ray" / "results.parquet").to_pylist()
    theirs = pq.read_table(tmp_path / "local" / "results.parquet").to_pylist()
    workers = {row["worker"] for row in mine if row["status"] == "done"}
    assert len(workers) == 2  # both workers took groups, each with its own process
    for a, b in zip(mine, theirs):
        assert (a["key"], a["status"], a["error"]) == (b["key"], b["status"], b["error"])
        if a["status"] != "done":
            continue
        assert a["ndf"] == pytest.approx(b["ndf"], abs=1e-9)
        assert a["clean_metric"] == pytest.approx(b["clean_metric"], abs=1e-10)
        assert (a["circuit_edges"], a["circuit_bits"]) == (b["circuit_edges"], b["circuit_bits"])
        assert a["top_edges"][:10] == b["top_edges"][:10]
        stored = ResultStore(tmp_path / "store-ray").get(a["key"])
        other = ResultStore(tmp_path / "store-local").get(b["key"])
        assert torch.allclose(stored.scores.double(), other.scores.double(), atol=1e-9)
    assert (
        pq.read_table(tmp_path / "ray" / "consensus.parquet").num_rows
        == pq.read_table(tmp_path / "local" / "consensus.parquet").num_rows
    )


@pytest.mark.slow  # starts a local Ray to ask it for CPUs (17 s at load 15)
def test_ray_refuses_workers_that_do_not_fit():
    executor = RayExecutor(
        ModelSource("x", factory=functools.partial(tiny_model, "gpt2")), workers=3, local_cpus=2
    )
    try:
        with pytest.raises(ExecutorError, match="ask for at most 2"):
            executor.start()
    finally:
        executor.close()
    with pytest.raises(ExecutorError, match="--cpus-per-worker"):
        RayExecutor(ModelSource("x"), cpus_per_worker=0)
