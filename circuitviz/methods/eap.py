"""Edge attribution patching and its integrated-gradients variants, and exact edge patching.

All of them score an edge u -> v by how much the metric moves when u's output, as seen by v,
switches from its clean to its corrupted value:
- EAP: ``(z'_u - z_u) . dL/d(input of v)`` with the gradient at the clean run;
- EAP-IG (inputs): the gradient averaged over m runs whose embeddings go from corrupted to
  clean (``z' + k/m (z - z')``, k = 1..m), all steps in one batched forward/backward;
- EAP-IG (activations): each writer group's (input, a layer's heads, an MLP) output is
  interpolated alone, and u's row uses the gradients of the runs that interpolated u's group;
- exact: patch one edge at a time and measure the metric (each edge's own effect, exactly; slow).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..core.graph import GraphSpec
from ..details.neurons import NeuronDetails
from ..engine import sites
from ..engine.gradients import SummedGradients, clean_residuals, reader_gradients
from ..engine.scores import batched_gradient_scores, gradient_scores, score_dtype, scoring_checks
from ..measure.evaluate import Evaluator
from ..models.adapter import adapter_of, model_device, model_dtype
from .base import EDGE_CHANGE, OMIT_DEFAULT, Cost, RunContext, ScoringMethod, curve_passes, gradient_cost
from .neuron_nodes import (
    check_neurons,
    neuron_cost,
    neuron_top_k_setting,
    neurons_setting,
    scores_with_neurons,
)
from .registry import register
from .settings import check_settings, ig_steps_setting, setting


def positions_setting():
    """The ``positions`` setting of the gradient methods: off by default, and then left out of
    the config's dict (``OMIT_DEFAULT``), so runs without it keep their keys and JSON."""
    field_ = setting(
        False,
        "score, select, prune and patch every (edge, position) unit: a circuit over token positions "
        "(budgets count units).",
    )
    return dataclasses.field(default=False, metadata={**field_.metadata, OMIT_DEFAULT: True})


def _zero_scores(model, spec: GraphSpec) -> torch.Tensor:
    """An empty score matrix on the model's device, in the precision scores accumulate in."""
    return torch.zeros(
        spec.n_forward, spec.n_backward, dtype=score_dtype(model_dtype(model)), device=model_device(model)
    )


def _differences(evaluator: Evaluator) -> torch.Tensor:
    """Corrupted minus clean writer outputs.  # [1, pos, n_forward, d_model]"""
    return evaluator.corrupted_writers - evaluator.clean_writers


def _gradient_scores_of(
    contexts: Sequence[RunContext], steps: int | None, progress=None, config=None
) -> list[tuple[torch.Tensor, NeuronDetails | None]]:
    """EAP (``steps`` None) or EAP-IG scores of one task or several of one prompt length, their
    gradient passes shared (``batched_gradient_scores``); with ``config.neurons`` the MLP neurons'
    scores from the same passes, and their circuits, in each task's details (``scores_with_neurons``).
    # each [n_forward, n_backward]"""
    evaluators = [ctx.evaluator for ctx in contexts]
    clean = torch.cat([e.clean_writers for e in evaluators])  # [n, pos, n_forward, d_model]
    corrupted = torch.cat([e.corrupted_writers for e in evaluators])
    prepared = [ctx.prepared() for ctx in contexts]
    model, spec = contexts[0].model, contexts[0].spec

    def batch_scores(differences):
        return batched_gradient_scores(
            model, spec, prepared, clean, corrupted, steps, progress, neuron_differences=differences
        )

    return scores_with_neurons(contexts, config, batch_scores)


def _position_scores_of(ctx: RunContext, steps: int | None) -> torch.Tensor:
    """EAP (``steps`` None) or EAP-IG scores of one task's (edge, position) units, from the same
    passes as its edge scores.  # [n_forward, n_backward, pos]"""
    evaluator = ctx.evaluator
    clean, corrupted = evaluator.clean_writers, evaluator.corrupted_writers
    return batched_gradient_scores(
        ctx.model, ctx.spec, [ctx.prepared()], clean, corrupted, steps, ctx.progress, positions=True
    )[0]


@dataclass(frozen=True)
class EAPConfig:
    """EAP: one gradient at the clean run; over positions or not."""

    positions: bool = positions_setting()
    neurons: bool = neurons_setting()
    neuron_top_k: int = neuron_top_k_setting()

    def __post_init__(self):
        check_settings(self)
        check_neurons(self)


