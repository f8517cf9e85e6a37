"""What each kind of pass a run makes costs, in plain forward passes of the prompt: the weights the
methods count their work with (``methods.base.Cost``), and the version of them that every stored
run record carries (``entry.calibration``), so that a run counted with other weights never prices
a run counted with these.

Measured on both embedded models (``benchmarks/bench_pass_weights.py``, CPU seconds of one thread,
medians, in one process; a plain pass is one sequence of a batched forward pass of the prompt, as
the app's probe runs it; docs/benchmarks.md has the figures):

- the faithfulness curve: a set-up, then two patched passes a budget (the circuit, and for its
  necessity every edge but the circuit's). A patched pass is a plain pass plus the mixing of each
  edge's clean and corrupted input, work that grows with the edges per layer and unit of width:
  SmolLM2-135M (123,211 edges, 30 layers of 576) pays 3.3 passes a budget, Gemma-3-270M (10,342
  edges, 18 of 640) 2.15, both about 5 for the set-up. One weight a budget could not hold both
  models and every budget count (a curve of four small budgets cost 3.6 a budget on Gemma, of
  seven 2.3-2.9: the set-up shared out);
- a gradient pass (EAP's one, each EAP-IG interpolation step): a set-up, then a batched forward and
  backward pass a row, about 2 passes on both models (counted 3 before: EAP-IG was over-counted
  against EAP, whose work is mostly its curve, and EAP's first estimate, priced at EAP-IG's rate,
  came out 1.6-1.8 times short). A pass too long for the device's working memory runs in chunks
  (``measure.chunks``), and each chunk pays the set-up again: on a CPU's 2 GB the IOI prompt's
  gradient pass holds 37 rows on Gemma-3-270M and 12 on SmolLM2-135M, so 40 IG steps are 2 and 4
  chunks; the 38th step cost 9.2 passes on Gemma where the 37th cost 2.5, the 13th 8.0 on SmolLM2
  (``limits.estimate_run`` counts the chunks, ``gradient_passes(rows, chunks)``).

The clean and corrupted runs of a prompt this process ran before are read back, not made again
(``measure.evaluate.kept_prompt_run``): a second method on the same prompt does not pay them, and
its estimate leaves them out (``Cost.prompt_passes``).

Nothing here imports torch: the calibration file's reader (which the command line's first lines
and the dataset form reach) reads ``WEIGHTS_VERSION``.
"""

from __future__ import annotations

# the version of the weights below: raise it whenever one changes. A stored run keeps the FLOPs it
# was counted at; a rate is FLOPs over seconds, so a run counted with other weights would price
# every later estimate off by the change (``entry.calibration`` leaves such runs out). A method's
# own measured weights count too (AtP*'s GradDrop rows and QK fix, ``methods.atp_star``): 2, the
# weights below; 3, AtP*'s measured on both models; 4, a gradient pass's set-up counted once a
# chunk, and the clean and corrupted runs left out where the run read them back (a chunked or
# second run's record of version 3 counted other work); 5, flow routes' observed pass measured
# (6.5, counted 3), and the methods that count their own work (ACDC, Edge Pruning, paraphrase
# pruning, Best-of-N, the ensemble) without the kept runs they read back; 6, flow routes' observed
# pass by the graph's shape (5.1 on Gemma-3-270M, 6.7 on SmolLM2-135M, 6.5 on both before), and
# Best-of-N's and paraphrase pruning's pairs scored in one batched gradient pass, a set-up a chunk
# (a set-up a pair before); 7, ACC++ counted by the decisions it traces and the sequences of its
# knockout (``methods.acc_cost``; 145.6 passes on the IOI prompt before, about three times its work)
WEIGHTS_VERSION = 7

PREPARE_PASSES = 7.0  # the clean and corrupted runs, keeping every writer's output
GRADIENT_SETUP_PASSES = 7.5  # a gradient pass's fixed part, whatever its rows
GRADIENT_STEP_PASSES = 2.0  # a row of a batched gradient pass (an IG step; EAP's one row)
CURVE_SET_UP_PASSES = 5.0  # the faithfulness curve's fixed part, once for all its budgets
MIXING = 0.085  # a patched pass's extra work per edge, over a layer's width, in passes
PATCHED_PASS = 1.1  # a patched pass where the graph's shape is not known (Gemma-3-270M's)


def patched_pass(spec=None) -> float:
    """One patched pass of one circuit: a plain pass plus mixing each edge's clean and corrupted
    input, ``MIXING`` x edges / (layers x width) (Gemma-3-270M 1.08, SmolLM2-135M 1.61)."""
    n_edges = int(getattr(spec, "n_edges", 0) or 0)
    n_layers = int(getattr(spec, "n_layers", 0) or 0)
    d_model = int(getattr(spec, "d_model", 0) or 0)
    if n_edges <= 0 or n_layers <= 0 or d_model <= 0:
        return PATCHED_PASS
    return 1.0 + MIXING * n_edges / (n_layers * d_model)


def curve_passes(n_budgets: int, spec=None) -> float:
    """The faithfulness curve of ``n_budgets`` budgets: its set-up, then two patched passes a
    budget (the circuit and its complement); no budget, no curve."""
    n_budgets = int(n_budgets)
    if n_budgets <= 0:
        return 0.0
    return CURVE_SET_UP_PASSES + 2.0 * patched_pass(spec) * n_budgets


def gradient_passes(rows: int, chunks: int = 1) -> float:
    """A batched gradient pass of ``rows`` rows (IG steps, or EAP's one) in ``chunks`` chunks (the
    device's working memory cuts it, ``measure.chunks``): a set-up a chunk, and its rows."""
    return GRADIENT_SETUP_PASSES * max(int(chunks), 1) + GRADIENT_STEP_PASSES * max(int(rows), 1)
