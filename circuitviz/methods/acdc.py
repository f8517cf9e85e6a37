"""ACDC (Conmy et al. 2023): a circuit by greedy pruning with real patching (docs/methods.md).

The walk starts from the whole graph and visits the readers from the logits backwards (reverse
topological order: ``logits``, the last MLP, the last layer's value, key and query inputs, ...,
which is the readers' index order reversed). At each reader it tries its incoming edges one at a
time, latest writer first: the edge is switched to the corrupted run, every other edge keeping
its current state, and removed for good when the metric moves by less than the threshold
``tau x |L(M(q)) - L(M(q'))|``; otherwise it is put back. A node none of whose outgoing edges is
kept by the time its readers come up changes nothing downstream: its incoming edges are removed
without a pass (as ACDC does, it is never put on the queue).

The decisions are sequential, but most can be guessed, so the walk speculates: one batched
pass carries the next B edges of a reader, row k being "the current state with edges 1..k-1 of
the batch as guessed (those guessed kept left in, those guessed removed removed) and edge k
removed". While every guess before edge k is right, row k against the metric of the guessed
state before it (row k-1's when edge k-1 was guessed removed, the one before it otherwise) is
exactly the test ACDC makes for edge k; at the first wrong guess the later rows are stale and the
walk continues after it. An edge's first guess is its first-order change at the current
circuit against tau (``guessed_ratios``: one forward and backward, refreshed at each block the
walk reaches, the backward stopping at that block; EAP's score at the whole model); a stale row
then guesses its edge again from its
own change, measured in a state one decision away. The circuits are those of the one-edge-at-a-time
walk whatever the guess (tested against it with wrong, random and right guesses); B is the size
that makes the expected cost per decided edge smallest for each next guess's chance of being
wrong, read off the guesses of its kind so far (``SpeculationSize``: a pass costs a fixed overhead
in rows besides its rows, and a wrong guess wastes the rows after it).
While a reader of block l is tested every reader below block l still has all its edges, so the
passes start at block l from the clean run (``from_layer``, ``engine.layer_start``): the same
metrics to float rounding, the blocks below run once per prompt instead of once per row; the
last block runs the last position only (the metric's), the others giving it their keys and
values, and the writers below l enter the rows' patches from the clean run, once per pass.

Scores: each edge's metric change when it was tested (signed, ``L(without it) - L(with it)`` in
the state of that moment); an edge never tested (its reader's node was already cut off) scores 0.
With ``tau > 0`` the kept edges are exactly those with ``|score| >= tau x span``, so top-N at the
size of ACDC's circuit is its circuit, and smaller budgets keep the edges whose removal moved
the metric most. ACDC's metric here is the task's metric (a logit difference, log-probability or
probability), not the KL divergence of the paper's default: the shared engine reads only the
answer and foil columns of the unembedding.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..core.graph import prune
from ..details.own_circuit import OwnCircuitDetails
from ..engine.layer_start import reader_layers
from ..engine.prefix import shared_prefix
from .base import PREPARE_PASSES, Cost, RunContext, ScoringMethod, curve_passes
from .registry import register
from .settings import check_settings, setting

SCORES_NOTE = (
    "each edge's signed metric change when ACDC tested it (the state of that moment), 0 where it was "
    "removed untested; the kept edges are those with |score| >= the threshold, so top-N at the circuit's "
    "size is ACDC's circuit"
)


@dataclass(frozen=True)
class ACDCConfig:
    """ACDC's threshold and how many circuits one speculative pass may carry."""

    threshold: float = setting(
        0.01,
        "remove an edge when patching it moves the metric by less than this part of the clean-corrupted "
        "difference (ACDC's tau, relative).",
        low=0.0,
        high=1.0,
    )
    max_batch: int = setting(
        32, "at most this many speculative circuits in one patched pass.", low=1, high=256
    )

    def __post_init__(self):
        check_settings(self)  # every bound its fields declare


