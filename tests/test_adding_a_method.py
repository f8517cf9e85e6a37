"""The smallest method there can be, added the way docs/adding-a-method.md says: one class.

It scores every edge by the size of its writer's clean-to-corrupted change seen by nothing in
particular (|corrupted - clean| summed): a real, if naive, method. Registering it makes it
reachable by name from the API, priced by the limits, offered as command-line flags and app form
fields, and measured by the same faithfulness curve as every other method.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from circuitviz.methods import Cost, RunContext, ScoringMethod, available_methods, register
from circuitviz.methods.base import _REGISTRY
from circuitviz.methods.settings import setting


@dataclass(frozen=True)
class ChangeSizeConfig:
    """Settings of the change-size method."""

    power: float = setting(1.0, "the exponent applied to each writer's change size.")
    norm: str = setting("l2", 'which size to take, "l1" or "l2".', choices=("l1", "l2"))


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


@pytest.fixture
def registered():
    register(ChangeSize)
    yield _REGISTRY["change-size"]
    del _REGISTRY["change-size"]


def test_a_registered_method_runs_everywhere_methods_run(registered, tmp_path):
    from circuitviz.api import discover
    from circuitviz.bench.toy_models import IOI_TASK, tiny_model
    from circuitviz.cli import build_parser
    from circuitviz.limits import estimate_request
    from circuitviz.store import ResultStore

    model = tiny_model("gpt2")
    assert "change-size" in available_methods()
    result, cached = discover(
        model, IOI_TASK, "change-size", {"power": 2.0}, budgets=[5, 20], store=ResultStore(tmp_path)
    )
    again, cached_again = discover(
        model, IOI_TASK, "change-size", {"power": 2.0}, budgets=[5, 20], store=ResultStore(tmp_path)
    )
    assert (cached, cached_again) == (False, True) and torch.equal(again.scores, result.scores)
    # measured like every method: the curve's points are patched evaluations of its circuits
    assert [p.budget for p in result.curve] == [5, 20] and all(0 <= p.ndf <= 1 for p in result.curve)
    assert int(result.circuit(20).sum()) == result.point(20).n_edges <= 20
    # scored as its class says: each writer's row is constant, rows ordered by change size
    rows = result.scores[:, result.graph.logits_backward]
    assert bool((rows[1:] >= 0).all()) and float(rows.max()) > 0
    # priced by the limits from its own estimate, offered on the command line with its settings
    assert estimate_request(model, IOI_TASK, "change-size").sequences == 2 + 7
    parsed = build_parser().parse_args(
        [
            "discover",
            "--prompt",
            "x",
            "--answer",
            " y",
            "--method",
            "change-size",
            "--power",
            "3",
            "--norm",
            "l1",
        ]
    )
    assert (parsed.setting_power, parsed.setting_norm) == (3.0, "l1")
    with pytest.raises(SystemExit):  # a choice outside the field's choices is refused by the parser
        build_parser().parse_args(["discover", "--prompt", "x", "--answer", " y", "--norm", "l3"])


def test_a_registered_method_gets_a_form(registered):
    from circuitviz.methods.base import setting_flags

    flags = {flag.dest: flag for flag in setting_flags()}
    assert flags["power"].methods == ("change-size",) and flags["power"].kind is float
    assert flags["norm"].choices == ("l1", "l2")
    assert flags["power"].help == "the exponent applied to each writer's change size."
