"""Where a batch's work runs: ``local`` (one model in this process) or ``ray`` (workers that each
load the model once and keep it, on one machine or a cluster).

Both run the same functions of ``work.py`` on the same groups, so they give the same results
(tested). Ray is optional: ``pip install 'circuitviz[ray]'``. Each Ray worker takes
``cpus_per_worker`` CPUs and ``gpus_per_worker`` GPUs (a fraction such as 0.5 puts two workers
on one GPU); ``address`` joins an existing cluster (whose workers must have circuitviz
installed), else a local Ray is started on this machine and stopped at the end.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from .dataset import Dataset, DatasetTask
from .work import (
    MaskGroup,
    ModelInfo,
    ModelSource,
    Outcome,
    WorkGroup,
    evaluate_group,
    generate,
    model_info,
    run_group,
    task_shapes,
)

EXECUTORS = ("local", "ray")
RAY_INSTALL = "pip install 'circuitviz[ray]'"

OnOutcomes = Callable[[list[Outcome]], None]
OnProgress = Callable[[float], None]


class ExecutorError(ValueError):
    """The executor cannot start; the message says what to do."""


class LocalExecutor:
    """Everything in this process, on one model loaded once."""

    name = "local"

    def __init__(self, source: ModelSource, model=None, store=None):
        self.source = source
        self.model = model
        self.store = store  # methods that keep intermediate results (Best-of-N) keep them here
        self.workers = 1

    def start(self) -> ModelInfo:
        if self.model is None:
            self.model = self.source.load()
        return model_info(self.model, self.source.model_id)

    def generate(self, family: str, n: int, seed: int, max_tokens: int, subjects=()) -> Dataset:
        return generate(self.model, family, n, seed, max_tokens, subjects)

    def shapes(self, tasks: list[DatasetTask], max_tokens: int) -> list:
        return task_shapes(self.model, tasks, max_tokens)

    def run(
        self, groups: Iterable[WorkGroup], on_outcomes: OnOutcomes, on_progress: OnProgress | None = None
    ):
        for group in groups:
            on_outcomes(run_group(self.model, self.source.model_id, group, self.store, on_progress))

    def evaluate(self, groups: Iterable[MaskGroup], on_found: Callable[[list], None]) -> None:
        for group in groups:
            on_found(evaluate_group(self.model, group))

    def close(self) -> None:
        pass


# ----- Ray --------------------------------------------------------------------------------------
def import_ray():
    """The ``ray`` module, or ExecutorError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise ExecutorError(
            f"The ray executor needs Ray, which is not installed; install it with `{RAY_INSTALL}` "
            "(in a checkout: `pip install -e '.[ray]'`), or use --executor local."
        ) from None
    return ray


class _Worker:
    """A Ray actor's state: the model, loaded once when the actor starts."""

    def __init__(self, source: ModelSource, threads: int):
        import torch

        torch.set_num_threads(max(1, threads))
        self.source = source
        self.model = source.load()

    def info(self) -> ModelInfo:
        return model_info(self.model, self.source.model_id)

    def generate(self, family: str, n: int, seed: int, max_tokens: int, subjects=()) -> Dataset:
        return generate(self.model, family, n, seed, max_tokens, subjects)

    def shapes(self, tasks: list[DatasetTask], max_tokens: int) -> list:
        return task_shapes(self.model, tasks, max_tokens)

    def run(self, group: WorkGroup) -> list[Outcome]:
        return run_group(self.model, self.source.model_id, group)

    def evaluate(self, group: MaskGroup) -> list:
        return evaluate_group(self.model, group)


def _package_root() -> str:
    return str(Path(__file__).resolve().parents[2])


