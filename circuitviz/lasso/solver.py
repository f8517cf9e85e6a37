"""Lasso by FISTA, batched over many targets that share one design matrix, in torch.

Every target column j solves the scikit-learn-convention Lasso

    min_a  1/(2M) ||t_j - X a||^2 + lambda_j ||a||_1      (a_i = 0 where ``allowed[i, j]`` is False)

through its sufficient statistics only: the Gram matrix ``G = X^T X / M`` [p, p], the cross
products ``C = X^T T / M`` [p, t] and the target powers ``||t_j||^2 / M`` [t]. One iteration is
one ``G @ Y`` for all targets at once, so a whole layer block (or the whole model) is one batched
matrix product per step, on whatever device the statistics live on.

FISTA (Beck and Teboulle 2009) with the gradient-based adaptive restart of O'Donoghue and Candes
(2015), per column. A column stops when its duality gap is below ``tol`` times its target power;
the gap is computed from the same statistics (see ``duality_gap``), so convergence is certified,
not guessed from the change between iterates. ``lasso_path`` walks a decreasing lambda grid with
warm starts, as coordinate-descent path solvers do.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NamedTuple

import torch


@contextmanager
def solver_threads(device: torch.device) -> Iterator[None]:
    """Run a CPU solve on one intra-op thread, restoring the setting afterwards.

    A solve is thousands of small batched operations; on a CPU shared with other work, each
    multi-threaded operation waits at a barrier for a thread that is not running (measured on
    this project's 2-core machine under load: a 91 x 236 product took 42 ms with 2 threads and
    0.5 ms with 1). GPU solves are left alone.
    """
    if torch.device(device).type != "cpu":
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


class LassoFit(NamedTuple):
    """One solve. coefficients [p, t]; gap [t] (objective units; None when not certified);
    iterations; converged."""

    coefficients: torch.Tensor
    gap: torch.Tensor | None
    iterations: int
    converged: bool


class LassoPath(NamedTuple):
    """A solve at every lambda of a decreasing grid.

    lambdas [n, t]; coefficients: n dense [p, t] tensors on the solver's device, or None when the
    caller asked only for summaries; residual_power [n, t] (1/M ||t - X a||^2); nonzeros [n, t];
    gaps [n, t]; iterations [n]; converged [n] bool.
    """

    lambdas: torch.Tensor
    coefficients: list[torch.Tensor] | None
    residual_power: torch.Tensor
    nonzeros: torch.Tensor
    gaps: torch.Tensor
    iterations: torch.Tensor
    converged: torch.Tensor


class SolveSetup(NamedTuple):
    """What both solvers start from, for a batch of t target columns with p predictors each.

    penalty [t]: each column's lambda, on the statistics' device and dtype; allowed [p, t] bool
    (None: every coefficient may be nonzero); weights: allowed as 0/1 in the statistics' dtype,
    for multiplying iterates; start [p, t]: the warm start (zeros without one) with the pinned
    coefficients zeroed; target_scale [t]: ||t_j||^2 / M floored above zero, the unit both
    stopping rules are stated in.
    """

    penalty: torch.Tensor
    allowed: torch.Tensor | None
    weights: torch.Tensor | None
    start: torch.Tensor
    target_scale: torch.Tensor


def solve_setup(
    cross: torch.Tensor,
    target_power: torch.Tensor,
    penalty: torch.Tensor | float,
    allowed: torch.Tensor | None = None,
    init: torch.Tensor | None = None,
) -> SolveSetup:
    """The set-up FISTA and the active-set method share, made once on the statistics' device."""
    p, t = cross.shape
    dtype, device = cross.dtype, cross.device
    penalty = torch.as_tensor(penalty, dtype=dtype, device=device).expand(t).clone()
    allowed = None if allowed is None else allowed.to(device).bool()
    weights = None if allowed is None else allowed.to(dtype)
    start = torch.zeros(p, t, dtype=dtype, device=device) if init is None else init.clone()
    if weights is not None:
        start = start * weights
    return SolveSetup(penalty, allowed, weights, start, target_power.clamp_min(1e-30))


def soft_threshold(x: torch.Tensor, threshold: torch.Tensor) -> torch.Tensor:
    """sign(x) max(|x| - threshold, 0), the proximal map of the l1 norm."""
    return x.sign() * (x.abs() - threshold).clamp_min(0.0)


