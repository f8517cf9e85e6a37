"""Fit CircuitLasso's linear structural equation model: one Lasso per target column, all batched.

The path: a shared geometric lambda grid from the largest lambda_max of all targets down to
``min_ratio`` of it (targets are standardised, so one lambda means the same correlation level for
every target), each solve warm-started from the previous one (a fixed lambda is solved alone,
from zero: the same solution, sooner). Which lambda each target keeps:

- ``"auto"``: per target column, the lambda of smallest extended BIC (Chen and Chen 2008),
  ``M log(RSS/M) + df (log M + 2 gamma log p)`` with gamma = 0.5, p the column's allowed
  predictors and RSS that of the least-squares refit on the Lasso's support (so the criterion
  judges supports, not the Lasso's shrinkage). A column leaves the path once its criterion has
  not improved for ``PATIENCE`` grid points;
- a number: that lambda for every column (in correlation units: an edge enters once its
  predictor's correlation with the target's residual exceeds it; 0 < lambda <= 1);
- a target sparsity: the one lambda, shared by all columns, whose count of selected unit edges
  is the largest not above the target (the grid brackets it, bisection narrows it down).

Pairs that are not selected are still ranked, by how close they are to entering the model at
the chosen solution: the largest |gradient| / lambda over their columns (1 = about to enter).
``edge_scores`` turns that ranking into scores below every selected edge, for the top-N budgets.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import torch

from ..core.text import given
from .blocks import lasso_in_blocks
from .solver import (
    kkt_violation,
    lambda_grid,
    solve_on_support,
    solver_threads,
    sufficient_statistics,
)
from .units import RegressionProblem

EBIC_GAMMA = 0.5
PATIENCE = 3
BISECTIONS = 10  # target sparsity: bisection steps between the two grid lambdas around the target


@dataclass
class SEMFit:
    """The fitted model, unit-level and column-level.

    selected [n_sources, n_targets]: aggregated |coefficient| at each target's chosen lambda
    (0 = not selected); coefficients [P, T]: the column coefficients at the chosen lambdas;
    closeness [n_sources, n_targets]: for pairs not selected, the largest |gradient| / lambda over
    their columns at the chosen solution (how near they are to entering); lambdas [n]: the grid;
    chosen [T]: the lambda each target column kept.
    """

    selected: torch.Tensor
    coefficients: torch.Tensor
    closeness: torch.Tensor | None  # None when the caller asked for none (``fit_sem(closeness=False)``)
    lambdas: torch.Tensor
    chosen: torch.Tensor
    info: dict = field(default_factory=dict)


def parse_selection(value) -> tuple[str, float]:
    """("auto", 0), ("adaptive", 0) or ("lambda", value) from a config's lambda setting;
    ValueError otherwise ("adaptive" is resolved by ``fit_adaptive``, never by ``fit_sem``)."""
    text = str(value).strip().lower()
    if text in ("", "auto"):
        return "auto", 0.0
    if text == "adaptive":
        return "adaptive", 0.0
    try:
        number = float(text)
    except ValueError:
        raise ValueError(
            f"lambda must be 'adaptive', 'auto' or a number between 0 and 1 (a correlation level), not {given(value)}."
        ) from None
    if math.isnan(number) or not 0 < number <= 1:
        raise ValueError(
            f"lambda {number} is outside (0, 1]; standardised Lasso lambdas are correlation levels, e.g. 0.05."
        )
    return "lambda", number


def _ebic(gram, cross, power, coefficients, m: int, penalty: torch.Tensor) -> torch.Tensor:
    """Extended BIC of each column's support, with the least-squares refit on that support.  # [T]

    The Lasso's own residual carries its shrinkage: a criterion on it keeps adding small
    coefficients to make up for the shrunken true ones. Refitting on the support (the
    "Lasso-OLS hybrid" of Efron et al. 2004) measures what the support itself explains.
    """
    support = (coefficients != 0).to(coefficients.dtype)
    refit = solve_on_support(gram, cross, torch.zeros_like(power), support, ridge=1e-10)
    product = gram @ refit
    residual = (power - 2 * (cross * refit).sum(0) + (refit * product).sum(0)).clamp_min(0)
    nonzeros = support.sum(0)
    value = m * torch.log(torch.maximum(residual, 1e-12 * power.clamp_min(1e-30))) + nonzeros * penalty
    return torch.where(nonzeros < m, value, torch.full_like(value, math.inf))


def fit_sem(
    problem: RegressionProblem,
    selection="auto",
    target_edges: int = 0,
    n_lambdas: int = 20,
    min_ratio: float = 1e-3,
    tol: float = 1e-9,
    sample_size: int | None = None,
    closeness: bool = True,
    check=None,
) -> SEMFit:
    """Fit every target column's Lasso along the path and keep the chosen solutions.

    ``sample_size``: the number of independent observations the criterion counts (default: the
    rows); see ``effective_sample_size``. ``closeness=False``: no ``SEMFit.closeness`` (None), for
    a caller that ranks no unselected pair (the SAE feature circuit): a product by G of every
    column fewer. ``check``: called before each block's solve at each lambda (``lasso_in_blocks``):
    a run's report, which raises once it is cancelled.
    """
    with solver_threads(problem.predictors.device):
        return _fit_sem(
            problem, selection, target_edges, n_lambdas, min_ratio, tol, sample_size, closeness, check
        )


def _fit_sem(
    problem, selection, target_edges, n_lambdas, min_ratio, tol, sample_size, closeness, check=None
) -> SEMFit:
    start = time.perf_counter()
    mode, fixed = parse_selection(selection)
    if target_edges and target_edges > 0:  # its own lambda whatever the setting: 'adaptive' (the
        mode = "target_edges"  # default) raised below, so --target-edges failed after the estimate
    elif mode == "adaptive":
        raise ValueError("fit_sem needs a lambda or 'auto'; 'adaptive' is chosen by fit_adaptive.")
    predictors = problem.predictors
    m, p = predictors.shape
    device, dtype = predictors.device, predictors.dtype
    full_allowed = problem.column_allowed().to(device)
    # identical target columns with the same allowed sources (the heads of one key/value group)
    # have one Lasso: solved once, its solution copied to each (``distinct_columns``)
    distinct, copy_of = distinct_columns(problem.targets, full_allowed)
    targets, allowed = problem.targets[:, distinct], full_allowed[:, distinct]
    t = targets.shape[1]
    gram, cross, power = sufficient_statistics(predictors, targets)
    if mode == "lambda":
        # one lambda: solved from zero at once. The active set gives the same solution (KKT-certified,
        # 1e-12 apart on the embedded model) as walking the grid down to it with warm starts, in
        # about a third of the time there (docs/methods.md: CircuitLasso's speed); no grid is made
        grid = torch.tensor([fixed], dtype=dtype, device=device)
    else:
        grid = lambda_grid(cross * allowed, None, n_lambdas, min_ratio, shared=True)[:, 0]
    candidates = allowed.sum(0).clamp_min(1).to(dtype)  # [T]
    n_eff = int(sample_size or m)
    ebic_penalty = math.log(max(n_eff, 2)) + 2 * EBIC_GAMMA * torch.log(candidates)  # [T]
    unit_allowed = problem.allowed.to(device)

    coefficients = torch.zeros(p, t, dtype=dtype, device=device)
    best = torch.zeros(p, t, dtype=dtype, device=device)
    best_ebic = torch.full((t,), math.inf, dtype=dtype, device=device)
    chosen = torch.zeros(t, dtype=dtype, device=device)
    since_best = torch.zeros(t, dtype=torch.long, device=device)
    running = torch.ones(t, dtype=torch.bool, device=device)
    rounds, steps = 0, 0
    for index in range(grid.shape[0]):
        lam = grid[index]
        columns = running.nonzero(as_tuple=True)[0]
        if columns.numel() == 0:
            break
        if columns.numel() == t:  # every column (a fixed lambda, the path's first points): views, not copies
            columns = slice(None)
        fit = lasso_in_blocks(
            gram,
            cross[:, columns],
            power[columns],
            lam,
            allowed[:, columns],
            # the first point starts from zero: None says so, and the first round's G a is not made
            init=coefficients[:, columns] if index else None,
            tol=tol,
            certify=False,  # the chosen solutions' optimality conditions are checked below, once
            check=check,
        )
        coefficients[:, columns] = fit.coefficients
        rounds += fit.iterations
        steps += 1
        if mode == "auto":
            ebic = _ebic(
                gram, cross[:, columns], power[columns], fit.coefficients, n_eff, ebic_penalty[columns]
            )
            better = ebic < best_ebic[columns]
            best_ebic[columns] = torch.where(better, ebic, best_ebic[columns])
            best[:, columns] = torch.where(better[None, :], fit.coefficients, best[:, columns])
            chosen[columns] = torch.where(better, lam, chosen[columns])
            since_best[columns] = torch.where(better, 0, since_best[columns] + 1)
            running &= since_best < PATIENCE
        elif mode == "lambda":
            best, chosen[:] = coefficients.clone(), lam
        else:
            count = int(((problem.aggregate(coefficients[:, copy_of]) > 0) & unit_allowed).sum())
            if count > target_edges:
                # the target lies between the last two grid points: bisect (geometrically) there
                high, low = float(grid[index - 1]) if index else float(lam) * 2, float(lam)
                for _ in range(BISECTIONS):
                    middle = math.sqrt(high * low)
                    fit = lasso_in_blocks(
                        gram, cross, power, middle, allowed, init=best, tol=tol, certify=False, check=check
                    )
                    rounds += fit.iterations
                    count = int(((problem.aggregate(fit.coefficients[:, copy_of]) > 0) & unit_allowed).sum())
                    if count > target_edges:
                        low = middle
                    else:
                        high, best, chosen[:] = middle, fit.coefficients.clone(), middle
                break
            best, chosen[:] = coefficients.clone(), lam
    violation = kkt_violation(gram, cross, chosen, best, allowed)
    best, chosen, violation = best[:, copy_of], chosen[copy_of], violation[copy_of]
    cross, power, allowed, t = cross[:, copy_of], power[copy_of], full_allowed, len(copy_of)
    selected = problem.aggregate(best)
    info = {
        "selection": mode,
        "lambda_grid": [float(value) for value in grid.tolist()],
        "lambda_chosen_median": float(chosen.median()) if t else 0.0,
        "lambda_fixed": fixed if mode == "lambda" else None,
        "target_edges": int(target_edges) if mode == "target_edges" else None,
        "path_steps": steps,
        "solver_rounds": rounds,
        "max_kkt_violation": float(violation.max()) if t else 0.0,
        "converged": bool((violation <= 1e-6 * power.clamp_min(1e-30).sqrt()).all()) if t else True,
        "observations": m,
        "distinct_target_columns": len(distinct),
        "solve_s": time.perf_counter() - start,
        "device": str(device),
    }
    return SEMFit(
        selected,
        best,
        _closeness(problem, gram, cross, best, chosen, allowed) if closeness else None,
        grid.cpu(),
        chosen.cpu(),
        info,
    )


def distinct_columns(targets: torch.Tensor, allowed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(the first of each group of identical columns [d], each column's group [T]), on targets'
    device. Columns are identical when their values [M] and allowed sources [P] are equal bit for
    bit: their Lassos are one problem (one solution)."""
    t = targets.shape[1]
    if t == 0:
        empty = torch.zeros(0, dtype=torch.long, device=targets.device)
        return empty, empty
    keys = torch.cat([targets, allowed.to(targets.dtype)], dim=0).T  # [T, M + P]
    _, inverse = torch.unique(keys, dim=0, return_inverse=True)  # sorted groups
    first = torch.full((int(inverse.max()) + 1,), t, dtype=torch.long, device=targets.device)
    first.scatter_reduce_(0, inverse, torch.arange(t, device=targets.device), "amin")
    order = torch.argsort(first)  # groups in the order of their first column
    rank = torch.empty_like(order)
    rank[order] = torch.arange(order.numel(), device=targets.device)
    return first[order], rank[inverse]


