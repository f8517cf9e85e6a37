"""The active-set Lasso solved in blocks of the rows each column allows, on the CPU.

CircuitLasso's regressions are layered: a reader of layer L may only have writers of earlier
layers as predictors, and a feature of the last SAE layer only the features of the layers before
it. ``lasso_active_set`` solves every column over all p rows: each round multiplies G [p, p] by
the coefficients [p, t] and works on [p, t] arrays, even for a column that allows a tenth of the
rows. Columns that allow the same rows (a *group*) can be solved on those rows alone, with G's
block on them: the same problem, since every other coefficient of theirs is held at zero, and
their duality gaps and optimality conditions read only the rows they allow.

Solving every group apart has its own cost (each block's round is some forty small operations),
so groups, in order of how many rows they allow, are joined into contiguous blocks (each over the
union of its groups' rows, its columns' own rows still enforced) by dynamic programming over a
per-round cost: multiply-adds of the G product, elements of the block's arrays, and a fixed cost
per block. Measured on the embedded model (2026-12-03, one thread): the SAE feature fit (layers 3
and 9: 512 features, 508 columns in three groups, the first layer's with no rows) and the
components fit (364 rows, 505 columns in 37 nested groups); docs/methods.md ("CircuitLasso's
speed") has the figures.

Elsewhere than on the CPU one batch over all rows is kept: there a round's cost is its kernel
launches, which blocks multiply.
"""

from __future__ import annotations

import torch

from .solver import LassoFit, lasso_active_set, solve_setup

# the per-round cost model, in seconds on one CPU thread (rough: it only decides the blocks)
_MULTIPLY_ADD_S = 6e-11  # the G product, per multiply-add
_ELEMENT_S = 2e-8  # the round's elementwise work, per element of a block's [rows, columns]
_BLOCK_S = 4e-4  # a block's fixed cost per round (its operations' dispatch)
_MAX_GROUPS = 64  # more distinct row sets than this: one block (the plan's own cost grows as g^2)