# what a batched pass costs besides its rows, in rows of the same pass: a pass of b rows started
# at block l costs about (overhead + b) x (L - l) / L, the overhead about the same at every block
# (Gemma-3-270M's IOI prompt, one thread: 1 and 16 rows at blocks 16, 10 and 4,
# benchmarks/bench_acdc.py --pass-cost). The overhead is about fixed in seconds while a row's cost
# grows with the positions it runs, so in rows it is PASS_OVERHEAD_ROWS x OVERHEAD_POSITIONS / the
# positions a row runs (the IOI prompt runs 13; measured 10-17 rows on a prompt running 2, 0.8-1.8
# on one running 24)
PASS_OVERHEAD_ROWS = 2.8
OVERHEAD_POSITIONS = 13
# curve-circuit rows per unit of ``walk_depth`` (the tested rows, stale rows and each pass's
# overhead, less the edges never tested), measured on Gemma-3-270M's IOI prompt at threshold 0.01
# (docs/methods.md; it over-prices walks whose circuits are sparser)
ROWS_PER_EDGE = 0.33
# the patched rows per edge of the graph that ROWS_PER_EDGE prices: its estimate was 0.81 of the
# inline multiple-choice walk, which ran 1.01 rows an edge (docs/benchmarks.md, ACDC). A walk runs
# fewer where a sparse circuit cuts whole nodes off early (0.51 on Gemma's factual prompt, 0.13 on
# SmolLM2's) and at most about one row per edge and its stale rows (1.11 on the multiple choice),
# whose rows may each cost more than priced: the top of the range allows 1.75x that (the estimate
# in the app, priced from other methods' runs, gave Gemma's IOI walk 0.6x its time)
PRICED_ROWS_PER_EDGE = 0.82
# what ROWS_PER_EDGE's rows were priced at when it was fitted (a budget of the curve, as counted
# then): the walk's weight, kept with its fit; the curve's budgets are ``curve_passes``
ROW_PASSES = 1.8
ROWS_PER_EDGE_RANGE = (0.1, 2.0)
# what the guess at each block costs (``guessed_ratios``: a forward of the circuit and a backward
# down to the block, Gemma's renormalisation of the mixed readers at and above it), in plain
# forward passes: 4.0 a block on Gemma-3-270M's 34-token prompt, the walk's bookkeeping included
# (14.7 CPU-s for 18 blocks at a plain pass of 0.205; 6 a block before the backward stopped at
# the block, 10-16 for the whole model's)
GUESS_PASSES = 4.0


class SpeculationSize:
    """How many circuits the next speculative pass carries.

    Row k of a pass is used only if the guesses of the k - 1 edges before it are all right, so
    with the guess of edge j wrong with probability p_j a pass of b rows decides
    E(b) = sum_k prod_(j<k) (1 - p_j) edges on average (up to the first wrong guess), for the
    price of ``overhead`` + b rows. The size is the b <= ``cap`` that makes (overhead + b) / E(b)
    smallest. p_j is the share of wrong guesses so far among the guesses of edge j's kind: by how
    far its guessed change is from tau (a factor of 3 a step, ``kind``), and whether a stale row
    or the gradient made it (with a prior of ``prior`` worth two guesses, so the first passes
    speculate). The decisions never depend on it; only rows and passes do."""

    def __init__(self, cap: int, overhead: float = PASS_OVERHEAD_ROWS, prior: float = 0.05):
        self.cap, self.overhead, self.prior = cap, overhead, prior
        self.wrong: dict[int, int] = {}  # kind -> wrong guesses so far
        self.made: dict[int, int] = {}  # kind -> guesses tested so far

    @staticmethod
    def kind(ratio: float, stale: bool) -> int:
        """A guess's kind: |guessed change| / tau in steps of a factor of 3 (below 1/9, ..., 9 and
        over), and whether a stale row made it."""
        step = 0
        for bound in (1 / 9, 1 / 3, 1.0, 3.0, 9.0):
            step += ratio >= bound
        return step + 6 * int(stale)

    def chance(self, kind: int) -> float:
        """The chance a guess of this kind is wrong."""
        return (self.wrong.get(kind, 0) + 2 * self.prior) / (self.made.get(kind, 0) + 2)

    def size(self, kinds: list[int]) -> int:
        """The size for the next edges' guesses of ``kinds`` (at most ``cap`` of them read)."""
        best, cheapest, decided, right = 1, float("inf"), 0.0, 1.0
        for rows, kind in enumerate(kinds[: self.cap], start=1):
            decided += right  # row ``rows`` is used when every guess before it is right
            right *= 1 - self.chance(kind)
            if (self.overhead + rows) / decided < cheapest:
                best, cheapest = rows, (self.overhead + rows) / decided
        return best

    def record(self, kinds: list[int], wrong: list[bool]) -> None:
        for kind, miss in zip(kinds, wrong):
            self.made[kind] = self.made.get(kind, 0) + 1
            self.wrong[kind] = self.wrong.get(kind, 0) + int(miss)