class RayExecutor:
    """Ray actors, each holding the model; groups go to whichever worker is free."""

    name = "ray"

    def __init__(
        self,
        source: ModelSource,
        workers: int | None = None,
        cpus_per_worker: float = 1.0,
        gpus_per_worker: float = 0.0,
        address: str | None = None,
        local_cpus: int | None = None,
    ):
        if cpus_per_worker <= 0 or gpus_per_worker < 0:
            raise ExecutorError("--cpus-per-worker must be above 0 and --gpus-per-worker 0 or more.")
        if workers is not None and workers < 1:
            raise ExecutorError(f"--workers must be 1 or more, not {workers}.")
        self.source = source
        self.requested = workers
        self.cpus = float(cpus_per_worker)
        self.gpus = float(gpus_per_worker)
        self.address = address
        self.local_cpus = local_cpus
        self.actors: list = []
        self.started_ray = False
        self.ray = None

    @property
    def workers(self) -> int:
        return len(self.actors)

    def _init(self) -> None:
        ray = self.ray = import_ray()
        if ray.is_initialized():
            return
        if self.address:
            try:
                ray.init(address=self.address, log_to_driver=False)
            except (ConnectionError, RuntimeError, ValueError) as error:
                raise ExecutorError(
                    f"Cannot join the Ray cluster at {self.address} ({str(error)[:120]}); check --ray-address."
                ) from None
        else:
            path = os.pathsep.join(p for p in (_package_root(), os.environ.get("PYTHONPATH", "")) if p)
            ray.init(
                num_cpus=self.local_cpus,
                include_dashboard=False,
                log_to_driver=False,
                object_store_memory=256 * 2**20,
                runtime_env={
                    "env_vars": {"PYTHONPATH": path, "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "")}
                },
            )
        self.started_ray = True

    def _worker_count(self) -> int:
        resources = self.ray.cluster_resources()
        if self.gpus > 0:
            fits = math.floor(resources.get("GPU", 0.0) / self.gpus + 1e-9)
            what = f"{resources.get('GPU', 0.0):g} GPUs"
        else:
            fits = math.floor(resources.get("CPU", 0.0) / self.cpus + 1e-9)
            what = f"{resources.get('CPU', 0.0):g} CPUs"
        fits = min(fits, math.floor(resources.get("CPU", 0.0) / self.cpus + 1e-9))
        if fits < 1:
            raise ExecutorError(
                f"The Ray cluster has {what}, too few for one worker of {self.cpus:g} CPUs and "
                f"{self.gpus:g} GPUs; lower --cpus-per-worker/--gpus-per-worker."
            )
        if self.requested and self.requested > fits:
            raise ExecutorError(
                f"{self.requested} workers of {self.cpus:g} CPUs and {self.gpus:g} GPUs do not fit the "
                f"Ray cluster ({what}); ask for at most {fits}."
            )
        return self.requested or fits

    def start(self) -> ModelInfo:
        self._init()
        ray = self.ray
        actor = ray.remote(num_cpus=self.cpus, num_gpus=self.gpus)(_Worker)
        self.actors = [actor.remote(self.source, max(1, int(self.cpus))) for _ in range(self._worker_count())]
        infos = ray.get([a.info.remote() for a in self.actors])  # every worker has loaded the model
        return infos[0]

    def generate(self, family: str, n: int, seed: int, max_tokens: int, subjects=()) -> Dataset:
        return self.ray.get(self.actors[0].generate.remote(family, n, seed, max_tokens, tuple(subjects)))

    def shapes(self, tasks: list[DatasetTask], max_tokens: int) -> list:
        share = math.ceil(len(tasks) / len(self.actors)) or 1
        pieces = [tasks[i : i + share] for i in range(0, len(tasks), share)]
        found = self.ray.get(
            [
                self.actors[i % len(self.actors)].shapes.remote(piece, max_tokens)
                for i, piece in enumerate(pieces)
            ]
        )
        return [shape for piece in found for shape in piece]

    def _dispatch(self, call: str, work: Sequence, on_done: Callable) -> None:
        """Keep every worker busy with one piece of work; hand each answer on as it arrives."""
        ray, pending, queue = self.ray, {}, list(work)[::-1]
        idle = list(self.actors)
        while queue or pending:
            while queue and idle:
                actor = idle.pop()
                pending[getattr(actor, call).remote(queue.pop())] = actor
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                idle.append(pending.pop(ref))
                on_done(ray.get(ref))

    def run(
        self, groups: Iterable[WorkGroup], on_outcomes: OnOutcomes, on_progress: OnProgress | None = None
    ):
        self._dispatch("run", list(groups), on_outcomes)

    def evaluate(self, groups: Iterable[MaskGroup], on_found: Callable[[list], None]) -> None:
        self._dispatch("evaluate", list(groups), on_found)

    def close(self) -> None:
        if self.ray is None:
            return
        for actor in self.actors:
            self.ray.kill(actor)
        self.actors = []
        if self.started_ray:
            self.ray.shutdown()
            self.started_ray = False


def make_executor(name: str, source: ModelSource, store=None, model=None, **ray_options):
    """The executor called ``name`` (local or ray)."""
    if name == "local":
        return LocalExecutor(source, model=model, store=store)
    if name == "ray":
        import_ray()  # say how to install it before anything else starts
        return RayExecutor(source, **ray_options)
    raise ExecutorError(f"Unknown executor {name!r}; choose local or ray.")