def row_groups(keys: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(each group's first row [g], each row's group [n]) of the rows of ``keys`` [n, d] (bool or
    float64) that are equal value for value, groups numbered in order of their first row: the
    groups ``torch.unique(keys, dim=0, return_inverse=True)`` makes, without its row-by-row sort
    (the allowed rows of the embedded model's 505-513 target columns: 3 ms against 6-9). Each row is summed with fixed weights
    into one key (a row's sum runs in the same order for every row of a contiguous array, so
    equal rows get equal keys); rows of one key are then checked equal to its first row, and a
    collision (rows of one key that differ) falls back to ``torch.unique``: the groups are exact
    either way."""
    n, device = keys.shape[0], keys.device
    if n == 0:
        empty = torch.zeros(0, dtype=torch.long, device=device)
        return empty, empty
    flat = keys.reshape(n, -1)
    arange = torch.arange(n, device=device)
    inverse = None
    if flat.dtype in (torch.bool, torch.float64):
        values = flat.to(torch.float64).contiguous()
        # weights in [1, 2), all different: a row's key is not its plain sum
        weights = (
            1.0 + torch.arange(values.shape[1], dtype=torch.float64, device=device) * 0.6180339887498949 % 1.0
        )
        _, inverse = torch.unique((values * weights).sum(1), return_inverse=True)
        first = torch.full((int(inverse.max()) + 1,), n, dtype=torch.long, device=device)
        first.scatter_reduce_(0, inverse, arange, "amin")
        if not bool((flat == flat[first[inverse]]).all()):
            inverse = None  # rows of one key differ (or a NaN): sort them instead
    if inverse is None:
        _, inverse = torch.unique(flat, dim=0, return_inverse=True)
        first = torch.full((int(inverse.max()) + 1,), n, dtype=torch.long, device=device)
        first.scatter_reduce_(0, inverse, arange, "amin")
    order = torch.argsort(first)  # groups in the order of their first row
    rank = torch.empty_like(order)
    rank[order] = torch.arange(order.numel(), device=device)
    return first[order], rank[inverse]


def row_blocks(allowed: torch.Tensor | None, device) -> list[tuple[torch.Tensor, torch.Tensor]] | None:
    """[(rows [r], columns [c])] covering every column once, or None for one block of all rows.

    None elsewhere than on the CPU, without ``allowed``, and where the plan is one block over all
    rows anyway. A block's rows are the union of what its columns allow, in increasing order;
    columns that allow no row form a block with no rows (their solution is zero)."""
    if allowed is None or torch.device(device).type != "cpu" or allowed.numel() == 0:
        return None
    p, t = allowed.shape
    columns_of = allowed.T.cpu()
    firsts, group = row_groups(columns_of)
    if firsts.shape[0] > _MAX_GROUPS:
        return None
    # the distinct patterns in the sorted order ``torch.unique(columns_of, dim=0)`` gives (the ties
    # of the row counts below follow it), sorted among g rows instead of t
    patterns, sorted_group = torch.unique(columns_of[firsts], dim=0, return_inverse=True)  # [g, p]
    inverse = sorted_group[group]  # [t]
    g = patterns.shape[0]
    columns = torch.bincount(inverse, minlength=g).tolist()
    order = torch.argsort(patterns.sum(1), stable=True).tolist()
    ordered = patterns[order].to(torch.uint8)
    # union[i][j]: rows allowed by groups order[i..j] together
    union = [ordered[i:].cummax(0).values.sum(1).tolist() for i in range(g)]
    # columns of groups order[:i] (whole numbers, so a block's count is the sum it was: the same
    # costs, the same plan, from a difference instead of a sum per block; the components fit's 37
    # groups weigh 703 blocks, 3 CPU-ms of sums)
    before = [0]
    for k in range(g):
        before.append(before[-1] + columns[order[k]])

    def cost(i: int, j: int) -> float:
        rows, cols = union[i][j - i], before[j + 1] - before[i]
        return rows * rows * cols * _MULTIPLY_ADD_S + rows * cols * _ELEMENT_S + _BLOCK_S

    best, cut = [0.0] * (g + 1), [0] * (g + 1)  # best[j]: groups order[:j] in blocks
    for j in range(1, g + 1):
        best[j], cut[j] = min((best[i] + cost(i, j - 1), i) for i in range(j))
    spans, j = [], g
    while j > 0:
        spans.append((cut[j], j))
        j = cut[j]
    if len(spans) == 1 and union[0][g - 1] == p:
        return None
    blocks = []
    for i, j in reversed(spans):
        members = torch.tensor([order[k] for k in range(i, j)], dtype=torch.long, device="cpu")
        rows = patterns[members].any(0).nonzero(as_tuple=True)[0]
        cols = torch.isin(inverse, members).nonzero(as_tuple=True)[0]
        blocks.append((rows.to(allowed.device), cols.to(allowed.device)))
    return blocks


def lasso_in_blocks(
    gram: torch.Tensor,
    cross: torch.Tensor,
    target_power: torch.Tensor,
    penalty: torch.Tensor | float,
    allowed: torch.Tensor | None = None,
    init: torch.Tensor | None = None,
    check=None,
    **options,
) -> LassoFit:
    """``lasso_active_set`` (same arguments and options), each block of ``row_blocks`` solved on
    its rows alone. The gaps are the blocks' own (equal to the whole problem's: a column's gap
    reads only the rows it allows; None with ``certify=False``); ``iterations`` is the most rounds
    any block took, and ``converged`` holds when every block converged. ``check``: called before
    each block's solve (a run's report, which raises once the run is cancelled)."""
    blocks = row_blocks(allowed, cross.device)
    if blocks is None:
        if check is not None:
            check()
        return lasso_active_set(gram, cross, target_power, penalty, allowed, init, **options)
    setup = solve_setup(cross, target_power, penalty, allowed, init)
    coefficients = torch.zeros_like(cross, device=cross.device)
    certified = options.get("certify", True)
    gap = torch.zeros_like(target_power, device=target_power.device) if certified else None
    rounds, converged = 0, True
    for rows, cols in blocks:
        if rows.numel() == 0:  # nothing allowed: zero, and the gap of a zero solution (0 here)
            continue
        if check is not None:
            check()
        block_allowed = setup.allowed[rows][:, cols]
        fit = lasso_active_set(
            gram[rows][:, rows],
            cross[rows][:, cols],
            target_power[cols],
            setup.penalty[cols],
            None if bool(block_allowed.all()) else block_allowed,
            None if init is None else setup.start[rows][:, cols],  # None: from zero
            **options,
        )
        coefficients[rows[:, None], cols[None, :]] = fit.coefficients
        if certified:
            gap[cols] = fit.gap
        rounds, converged = max(rounds, fit.iterations), converged and fit.converged
    return LassoFit(coefficients, gap, rounds, converged)