@dataclass
class WalkCounts:
    """What the walk cost and found."""

    rows: int = 0  # patched circuits evaluated (each a forward pass over the prompt)
    passes: int = 0  # batched patched passes (sequential steps)
    tested: int = 0  # edges ACDC decided by a measurement
    kept: int = 0  # edges kept
    mispredicted: int = 0  # tested edges decided otherwise than the pass had guessed
    guesses: int = 0  # gradient passes that guessed the decisions (one per block reached)


def guessed_ratios(evaluator, spec, state: torch.Tensor, tau: float, layer: int = 0) -> torch.Tensor:
    """Each edge's guessed |change| / tau at the circuit ``state`` [n_forward, n_backward] bool:
    the metric's gradient in the edge's kept share at that circuit (``patching.masked_residual``,
    one forward and backward), the first-order change of removing it alone (EAP's score when
    ``state`` is the whole model). The guess is "kept" where it is at least 1. Only the edges into
    readers of block ``layer`` and above are guessed (the walk reads those); the readers below
    keep every edge wholly, so the backward pass stops at block ``layer`` and their norms are not
    renormalised (0 there). # [n_forward, n_backward] float64, on the host; 0 off the graph"""
    from ..engine.metric import metric_from_residual
    from ..engine.patching import masked_residual

    model, prepared = evaluator.model, evaluator.prepared
    # a hair below 1: a reader whose edges are all wholly kept gets no patch, so no gradient
    hair = state.to(evaluator.clean_writers.dtype) * (1 - 1e-4)  # [fwd, bwd]
    below = torch.tensor([block < layer for block in reader_layers(spec)], device=hair.device)  # [bwd]
    hair[:, below] = 1.0  # every edge of a reader below the block is kept (state there is the graph)
    keep = hair[None].requires_grad_(True)  # [1, fwd, bwd]
    with torch.enable_grad():
        corrupted, raw = evaluator.corrupted_writers, evaluator.corrupted_raw
        residual = masked_residual(model, spec, prepared, corrupted, keep, raw)  # [1, d_model]
        (gradient,) = torch.autograd.grad(metric_from_residual(model, prepared, residual).sum(), keep)
    size = gradient[0].abs().double().cpu()
    ratio = size / tau if tau > 0 else torch.where(size >= 0, float("inf"), 0.0)
    return ratio * spec.edge_mask.cpu()


def attribution_guess(evaluator, spec, state: torch.Tensor, tau: float) -> torch.Tensor:
    """The edges guessed kept at the circuit ``state`` (``guessed_ratios`` at least 1).
    # [n_forward, n_backward] bool, on the host"""
    return (guessed_ratios(evaluator, spec, state, tau) >= 1) & spec.edge_mask.cpu()