def _closeness(problem, gram, cross, coefficients, penalty, allowed) -> torch.Tensor:
    """max over a pair's zero columns of |gradient| / lambda at the chosen solution.  # [n_src, n_tgt]"""
    gradient = (gram @ coefficients - cross).abs() / penalty.clamp_min(1e-30)[None, :]
    gradient = torch.where(allowed & (coefficients == 0), gradient, torch.zeros_like(gradient))
    device = gradient.device
    rows = problem.source_of.to(device)[:, None].expand_as(gradient)
    by_source = torch.zeros(problem.n_sources, gradient.shape[1], dtype=gradient.dtype, device=device)
    by_source.scatter_reduce_(0, rows, gradient, "amax")
    cols = problem.target_of.to(device)[None, :].expand_as(by_source)
    result = torch.zeros(problem.n_sources, problem.n_targets, dtype=gradient.dtype, device=device)
    result.scatter_reduce_(1, cols, by_source, "amax")
    return result


# "adaptive" lambda: observations a linear model explains exactly (a planted model's: no norms,
# every reader's input linear in the writers it reads) are fitted at EXACT_LAMBDA and scored by
# the least-squares refit; any other (a real model's, or too few observations to tell) at
# NOISY_LAMBDA with the Lasso's own coefficients. Both measured: docs/methods.md.
NOISY_LAMBDA = 0.3
EXACT_LAMBDA = 0.002
EXACT_RESIDUAL = 1e-6  # median share of a target's variance left by least squares on every allowed source
MIN_ROWS_PER_PREDICTOR = 2  # below this the least-squares fit is too close to saturated to tell