def lipschitz_constant(gram: torch.Tensor) -> float:
    """The largest eigenvalue of the (symmetric, positive semi-definite) Gram matrix."""
    if gram.numel() == 0:
        return 1.0
    return float(torch.linalg.eigvalsh(gram.double())[-1].clamp_min(1e-12))


def lambda_max(cross: torch.Tensor, allowed: torch.Tensor | None = None) -> torch.Tensor:
    """The smallest lambda at which every coefficient of a column is zero.  # [t]"""
    values = cross.abs() if allowed is None else cross.abs() * allowed
    return values.amax(0) if values.shape[0] else torch.zeros(values.shape[1], dtype=values.dtype)


def duality_gap(
    gram: torch.Tensor,
    cross: torch.Tensor,
    target_power: torch.Tensor,
    penalty: torch.Tensor,
    coefficients: torch.Tensor,
    allowed: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(duality gap, residual power), both [t], from the sufficient statistics alone.

    With r = t - X a: the primal is ||r||^2/(2M) + lambda ||a||_1; the dual point s r with
    s = min(1, lambda / ||X^T r / M||_inf) is feasible, and its value is
    s (t^T r)/M - s^2 ||r||^2/(2M). Here ||r||^2/M = tt - 2 c^T a + a^T G a and
    t^T r / M = tt - c^T a, so no observation matrix is needed.
    """
    product = gram @ coefficients  # [p, t]
    gradient = product - cross
    if allowed is not None:
        gradient = gradient * allowed
    linear = (cross * coefficients).sum(0)
    residual_power = (target_power - 2 * linear + (coefficients * product).sum(0)).clamp_min(0.0)
    dual_norm = gradient.abs().amax(0) if gradient.shape[0] else torch.zeros_like(target_power)
    scale = torch.where(dual_norm > penalty, penalty / dual_norm.clamp_min(1e-30), torch.ones_like(penalty))
    primal = 0.5 * residual_power + penalty * coefficients.abs().sum(0)
    dual = scale * (target_power - linear) - 0.5 * scale**2 * residual_power
    return (primal - dual).clamp_min(0.0), residual_power


def lasso_fista(
    gram: torch.Tensor,
    cross: torch.Tensor,
    target_power: torch.Tensor,
    penalty: torch.Tensor | float,
    allowed: torch.Tensor | None = None,
    init: torch.Tensor | None = None,
    max_iter: int = 5000,
    tol: float = 1e-8,
    check_every: int = 10,
    lipschitz: float | None = None,
) -> LassoFit:
    """Solve the Lasso of every target column at its ``penalty`` (scalar or [t]).

    gram [p, p], cross [p, t], target_power [t]; allowed [p, t] bool pins coefficients to zero;
    init [p, t] warm start. Columns that have converged are set aside, so the batch shrinks as
    the easy targets finish.
    """
    t = cross.shape[1]
    dtype, device = cross.dtype, cross.device
    setup = solve_setup(cross, target_power, penalty, allowed, init)
    penalty, mask, coefficients, scale = setup.penalty, setup.weights, setup.start, setup.target_scale
    step = 1.0 / (lipschitz if lipschitz is not None else lipschitz_constant(gram))
    gap = torch.zeros(t, dtype=dtype, device=device)
    active = torch.arange(t, device=device)
    iterations = 0
    while active.numel() and iterations < max_iter:
        # the columns still running, compacted so finished targets cost nothing
        c_act = cross[:, active]
        m_act = None if mask is None else mask[:, active]
        lam = penalty[active]
        a = coefficients[:, active]
        y = a.clone()
        momentum = torch.ones(active.numel(), dtype=dtype, device=device)
        rounds = min(check_every, max_iter - iterations)
        for _ in range(rounds):
            a_new = soft_threshold(y - step * (gram @ y - c_act), step * lam)
            if m_act is not None:
                a_new = a_new * m_act
            # restart a column's momentum when the step points against the last move
            restart = ((y - a_new) * (a_new - a)).sum(0) > 0
            next_momentum = 0.5 * (1 + torch.sqrt(1 + 4 * momentum**2))
            weight = torch.where(restart, torch.zeros_like(momentum), (momentum - 1) / next_momentum)
            y = a_new + weight * (a_new - a)
            momentum = torch.where(restart, torch.ones_like(momentum), next_momentum)
            a = a_new
        iterations += rounds
        coefficients[:, active] = a
        gap_act, _ = duality_gap(gram, c_act, target_power[active], lam, a, m_act)
        gap[active] = gap_act
        active = active[gap_act > tol * scale[active]]
    return LassoFit(coefficients, gap, iterations, bool(active.numel() == 0))


def lambda_grid(
    cross: torch.Tensor,
    allowed: torch.Tensor | None = None,
    n_lambdas: int = 20,
    min_ratio: float = 1e-3,
    shared: bool = True,
) -> torch.Tensor:
    """A geometric grid from lambda_max down to ``min_ratio`` of it.  # [n, t]

    ``shared``: one grid for all columns (from the largest lambda_max), so that the same index
    means the same lambda everywhere; otherwise each column gets its own grid.
    """
    top = lambda_max(cross, allowed)  # [t]
    if shared:
        top = torch.full_like(top, float(top.max()) if top.numel() else 0.0)
    ratios = torch.logspace(0, math.log10(min_ratio), n_lambdas, dtype=cross.dtype, device=cross.device)
    return ratios[:, None] * top[None, :]


def lasso_path(
    gram: torch.Tensor,
    cross: torch.Tensor,
    target_power: torch.Tensor,
    lambdas: torch.Tensor,
    allowed: torch.Tensor | None = None,
    keep_coefficients: bool = True,
    max_iter: int = 5000,
    tol: float = 1e-8,
    on_step=None,
) -> LassoPath:
    """Solve at every row of ``lambdas`` [n, t] (decreasing), each solve warm-started from the last.

    ``on_step(index, coefficients)`` sees every solution as it is found (for streaming
    summaries that do not keep the whole path in memory).
    """
    lipschitz = lipschitz_constant(gram)
    n, t = lambdas.shape
    coefficients = None
    kept: list[torch.Tensor] = []
    residual_power = torch.zeros(n, t, dtype=cross.dtype)
    nonzeros = torch.zeros(n, t, dtype=torch.long)
    gaps = torch.zeros(n, t, dtype=cross.dtype)
    iterations = torch.zeros(n, dtype=torch.long)
    converged = torch.zeros(n, dtype=torch.bool)
    for index in range(n):
        fit = lasso_fista(
            gram,
            cross,
            target_power,
            lambdas[index],
            allowed,
            init=coefficients,
            max_iter=max_iter,
            tol=tol,
            lipschitz=lipschitz,
        )
        coefficients = fit.coefficients
        _, power = duality_gap(gram, cross, target_power, lambdas[index], coefficients, allowed)
        residual_power[index] = power.cpu()
        nonzeros[index] = (coefficients != 0).sum(0).cpu()
        gaps[index] = fit.gap.cpu()
        iterations[index] = fit.iterations
        converged[index] = fit.converged
        if keep_coefficients:
            kept.append(coefficients.clone())
        if on_step is not None:
            on_step(index, coefficients)
    return LassoPath(
        lambdas.cpu(),
        kept if keep_coefficients else None,
        residual_power,
        nonzeros,
        gaps,
        iterations,
        converged,
    )


def sufficient_statistics(
    predictors: torch.Tensor, targets: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(G = X^T X / M [p, p], C = X^T T / M [p, t], ||t_j||^2 / M [t]) of X [M, p] and T [M, t]."""
    m = max(predictors.shape[0], 1)
    return predictors.T @ predictors / m, predictors.T @ targets / m, (targets**2).sum(0) / m


def standardize(values: torch.Tensor, rel_tol: float = 1e-6) -> tuple[torch.Tensor, torch.Tensor]:
    """Columns centred and scaled to unit variance; (standardized [M, n], kept [n] bool).

    A column whose standard deviation is below ``rel_tol`` of the largest one (or zero) carries no
    observable variation: it is zeroed and reported as not kept, never divided by ~0.
    """
    centred = values - values.mean(0, keepdim=True)
    spread = centred.pow(2).mean(0).sqrt()  # [n]
    # the threshold stays on the device (no read back per call): max(rel_tol x top, 1e-30)
    kept = spread > ((rel_tol * spread.max()).clamp_min(1e-30) if spread.numel() else 1e-30)
    return torch.where(kept, centred / spread.clamp_min(1e-30), torch.zeros_like(centred)), kept


# ----- active set: exact solutions certified by the KKT conditions ---------------------------------
def kkt_violation(
    gram: torch.Tensor,
    cross: torch.Tensor,
    penalty: torch.Tensor,
    coefficients: torch.Tensor,
    allowed: torch.Tensor | None = None,
) -> torch.Tensor:
    """The largest violation of the Lasso optimality conditions per column.  # [t]

    At a solution the gradient g = G a - C satisfies g_i = -lambda sign(a_i) where a_i != 0 and
    |g_i| <= lambda where a_i = 0 (for allowed coefficients); this returns the worst deviation.
    """
    gradient = gram @ coefficients - cross
    nonzero = coefficients != 0
    # the worse of the two is the one that applies (the other is 0): one where, not two and a maximum
    off_support = (gradient.abs() - penalty).clamp_min(0.0)
    if allowed is not None:
        off_support = torch.where(allowed, off_support, 0.0)
    worst = torch.where(nonzero, (gradient + penalty * coefficients.sign()).abs(), off_support)
    return worst.amax(0) if worst.shape[0] else torch.zeros(worst.shape[1], dtype=worst.dtype)


def solve_on_support(gram, cross, penalty, signs, ridge: float = 1e-12, memory_bytes: float = 2**27):
    """Minimiser of 1/2 a^T G a - c^T a + lambda signs^T a over each column's support.  # [p, t]

    signs [p, t] in {-1, 0, 1}; zero marks coordinates held at 0 (with lambda 0 and signs 1 on
    the support: the least-squares fit on the support). Columns are solved as a batch
    of small dense systems, padded to the largest support (padding is an identity block).
    """
    p, t = signs.shape
    result = torch.zeros(p, t, dtype=cross.dtype, device=cross.device)
    solution, order, _ = _solve_on_slots(gram, cross, penalty, signs, ridge, memory_bytes)
    if order.shape[0]:
        result.scatter_(0, order, solution)
    return result


def _solve_on_slots(
    gram, cross, penalty, signs, ridge: float = 1e-12, memory_bytes: float = 2**27, min_size: int = 0
):
    """``solve_on_support`` in each column's support slots: (solution [k, t], order [k, t],
    each chunk's k x k blocks of G, for ``_gram_on_slots``), ``order`` the support rows in
    increasing order, then other rows (where the solution is 0) up to k, the largest support (at
    least ``min_size``, at most p)."""
    p, t = signs.shape
    support = signs != 0
    size = min(p, max(int(support.sum(0).max()) if t else 0, min_size))
    if size == 0:
        empty = torch.zeros(0, t, dtype=torch.long, device=cross.device)
        return torch.zeros(0, t, dtype=cross.dtype, device=cross.device), empty, None
    order = _support_first(support, size)  # [k, t]
    valid = support.gather(0, order)  # [k, t]
    solution = torch.zeros(size, t, dtype=cross.dtype, device=cross.device)
    chunk = max(1, int(memory_bytes // (8 * size * size)))
    eye = torch.eye(size, dtype=cross.dtype, device=cross.device)
    scale = float(gram.diagonal().mean()) if p else 1.0
    blocks = []
    for start in range(0, t, chunk):
        cols = slice(start, min(start + chunk, t))
        keep = valid[:, cols].T  # [c, k]
        system = _slot_blocks(gram, order[:, cols])  # [c, k, k]
        blocks.append(system)
        both = keep[:, :, None] & keep[:, None, :]
        system = torch.where(both, system, eye) + ridge * scale * eye
        rhs = cross[:, cols].gather(0, order[:, cols]) - penalty[cols] * signs[:, cols].gather(
            0, order[:, cols]
        )
        rhs = rhs.T * keep  # [c, k]
        solution[:, cols] = (torch.linalg.solve(system, rhs[:, :, None])[:, :, 0] * keep).T
    return solution, order, blocks


def _slot_blocks(gram: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
    """G[order[i, c], order[j, c]] as [c, k, k], order [k, c], read as one ``index_select`` of flat
    G (2-3x faster than a two-index gather) and laid out as that gather of ``order.T`` lays it
    out (strides (1, k c, c)): the products by it sum as before, to the bit.  # [c, k, k]"""
    k, c = order.shape
    flat = (order[:, None, :] * gram.shape[1] + order[None, :, :]).reshape(-1)  # [k, k, c]
    return gram.reshape(-1).index_select(0, flat).reshape(k, k, c).permute(2, 0, 1)


def _gram_on_slots(gram, order, direction, memory_bytes: float = 2**27, blocks=None) -> torch.Tensor:
    """(G d) at each column's slots, d = ``direction`` [k, t] in the slots ``order`` [k, t] (0
    elsewhere), from each column's k x k block of G: the same sums as ``(G @ d_full).gather(0,
    order)`` over the k slots instead of all p rows (the embedded model: k about 16 of 364), in
    chunks of columns whose blocks hold at most ``memory_bytes`` (or ``_solve_on_slots``'s).  # [k, t]"""
    size, t = order.shape
    out = torch.empty(size, t, dtype=direction.dtype, device=direction.device)
    chunk = max(1, int(memory_bytes // (8 * max(size, 1) ** 2)))
    for number, start in enumerate(range(0, t, chunk)):
        block = _slot_blocks(gram, order[:, start : start + chunk]) if blocks is None else blocks[number]
        out[:, start : start + chunk] = (block @ direction[:, start : start + chunk].T[:, :, None])[:, :, 0].T
    return out


def _support_first(support: torch.Tensor, size: int) -> torch.Tensor:
    """Each column's support rows in increasing order, then its other rows, first ``size`` only
    (a stable argsort of ``~support``): the largest of the distinct keys -row on the support and
    -row - p off it (3-6x faster than counting with two cumulative sums).  # [size, t]"""
    p = support.shape[0]
    rows = torch.arange(p, device=support.device)[:, None]
    return torch.where(support, -rows, -rows - p).topk(size, dim=0).indices


def _objective(gram_a, cross, penalty, a) -> torch.Tensor:
    """1/2 a^T G a - c^T a + lambda ||a||_1 per column, given G a.  # [t]"""
    return 0.5 * (a * gram_a).sum(0) - (cross * a).sum(0) + penalty * a.abs().sum(0)


def _line_minimum(gram_d, gram_x, cross, penalty, x, direction) -> torch.Tensor:
    """argmin over s in [0, 1] of the objective at x + s d, per column, exactly.  # [t]

    Along a segment the objective is convex and piecewise quadratic; its kinks are where a
    coordinate crosses zero. Its slope on the piece after the k-th kink is
    ``linear + s curvature + lambda (S_0 + 2 sum of the first k |d_i|)``, so the minimum lies on
    the first piece whose slope at its right end is not negative.
    """
    linear = (direction * gram_x).sum(0) - (cross * direction).sum(0)  # [t]
    curvature = (direction * gram_d).sum(0).clamp_min(1e-300)
    crosses = (x != 0) & (x.sign() != direction.sign()) & (direction != 0)
    kinks = torch.where(
        crosses, -x / direction.where(crosses, torch.ones_like(x)), torch.full_like(x, torch.inf)
    )
    # only a column's crossings are finite kinks: keeping the smallest ``most`` (the most
    # crossings of any column, at least one row) leaves out rows that are inf in every column,
    # whose pieces all have the same slope as the first piece after the last finite kink (their
    # jumps are 0 and their ends clamp to 1): the same step, at a fraction of a full sort's cost
    most = min(x.shape[0], max(1, int(crosses.sum(0).max()) if crosses.numel() else 1))
    kinks, order = torch.topk(kinks.clamp_min(0.0), most, dim=0, largest=False, sorted=True)  # [most, t]
    jumps = 2 * direction.abs().gather(0, order) * torch.isfinite(kinks)  # slope rises at each kink
    start_sign = torch.where(x != 0, x.sign(), direction.sign())
    slope_sum = (start_sign * direction).sum(0)  # S_0
    sums = slope_sum[None, :] + torch.cat([torch.zeros_like(jumps[:1]), jumps.cumsum(0)])  # [p + 1, t]
    lefts = torch.cat([torch.zeros_like(kinks[:1]), kinks]).clamp_max(1.0)  # [p + 1, t]
    rights = torch.cat([kinks, torch.full_like(kinks[:1], torch.inf)]).clamp_max(1.0)
    right_slope = linear[None, :] + rights * curvature[None, :] + penalty[None, :] * sums
    piece = (right_slope >= 0).to(torch.uint8).argmax(0)  # the first piece reaching slope >= 0
    piece = torch.where((right_slope >= 0).any(0), piece, torch.full_like(piece, sums.shape[0] - 1))
    total = sums.gather(0, piece[None])[0]
    root = -(linear + penalty * total) / curvature
    return torch.minimum(
        torch.maximum(root, lefts.gather(0, piece[None])[0]), rights.gather(0, piece[None])[0]
    )


def lasso_active_set(
    gram: torch.Tensor,
    cross: torch.Tensor,
    target_power: torch.Tensor,
    penalty: torch.Tensor | float,
    allowed: torch.Tensor | None = None,
    init: torch.Tensor | None = None,
    max_rounds: int = 200,
    tol: float = 1e-9,
    add_per_round: int = 8,
    ridge: float = 1e-12,
    fallback_iter: int = 20000,
    certify: bool = True,
) -> LassoFit:
    """Exact Lasso solutions by a batched feature-sign active-set method (Lee et al. 2007).

    Each round, per column: if the current support is not optimal, solve the quadratic on it with
    the current signs; otherwise add up to ``add_per_round`` of the most violating coordinates
    with the sign that decreases the objective, and solve. A discrete line search along the
    segment to the new solution (at every sign change and the end point) keeps the objective
    decreasing, dropping coordinates that reach zero. A column is done when its KKT violation is
    below ``tol`` times its target's standard deviation: the solution is then exact up to the
    linear solves, whatever the conditioning of G (FISTA's weak spot: it slows down as the
    predictors get more correlated, and stalls when there are more predictors than observations).
    Columns that stop making progress are finished by FISTA from where they are.

    ``certify=False``: no duality gap (``gap`` None) and ``converged`` True, for a caller that
    checks the optimality conditions itself (``fit_sem``: two products by G fewer).
    """
    p, t = cross.shape
    device = cross.device
    setup = solve_setup(cross, target_power, penalty, allowed, init)
    penalty, a = setup.penalty, setup.start
    threshold = tol * setup.target_scale.sqrt()
    pending = torch.arange(t, device=device)
    stalled = torch.zeros(t, dtype=torch.bool, device=device)
    # coordinates a column may add per round: halved when adding that many made no progress
    budget = torch.full((t,), max(1, add_per_round), dtype=torch.long, device=device)
    rounds = 0
    # G a of the pending columns as the last round left it (the product the step's test made),
    # so each round multiplies by G twice, not three times; None before the first round
    gram_a: torch.Tensor | None = None
    if init is None:  # G 0 = 0 (every product of G's finite entries and +0 sums to +0)
        gram_a = torch.zeros_like(a)
    # the pending columns' statistics and coefficients, compacted (``index_select``, a plain
    # copy) only when columns finish: gathering [p, t] columns every round cost more than the
    # round's products on the embedded model
    c, lam, m, x = cross, penalty, setup.allowed, a  # m None: every row allowed
    while pending.numel() and rounds < max_rounds:
        rounds += 1
        limit, allowance = threshold[pending], budget[pending]
        gram_x = gram @ x if gram_a is None else gram_a
        gradient = gram_x - c
        nonzero = x != 0
        signs = x.sign()
        # |gradient + lambda sign(x)| on the support, +0 off it
        on_support = torch.where(nonzero, (gradient + lam * signs).abs(), 0.0).amax(0)
        violation = torch.where(~nonzero if m is None else ~nonzero & m, gradient.abs() - lam, -torch.inf)
        worst = violation.amax(0)
        done = (on_support <= limit) & (worst <= limit)
        # columns whose support is optimal get new coordinates; the others re-solve their support
        grow = ~done & (on_support <= limit)
        growing = grow.nonzero(as_tuple=True)[0]
        if growing.numel():
            # each column's most violating coordinates, for the growing columns only (the top-k
            # of a column is its own: the same picks as over every column; no copy when all grow)
            every = growing.numel() == grow.numel()
            grown_violation = violation if every else violation.index_select(1, growing)
            top = grown_violation.topk(min(max(1, add_per_round), p), dim=0)
            rank = torch.arange(top.values.shape[0], device=device)[:, None]
            add = (top.values > limit[growing]) & (rank < allowance[growing][None, :])
            grown_gradient = gradient if every else gradient.index_select(1, growing)
            new_signs = -grown_gradient.gather(0, top.indices).sign() * add
            chosen = signs if every else signs.index_select(1, growing)
            current = chosen.gather(0, top.indices)
            chosen.scatter_(0, top.indices, torch.where(add, new_signs, current))
            if not every:
                signs.index_copy_(1, growing, chosen)
        # the segment from x to the solution on the new support lies in that support (x's own is
        # part of it), so the line search and the objectives read each column's support slots
        # [k, c] (k its largest size, ~16 of the embedded model's 364 rows) instead of every row;
        # the signs are 0 on masked rows (x is 0 there and none is added), so no product by the mask
        target, order, slot_blocks = _solve_on_slots(gram, c, lam, signs, ridge, min_size=1)
        x_s = x.gather(0, order)  # 0 in the padding slots, as the target
        direction = target - x_s
        gram_d = _gram_on_slots(gram, order, direction, blocks=slot_blocks)
        gram_x_s, c_s = gram_x.gather(0, order), c.gather(0, order)
        step = _line_minimum(gram_d, gram_x_s, c_s, lam, x_s, direction)
        new_s = x_s + step * direction
        # coordinates that the step brings to zero (a kink of the objective) are exactly zero:
        # left at rounding size of what they were and what the step moved them. Scaled by the
        # step's move, not the direction's: on a singular support (collinear predictors) the
        # direction is huge along its null space and the step tiny, and a threshold of 1e-12 of
        # the direction zeroed real coefficients, made the objective worse and stalled the column
        tiny = 1e-12 * (x_s.abs() + (step * direction).abs())
        new_s = torch.where(new_s.abs() <= tiny, torch.zeros_like(new_s), new_s)
        new_x = torch.zeros_like(x).scatter_(0, order, new_s)
        base = _objective(gram_x_s, c_s, lam, x_s)
        gram_new = gram @ new_x
        change = _objective(gram_new.gather(0, order), c_s, lam, new_s)
        progress = change < base - 1e-15 * base.abs().clamp_min(1.0)
        moved = progress & ~done
        kept = torch.where((progress & ~done)[None, :], new_x, x)  # done or no progress: as it was
        a.index_copy_(1, pending, kept)
        gram_kept = torch.where(moved[None, :], gram_new, gram_x)  # G a of every pending column now
        retry = ~done & ~progress & grow & (allowance > 1)
        grown = (allowance * 2).clamp_max(max(1, add_per_round))
        budget[pending] = torch.where(retry, allowance // 2, torch.where(progress, grown, 1))
        stuck = ~done & ~progress & ~retry
        stalled[pending[stuck]] = True
        going = ~done & (progress | retry)
        if bool(going.all()):
            x, gram_a = kept, gram_kept
            continue
        still = going.nonzero(as_tuple=True)[0]
        pending = pending[still]
        c, lam = c.index_select(1, still), lam[still]
        m = None if m is None else m.index_select(1, still)
        x, gram_a = kept.index_select(1, still), gram_kept.index_select(1, still)
    unfinished = torch.zeros(t, dtype=torch.bool, device=device)
    unfinished[pending] = True
    unfinished |= stalled
    iterations = rounds
    if bool(unfinished.any()):
        cols = unfinished.nonzero(as_tuple=True)[0]
        fit = lasso_fista(
            gram,
            cross[:, cols],
            target_power[cols],
            penalty[cols],
            None if setup.allowed is None else setup.allowed[:, cols],
            init=a[:, cols],
            max_iter=fallback_iter,
            tol=tol,
        )
        a[:, cols] = fit.coefficients
        iterations += fit.iterations
    if not certify:
        return LassoFit(a, None, iterations, True)
    gap, _ = duality_gap(gram, cross, target_power, penalty, a, setup.weights)
    violation = kkt_violation(gram, cross, penalty, a, setup.allowed)
    converged = bool((violation <= threshold * 10).all() | (gap <= tol * setup.target_scale).all())
    return LassoFit(a, gap, iterations, converged)