def acdc_walk(
    evaluator, spec, tau: float, max_batch: int, progress=None, from_layer: bool = True, guess=None
):
    """ACDC's greedy walk: (kept edges [n_forward, n_backward] bool, scores, WalkCounts).

    ``tau`` is absolute (in the metric's units). On the evaluator's device. ``guess``
    [n_forward, n_backward] bool: the edges each pass first guesses kept (None: guessed again
    from the current circuit's gradient whenever the walk reaches a new block,
    ``guessed_ratios``); it changes the rows and passes, never a decision.
    """
    device = evaluator.device
    graph = spec.tensors(device)
    state = graph.edge_mask.clone()
    scores = torch.zeros(spec.n_forward, spec.n_backward, dtype=torch.float64, device=device)
    owner = spec.backward_to_forward.tolist()  # the node each reader belongs to (-1: logits)
    parents_of = graph.edge_mask.t().cpu()  # [n_backward, n_forward]: host-side bookkeeping
    layers = reader_layers(spec)
    # [n_backward, n_forward]: each edge's guessed |change| / tau (kept where >= 1), and whether
    # a stale row made the guess
    ratios = 2.0 * guess.t().double().cpu() if guess is not None else None
    stale = torch.zeros(spec.n_backward, spec.n_forward, dtype=torch.bool, device="cpu")
    guessed_at = None  # the block the current gradient guess was made for
    counts = WalkCounts()
    current = float(evaluator.baseline.clean)
    prepared = evaluator.prepared
    run = prepared.n_positions - shared_prefix(evaluator.model, [prepared])  # the positions a row runs
    speculation = SpeculationSize(max_batch, PASS_OVERHEAD_ROWS * OVERHEAD_POSITIONS / max(run, 1))
    for step, reader in enumerate(reversed(range(spec.n_backward))):
        node = owner[reader]
        if node >= 0 and not bool(state[node].any()):  # cut off: nothing downstream reads it
            state[:, reader] = False
            continue
        parents = parents_of[reader].nonzero()[:, 0].flip(0).tolist()  # latest writer first
        if guess is None and guessed_at != layers[reader]:
            ratios = guessed_ratios(evaluator, spec, state, tau, layers[reader]).t().clone()
            stale.zero_()
            guessed_at = layers[reader]
            counts.guesses += 1
        start = 0
        while start < len(parents):
            rest = parents[start : start + max_batch]
            kinds = [
                speculation.kind(r, s)
                for r, s in zip(ratios[reader, rest].tolist(), stale[reader, rest].tolist())
            ]
            batch = rest[: speculation.size(kinds)]
            keep = (ratios[reader, batch] >= 1).tolist()
            rows = state.expand(len(batch), -1, -1).clone()  # [size, n_forward, n_backward]
            for k, parent in enumerate(batch):  # row k: edge k removed, those before it as guessed
                rows[k, parent, reader] = False
                if not keep[k]:
                    rows[k + 1 :, parent, reader] = False
            values = evaluator.metrics(rows, from_layer=from_layer).double().tolist()
            counts.rows += len(batch)
            counts.passes += 1
            before = current  # the metric of the state before edge k (every earlier guess right)
            decided = 0
            for k, value in enumerate(values):
                parent = batch[k]
                change = value - before
                scores[parent, reader] = change
                counts.tested += 1
                decided += 1
                removed = abs(change) < tau
                if removed == keep[k]:  # guessed wrong: the later rows start from another state
                    counts.mispredicted += 1
                    chain = before if removed else value  # the metric the later rows' guess gave
                    _guess_again(ratios, stale, reader, batch, keep, values, k, chain, tau)
                if removed:
                    state[parent, reader] = False
                    before = value
                else:
                    counts.kept += 1
                if removed == keep[k]:
                    break
            current = before
            start += decided
            speculation.record(kinds[:decided], [False] * (decided - 1) + [removed == keep[decided - 1]])
        if progress is not None:
            progress("score", (step + 1) / spec.n_backward)
    return state, scores, counts


def _guess_again(ratios, stale, reader, batch, keep, values, wrong, before, tau) -> None:
    """After the pass's guess for edge ``wrong`` failed, the later rows are stale, but each
    still measured its edge in a state one decision away: their changes are the next guesses.
    ``before``: the metric of the guessed state before row ``wrong + 1``."""
    for k in range(wrong + 1, len(batch)):
        change = abs(values[k] - before)
        ratios[reader, batch[k]] = change / tau if tau > 0 else float("inf")
        stale[reader, batch[k]] = True
        if not keep[k]:
            before = values[k]


