"""What an ACC++ run asks of the model, counted in plain passes of the prompt (``base.Cost``).

Measured on both embedded models (2026-12-07, CPU seconds of one thread against the EAP-IG run
the estimates are priced from, IOI prompt, budgets 20, 100, 200, 500; docs/benchmarks.md):

- its own forward pass, keeping every writer's output, and the heads' SVD read back: about 4
  passes (Gemma-3-270M 4.5, SmolLM2-135M 3.7);
- each traced attention decision (its head's tables, the decomposition, the softmax's integrated
  gradients, the greedy removal): about the same seconds at any length, 0.49 passes of the
  15-token prompt on Gemma-3-270M (0.24 of a 32-token one), 0.23 on SmolLM2-135M at 64 IG steps;
  counted 7.5 / n_tokens, the IG's share (about a seventh) with the steps;
- each sequence of the knockout (the clean run, the found signals, each random draw, all found
  signals, each distinct circuit of the budgets): 1.2 passes on both at 15 tokens, 1.65 on Gemma
  at 5 and at 32 tokens (a forward pass with its queries and keys edited); counted 1.4;
- with a corrupted prompt, the evaluator's clean and corrupted runs and the patching curve of the
  distinct circuits (``curve_passes``); without one, nothing more (the knockout is the curve).

The decisions traced are what the run finds: tracing follows a decision's signals into the
decisions of earlier heads, so the IOI prompt traced 28 (Gemma-3-270M) and 52 (SmolLM2-135M) of
``max_decisions`` 200, a five-token prompt 1 to 3. Before the run they are bounded by
``max_decisions``, by the heads and the prompt's length (a head's row at destination d holds at
most n_sources / k weights of at least tau(d) = k / n_sources) and, at ``max_depth`` 1, by
``direct_top_k``; none at all is traced where no seed is a head's decision. The estimate is that
range: no decision, no draw and one circuit at its low end, the bound with every draw and
circuit at its high end (today's count gave every run the 200 decisions and 8 passes a draw:
2.3-4.9 times the run).
"""

from __future__ import annotations

from ..core.pass_weights import PREPARE_PASSES, curve_passes
from .base import Cost

FORWARD_PASSES = 4.0  # ACC++'s own forward pass keeping every writer's output, and the SVD read back
# a traced decision takes about the same seconds whatever the prompt's length (Gemma-3-270M 34 ms
# at 15 tokens, 35 ms at 32), so its passes are token-passes over the prompt's tokens
DECISION_TOKEN_PASSES = 6.5  # its fixed part (head tables, decomposition, greedy removal)
IG_STEP_TOKEN_PASSES = 0.016  # its integrated gradients, a step (64 steps: 1.0)
KNOCKOUT_ROW_PASSES = 1.4  # a sequence of the knockout: a forward pass with edited queries and keys
KNOCKOUT_FIXED_ROWS = 3  # the clean run, the found signals knocked out, all found signals knocked out


def decision_bound(config, spec, n_tokens: int) -> int:
    """The most attention decisions a run can trace on a prompt of ``n_tokens`` tokens: at most
    ``max_decisions``; at most n_sources / k per head and destination (weights of at least
    k / n_sources sum to at most 1); at ``max_depth`` 1, only the seeds' (``direct_top_k``)."""
    k = float(config.k)
    rows = sum(min(sources, int(sources / k + 1e-9)) for sources in range(2, max(int(n_tokens), 0) + 1))
    bound = min(int(config.max_decisions), int(spec.n_layers) * int(spec.n_heads) * rows)
    if int(config.max_depth) == 1 or int(config.direct_top_k) == 0:
        bound = min(bound, int(config.direct_top_k))
    return max(bound, 0)


def acc_passes(
    decisions: int,
    draws: int,
    circuits: int,
    *,
    corrupted: bool,
    n_tokens: int,
    spec=None,
    ig_steps: int = 64,
) -> float:
    """A run's passes on a prompt of ``n_tokens`` tokens with ``decisions`` traced, ``draws``
    random knockout draws and ``circuits`` distinct circuits among its budgets (the whole traced
    circuit's among them)."""
    decision = (DECISION_TOKEN_PASSES + IG_STEP_TOKEN_PASSES * int(ig_steps)) / max(int(n_tokens), 1)
    rows = KNOCKOUT_FIXED_ROWS + int(draws) + int(circuits)
    evaluation = PREPARE_PASSES + curve_passes(circuits, spec) if corrupted else 0.0
    return FORWARD_PASSES + decision * int(decisions) + KNOCKOUT_ROW_PASSES * rows + evaluation


def acc_cost(config, spec, n_tokens: int, n_budgets: int, *, corrupted: bool) -> Cost:
    """The run's count at its most (every decision the bound allows, every draw, each budget a
    distinct circuit beside the whole traced circuit's), with the least a run takes."""
    most_decisions = decision_bound(config, spec, n_tokens)
    ig_steps = int(config.ig_steps)
    high = acc_passes(
        most_decisions,
        int(config.n_random) if most_decisions else 0,
        max(int(n_budgets), 0) + 1,
        corrupted=corrupted,
        n_tokens=n_tokens,
        spec=spec,
        ig_steps=ig_steps,
    )
    low = acc_passes(0, 0, 1, corrupted=corrupted, n_tokens=n_tokens, spec=spec, ig_steps=ig_steps)
    return Cost(
        passes=high,
        gradient_batch=1,
        ig_steps=ig_steps,
        prompt_passes=PREPARE_PASSES if corrupted else 0.0,
        passes_range=(low, high),
        range_reason=f"ACC++ traces only the attention decisions its signals reach, from none to "
        f"{most_decisions:,} here (max_decisions, the heads and the prompt's length bound them)",
    )
