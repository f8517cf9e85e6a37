"""RelP, relevance patching (Jafari et al. 2025): attribution patching whose backward pass follows
layer-wise relevance propagation rules instead of the plain gradient.

An edge u -> v scores ``(z'_u - z_u) . r_v`` as EAP does, with r_v the metric's "gradient" at v's
input computed by a backward pass in which norms are linear (scale fixed), an activation f passes
back f(x)/x and a gated MLP's product shares its relevance half and half between its factors
(``engine.relevance``). Two forward passes (clean, corrupted) and one backward, like EAP.
Attention follows ``attention``: "constant" (the default: the AH rule, the attention rule of the
paper's table) holds every pattern constant, so edges into queries and keys score 0; "gradient"
(the default rule set of the paper's released code, which leaves the AH rule out) lets the
softmax pass its gradient, so queries and keys receive relevance. On the embedded model over the
nine prompts the softmax's gradient raised the heads' Pearson with patching from 0.815 to 0.838
and lowered the MLPs' from 0.804 to 0.329 (EAP: 0.935, 0.534; docs/benchmarks.md), so the AH
rule stays the default.
With ``neurons`` on, every MLP neuron scores ``(a' - a) . r`` at its hidden activation, r the
same relevance backward pass's value there (``methods.neuron_nodes``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..core.text import given
from ..details.neurons import NeuronDetails
from ..engine.relevance import DEFAULT_RULES, relevance_hooks
from ..engine.scores import batched_gradient_scores
from .base import EDGE_CHANGE, Cost, ScoringMethod, gradient_cost
from .neuron_nodes import (
    check_neurons,
    neuron_cost,
    neuron_top_k_setting,
    neurons_setting,
    scores_with_neurons,
)
from .registry import register
from .settings import check_settings, setting

ATTENTION_RULES = ("constant", "gradient")


@dataclass(frozen=True)
class RelPConfig:
    """Settings of RelP: the rule for attention patterns (the other rules are fixed), and MLP
    neurons as nodes or not."""

    attention: str = setting(
        "constant",
        '"constant": attention patterns are constants (the AH rule), so edges into queries and keys '
        'score 0; "gradient": the softmax passes its gradient, so queries and keys get relevance (the '
        "default rules of the paper's released code).",
        choices=ATTENTION_RULES,
    )
    neurons: bool = neurons_setting()
    neuron_top_k: int = neuron_top_k_setting()

    def __post_init__(self):
        check_settings(self)
        check_neurons(self)
        object.__setattr__(self, "attention", str(self.attention).strip().lower())
        if self.attention not in ATTENTION_RULES:
            raise ValueError(f"attention must be 'constant' or 'gradient', not {given(self.attention)}.")


@register
class RelP(ScoringMethod):
    name = "relp"
    label = "RelP"
    summary = "Relevance patching: attribution patching with a backward pass by relevance-propagation rules."
    Config = RelPConfig
    score_meaning = f"relevance patching's estimate (relevance rules in the backward pass) of {EDGE_CHANGE}"
    calibration_family = ("eap",)  # EAP's passes with other rules: priced as EAP's until measured
    Details = NeuronDetails

    def estimate(self, config, spec, n_tokens, n_budgets) -> Cost:
        return gradient_cost(
            1, n_budgets, integrated=False, spec=spec, **neuron_cost(config, spec, n_tokens, 1)
        )

    def rules(self, config) -> frozenset[str]:
        """The relevance rules of a run (``engine.relevance.RULES``): all four, or all but the AH
        rule with ``attention=gradient``."""
        return DEFAULT_RULES if config.attention == "constant" else DEFAULT_RULES - {"ah"}

    def score_batch(self, contexts, config, progress=None):
        evaluators = [ctx.evaluator for ctx in contexts]
        model, spec = contexts[0].model, contexts[0].spec
        clean = torch.cat([e.clean_writers for e in evaluators])
        corrupted = torch.cat([e.corrupted_writers for e in evaluators])
        rules = self.rules(config)

        def batch_scores(differences):
            return batched_gradient_scores(
                model,
                spec,
                [ctx.prepared() for ctx in contexts],
                clean,
                corrupted,
                None,
                progress,
                extra_hooks=lambda: relevance_hooks(model, spec, rules=rules),
                split_inputs=True,
                neuron_differences=differences,
            )

        return scores_with_neurons(contexts, config, batch_scores)
