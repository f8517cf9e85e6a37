"""The calls the CLI, the app and the benchmarks share: discover a circuit, evaluate one.

``discover`` goes through the result store, so the same (model, task, method, config, budgets)
is computed once; ``evaluate_circuits`` scores any circuits (from a file, another method, a
user's selection) on a task with the same batched evaluation every method uses.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import torch

from .evaluate import Baseline, CurvePoint, Evaluator
from .graph import prune
from .keys import content_key
from .limits import Limits, check_run, estimate_request
from .methods import config_to_dict, get_method
from .methods.base import Progress, RunContext
from .models.adapter import adapter_of, model_dtype
from .parsing import parse_whole_numbers
from .results import CircuitResult
from .store import ResultStore
from .tasks import DEFAULT_MAX_TOKENS, PromptTask, prepare_task
from .text import shown_number

DEFAULT_BUDGETS = (50, 100, 200, 500, 1000, 2000, 5000)


def parse_budgets(text: str) -> list[int]:
    """'50,100,200' -> budgets, edge counts of 0 or more."""
    return parse_whole_numbers(
        text,
        "Budget {part} is not a whole number of edges; write e.g. 50,100,200.",
        refuse=lambda value: (
            f"Budget {shown_number(value)} is negative; budgets count edges, so use 0 or more."
            if value < 0
            else None
        ),
        empty="No budgets given; write edge counts such as 50,100,200.",
    )


def request_key(model, model_id: str, task: PromptTask, method: str, config, budgets, max_tokens: int) -> str:
    """The store key of a discovery request."""
    return request_key_of(model_id, str(model_dtype(model)), task, method, config, budgets, max_tokens)


def request_key_of(
    model_id: str, dtype: str, task: PromptTask, method: str, config, budgets, max_tokens: int
) -> str:
    """``request_key`` from the model's id and dtype alone (a batch's driver, whose workers hold
    the model, keys its items with this)."""
    return content_key(
        kind="discover",
        model=model_id,
        dtype=dtype,
        task=task.to_dict(),
        method=method,
        config=config_to_dict(config),
        budgets=sorted(int(b) for b in budgets),
        max_tokens=max_tokens,
    )


def discover(
    model,
    task: PromptTask,
    method: str = "eap-ig",
    config: dict | object | None = None,
    budgets: Sequence[int] = DEFAULT_BUDGETS,
    model_id: str | None = None,
    store: ResultStore | None = None,
    progress: Progress | None = None,
    max_tokens: int = DEFAULT_MAX_TOKENS,
) -> tuple[CircuitResult, bool]:
    """Run (or fetch from ``store``) a method on a task. Returns (result, came from the store).

    ``store`` is the run's one result store: the method keeps what it caches there too (Best-of-N's
    score matrices); None computes everything and keeps nothing.
    """
    chosen = get_method(method)
    if config is None or isinstance(config, dict):
        config = chosen.make_config(config)
    model_id = model_id or str(getattr(model.cfg, "model_name", "model"))

    def compute() -> CircuitResult:
        # refuse before any work when the request is over the configured limits (limits.py)
        limits = dataclasses.replace(Limits.load(), max_tokens=max_tokens)
        check_run(estimate_request(model, task, chosen.name, config, n_budgets=len(budgets)), limits)
        ctx = RunContext(model, task, model_id, store, progress, max_tokens)
        return chosen.run(ctx, config, sorted({int(b) for b in budgets}))

    if store is None:
        return compute(), False
    key = request_key(model, model_id, task, chosen.name, config, budgets, max_tokens)
    return store.get_or_compute(key, compute)


def evaluate_circuits(
    model,
    task: PromptTask,
    circuits: Sequence[torch.Tensor],
    budgets: Sequence[int] | None = None,
    prune_dead: bool = False,
    max_tokens: int = DEFAULT_MAX_TOKENS,
) -> tuple[Baseline, list[CurvePoint]]:
    """Faithfulness of given circuit masks [n_forward, n_backward] on a task, in one batch."""
    spec = adapter_of(model).spec
    prepared = prepare_task(model, task, max_tokens=max_tokens)
    evaluator = Evaluator(model, spec, prepared)
    masks = [prune(spec, c) if prune_dead else c & spec.edge_mask for c in circuits]
    if not masks:
        return evaluator.baseline, []
    stacked = torch.stack(masks)
    budgets = list(budgets) if budgets is not None else [int(m.sum()) for m in masks]
    return evaluator.baseline, evaluator.curve(stacked, budgets)