def linear_residual(problem: RegressionProblem) -> float | None:
    """Median over target columns of the variance share least squares on every allowed source
    leaves unexplained; None when the observations are too few to tell (under
    ``MIN_ROWS_PER_PREDICTOR`` rows per predictor column)."""
    m, p = problem.predictors.shape
    if p == 0 or m < MIN_ROWS_PER_PREDICTOR * p or problem.targets.shape[1] == 0:
        return None
    gram, cross, power = sufficient_statistics(problem.predictors, problem.targets)
    support = problem.column_allowed().to(gram.device, cross.dtype)
    solution = solve_on_support(gram, cross, torch.zeros_like(power), support, ridge=1e-10)
    residual = (power - 2 * (cross * solution).sum(0) + (solution * (gram @ solution)).sum(0)).clamp_min(0)
    return float((residual / power.clamp_min(1e-30)).median())


def fit_adaptive(
    problem: RegressionProblem, n_lambdas: int = 20, check=None
) -> tuple[SEMFit, torch.Tensor, dict]:
    """(fit, unit strengths [n_sources, n_targets], what was chosen) for the "adaptive" lambda
    (``check`` as ``fit_sem`` takes it)."""
    residual = linear_residual(problem)
    exact = residual is not None and residual < EXACT_RESIDUAL
    fit = fit_sem(problem, str(EXACT_LAMBDA if exact else NOISY_LAMBDA), 0, n_lambdas, check=check)
    strengths = refitted_strengths(problem, fit) if exact else fit.selected.cpu().clone()
    regime = {
        "regime": "exact linear" if exact else "noisy",
        "linear_residual": residual,
        "lambda_adaptive": EXACT_LAMBDA if exact else NOISY_LAMBDA,
    }
    return fit, strengths, regime


