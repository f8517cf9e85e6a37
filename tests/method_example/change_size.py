"""The smallest method there can be, written the way docs/adding-a-method.md says: this one file.

It scores every edge by the size of its writer's clean-to-corrupted change (|corrupted - clean|
summed over positions): a real, if naive, method. ``tests/test_adding_a_method.py`` drops this
file where the registry looks (a folder of the ``circuitviz.methods`` package's path, or a module
behind a ``circuitviz.methods`` entry point) and finds it reachable by name from the API, priced
by the limits, offered as command-line flags and app form fields, and measured by the same
faithfulness curve as every other method -- with no other file touched.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from circuitviz.methods import Cost, RunContext, ScoringMethod, register
from circuitviz.methods.settings import setting


@dataclass(frozen=True)
class ChangeSizeConfig:
    """Settings of the change-size method."""

    power: float = setting(1.0, "the exponent applied to each writer's change size.")
    norm: str = setting("l2", 'which size to take, "l1" or "l2".', choices=("l1", "l2"))


@register
class ChangeSize(ScoringMethod):
    name = "change-size"
    label = "Change size"
    summary = "Every edge scores the size of its writer's clean-to-corrupted change (a naive baseline)."
    Config = ChangeSizeConfig

    def estimate(self, config, spec, n_tokens, n_budgets) -> Cost:
        return Cost(passes=2.0 + n_budgets)  # the clean and corrupted runs, then the curve

    def score(self, ctx: RunContext, config) -> torch.Tensor:
        evaluator = ctx.evaluator
        change = evaluator.corrupted_writers - evaluator.clean_writers  # [1, pos, n_forward, d_model]
        order = 1 if config.norm == "l1" else 2
        size = change.norm(p=order, dim=-1).sum(dim=(0, 1)) ** config.power  # [n_forward]
        return size[:, None].expand(ctx.spec.n_forward, ctx.spec.n_backward)
