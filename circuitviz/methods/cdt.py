"""CD-T, contextual decomposition for transformers (Hsu et al. 2024-25): which components carry the
answer, from forward passes of the clean prompt alone, no gradient (docs/methods.md).

Contextual decomposition splits every activation x into a *relevant* part β (what flows from a
chosen source) and an *irrelevant* part γ (everything else), x = β + γ, and carries the split
through the network with fixed rules:
- a linear map: β' = W β, γ' = W γ + b (the bias goes to the irrelevant part; the paper shares it
  out by |Wβ| : |Wγ|, which makes no difference on Gemma, Llama or SmolLM2: they have no biases);
- an activation f: γ' = f(γ), β' = f(β + γ) - f(γ); a gated MLP's product f(g) l likewise,
  γ' = f(g_γ) l_γ and β' the rest (our extension: the paper's models have no gated MLP);
- a norm (``norms``): "frozen", the paper's, takes the scale of the whole activation in the clean
  run, so the norm is linear in each part (LayerNorm's centring too; its bias to γ); it diverges
  on Gemma-3 (docs/methods.md), so the default, "nonlinear", treats a norm as an activation:
  γ' = N(γ) at γ's own scale, β' = N(β + γ) - N(γ);
- attention: the pattern is the clean run's, taken as given, so a head is linear in its values
  and its queries and keys pass nothing on.
Under these rules γ at every site is exactly the model's own forward pass with the source's output
removed, every attention pattern (and, with frozen norms, every norm's scale) held at the clean
run's values (the logits' soft-cap, an activation, is applied as it is), and β = clean - γ. That is how it is
computed: one batched run, one sequence per source.

A source is a writer of the graph (the input, a head, an MLP) at every position at once, and its
relevant part is its whole output (``baseline="zero"``, the paper) or its clean-minus-corrupted
output (``baseline="corrupted"``: the corrupted output stays irrelevant, as the paper's mean
baseline keeps the mean). Scores on the graph:
- a node's relevance R(u) = L(clean) - L(γ's logits) (for the logit difference, the metric of β);
- an edge u -> v into a head's values or an MLP: R(V) x share(u, V), where V is the reader's node
  and share(u, V) = sum_p <β_V^u, β_V^V> / sum_p ||β_V^V||^2 is the part of V's own relevant output
  that CD attributes to u along every path (the paper's source-to-target decomposition); β_V^V is
  read off one run with every writer replaced by its baseline;
- u -> a head's query or key: 0 (the pattern is given);
- u -> logits: the direct part, L(clean) - L(final residual minus u's relevant output at the last
  position, final norm frozen).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..core.graph import GraphSpec
from ..core.tasks import PreparedTask
from ..details.decomposition import DecompositionDetails
from ..engine import sites
from ..engine.capture import WriterBuffer, writer_hooks
from ..engine.memory import evaluation_bytes_per_position
from ..engine.metric import metric_named
from ..engine.prefix import final_residual
from ..engine.scores import chunk_report
from ..measure.chunks import run_in_chunks
from ..models.adapter import adapter_of
from .base import PREPARE_PASSES, Cost, RunContext, ScoringMethod, curve_passes
from .flow_routes import NEUTRAL_PROMPT, NO_CORRUPTION_NOTE, use_neutral_corruption
from .registry import register
from .settings import check_settings, setting

BASELINES = ("zero", "corrupted")
NORM_RULES = ("nonlinear", "frozen")
SCORES_NOTE = (
    "an edge into a head's values or an MLP scores that node's relevance times the share of its "
    "relevant output CD attributes to the edge's source (every path); into the logits, the source's "
    "direct relevance; into queries and keys 0 (the attention pattern is given)"
)


@dataclass(frozen=True)
class CDTConfig:
    """What the relevant part of a source is."""

    baseline: str = setting(
        "zero",
        'a source\'s relevant part: its whole output ("zero", the paper) or its clean-minus-corrupted '
        'output ("corrupted": the corrupted output stays irrelevant).',
        choices=BASELINES,
    )

    norms: str = setting(
        "nonlinear",
        'how a norm splits the parts: "nonlinear" (an activation: the irrelevant part normalised by its own '
        "scale, the relevant part the rest) or \"frozen\" (linear at the clean run's scale, the paper's rule; "
        "it diverges on Gemma-3, whose post-norms scale small MLP outputs up).",
        choices=NORM_RULES,
    )

    def __post_init__(self):
        check_settings(self)
        if self.norms not in NORM_RULES:
            raise ValueError(f"norms must be 'nonlinear' or 'frozen', not {str(self.norms)[:30]!r}.")
        if self.baseline not in BASELINES:
            raise ValueError(f"baseline must be 'zero' or 'corrupted', not {str(self.baseline)[:30]!r}.")


@dataclass
class Decomposition:
    """What CD-T found on one prompt (every tensor on the model's device).

    relevance: [n_forward] R(u); direct: [n_forward] u's direct relevance to the metric;
    shares: [n_forward (source), n_forward (target)] share(u, V); clean_metric: L(clean).
    """

    relevance: torch.Tensor
    direct: torch.Tensor
    shares: torch.Tensor
    clean_metric: float


def _frozen_sites(model, spec: GraphSpec, frozen_norms: bool = True) -> list[str]:
    """Every attention pattern the model has, and (``frozen_norms``) every norm scale in its blocks."""
    adapter = adapter_of(model)
    # (q/k-norms need no freezing: the pattern they feed is frozen whole)
    names = [
        name
        for name in sites.norm_scales(spec)
        if frozen_norms
        and name != sites.FINAL_NORM_SCALE
        and not name.endswith(("q_norm.hook_scale", "k_norm.hook_scale"))
    ]
    names += [sites.attention_pattern(layer) for layer in range(spec.n_layers)]
    return [name for name in names if adapter.has_hook(name)]


def _source_sites(spec: GraphSpec) -> list[tuple[str, int | None]]:
    """(hook name, head or None) where each writer's output can be replaced, in forward order."""
    return [(sites.EMBEDDING, None)] + [sites.writer_site(spec, node) for node in range(1, spec.n_forward)]


def _record(model, tokens: torch.Tensor, names: list[str]) -> dict[str, torch.Tensor]:
    """The values at ``names`` of one plain run of ``tokens``."""
    adapter = adapter_of(model)
    kept: dict[str, torch.Tensor] = {}

    def keep(x, hook):
        kept[hook.name] = x.detach().clone()

    final_residual(model, tokens.to(adapter.device), [(name, keep) for name in names])
    return kept


class _FrozenReadout:
    """What a metric reads of the model (``unembed``) with the final norm's scale frozen at the
    clean run's, computed here rather than by a hook (a bridge's readout calls no hook).

    The scale is read off the norm's own output on the clean final residual x: with c(x) the
    centred (LayerNorm) or plain (RMSNorm) x, w and b its weight and bias, norm(x) = c(x) w / s + b,
    so s = <c w, c w> / <c w, norm(x) - b> whatever the norm's epsilon."""

    def __init__(self, adapter, clean_final: torch.Tensor):
        self.adapter, self.norm, self.scale = adapter, adapter.final_norm, None
        if self.norm is not None:
            x = clean_final[:, None, :]  # [1, 1, d_model]
            shaped = self._centred(x) * self._weight(x)
            normed = self.norm(x) - self._bias(x)
            self.scale = (shaped * shaped).sum(-1, keepdim=True) / (shaped * normed).sum(-1, keepdim=True)

    def _centred(self, x):
        return x - x.mean(-1, keepdim=True) if "LayerNorm" in type(self.norm).__name__ else x

    def _weight(self, x):
        weight = getattr(self.norm, "w", None)
        return weight if weight is not None else torch.ones_like(x[0, 0])

    def _bias(self, x):
        bias = getattr(self.norm, "b", None)
        return bias if bias is not None else torch.zeros_like(x[0, 0])

    def unembed(self, residual: torch.Tensor, ids: torch.Tensor | None = None) -> torch.Tensor:
        x = residual[:, None, :]
        if self.norm is not None:
            x = self._centred(x) / self.scale * self._weight(x) + self._bias(x)
        return self.adapter.logits_of_normed(x[:, 0], ids)


def _final_metric(prepared: PreparedTask, readout: _FrozenReadout, residual: torch.Tensor) -> torch.Tensor:
    """The task's metric of final residuals [b, d_model] read with the final norm frozen.  # [b]"""
    ids = torch.tensor([prepared.answer_id, *prepared.foil_ids], device=residual.device)
    return metric_named(prepared.task.metric).of_residual(readout, residual, ids)


def _frozen_value(frozen: dict[str, torch.Tensor], x: torch.Tensor, hook) -> torch.Tensor:
    """The clean run's value at ``hook`` in place of ``x``, one copy per row: an expanded view
    (no memory of its own per row) is refused by attention that reshapes its pattern with
    ``view`` (TransformerLens's ALiBi bridge, Falcon-RW's)."""
    return frozen[hook.name].expand_as(x).contiguous()


def _base_writers(model, spec: GraphSpec, tokens, frozen_names, frozen, base_sites) -> torch.Tensor:
    """Each writer's irrelevant output when it is the source: the clean run with every writer's
    output replaced by its corrupted one (``base_sites``) or by 0 (empty), norms frozen at the clean
    run's scales. A head is replaced at its mixed values, so it keeps its share of the layer's
    output bias (no head computes it) and, after a post-attention norm, takes the clean run's scale.
    # [pos, n_forward, d_model]"""
    adapter = adapter_of(model)
    buffer = WriterBuffer(spec, 1, tokens.shape[1], adapter.dtype, adapter.device)
    names = [sites.EMBEDDING, *(sites.head_z(layer) for layer in range(spec.n_layers))]
    names += [sites.mlp_out(layer) for layer in range(spec.n_layers)]

    def replace(x, hook):
        return base_sites[hook.name] if base_sites else torch.zeros_like(x)

    hooks = [(name, functools.partial(_frozen_value, frozen)) for name in frozen_names]
    hooks += [(name, replace) for name in names]
    final_residual(model, tokens, hooks + writer_hooks(model, spec, buffer))
    return buffer.values[0]


@torch.no_grad()
def decompose(
    model,
    spec: GraphSpec,
    prepared: PreparedTask,
    clean_writers: torch.Tensor,
    corrupted: bool = False,
    norms: str = "nonlinear",
    progress: Callable[[str, float], None] | None = None,
) -> Decomposition:
    """CD-T with every writer as a source in turn (the module docstring).

    clean_writers: [pos, n_forward, d_model] (the engine's writer outputs of the clean run);
    corrupted: the baseline is the corrupted run's output (else 0); norms: "frozen" (each norm
    linear at the clean run's scale, the paper) or "nonlinear" (a norm is an activation:
    γ' = N(γ), β' = N(β + γ) - N(γ)). ``progress``: the run's report, told the scoring's share
    behind it before each block of each chunk's pass (``_block_reports``)."""
    adapter = adapter_of(model)
    device = adapter.device
    tokens = prepared.clean_tokens.to(device)
    frozen_norms = norms == "frozen"
    frozen_names = _frozen_sites(model, spec, frozen_norms)
    places = _source_sites(spec)
    frozen = _record(model, tokens, frozen_names)
    if set(frozen) != set(frozen_names):
        raise ValueError(
            "CD-T cannot hold this model's norm scales and attention patterns at their clean values "
            f"(no value reached {sorted(set(frozen_names) - set(frozen))[0]}); use another method."
        )
    base_sites: dict[str, torch.Tensor] = {}  # the corrupted run's values where sources are replaced
    if corrupted:
        names = [sites.EMBEDDING, *(sites.head_z(layer) for layer in range(spec.n_layers))]
        base_sites = _record(
            model, prepared.corrupted_tokens, names + [sites.mlp_out(i) for i in range(spec.n_layers)]
        )

    # the clean final residual, and the readout with the final norm frozen at its scale
    clean_final = final_residual(model, tokens, [])  # [1, d_model]
    readout = _FrozenReadout(adapter, clean_final) if frozen_norms else adapter
    clean_metric = _final_metric(prepared, readout, clean_final)[0]

    # each writer's relevant output: its whole output less what stays irrelevant when it is the source
    relevant = clean_writers - _base_writers(model, spec, tokens, frozen_names, frozen, base_sites)
    direct = clean_metric - _final_metric(prepared, readout, clean_final - relevant[-1])
    own = (relevant * relevant).sum(dim=(0, 2))  # [n_forward] sum_p ||beta_V^V||^2

    n = spec.n_forward
    relevance = torch.zeros(n, dtype=clean_metric.dtype, device=device)
    dots = torch.zeros(n, n, dtype=clean_writers.dtype, device=device)

    def compute(rows: slice):
        chosen = list(range(rows.start, rows.stop))
        batch = len(chosen)
        found = torch.zeros(batch, n, dtype=clean_writers.dtype, device=device)

        freeze = functools.partial(_frozen_value, frozen)

        def remove(x, hook):
            x = x.clone()
            for row, node in enumerate(chosen):
                name, head = places[node]
                if name != hook.name:
                    continue
                if head is None:
                    x[row] = base_sites[name][0] if base_sites else 0.0
                else:
                    x[row, :, head] = base_sites[name][0, :, head] if base_sites else 0.0
            return x

        def sink(index, tensor):
            # <clean_V - gamma_V, relevant_V> summed over positions and the model dimension
            target = relevant[:, index]  # [pos, d] or [pos, H, d]
            tensor = tensor.to(clean_writers.device)  # from its layer's device (a split model's may differ)
            found[:, index] = ((clean_writers[:, index] - tensor) * target).sum(dim=(1, -1))

        hooks = [(name, freeze) for name in frozen_names]
        hooks += [(name, remove) for name in sorted({places[node][0] for node in chosen})]
        hooks += writer_hooks(model, spec, sink)
        hooks += _block_reports(spec.n_layers, progress, rows, n)
        residual = final_residual(model, tokens.expand(batch, -1), hooks)  # [batch, d_model]
        return clean_metric - _final_metric(prepared, readout, residual), found

    def commit(rows: slice, result) -> None:
        relevance[rows], dots[rows] = result

    run_in_chunks(
        model,
        "evaluate",
        n,
        prepared.n_positions,
        evaluation_bytes_per_position(spec, adapter.element_size),
        compute,
        commit,
    )
    if not torch.isfinite(relevance).all() and not frozen_norms:
        raise ValueError(
            f"CD-T's decomposition gave no finite relevance for {int((~torch.isfinite(relevance)).sum())} "
            f"of {n} sources on this model; use another method."
        )
    if not torch.isfinite(relevance).all():
        raise ValueError(
            f"CD-T's decomposition diverged on this model: with every norm frozen at the clean run's scale, "
            f"the irrelevant part of {int((~torch.isfinite(relevance)).sum())} of {n} sources grew without "
            "bound through the layers; set norms to nonlinear (--norms nonlinear on the command line)."
        )
    shares = torch.where(own > 0, dots / own.clamp_min(torch.finfo(own.dtype).tiny), torch.zeros_like(dots))
    return Decomposition(relevance, direct, shares, float(clean_metric))


def _block_reports(n_layers: int, progress, rows: slice, n_items: int) -> list:
    """Hooks that tell ``progress`` how far the decomposition has gone before each block of the
    chunk ``rows``'s forward pass ([] without one; a cancelled run's report raises there). On a CPU
    one chunk holds every source, and SmolLM2-135M's 301 took minutes on a busy machine while
    discover's line stood at 'score 0.0%' until the phase ended (2026-12-07)."""
    if progress is None:
        return []
    report = chunk_report(progress, rows, n_items)

    def hook_of(layer: int):
        def hook(value, hook):
            report(layer / n_layers)

        return hook

    return [(sites.resid_pre(layer), hook_of(layer)) for layer in range(n_layers)]


def edge_scores(spec: GraphSpec, found: Decomposition) -> torch.Tensor:
    """The graph's edge scores from a decomposition (the module docstring).  # [n_forward, n_backward]"""
    relevance, shares = found.relevance, found.shares
    scores = torch.zeros(spec.n_forward, spec.n_backward, dtype=relevance.dtype, device=relevance.device)
    for layer in range(spec.n_layers):
        heads = spec.head_forward(layer)
        values = spec.head_backward(layer, "v")
        scores[:, values] = shares[:, heads] * relevance[heads]
        mlp = spec.mlp_forward(layer)
        scores[:, spec.mlp_backward(layer)] = shares[:, mlp] * relevance[mlp]
    scores[:, spec.logits_backward] = found.direct
    return scores


@register
class CDT(ScoringMethod):
    name = "cd-t"
    label = "CD-T"
    summary = (
        "Contextual decomposition: each component's relevant part carried through the clean run with "
        "norms and attention patterns frozen; no corrupted prompt, no gradient."
    )
    score_meaning = SCORES_NOTE
    Config = CDTConfig
    needs_corrupted = False
    without_corrupted = (
        "Without one, NDF, necessity, the faithfulness curve and the decomposition's corrupted baseline "
        f"use a neutral prompt as the corrupted run ({NEUTRAL_PROMPT})."
    )
    scores_estimate_metric = False  # shares of decomposed relevance, not changes under the corruption

    def estimate(self, config, spec, n_tokens, n_budgets) -> Cost:
        # the clean records (about 2 passes), one decomposed sequence per writer, then the clean and
        # corrupted runs and the curve when measured
        passes = 2.0 + spec.n_forward + PREPARE_PASSES + curve_passes(n_budgets, spec)
        return Cost(passes=passes, prompt_passes=PREPARE_PASSES)

    Details = DecompositionDetails

    def score(self, ctx: RunContext, config) -> torch.Tensor:
        return self.score_with_details(ctx, config)[0]

    def score_with_details(self, ctx: RunContext, config):
        evaluator, spec = ctx.evaluator, ctx.spec
        corrupted = config.baseline == "corrupted"
        with ctx.timed("decomposition_s"):
            found = decompose(
                ctx.model,
                spec,
                ctx.prepared(),
                evaluator.clean_writers[0],
                corrupted,
                str(config.norms),
                ctx.progress,
            )
        if ctx.task.corrupted:
            measured = "the faithfulness curve patches to the task's corrupted prompt"
            measured += "" if corrupted else "; the decomposition did not use it"
        else:
            measured = NO_CORRUPTION_NOTE
            if corrupted:
                measured += " The corrupted baseline of the decomposition was that neutral prompt too."
        details = DecompositionDetails(
            baseline=str(config.baseline),
            clean_metric=found.clean_metric,
            relevance=dict(zip(spec.forward_names, found.relevance.double().cpu().tolist())),
            scores_note=SCORES_NOTE,
            notes=[measured],
        )
        return edge_scores(spec, found), details

    def run_batch(self, contexts, config, budgets, progress=None):
        """A task without a corrupted prompt is measured (and, with ``baseline="corrupted"``,
        decomposed) against the neutral prompt, as the flow routes are."""
        use_neutral_corruption(contexts)
        return super().run_batch(contexts, config, budgets, progress)
