"""ACC++ as a registered method: the traced circuit as the engine's result, with its position graph.

The result is an ordinary ``CircuitResult``: the signals are projected on the engine's edges
(``c -> a{l}.h{h}<q|k>`` scored by summed IG, seeds ``c -> logits`` by their share of direct
effect), the circuit at a budget is the top-N of those edges (never an edge ACC++ did not find),
and ``extra`` holds the position-resolved graph (``circuitviz.acc.graph``), the knockout check
and the SVD cache's state.

Faithfulness: with a corrupted prompt, the engine's usual patching curve over the budgets.
Without one, the curve is measured inside the circuit (``circuitviz.acc.ablation``): at budget
N the signals of the top-N edges are kept and every other found signal knocked out; the
"corrupted" baseline is the run with all of them knocked out. The paper's check (found signals
versus as many random ones) is always in ``extra["faithfulness"]["knockout"]``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch

from ..acc.ablation import knockout_check
from ..acc.forward import run_forward
from ..acc.graph import circuit_json, engine_scores, prune_to_logits
from ..acc.svd import load_svd
from ..acc.trace import Tracer, TraceSettings
from ..evaluate import Evaluator
from ..graph import GraphSpec, top_n
from ..results import CircuitResult
from ..tasks import DEFAULT_MAX_TOKENS, PromptTask, prepare_task
from .base import Method, Progress, config_to_dict, register


@dataclass(frozen=True)
class ACCConfig:
    """ACC++ settings.

    k: threshold constant of tau(d) = k / (sources d attends over); the paper uses 1.5 to 2.5
    direct_top_k: components with the largest direct effect on the answer to trace from
    max_depth: steps back from the answer (0: no limit; each step goes to an earlier layer)
    max_decisions: attention decisions traced at most (breadth-first, so the nearest first)
    max_signals: signals removed at most per decision side
    ig_steps: quadrature nodes of the integrated gradients through the softmax
    n_random: random draws of the knockout's control (0: skip it)
    seed: random seed of those draws
    """

    k: float = 2.0
    direct_top_k: int = 10
    max_depth: int = 0
    max_decisions: int = 200
    max_signals: int = 200
    ig_steps: int = 64
    n_random: int = 5
    seed: int = 0

    def __post_init__(self):
        if not (isinstance(self.k, (int, float)) and 0 < float(self.k) <= 1000):
            raise ValueError(f"k must be a positive number (the paper uses 1.5 to 2.5), not {self.k!r}.")
        for name, low in (
            ("direct_top_k", 1),
            ("max_depth", 0),
            ("max_decisions", 1),
            ("max_signals", 1),
            ("ig_steps", 2),
            ("n_random", 0),
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"{name} must be a whole number of at least {low}, not {value!r}.")
        if self.ig_steps > 1000:
            raise ValueError(f"ig_steps must be at most 1000, not {self.ig_steps}.")

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


def _json_safe(value):
    """NaN and infinities are not JSON: write them as null, recursively."""
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if isinstance(value, dict):
        return {key: _json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(item) for item in value]
    return value


def acc_circuits(spec: GraphSpec, scores: torch.Tensor, budgets: Sequence[int]) -> dict[int, torch.Tensor]:
    """The circuit at each budget: the top-N found edges (no unfound edge), kept if they reach logits."""
    found = (scores != 0) & spec.edge_mask
    return {int(b): prune_to_logits(spec, top_n(spec, scores, int(b)) & found) for b in budgets}


@register
class ACCPlusPlus(Method):
    name = "acc++"
    label = "ACC++"
    summary = (
        "Attention causal communication: which upstream signals (singular directions of a head's "
        "query-key form) make each head attend where it does; one forward pass, no corrupted prompt."
    )
    Config = ACCConfig
    needs_corrupted = False

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
        spec = GraphSpec.from_model(model)
        prepared = prepare_task(model, task, max_tokens=max_tokens, need_corrupted=False)

        svd = load_svd(model)
        timings["svd_s"] = svd.seconds
        start = time.perf_counter()
        forward = run_forward(model, prepared.clean_tokens)
        timings["forward_s"] = time.perf_counter() - start

        tracer = Tracer(model, forward, svd, config.settings())
        trace = tracer.run(prepared, progress)
        timings.update(trace.timings)
        tokens = prepared.clean_str_tokens
        circuit = circuit_json(spec, trace, tokens)
        scores = engine_scores(spec, circuit)

        full_budget = int(((scores != 0) & spec.edge_mask).sum())
        budgets = sorted({int(b) for b in budgets} | {full_budget})
        circuits = acc_circuits(spec, scores, budgets)

        start = time.perf_counter()
        report, knockout_curve, knockout_baseline = knockout_check(
            model, spec, svd, trace, prepared, [(b, circuits[b]) for b in budgets]
        )
        timings["knockout_s"] = time.perf_counter() - start
        if progress:
            progress("knockout", 1.0)

        start = time.perf_counter()
        if task.corrupted:
            evaluator = Evaluator(model, spec, prepared)
            distinct: dict[bytes, int] = {}
            slot_of = [distinct.setdefault(circuits[b].numpy().tobytes(), len(distinct)) for b in budgets]
            firsts = [budgets[slot_of.index(slot)] for slot in range(len(distinct))]
            points = evaluator.curve(torch.stack([circuits[b] for b in firsts]), firsts, progress)
            curve = [replace(points[slot], budget=b) for b, slot in zip(budgets, slot_of)]
            baseline = evaluator.baseline
            kind = "patching"
        else:
            curve, baseline, kind = knockout_curve, knockout_baseline, "signal-knockout"
        timings["evaluation_s"] = time.perf_counter() - start

        extra = {
            "kind": "acc++",
            **circuit,
            "full_circuit_budget": full_budget,
            "faithfulness": {
                "kind": kind,
                "note": (
                    "NDF by patching the corrupted prompt's activations into every edge outside the circuit."
                    if kind == "patching"
                    else "No corrupted prompt: at each budget the top-N edges' signals are kept and every "
                    "other found signal is knocked out; 0 = all found signals knocked out, 1 = clean run."
                ),
                "knockout": report,
                "knockout_curve": [point.to_dict() for point in knockout_curve],
            },
            "svd": {"cached": svd.cached, "seconds": svd.seconds, "path": svd.path, "bytes": svd.n_bytes},
        }
        return CircuitResult(
            model_id=model_id or str(getattr(model.cfg, "model_name", "model")),
            graph=spec,
            task=task,
            method=self.name,
            config=config_to_dict(config),
            scores=scores,
            baseline=baseline,
            curve=curve,
            timings=timings,
            circuits=circuits,
            tokens={"clean": tokens, "corrupted": prepared.corrupted_str_tokens},
            device=str(next(model.parameters()).device),
            extra=_json_safe(extra),
        )