def walk_depth(spec) -> float:
    """The edges into each reader weighted by the share of the blocks a row testing them runs
    (``engine.layer_start``): sum over readers r of edges(r) x (L - block(r)) / L."""
    edges = spec.edge_mask.sum(0).tolist()  # [n_backward]
    layers = reader_layers(spec)
    return sum(count * (spec.n_layers - layer) / spec.n_layers for count, layer in zip(edges, layers))


@register
class ACDC(ScoringMethod):
    name = "acdc"
    label = "ACDC"
    summary = (
        "Greedy pruning by real patching, from the logits backwards: an edge is removed for good when "
        "corrupting it moves the metric less than the threshold."
    )
    score_meaning = SCORES_NOTE
    Config = ACDCConfig
    Details = OwnCircuitDetails
    fitted_to_prompt = (
        "ACDC removes an edge only where the patched circuit's metric on this prompt moves by less than "
        "its threshold"
    )

    def estimate(self, config, spec, n_tokens, n_budgets) -> Cost:
        # about one patched row per edge (each edge tested, plus the rows a wrong guess makes
        # stale and each pass's own overhead, less the edges of cut-off nodes removed untested), a
        # row priced as a circuit of the faithfulness curve but run from its reader's block: an
        # edge into a reader of block l runs (L - l) of the L blocks (``walk_depth``). The clean
        # run the rows start from is one more pass; the guess, a gradient pass per block.
        return self._cost(spec, n_budgets, PRICED_ROWS_PER_EDGE)

    def _cost(self, spec, n_budgets: int, rows_per_edge: float) -> Cost:
        """The walk's passes when it runs ``rows_per_edge`` patched rows per edge of the graph,
        with the least and the most a walk runs (``ROWS_PER_EDGE_RANGE``)."""

        def passes(rows_per_edge: float) -> float:
            rows = ROWS_PER_EDGE * walk_depth(spec) * rows_per_edge / PRICED_ROWS_PER_EDGE
            return (
                PREPARE_PASSES
                + 1.0
                + GUESS_PASSES * spec.n_layers
                + ROW_PASSES * rows
                + curve_passes(n_budgets, spec)
            )

        low, high = ROWS_PER_EDGE_RANGE
        return Cost(
            passes=passes(rows_per_edge),
            prompt_passes=PREPARE_PASSES,  # the walk starts from the evaluator's runs, read back when kept
            passes_range=(passes(low), passes(high)),
            range_reason="ACDC tests an edge only while a path still reaches it, so a sparse circuit "
            "ends its walk early",
        )

    def passes_done(self, result) -> float | None:
        rows = (
            ((getattr(result.details, "counts", None) or {}).get("patched_rows")) if result.details else None
        )
        if rows is None or result.graph.n_edges == 0:
            return None
        return self._cost(result.graph, len(result.curve), rows / result.graph.n_edges).passes

    def score(self, ctx: RunContext, config) -> torch.Tensor:
        return self.score_with_details(ctx, config)[0]

    def score_with_details(self, ctx: RunContext, config):
        evaluator, spec = ctx.evaluator, ctx.spec
        span = abs(evaluator.baseline.clean - evaluator.baseline.corrupted)
        tau = float(config.threshold) * span
        with ctx.timed("walk_s"):
            kept, scores, counts = acdc_walk(evaluator, spec, tau, int(config.max_batch), ctx.progress)
        circuit = prune(spec, kept.cpu())
        details = OwnCircuitDetails(
            method=self.name,
            threshold=float(config.threshold),
            circuit_edges=spec.edge_names_of(circuit),
            counts={
                "patched_rows": counts.rows,
                "batched_passes": counts.passes,
                "edges_tested": counts.tested,
                "wrong_guesses": counts.mispredicted,
                "edges_kept": counts.kept,
            },
            scores_note=SCORES_NOTE,
            notes=[
                f"threshold {config.threshold:g} of the clean-corrupted difference |{span:.4g}| = {tau:.4g} "
                "in the task's metric (not the KL divergence)"
            ],
        )
        return scores, details
