"""The method interface and the registry every page, command and benchmark reaches methods by.

A method turns (model, task, config, budgets) into a ``CircuitResult``. Most methods only score
edges; ``ScoringMethod`` does the rest for them in one shared way (the clean/corrupted runs,
top-N selection and pruning at every budget, one batched faithfulness curve), so every method is
measured the same way. Methods that choose circuits themselves (Best-of-N) override ``run``.
"""

from __future__ import annotations

import abc
import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import ClassVar

import torch

from ..evaluate import Evaluator, circuits_at_budgets
from ..graph import GraphSpec
from ..results import CircuitResult
from ..tasks import DEFAULT_MAX_TOKENS, PreparedTask, PromptTask, prepare_task

Progress = Callable[[str, float], None]


class UnknownMethodError(ValueError):
    """The method name is not registered; the message lists the ones that are."""


@dataclasses.dataclass(frozen=True)
class NoConfig:
    """A method without settings."""


def config_to_dict(config) -> dict:
    return dataclasses.asdict(config) if dataclasses.is_dataclass(config) else dict(config or {})


class Method(abc.ABC):
    """Base of every method: a name, a label, a config dataclass and ``run``."""

    name: ClassVar[str]
    label: ClassVar[str]
    summary: ClassVar[str] = ""
    Config: ClassVar[type] = NoConfig
    needs_corrupted: ClassVar[bool] = True

    def default_config(self):
        return self.Config()

    def make_config(self, values: dict | None = None):
        """A config from plain values (CLI flags, a form, JSON); unknown keys are refused."""
        values = dict(values or {})
        names = {f.name for f in dataclasses.fields(self.Config)}
        unknown = sorted(set(values) - names)
        if unknown:
            raise ValueError(
                f"{self.name} has no setting {', '.join(unknown)}; its settings are "
                f"{', '.join(sorted(names)) or 'none'}."
            )
        return self.Config(**values)

    @abc.abstractmethod
    def run(
        self,
        model,
        task: PromptTask,
        config=None,
        budgets: Sequence[int] = (),
        progress: Progress | None = None,
        model_id: str | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
    ) -> CircuitResult:
        """Discover the circuit of ``task`` at every budget; see ScoringMethod for the usual way."""


class ScoringMethod(Method):
    """A method that produces one edge-score matrix; circuits are its top-N edges, pruned."""

    @abc.abstractmethod
    def score(
        self,
        model,
        spec: GraphSpec,
        prepared: PreparedTask,
        evaluator: Evaluator,
        config,
        progress: Progress | None = None,
    ) -> torch.Tensor:
        """Edge scores, the estimated change of the metric when the edge is corrupted.

        Returns [n_forward, n_backward], zero off the edge mask.
        """

    def run(
        self,
        model,
        task: PromptTask,
        config=None,
        budgets: Sequence[int] = (),
        progress: Progress | None = None,
        model_id: str | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
    ) -> CircuitResult:
        config = config if config is not None else self.default_config()
        timings: dict[str, float] = {}
        start = time.perf_counter()
        spec = GraphSpec.from_model(model)
        prepared = prepare_task(model, task, max_tokens=max_tokens, need_corrupted=self.needs_corrupted)
        evaluator = Evaluator(model, spec, prepared)
        timings["clean_corrupted_s"] = time.perf_counter() - start

        start = time.perf_counter()
        scores = self.score(model, spec, prepared, evaluator, config, progress)
        scores = (scores.float() * spec.tensors(scores.device).edge_mask).nan_to_num(0.0)
        timings["scoring_s"] = time.perf_counter() - start

        start = time.perf_counter()
        budgets = sorted({int(b) for b in budgets})
        circuits = circuits_at_budgets(spec, scores, budgets)
        curve = evaluator.curve(circuits, budgets, progress)
        timings["evaluation_s"] = time.perf_counter() - start
        return CircuitResult(
            model_id=model_id or str(getattr(model.cfg, "model_name", "model")),
            graph=spec,
            task=task,
            method=self.name,
            config=config_to_dict(config),
            scores=scores.cpu(),
            baseline=evaluator.baseline,
            curve=curve,
            timings=timings,
            tokens={"clean": prepared.clean_str_tokens, "corrupted": prepared.corrupted_str_tokens},
            device=str(next(model.parameters()).device),
        )


_REGISTRY: dict[str, Method] = {}


def register(cls: type[Method]) -> type[Method]:
    """Class decorator: make a method reachable by its name."""
    _REGISTRY[cls.name] = cls()
    return cls


def get_method(name: str) -> Method:
    method = _REGISTRY.get(name.strip().lower()) if isinstance(name, str) else None
    if method is None:
        raise UnknownMethodError(f"Unknown method {name!r}; choose one of {', '.join(sorted(_REGISTRY))}.")
    return method


def available_methods() -> dict[str, Method]:
    return dict(_REGISTRY)