@register
class EAP(ScoringMethod):
    name = "eap"
    label = "EAP"
    summary = "Edge attribution patching: one gradient at the clean prompt, times the corruption's change."
    Config = EAPConfig
    score_meaning = f"attribution patching's estimate of {EDGE_CHANGE}"
    Details = NeuronDetails

    def estimate(self, config, spec, n_tokens, n_budgets) -> Cost:
        return gradient_cost(
            1, n_budgets, integrated=False, spec=spec, **neuron_cost(config, spec, n_tokens, 1)
        )

    def score_batch(self, contexts, config, progress=None):
        return _gradient_scores_of(contexts, None, progress, config)

    def score_positions(self, ctx: RunContext, config):
        return _position_scores_of(ctx, None)


@dataclass(frozen=True)
class IGConfig:
    """Its steps, and whether it runs over positions."""

    ig_steps: int = ig_steps_setting(
        20, "points on the path from the corrupted to the clean input (the paper uses 20)."
    )
    positions: bool = positions_setting()

    def __post_init__(self):
        check_settings(self)


@dataclass(frozen=True)
class EAPIGConfig(IGConfig):
    """EAP-IG's: its steps, over positions or not, and MLP neurons as nodes or not."""

    neurons: bool = neurons_setting()
    neuron_top_k: int = neuron_top_k_setting()

    def __post_init__(self):
        check_settings(self)
        check_neurons(self)


@register
class EAPIG(ScoringMethod):
    name = "eap-ig"
    label = "EAP-IG (inputs)"
    summary = "Integrated gradients along the path from the corrupted to the clean input embedding."
    Config = EAPIGConfig
    score_meaning = f"integrated gradients' estimate (along the input embedding) of {EDGE_CHANGE}"
    Details = NeuronDetails

    def estimate(self, config, spec, n_tokens, n_budgets) -> Cost:
        steps = int(config.ig_steps)
        return gradient_cost(steps, n_budgets, spec=spec, **neuron_cost(config, spec, n_tokens, steps))

    def score_batch(self, contexts, config, progress=None):
        return _gradient_scores_of(contexts, int(config.ig_steps), progress, config)

    def score_positions(self, ctx: RunContext, config):
        return _position_scores_of(ctx, int(config.ig_steps))


