"""Recursive backward tracing: from the answer logit to the signals behind each attention decision.

1. Seeds: the components (at the last position) with the largest direct effect on the answer
   logit (or the answer-minus-foil logit difference), through the final norm frozen at this
   run. A head is split by the source it reads, so a seed head names its attention decision.
2. Every decision (head, destination d, source s) with weight at least tau(d) = k / n_sources
   is decomposed on the query side and on the key side; integrated gradients rank the
   candidates and the greedy step removes them until the weight falls below tau(d). The removed
   candidates are the decision's signals.
3. A signal from an upstream head piece (h', position p, source m) points at the decision
   (h', p, m); it is traced in turn when its weight reaches tau(p). MLPs, the embeddings and the
   bias are leaves (the paper does not trace into MLPs). The search is breadth-first, so the
   limits (max depth, max decisions) cut the least direct parts first.

A key-side signal changes the keys of every source; it is recorded at the source where it does
the most to the decision (largest |contribution x softmax gradient|), which is the decision's
source s in nearly every case.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from ..models.adapter import adapter_of
from .attribution import attention_threshold, greedy_removal, path_gradient
from .decompose import Component, Decision, HeadTables, decompose
from .forward import ForwardPass, allowed_sources
from .svd import HeadSVD, compute_dtype, fold_layer, is_centring

Progress = Callable[[str, float], None]


@dataclass(frozen=True)
class TraceSettings:
    """The knobs of a trace (the method's Config carries the same fields)."""

    k: float = 2.0
    direct_top_k: int = 10
    max_depth: int = 0  # 0: no limit (every step goes to an earlier layer anyway)
    max_decisions: int = 200
    max_signals: int = 200
    ig_steps: int = 64
    n_random: int = 5  # random control draws per decision side, for the knockout check
    seed: int = 0
    max_cached_heads: int = 12  # head tables kept in memory at once (36 MB each at 256 Gemma tokens)


@dataclass
class Signal:
    """One removed candidate: side, component, singular direction, IG, weight after removal.

    ``coefficients`` is what removing it subtracts, kept for the knockout check: a query-side
    signal's coordinate alpha_c[k] (one number), a key-side signal's beta_c[j, k] at every
    source (a vector over ``sources``).
    """

    side: str
    component: Component
    component_index: int
    direction: int
    attribution: float
    weight_after: float
    coefficients: torch.Tensor
    position: int = -1  # where the upstream component's output sits (set after the greedy step)


@dataclass
class TracedDecision:
    layer: int
    head: int
    destination: int
    source: int
    weight: float
    threshold: float
    depth: int
    sources: range
    decomposition_error: float
    n_candidates: int
    signals: dict[str, list[Signal]] = field(default_factory=dict)
    reached: dict[str, bool] = field(default_factory=dict)
    # random candidates of the same side and count, per draw (the knockout's control)
    controls: dict[str, list[list[Signal]]] = field(default_factory=dict)
    weight_curve: dict[str, list[float]] = field(default_factory=dict)


@dataclass
class Seed:
    component: Component
    position: int
    direct_effect: float


@dataclass
class Trace:
    """Everything a trace produced (tensors stay on the model's device)."""

    seeds: list[Seed]
    decisions: list[TracedDecision]
    direct_effect_total: float
    limits: dict
    timings: dict[str, float]
    n_positions: int


def logit_direction(model, answer_id: int, foil_ids: tuple[int, ...], metric: str) -> torch.Tensor:
    """The residual direction whose dot product is the metric's logit part.  # [d_model]"""
    dtype = compute_dtype(model)
    W_U, _ = adapter_of(model).unembedding
    home = adapter_of(model).device  # a split model's unembedding may sit on another
    direction = W_U[:, answer_id].detach().to(home, dtype)
    if metric == "logit_diff" and foil_ids:
        direction = direction - W_U[:, list(foil_ids)].detach().to(home, dtype).mean(-1)
    return direction


def direct_effects(
    model, forward: ForwardPass, direction: torch.Tensor
) -> tuple[list[tuple[Component, float]], float]:
    """Every component's direct effect at the last position along ``direction``.

    Returns ([(component, effect)] for input, MLPs and head pieces (head, source m)), and the
    bias's effect (b_O terms), so that the sum of all plus the final norm's bias term is the
    metric's logit part (without any output soft-cap).
    """
    spec = forward.spec
    last = forward.n_positions - 1
    norm = adapter_of(model).final_norm
    readout = direction.clone()
    weight = getattr(norm, "w", None) if norm is not None else None
    if weight is not None:
        readout = readout * weight.detach().to(readout.device, readout.dtype)
    if is_centring(norm):
        readout = readout - readout.mean()
    readout = readout / forward.final_scale[last]
    effects: list[tuple[Component, float]] = []
    writers = forward.writers[last] @ readout  # [n_forward]
    effects.append((Component("input", "input", 0, -1), float(writers[0])))
    bias = 0.0
    for layer in range(spec.n_layers):
        pieces = forward.head_pieces(layer, last) @ readout  # [H, n]
        for head in range(spec.n_heads):
            index = spec.head_forward(layer).start + head
            for source in range(last + 1):
                if forward.patterns[layer][head, last, source] > 0:
                    component = Component("head", spec.forward_names[index], index, layer, head, source)
                    effects.append((component, float(pieces[head, source])))
        bias += float(forward.head_bias[layer][last] @ readout)
        mlp = spec.mlp_forward(layer)
        effects.append((Component("mlp", spec.forward_names[mlp], mlp, layer), float(writers[mlp])))
    return effects, bias


class Tracer:
    """Traces one prompt's circuit on one model from one forward pass."""

    def __init__(self, model, forward: ForwardPass, svd: HeadSVD, settings: TraceSettings):
        self.model = model
        self.forward = forward
        self.svd = svd
        self.settings = settings
        self._folded: dict[int, object] = {}
        self._tables: OrderedDict[tuple[int, int], HeadTables] = OrderedDict()
        self._generator = torch.Generator().manual_seed(int(settings.seed))
        self.timings = {"candidates_s": 0.0, "ig_s": 0.0, "greedy_s": 0.0}

    def tables(self, layer: int, head: int) -> HeadTables:
        """Head (layer, head)'s tables, computed once and kept in a small least-recently-used cache."""
        key = (layer, head)
        if key in self._tables:
            self._tables.move_to_end(key)
            return self._tables[key]
        if layer not in self._folded:
            self._folded[layer] = fold_layer(self.model, layer)
        self._tables[key] = HeadTables(self.model, self.forward, self._folded[layer], self.svd, layer, head)
        while len(self._tables) > max(1, self.settings.max_cached_heads):
            self._tables.popitem(last=False)
        return self._tables[key]

    def threshold(self, layer: int, destination: int) -> float:
        return attention_threshold(self.settings.k, len(allowed_sources(self.model, layer, destination)))

    def is_decision(self, layer: int, head: int, destination: int, source: int) -> bool:
        """Whether (head, d, s) is an attention decision: weight >= tau(d), more than one source."""
        sources = allowed_sources(self.model, layer, destination)
        if len(sources) < 2 or source not in sources:
            return False
        weight = float(self.forward.patterns[layer][head, destination, source])
        return weight >= self.threshold(layer, destination)

    def trace_decision(
        self, layer: int, head: int, destination: int, source: int, depth: int
    ) -> TracedDecision:
        """Decompose one decision on both sides, attribute, and remove greedily."""
        settings = self.settings
        start = time.perf_counter()
        tables = self.tables(layer, head)
        decision = decompose(tables, destination, source)
        self.timings["candidates_s"] += time.perf_counter() - start

        start = time.perf_counter()
        gradient = path_gradient(decision.row, decision.source_index, settings.ig_steps, tables.soft_cap)
        attributions = {side: decision.attribution_products(side, gradient) for side in "qk"}
        self.timings["ig_s"] += time.perf_counter() - start

        start = time.perf_counter()
        threshold = self.threshold(layer, destination)
        traced = TracedDecision(
            layer=layer,
            head=head,
            destination=destination,
            source=source,
            weight=float(self.forward.patterns[layer][head, destination, source]),
            threshold=threshold,
            depth=depth,
            sources=decision.sources,
            decomposition_error=decision.decomposition_error(),
            n_candidates=int(attributions["q"].numel()),
        )
        for side in "qk":
            greedy = greedy_removal(
                decision.row,
                decision.source_index,
                attributions[side],
                lambda component, side=side: decision.vectors(side, component),
                threshold,
                settings.max_signals,
                tables.soft_cap,
            )
            signals = [
                self._signal(decision, side, r.component, r.direction, r.attribution, r.weight_after)
                for r in greedy.removals
            ]
            self._place(decision, side, signals, gradient)
            traced.signals[side] = signals
            traced.reached[side] = greedy.reached
            traced.weight_curve[side] = [greedy.weight] + [r.weight_after for r in greedy.removals]
            traced.controls[side] = self._controls(decision, side, attributions[side], signals)
        self.timings["greedy_s"] += time.perf_counter() - start
        return traced

    @staticmethod
    def _signal(
        decision: Decision, side: str, component: int, direction: int, attribution: float, weight: float
    ):
        if side == "q":
            coefficients = decision.alpha_parts[component, direction].reshape(1)
        else:
            coefficients = decision.key_column(component, direction)
        return Signal(
            side=side,
            component=decision.component(component),
            component_index=component,
            direction=direction,
            attribution=attribution,
            weight_after=weight,
            coefficients=coefficients,
            position=decision.destination,
        )

    def _controls(self, decision: Decision, side: str, attributions: torch.Tensor, signals: list[Signal]):
        """``n_random`` draws of as many random candidates of this side as signals were found."""
        count = len(signals)
        if not count or self.settings.n_random <= 0:
            return []
        total = attributions.numel()
        chosen = {s.component_index * attributions.shape[1] + s.direction for s in signals}
        draws = []
        for _ in range(self.settings.n_random):
            picks: list[int] = []
            while len(picks) < min(count, total - len(chosen)):
                index = int(torch.randint(total, (1,), generator=self._generator))
                if index not in chosen and index not in picks:
                    picks.append(index)
            draws.append(
                [
                    self._signal(
                        decision,
                        side,
                        *divmod(index, attributions.shape[1]),
                        float(attributions.reshape(-1)[index]),
                        float("nan"),
                    )
                    for index in picks
                ]
            )
        return draws

    def _place(self, decision: Decision, side: str, signals: list[Signal], gradient: torch.Tensor) -> None:
        """Set each signal's position: the destination for query signals; for key signals the
        source where the component's removed directions do the most to the decision."""
        if side == "q":
            for signal in signals:
                signal.position = decision.destination
            return
        by_component: dict[int, list[Signal]] = {}
        for signal in signals:
            by_component.setdefault(signal.component_index, []).append(signal)
        for component, group in by_component.items():
            vectors = decision.key_vectors(component)  # [R, n_src]
            chosen = vectors[[s.direction for s in group]].sum(0)  # [n_src]
            position = decision.sources.start + int((chosen * gradient).abs().argmax())
            for signal in group:
                signal.position = position

    def run(self, prepared, progress: Progress | None = None) -> Trace:
        """Seeds, then breadth-first tracing within the limits."""
        settings = self.settings
        start = time.perf_counter()
        direction = logit_direction(self.model, prepared.answer_id, prepared.foil_ids, prepared.task.metric)
        effects, _ = direct_effects(self.model, self.forward, direction)
        ranked = sorted(effects, key=lambda item: -abs(item[1]))[: max(0, int(settings.direct_top_k))]
        last = self.forward.n_positions - 1
        seeds = [Seed(component, last, effect) for component, effect in ranked]
        self.timings["seeds_s"] = time.perf_counter() - start

        queue: deque[tuple[int, int, int, int, int]] = deque()
        queued: set[tuple[int, int, int, int]] = set()

        def offer(layer: int, head: int, destination: int, source: int, depth: int) -> None:
            key = (layer, head, destination, source)
            if key in queued or not self.is_decision(*key):
                return
            if settings.max_depth and depth > settings.max_depth:
                return
            queued.add(key)
            queue.append((*key, depth))

        for seed in seeds:
            if seed.component.kind == "head":
                offer(seed.component.layer, seed.component.head, last, seed.component.source, 1)
        decisions: list[TracedDecision] = []
        stopped_by_limit = False
        shown = 0.0  # the share reported so far: tracing finds more decisions as it goes (below)
        while queue:
            if len(decisions) >= settings.max_decisions:
                stopped_by_limit = True
                break
            layer, head, destination, source, depth = queue.popleft()
            traced = self.trace_decision(layer, head, destination, source, depth)
            decisions.append(traced)
            for side in "qk":
                for signal in traced.signals[side]:
                    piece = signal.component
                    if piece.kind == "head":
                        offer(piece.layer, piece.head, signal.position, piece.source, depth + 1)
            if progress:  # done over known: new decisions found lower it, so the share shown only rises
                known = min(settings.max_decisions, len(decisions) + len(queue))
                shown = max(shown, len(decisions) / max(1, known))
                progress("trace", shown)
        self.timings["tracing_s"] = time.perf_counter() - start
        total = sum(effect for _, effect in effects)
        return Trace(
            seeds=seeds,
            decisions=decisions,
            direct_effect_total=total,
            limits={
                "max_decisions_reached": stopped_by_limit,
                "decisions_left": len(queue),
                "max_depth": settings.max_depth,
                "max_decisions": settings.max_decisions,
                "direct_top_k": settings.direct_top_k,
            },
            timings=dict(self.timings),
            n_positions=self.forward.n_positions,
        )
