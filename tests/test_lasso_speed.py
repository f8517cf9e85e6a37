"""CircuitLasso's faster reduction and solver against the algorithms they replaced, written out
here as they were: the principal scores of all units in one batch, the line search over a full
sort of every coordinate's kink, the support order from a stable argsort, and the rounds that
gathered every pending column and searched the line over every row. The new code must give the
same numbers (bit for bit on the CPU; the rounds' line search in support slots to rounding, with
the same supports and rounds), down to the method's scores on a tiny model.
Heads that share keys and values (grouped-query attention) are reduced and solved once per
group; on a tiny model whose reduction is exact the scores equal those of one per head."""

import pytest
import torch

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.core.tasks import prepare_task
from circuitviz.lasso import sem, solver, units
from circuitviz.lasso.observations import collect_observations, observation_texts
from circuitviz.methods import get_method
from circuitviz.models.adapter import adapter_of


def reference_principal_scores(x, k, seed=0, power_iterations=4, dtype=None, rows=None, progress=None):
    """The one-batch reduction as it was before units were reduced a chunk at a time (every row,
    whatever ``rows`` says repeats); a list of groups, one such call each."""
    if isinstance(x, list):
        return torch.cat([reference_principal_scores(g, k, seed, power_iterations, dtype) for g in x])
    x = x.to(dtype or x.dtype)
    n, m, d = x.shape
    centred = x - x.mean(1, keepdim=True)
    k = max(1, min(k, m, d))
    width = min(k + 8, m, d)
    if min(m, d) <= max(4 * width, units.EXACT_ROWS):
        if d <= m:
            values, vectors = torch.linalg.eigh(centred.transpose(1, 2) @ centred)
            return centred @ vectors.flip(-1)[:, :, :k]
        values, vectors = torch.linalg.eigh(centred @ centred.transpose(1, 2))
        top = values.flip(-1)[:, :k].clamp_min(0).sqrt()
        return vectors.flip(-1)[:, :, :k] * top[:, None, :]
    generator = torch.Generator(device="cpu").manual_seed(seed)
    omega = torch.randn(n, d, width, generator=generator, device="cpu", dtype=x.dtype).to(x.device)
    if m <= units.GRAM_ROWS:  # the iteration on the rows' Gram matrix
        gram = centred @ centred.transpose(1, 2)
        sample = centred @ omega
        for _ in range(power_iterations):
            sample, _ = torch.linalg.qr(sample)
            sample = gram @ sample
        basis, _ = torch.linalg.qr(sample)
        values, vectors = torch.linalg.eigh(basis.transpose(1, 2) @ (gram @ basis))
        return basis @ vectors.flip(-1)[:, :, :k] * values.flip(-1)[:, :k].clamp_min(0).sqrt()[:, None, :]
    sample = centred @ omega
    for _ in range(power_iterations):
        sample, _ = torch.linalg.qr(sample)
        sample = centred @ (centred.transpose(1, 2) @ sample)
    basis, _ = torch.linalg.qr(sample)
    small = basis.transpose(1, 2) @ centred
    left, singular, _ = torch.linalg.svd(small, full_matrices=False)
    return basis @ left[:, :, :k] * singular[:, None, :k]


def reference_line_minimum(gram_d, gram_x, cross, penalty, x, direction):
    """The exact line search over a full sort of all p kinks per column."""
    linear = (direction * gram_x).sum(0) - (cross * direction).sum(0)
    curvature = (direction * gram_d).sum(0).clamp_min(1e-300)
    crosses = (x != 0) & (x.sign() != direction.sign()) & (direction != 0)
    kinks = torch.where(
        crosses, -x / direction.where(crosses, torch.ones_like(x)), torch.full_like(x, torch.inf)
    )
    kinks, order = torch.sort(kinks.clamp_min(0.0), dim=0)
    jumps = 2 * direction.abs().gather(0, order) * torch.isfinite(kinks)
    start_sign = torch.where(x != 0, x.sign(), direction.sign())
    slope_sum = (start_sign * direction).sum(0)
    sums = slope_sum[None, :] + torch.cat([torch.zeros_like(jumps[:1]), jumps.cumsum(0)])
    lefts = torch.cat([torch.zeros_like(kinks[:1]), kinks]).clamp_max(1.0)
    rights = torch.cat([kinks, torch.full_like(kinks[:1], torch.inf)]).clamp_max(1.0)
    right_slope = linear[None, :] + rights * curvature[None, :] + penalty[None, :] * sums
    piece = (right_slope >= 0).to(torch.uint8).argmax(0)
    piece = torch.where((right_slope >= 0).any(0), piece, torch.full_like(piece, sums.shape[0] - 1))
    total = sums.gather(0, piece[None])[0]
    root = -(linear + penalty * total) / curvature
    return torch.minimum(
        torch.maximum(root, lefts.gather(0, piece[None])[0]), rights.gather(0, piece[None])[0]
    )