@register
class EAPIGActivations(ScoringMethod):
    name = "eap-ig-activations"
    label = "EAP-IG (activations)"
    summary = "Integrated gradients along each component group's own path from corrupted to clean output."
    Config = IGConfig
    score_meaning = f"integrated gradients' estimate (along each group's output) of {EDGE_CHANGE}"

    def estimate(self, config, spec, n_tokens, n_budgets) -> Cost:
        # 2L + 1 groups, block l's two running L - l of the L blocks: the embedding's whole pass
        # and 2 x (L + 1) / 2 whole passes for the rest
        groups = spec.n_layers + 2
        cost = gradient_cost(config.ig_steps * groups, n_budgets, spec=spec)
        return dataclasses.replace(cost, ig_steps=int(config.ig_steps))

    def score(self, ctx: RunContext, config):
        return self._scores(ctx, config, positions=False)

    def score_positions(self, ctx: RunContext, config):
        return self._scores(ctx, config, positions=True)

    def _scores(self, ctx: RunContext, config, positions: bool):
        """The activation-IG scores, summed over positions or (``positions``) not."""
        model, spec, prepared, evaluator = ctx.model, ctx.spec, ctx.prepared(), ctx.evaluator
        steps = int(config.ig_steps)
        groups = sites.writer_group_sites(spec)
        clean = evaluator.clean_writers[0]  # [pos, n_forward, d_model]
        corrupted = evaluator.corrupted_writers[0]
        differences = _differences(evaluator)[0]  # [pos, n_forward, d_model]
        device = clean.device
        # which writer group owns each row of the score matrix
        row_group = torch.zeros(spec.n_forward, dtype=torch.long, device=device)
        for g, (_, index) in enumerate(groups):
            row_group[index] = g
        # the groups of block l run from block l: below it every row is the clean run (its residual
        # stream kept once) and no reader there reads a changed writer; the embedding's from the start
        residuals = clean_residuals(model, spec, prepared) if adapter_of(model).starts_at_layer else None
        starts = [(g - 1) // 2 if g > 0 and residuals is not None else 0 for g in range(len(groups))]

        def batch_pass(jobs, rows: slice, progress=None):
            batch_jobs = jobs[rows]
            group_of = torch.tensor([g for g, _ in batch_jobs], device=device)
            alpha = torch.tensor([k / steps for _, k in batch_jobs], dtype=clean.dtype, device=device)
            alpha = alpha[:, None, None]
            present = {g for g, _ in batch_jobs}

            def interpolated(index: slice):
                start_value = corrupted[:, index].sum(1)  # [pos, d_model]
                end_value = clean[:, index].sum(1)
                return start_value + alpha * (end_value - start_value)  # [b, pos, d_model]

            def replace(x, hook, group, index):
                if group not in present:
                    return x
                # x sits on its layer's device (a split model's may differ from the model's first)
                rows = (group_of == group)[:, None, None].to(x.device)
                return torch.where(rows, interpolated(index).to(x.device), x)

            hooks = [
                (name, lambda x, hook, g=g, index=index: replace(x, hook, g, index))
                for g, (name, index) in enumerate(groups)
                if g > 0
            ]

            def input_replacement(x):
                return torch.where((group_of == 0)[:, None, None], interpolated(slice(0, 1)), x)

            start = min(starts[g] for g in present)
            gradients, _ = reader_gradients(
                model,
                spec,
                prepared,
                len(batch_jobs),
                input_replacement,
                extra_hooks=hooks + scoring_checks(spec.n_layers, progress, rows, len(jobs)),
                start=start,
                start_residual=residuals[start] if start > 0 else None,
            )
            # a sequence's gradients score only the rows of the group it interpolated: the steps
            # of one group are summed first, then contracted once with that group's rows
            members = sorted(present)
            local = torch.tensor([members.index(g) for g, _ in batch_jobs], device=device)
            listed = torch.tensor(members, device=device)
            owned = (listed[:, None] == row_group[None, :]).to(differences.dtype)  # [groups, n_forward]
            summed = SummedGradients(gradients, local, len(members))
            return summed, differences[None] * owned[:, None, :, None], None, None

        # every (group, step) pair is one sequence; the sequences of one starting block together
        segments = {}
        for g in range(len(groups)):
            segments.setdefault(starts[g], []).extend((g, k) for k in range(1, steps + 1))
        total, done, scores = len(groups) * steps, 0, None
        for jobs in segments.values():

            def progress(phase, fraction, done=done, size=len(jobs)):
                ctx.progress(phase, (done + fraction * size) / total)

            progress = progress if ctx.progress else None  # each block of a pass reports through it

            part = gradient_scores(
                model,
                spec,
                len(jobs),
                prepared.n_positions,
                lambda rows, jobs=jobs, progress=progress: batch_pass(jobs, rows, progress),
                progress=progress,
                positions=positions,
            )
            scores = part if scores is None else scores.add_(part)
            done += len(jobs)
        return scores / steps


@dataclass(frozen=True)
class ExactConfig:
    """Its one setting."""

    max_edges: int = setting(20000, "refuse graphs with more edges than this (one patched run per edge).")


@register
class ExactPatching(ScoringMethod):
    name = "exact"
    label = "Exact patching"
    summary = (
        "Corrupt one edge at a time and measure the metric: each edge's effect alone, exactly (what "
        "the attribution methods estimate), one run per edge; edges that matter only together score "
        "low."
    )
    Config = ExactConfig
    score_meaning = f"measured by patching one edge at a time: {EDGE_CHANGE}"

    def estimate(self, config, spec, n_tokens, n_budgets) -> Cost:
        # the 2: the evaluator's clean and corrupted runs, read back when this process kept them
        return Cost(
            passes=2.0 + min(spec.n_edges, int(config.max_edges)) + curve_passes(n_budgets, spec),
            prompt_passes=2.0,
        )

    def score(self, ctx: RunContext, config):
        model, spec, evaluator = ctx.model, ctx.spec, ctx.evaluator
        n_edges = spec.n_edges
        if n_edges > config.max_edges:
            raise ValueError(
                f"Exact patching needs one run per edge and this model has {n_edges} edges, over "
                f"the limit of {config.max_edges}; use eap-ig, or raise max_edges."
            )
        device = evaluator.device
        graph = spec.tensors(device)
        forward, backward = graph.edge_index
        scores = _zero_scores(model, spec)
        chunk = evaluator.chunk_size
        for start in range(0, n_edges, chunk):
            index = torch.arange(start, min(start + chunk, n_edges), device=device)
            circuits = graph.edge_mask.expand(len(index), -1, -1).clone()
            circuits[torch.arange(len(index), device=device), forward[index], backward[index]] = False
            values = evaluator.metrics(circuits)
            scores[forward[index], backward[index]] = (values - evaluator.baseline.clean).to(scores.dtype)
            ctx.report("score", min(1.0, (start + len(index)) / n_edges))
        return scores