def refitted_strengths(problem: RegressionProblem, fit: SEMFit) -> torch.Tensor:
    """Unit-level strengths of the least-squares refit on each column's Lasso support (the
    support's own fit, without the shrinkage that makes weak true sources look like noise).
    # [n_sources, n_targets] float64, CPU"""
    gram, cross, power = sufficient_statistics(problem.predictors, problem.targets)
    support = (fit.coefficients != 0).to(cross.dtype)
    refit = solve_on_support(gram, cross, torch.zeros_like(power), support, ridge=1e-10)
    return problem.aggregate(refit).cpu()


def ranked_shares(fit: SEMFit, shares: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """Scores: edges on a selected path into the metric by their share; below them the other
    selected edges by their strength, then every other allowed pair by how close it is to
    entering (``edge_scores``'s order). # [n_sources, n_targets] float32"""
    allowed = allowed.cpu()
    shares = torch.where(
        allowed, shares.double().cpu(), torch.zeros(allowed.shape, dtype=torch.float64, device="cpu")
    )
    on_path = shares > 0
    rest = edge_scores(fit, allowed).double()  # selected by strength, then closeness
    top = float(rest.max()) if rest.numel() else 1.0
    floor = 0.5 * float(shares[on_path].min()) if bool(on_path.any()) else 1.0
    below = floor * rest / max(top, 1e-300)
    return torch.where(on_path, shares, torch.where(allowed, below, torch.zeros_like(below))).float()


def edge_scores(fit: SEMFit, allowed: torch.Tensor) -> torch.Tensor:
    """Scores over unit pairs: selected pairs by their aggregated |coefficient|; below them every
    other allowed pair, ordered by how close it is to entering (``SEMFit.closeness``).
    # [n_sources, n_targets] float32
    """
    allowed = allowed.cpu()
    selected = torch.where(allowed, fit.selected.float().cpu(), torch.zeros(allowed.shape))
    chosen = selected > 0
    floor = 0.5 * float(selected[chosen].min()) if bool(chosen.any()) else 1.0
    closeness = fit.closeness.float().cpu().clamp(0.0, 1.0)
    rest = allowed & ~chosen
    return torch.where(rest, floor * closeness, selected)