def reference_support_first(support, size):
    return torch.argsort((~support).to(torch.uint8), dim=0, stable=True)[:size]


def reference_active_set_rounds(gram, cross, target_power, penalty, allowed=None, tol=1e-9, add_per_round=8):
    """The active set's rounds as they were: every round gathers the pending columns from the
    full [p, t] arrays, takes the top-k over every column and searches the line over every row.
    (coefficients, rounds)"""
    p, t = cross.shape
    setup = solver.solve_setup(cross, target_power, penalty, allowed, None)
    penalty, a = setup.penalty, setup.start
    mask = torch.ones(p, t, dtype=torch.bool, device="cpu") if setup.allowed is None else setup.allowed
    threshold = tol * setup.target_scale.sqrt()
    pending = torch.arange(t, device="cpu")
    budget = torch.full((t,), add_per_round, dtype=torch.long, device="cpu")
    rounds, gram_a = 0, None
    while pending.numel() and rounds < 200:
        rounds += 1
        c, lam, m = cross[:, pending], penalty[pending], mask[:, pending]
        x = a[:, pending]
        gram_x = gram @ x if gram_a is None else gram_a
        gradient = gram_x - c
        nonzero = x != 0
        on_support = torch.where(nonzero, (gradient + lam * x.sign()).abs(), 0.0).amax(0)
        violation = torch.where(~nonzero & m, gradient.abs() - lam, -torch.inf)
        worst = violation.amax(0)
        done = (on_support <= threshold[pending]) & (worst <= threshold[pending])
        grow = ~done & (on_support <= threshold[pending])
        signs = x.sign()
        if bool(grow.any()):
            top = violation.topk(min(add_per_round, p), dim=0)
            rank = torch.arange(top.values.shape[0], device="cpu")[:, None]
            add = (top.values > threshold[pending]) & grow[None, :] & (rank < budget[pending][None, :])
            new_signs = -gradient.gather(0, top.indices).sign() * add
            current = signs.gather(0, top.indices)
            signs.scatter_(0, top.indices, torch.where(add, new_signs, current))
        target = solver.solve_on_support(gram, c, lam, signs * m, 1e-12)
        direction = target - x
        step = solver._line_minimum(gram @ direction, gram_x, c, lam, x, direction)
        new_x = x + step * direction
        tiny = 1e-12 * (x.abs() + direction.abs())
        new_x = torch.where(new_x.abs() <= tiny, torch.zeros_like(new_x), new_x)
        base = solver._objective(gram_x, c, lam, x)
        gram_new = gram @ new_x
        progress = solver._objective(gram_new, c, lam, new_x) < base - 1e-15 * base.abs().clamp_min(1.0)
        moved = progress & ~done
        new_x = torch.where(progress[None, :] | done[None, :], new_x, x)
        a[:, pending] = torch.where(done[None, :], x, new_x)
        gram_kept = torch.where(moved[None, :], gram_new, gram_x)
        retry = ~done & ~progress & grow & (budget[pending] > 1)
        grown = (budget[pending] * 2).clamp_max(add_per_round)
        budget[pending] = torch.where(retry, budget[pending] // 2, torch.where(progress, grown, 1))
        going = ~done & (progress | retry)
        pending = pending[going]
        gram_a = gram_kept[:, going]
    assert pending.numel() == 0, "the reference stopped early: pick a problem it finishes"
    return a, rounds


@pytest.mark.parametrize(
    "shape", [(7, 50, 300), (5, 30, 20), (3, 20, 100), (4, 200, 64), (3, 170, 150), (4, 140, 300)]
)
@pytest.mark.parametrize("chunk_units", [1, 3])
def test_principal_scores_a_chunk_at_a_time_equal_one_batch(shape, chunk_units, monkeypatch):
    """Every branch (randomized on the rows or on their Gram matrix, exact), any chunk size: the
    same scores bit for bit."""
    n, m, d = shape
    generator = torch.Generator().manual_seed(sum(shape))
    # a float32 activation array as the observations hold it, read through a transposed view
    x = (
        torch.randn(m, n, d, generator=generator, device="cpu") * torch.linspace(3, 0.1, d, device="cpu")
    ).transpose(0, 1)
    monkeypatch.setattr(units, "_CPU_CHUNK_BYTES", chunk_units * m * d * 8)
    new = units.principal_scores(x, 4, seed=2, dtype=torch.float64)
    old = reference_principal_scores(x, 4, seed=2, dtype=torch.float64)
    assert new.dtype == torch.float64 and new.shape == old.shape
    assert torch.equal(new, old)


@pytest.mark.parametrize("rows", [140, 60])
def test_the_randomized_iteration_on_the_gram_matrix_gives_the_thin_products_scores(rows, monkeypatch):
    """On few rows the randomized iteration multiplies by the rows' Gram matrix K = C C^T and
    takes the eigendecomposition of Q^T K Q for the SVD of Q^T C: the same scores in exact
    arithmetic (each direction up to its sign), here within 1e-12 of the largest."""
    generator = torch.Generator(device="cpu").manual_seed(rows)
    x = torch.randn(3, rows, 400, generator=generator, dtype=torch.float64, device="cpu")
    x = x * torch.logspace(0, -2, 400, dtype=torch.float64, device="cpu")
    centred = x - x.mean(1, keepdim=True)
    omega = units._random_start(0, 3, 400, 12, torch.float64)
    on_gram = units._randomized_scores(centred.clone(), omega, 4, 4)
    monkeypatch.setattr(units, "GRAM_ROWS", 0)
    thin = units._randomized_scores(centred.clone(), omega, 4, 4)
    signs = torch.sign((on_gram * thin).sum(1, keepdim=True))
    assert bool((signs != 0).all())
    torch.testing.assert_close(on_gram * signs, thin, rtol=0, atol=1e-12 * float(thin.abs().max()))


def test_line_search_and_support_order_equal_the_full_sort():
    """The line search over each column's crossings only, and the counted support order, give
    what the full sort and the stable argsort gave: columns with no crossing, one, many, and
    steps that stop inside a piece or at the segment's end."""
    generator = torch.Generator().manual_seed(0)
    p, t = 40, 12
    gram = torch.randn(p, p, generator=generator, dtype=torch.float64, device="cpu")
    gram = gram @ gram.T / p + 0.1 * torch.eye(p, dtype=torch.float64, device="cpu")
    x = torch.randn(p, t, generator=generator, dtype=torch.float64, device="cpu") * (
        torch.rand(p, t, generator=generator, device="cpu") < 0.3
    )
    direction = torch.randn(p, t, generator=generator, dtype=torch.float64, device="cpu") * (
        torch.rand(p, t, generator=generator, device="cpu") < 0.4
    )
    direction[:, 0] = x[:, 0]  # no crossing in column 0 (it moves away from zero)
    x[:, 1] = 0.0  # nor in column 1
    # the quadratic part's minimum lies at x + s d with s from 0.2 to 2 (past the segment's end)
    cross = gram @ (x + torch.linspace(0.2, 2.0, t, dtype=torch.float64, device="cpu") * direction)
    penalty = 0.01 * torch.rand(t, generator=generator, dtype=torch.float64, device="cpu")
    crossings = ((x != 0) & (x.sign() != direction.sign()) & (direction != 0)).sum(0)
    assert int(crossings.max()) >= 2 and int(crossings[0]) == int(crossings[1]) == 0
    gram_x, gram_d = gram @ x, gram @ direction
    new = solver._line_minimum(gram_d, gram_x, cross, penalty, x, direction)
    old = reference_line_minimum(gram_d, gram_x, cross, penalty, x, direction)
    assert torch.equal(new, old)
    assert bool(((new > 0) & (new < 1)).any()) and bool((new == 1).any())
    support = x != 0
    size = int(support.sum(0).max())
    assert torch.equal(solver._support_first(support, size), reference_support_first(support, size))
    assert torch.equal(solver._support_first(support, p), reference_support_first(support, p))


def test_active_set_equals_the_old_helpers():
    """A whole active-set solve (many rounds, warm start from zero) with the new helpers or the
    old ones: the same coefficients bit for bit."""
    generator = torch.Generator().manual_seed(3)
    m, p, t = 80, 60, 15
    x = torch.randn(m, p, generator=generator, dtype=torch.float64, device="cpu")
    y = x @ (
        torch.randn(p, t, generator=generator, dtype=torch.float64, device="cpu")
        * (torch.rand(p, t, generator=generator, device="cpu") < 0.2)
    )
    y = y + 0.3 * torch.randn(m, t, generator=generator, dtype=torch.float64, device="cpu")
    gram, cross, power = solver.sufficient_statistics(x, y)
    new = solver.lasso_active_set(gram, cross, power, 0.05)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(solver, "_line_minimum", reference_line_minimum)
        patch.setattr(solver, "_support_first", reference_support_first)
        old = solver.lasso_active_set(gram, cross, power, 0.05)
    assert new.iterations == old.iterations and new.iterations > 3
    assert torch.equal(new.coefficients, old.coefficients)


@pytest.mark.parametrize("lam", [0.3, 0.05, 0.002])
@pytest.mark.parametrize("masked", [False, True])
def test_active_set_rounds_equal_the_dense_rounds(lam, masked):
    """The rounds that keep the pending columns compacted, take the top-k over the growing columns
    only and search the line in each column's support slots: the same rounds, the same supports
    and the same coefficients to rounding (the slots' sums skip the zero rows, so their last bits
    may differ) as the dense rounds that gathered every column every round (columns finishing
    at different rounds, an allowed mask pinning some coefficients)."""
    generator = torch.Generator().manual_seed(11)
    m, p, t = 90, 70, 40
    x = torch.randn(m, p, generator=generator, dtype=torch.float64, device="cpu")
    y = x @ (
        torch.randn(p, t, generator=generator, dtype=torch.float64, device="cpu")
        * (torch.rand(p, t, generator=generator, device="cpu") < 0.15)
    )
    noise = torch.randn(m, t, generator=generator, dtype=torch.float64, device="cpu")
    y = y + torch.linspace(0.05, 2.0, t, dtype=torch.float64, device="cpu") * noise
    x, y = solver.standardize(x)[0], solver.standardize(y)[0]
    gram, cross, power = solver.sufficient_statistics(x, y)
    allowed = torch.rand(p, t, generator=generator, device="cpu") < 0.7 if masked else None
    new = solver.lasso_active_set(gram, cross, power, lam, allowed)
    old, rounds = reference_active_set_rounds(gram, cross, power, lam, allowed)
    assert new.iterations == rounds and rounds > 3
    assert torch.equal(new.coefficients != 0, old != 0)
    assert torch.allclose(new.coefficients, old, rtol=0, atol=1e-13)
    assert bool((new.coefficients != 0).any())


def test_a_rank_deficient_support_is_solved_without_the_fallback(monkeypatch):
    """Sparse, collinear predictors (more columns than observations, as SAE features on a short
    prompt): a support whose system is singular gives a huge direction along its null space and
    a step of ~1e-17. Coordinates are zeroed only when the step itself leaves them at rounding
    size; zeroing every one below 1e-12 of the direction's size (0.3 here) made the objective
    worse, the column stalled and FISTA finished it (seed 46: two columns at lambda 0.1 or 0.03).
    Now every column ends in the active set, its optimality conditions certified."""
    generator = torch.Generator().manual_seed(46)
    m, p, t = 40, 120, 20
    base = torch.randn(m, 30, generator=generator, dtype=torch.float64, device="cpu")
    base = base * (torch.rand(m, 30, generator=generator, device="cpu") < 0.15)
    mix = torch.randn(30, p, generator=generator, dtype=torch.float64, device="cpu")
    x = base @ (mix * (torch.rand(30, p, generator=generator, device="cpu") < 0.05))  # rank <= 30
    jitter = torch.randn(m, p, generator=generator, dtype=torch.float64, device="cpu")
    x = x + 1e-9 * jitter * (x != 0)
    weights = torch.randn(p, t, generator=generator, dtype=torch.float64, device="cpu")
    weights = weights * (torch.rand(p, t, generator=generator, device="cpu") < 0.05)
    noise = torch.randn(m, t, generator=generator, dtype=torch.float64, device="cpu")
    y = x @ weights + 0.3 * noise
    x, y = solver.standardize(x)[0], solver.standardize(y)[0]
    gram, cross, power = solver.sufficient_statistics(x, y)

    def no_fallback(*args, **kwargs):
        raise AssertionError("a column stalled and went to FISTA")

    monkeypatch.setattr(solver, "lasso_fista", no_fallback)
    for lam in (0.3, 0.1, 0.03):
        fit = solver.lasso_active_set(gram, cross, power, lam)
        penalty = torch.full((t,), lam, dtype=torch.float64, device="cpu")
        assert fit.converged
        assert float(solver.kkt_violation(gram, cross, penalty, fit.coefficients).max()) < 1e-8


def test_the_random_start_is_kept_and_equals_a_fresh_draw(monkeypatch):
    """The randomized reduction's start is drawn once per (seed, shape, dtype) and kept: the same
    numbers as a fresh draw, untouched by the reductions that read it."""
    units._RANDOM_STARTS.clear()
    x = torch.randn(3, 160, 200, generator=torch.Generator().manual_seed(5), device="cpu")
    first = units.principal_scores(x, 4, seed=7, dtype=torch.float64)
    again = units.principal_scores(x, 4, seed=7, dtype=torch.float64)
    generator = torch.Generator(device="cpu").manual_seed(7)
    fresh = torch.randn(3, 200, 12, generator=generator, device="cpu", dtype=torch.float64)
    assert torch.equal(units._random_start(7, 3, 200, 12, torch.float64), fresh)
    assert torch.equal(first, again)
    assert torch.equal(first, reference_principal_scores(x, 4, seed=7, dtype=torch.float64))
    other = units.principal_scores(x, 4, seed=8, dtype=torch.float64)  # another seed, another start
    assert not torch.equal(other, first)
    monkeypatch.setattr(units, "_RANDOM_STARTS_BYTES", 10 * 200 * 12 * 8)  # room for ten [1, 200, 12]
    for seed in range(13):  # the kept draws stay within their bytes, the most recent kept
        units._random_start(seed, 1, 200, 12, torch.float64)
    assert [key[0] for key in units._RANDOM_STARTS] == list(range(3, 13))
    big = units._random_start(99, 20, 200, 12, torch.float64)  # over the budget alone: drawn, not kept
    assert big.shape == (20, 200, 12) and not units._RANDOM_STARTS


@pytest.mark.parametrize("settings", [{}, {"lasso_lambda": "0.05", "directions": 2}])
def test_method_scores_equal_the_old_algorithms(settings, monkeypatch):
    """CircuitLasso's scores on a tiny model: the same with the old reduction and solver helpers."""
    model = tiny_model("gpt2", seed=0)
    method = get_method("circuit-lasso")
    config = method.make_config({"n_paraphrases": 2, **settings})
    new = method.run_on(model, IOI_TASK, config, budgets=[], model_id="tiny").scores
    monkeypatch.setattr(units, "principal_scores", reference_principal_scores)
    monkeypatch.setattr(solver, "_line_minimum", reference_line_minimum)
    monkeypatch.setattr(solver, "_support_first", reference_support_first)
    old = method.run_on(model, IOI_TASK, config, budgets=[], model_id="tiny").scores
    assert torch.equal(new, old)
    assert bool((new > 0).any())


def each_head_alone(values):
    """The old reduction's grouping: every head its own unit."""
    heads = list(range(values.shape[1]))
    return heads, heads


def each_column_alone(targets, allowed):
    """The old solve: every target column its own Lasso."""
    columns = torch.arange(targets.shape[1], device=targets.device)
    return columns, columns


def gemma_problem(model):
    spec = adapter_of(model).spec
    prepared = prepare_task(model, IOI_TASK)
    texts = observation_texts(IOI_TASK, 2)
    observed = collect_observations(model, spec, prepared, texts, units.component_hook_names(model, spec))
    return spec, observed


def test_heads_of_one_key_value_group_are_reduced_once(monkeypatch):
    """Gemma's shape (one key/value head for all query heads): each layer's keys and values are
    reduced once, not once per head, and every head of the group gets the same target columns."""
    model = tiny_model("gemma", seed=0)
    spec, observed = gemma_problem(model)
    reduced = []
    original = units.principal_scores

    def counting(x, *args, **kwargs):
        reduced.append(sum(int(group.shape[0]) for group in (x if isinstance(x, list) else [x])))
        return original(x, *args, **kwargs)

    monkeypatch.setattr(units, "principal_scores", counting)
    problem = units.build_component_problem(
        model, spec, observed.writers, observed.activations, observed.metric, 4
    )
    per_layer = spec.n_heads + 2  # queries per head, one key group, one value group
    assert sum(reduced) == spec.n_forward + spec.n_layers * (per_layer + 1)  # old: 3 * n_heads + 1
    for layer in range(spec.n_layers):
        for qkv in "kv":
            readers = spec.head_backward(layer, qkv)
            columns = [
                problem.targets[:, problem.target_of == reader]
                for reader in range(readers.start, readers.stop)
            ]
            assert all(torch.equal(column, columns[0]) for column in columns[1:])
        queries = spec.head_backward(layer, "q")
        first, second = (problem.targets[:, problem.target_of == queries.start + h] for h in (0, 1))
        assert not torch.equal(first, second)  # query heads stay their own


def test_identical_target_columns_are_solved_once(monkeypatch):
    """The Lassos of identical target columns are one: solved once (fewer columns reach the
    active set than the old one-per-column solve) and the same solution at the fixed lambdas the
    method uses (the adaptive default's 0.3, a number). Under "auto" a column whose extended BIC
    ties between two grid points to rounding may keep the other one, as a different batch of
    columns could make it do before."""
    model = tiny_model("gemma", seed=0)
    spec, observed = gemma_problem(model)
    problem = units.build_component_problem(
        model, spec, observed.writers, observed.activations, observed.metric, 4
    )
    distinct, copy_of = sem.distinct_columns(problem.targets, problem.column_allowed())
    assert 0 < len(distinct) < problem.targets.shape[1]
    assert torch.equal(problem.targets[:, distinct][:, copy_of], problem.targets)
    solved: list[int] = []
    original = sem.lasso_in_blocks

    def counting(gram, cross, *args, **kwargs):
        solved.append(int(cross.shape[1]))
        return original(gram, cross, *args, **kwargs)

    for selection in ("0.05", "0.3"):
        solved.clear()
        monkeypatch.setattr(sem, "lasso_in_blocks", counting)
        new = sem.fit_sem(problem, selection)
        new_columns = solved[0]
        monkeypatch.setattr(sem, "distinct_columns", each_column_alone)
        solved.clear()
        old = sem.fit_sem(problem, selection)
        monkeypatch.undo()
        assert new_columns == len(distinct) and solved[0] == problem.targets.shape[1]
        assert torch.equal(new.coefficients != 0, old.coefficients != 0)
        torch.testing.assert_close(new.coefficients, old.coefficients, rtol=0, atol=1e-12)
        torch.testing.assert_close(new.selected, old.selected, rtol=0, atol=1e-12)
        assert torch.equal(new.chosen, old.chosen)


@pytest.mark.parametrize("shape", ["gemma", "llama"])
def test_method_scores_equal_one_reduction_and_solve_per_head(shape, monkeypatch):
    """On tiny models with grouped keys and values (their heads' reduction is exact, so a head
    reduced alone gives its group's scores), the method's scores equal those of the old code,
    which reduced and solved every head alone, to the solver's tolerance; the same edges rank."""
    model = tiny_model(shape, seed=0)
    method = get_method("circuit-lasso")
    config = method.make_config({"n_paraphrases": 2})
    new = method.run_on(model, IOI_TASK, config, budgets=[], model_id="tiny").scores
    monkeypatch.setattr(units, "distinct_heads", each_head_alone)
    monkeypatch.setattr(sem, "distinct_columns", each_column_alone)
    old = method.run_on(model, IOI_TASK, config, budgets=[], model_id="tiny").scores
    torch.testing.assert_close(new, old, rtol=1e-6, atol=1e-9)
    assert torch.equal(
        torch.argsort(new.flatten(), stable=True)[-50:], torch.argsort(old.flatten(), stable=True)[-50:]
    )
    assert bool((new > 0).any())
