"""ACC++ as a registered method: the traced circuit as the engine's result, with its position graph.

The result is an ordinary ``CircuitResult``: the signals are projected on the engine's edges
(``c -> a{l}.h{h}<q|k>`` scored by summed IG, seeds ``c -> logits`` by their share of direct
effect), the circuit at a budget is the top-N of those edges (never an edge ACC++ did not find),
and its ``ACCDetails`` hold the position-resolved graph (``circuitviz.acc.circuit``), the knockout check
and the SVD cache's state.

Faithfulness: with a corrupted prompt, the engine's usual patching curve over the budgets.
Without one, the curve is measured inside the circuit (``circuitviz.acc.ablation``): at budget
N the signals of the top-N edges are kept and every other found signal knocked out; the
"corrupted" baseline is the run with all of them knocked out. The paper's check (found signals
versus as many random ones) is always in ``details.faithfulness["knockout"]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch

from ..acc.ablation import knockout_check
from ..acc.circuit import circuit_json, engine_scores
from ..acc.completion import completed_scores
from ..acc.forward import check_supported, run_forward
from ..acc.svd import load_svd
from ..acc.trace import Tracer, TraceSettings
from ..core.results import CircuitResult
from ..core.text import given
from ..details.acc import ACCDetails, acc_circuits
from ..measure.evaluate import curves_of_tasks
from .acc_cost import acc_cost, acc_passes
from .base import Cost, Method, OneOff, RunContext
from .registry import register
from .settings import check_settings, ig_steps_setting, setting

COMPLETION_NOTE = (
    "The patching curve measures the traced circuit completed with the value inputs of its heads "
    "and the inputs of its MLPs, read from the input and the circuit's own earlier nodes "
    "(ACC++ traces queries and keys only); the knockout checks the signals alone."
)


@dataclass(frozen=True)
class ACCConfig:
    """ACC++ settings."""

    k: float = setting(
        2.0,
        "threshold constant of tau(d) = k / (sources d attends over), above 0; the paper uses 1.5 to 2.5",
        high=1000.0,
    )
    direct_top_k: int = setting(
        10, "components with the largest direct effect on the answer to trace from", low=1
    )
    max_depth: int = setting(
        0, "steps back from the answer (0: no limit; each step goes to an earlier layer)", low=0
    )
    max_decisions: int = setting(
        200, "attention decisions traced at most (breadth-first, so the nearest first)", low=1
    )
    max_signals: int = setting(200, "signals removed at most per decision side", low=1)
    ig_steps: int = ig_steps_setting(
        64, "quadrature nodes of the integrated gradients through the softmax", low=2
    )
    n_random: int = setting(5, "random draws of the knockout's control (0: skip it)", low=0)
    seed: int = setting(0, "random seed of the knockout's control draws")

    def __post_init__(self):
        if not (isinstance(self.k, (int, float)) and 0 < float(self.k) <= 1000):
            raise ValueError(f"k must be a positive number (the paper uses 1.5 to 2.5), not {given(self.k)}.")
        check_settings(self)  # every bound its fields declare

    def settings(self) -> TraceSettings:
        return TraceSettings(
            k=float(self.k),
            direct_top_k=self.direct_top_k,
            max_depth=self.max_depth,
            max_decisions=self.max_decisions,
            max_signals=self.max_signals,
            ig_steps=self.ig_steps,
            n_random=self.n_random,
            seed=self.seed,
        )


@register
class ACCPlusPlus(Method):
    name = "acc++"
    label = "ACC++"
    summary = (
        "Attention causal communication: which upstream signals (singular directions of a head's "
        "query-key form) make each head attend where it does; one forward pass, no corrupted prompt."
    )
    Config = ACCConfig
    Details = ACCDetails
    needs_corrupted = False
    without_corrupted = (
        "Without one, the curve knocks signals out instead of patching: at each budget the circuit's "
        "signals are kept and every other signal ACC++ found is knocked out (NDF 0 = all knocked out, "
        "1 = the clean run), and necessity is not measured."
    )
    has_signals_view = True
    scores_estimate_metric = False  # signal attributions to attention decisions, completed
    score_meaning = (
        "into a query or key, the summed integrated-gradients attribution of the signals it carries "
        "to that head's attention decision; into the logits, the source's share of the direct "
        "effect; a completion edge (value and MLP inputs, which ACC++ does not trace) scores just "
        "below the strongest traced edge out of the node it feeds"
    )
    over_graph_keeps = (
        "ACC++'s whole circuit (its traced edges and their completion), not the whole graph (ACC++ keeps "
        "no edge it did not find)"
    )
    flat_curve_note = (
        "even with its heads' value paths and its MLPs' inputs added "
        "(ACC++ traces queries and keys only), the circuit does not carry the answer here; its own "
        "check is the knockout on the Signals page."
    )

    def estimate(self, config, spec, n_tokens, n_budgets) -> Cost:
        return acc_cost(config, spec, n_tokens, n_budgets, corrupted=True)

    def estimate_for_task(self, model, task, config, spec, n_tokens, n_budgets) -> Cost:
        """Without a corrupted prompt no evaluator runs: the knockout is the curve."""
        return acc_cost(config, spec, n_tokens, n_budgets, corrupted=bool(task.corrupted))

    def passes_done(self, result) -> float | None:
        """The run's passes as it went: the decisions it traced, the knockout's draws and distinct
        circuits, and the patching curve's circuits where it had a corrupted prompt."""
        details = result.details
        if not isinstance(details, ACCDetails) or not details.faithfulness:
            return None
        faithfulness = details.faithfulness
        circuits = len({point.get("n_edges") for point in faithfulness.get("knockout_curve") or []})
        return acc_passes(
            len(details.decisions),
            int((faithfulness.get("knockout") or {}).get("n_random_draws", 0)),
            max(circuits, 1),
            corrupted=faithfulness.get("kind") == "patching",
            n_tokens=len(details.tokens) or 1,
            spec=result.graph,
            ig_steps=int(self.as_config(result.config or {}).ig_steps),
        )

    def one_off(self, model) -> OneOff | None:
        """A model's first ACC++ run computes its heads' SVD (4.0-9.0 s of a 15.9 s first run on
        Gemma-3-270M, whose estimate left it out), then reads it from disk in 0.1 s."""
        from ..acc.svd import svd_ready, svd_seconds

        if svd_ready(model):
            return None
        heads = model.cfg.n_layers * model.cfg.n_heads
        return OneOff(svd_seconds(model), f"the SVD of the model's {heads:,} heads, once per model")

    def added_budgets(self, result) -> set[int]:
        """The whole traced circuit's budget, always evaluated beside those asked."""
        full = getattr(result.details, "full_circuit_budget", None)
        return {int(full)} if full is not None else set()

    def run_task(self, ctx: RunContext, config, budgets: Sequence[int]) -> CircuitResult:
        config = self.as_config(config)
        model, spec = ctx.model, ctx.spec
        prepared = ctx.prepared(need_corrupted=False)

        check_supported(model)  # before the SVD, which would fail on what the forward refuses
        svd = load_svd(model, progress=ctx.progress)  # a first run's SVD reports each head
        ctx.timings["svd_s"] = svd.seconds
        with ctx.timed("forward_s"):
            forward = run_forward(model, prepared.clean_tokens)

        trace = Tracer(model, forward, svd, config.settings()).run(prepared, ctx.progress)
        ctx.timings.update(trace.timings)
        circuit = circuit_json(spec, trace, prepared.clean_str_tokens)
        traced = engine_scores(spec, circuit)  # the signals: queries, keys, logits
        scores = completed_scores(spec, traced)  # with the value and MLP inputs of the traced nodes

        full_budget = int(((scores != 0) & spec.edge_mask).sum())
        budgets = sorted({int(b) for b in budgets} | {full_budget})
        circuits = acc_circuits(spec, scores, budgets)

        # at each budget the signals of the circuit the result keeps (and draws and writes) are kept:
        # the knockout curve of the top-N traced edges alone counted and measured another circuit
        # (SmolLM2's capital of France: '45 edges kept' at budget 343 beside a 343-edge circuit)
        with ctx.timed("knockout_s"):
            check = (lambda: ctx.report("knockout", 0.0)) if ctx.progress is not None else None
            report, knockout_curve, knockout_baseline = knockout_check(
                model, spec, svd, trace, prepared, [(b, circuits[b]) for b in budgets], check
            )
        ctx.report("knockout", 1.0)

        with ctx.timed("evaluation_s"):
            curve, baseline, kind = self._curve(ctx, budgets, circuits, knockout_curve, knockout_baseline)
        note = (
            "NDF by patching the corrupted prompt's activations into every edge outside the circuit."
            if kind == "patching"
            else "No corrupted prompt: at each budget the top-N edges' signals are kept and every "
            "other found signal is knocked out; 0 = all found signals knocked out, 1 = clean run."
        )
        details = ACCDetails(
            **circuit,
            full_circuit_budget=full_budget,
            faithfulness={
                "kind": kind,
                "note": note,
                "knockout": report,
                "knockout_curve": [point.to_dict() for point in knockout_curve],
            },
            svd={"cached": svd.cached, "seconds": svd.seconds, "path": svd.path, "bytes": svd.n_bytes},
            completion={
                "note": COMPLETION_NOTE,
                "traced_edges": int(((traced != 0) & spec.edge_mask).sum()),
                "completion_edges": full_budget - int(((traced != 0) & spec.edge_mask).sum()),
            },
        )
        details = ACCDetails.from_dict(details.to_dict())  # plain, NaN-free data, as it is stored
        return ctx.result(
            self.name, config, scores, curve, circuits, details, baseline=baseline, need_corrupted=False
        )

    @staticmethod
    def _curve(ctx: RunContext, budgets, circuits, knockout_curve, knockout_baseline):
        """The patching curve with a corrupted prompt, else the knockout curve inside the circuit."""
        if not ctx.task.corrupted:
            return knockout_curve, knockout_baseline, "signal-knockout"
        evaluator = ctx.evaluator
        distinct: dict[bytes, int] = {}
        slot_of = [distinct.setdefault(circuits[b].cpu().numpy().tobytes(), len(distinct)) for b in budgets]
        firsts = [budgets[slot_of.index(slot)] for slot in range(len(distinct))]
        points = curves_of_tasks(
            [evaluator], torch.stack([circuits[b] for b in firsts])[None], firsts, ctx.progress
        )[0]
        curve = [replace(points[slot], budget=b) for b, slot in zip(budgets, slot_of)]
        return curve, evaluator.baseline, "patching"
