"""The active-set Lasso solved in blocks of the rows its columns allow (``circuitviz.lasso.blocks``)."""

from __future__ import annotations

import pytest
import torch

from circuitviz.bench.toy_models import tiny_model
from circuitviz.lasso import blocks, sem, solver, units


def layered_problem(seed: int, layers: int = 4, width: int = 64, m: int = 600):
    """A layered SEM's regression, as CircuitLasso's: predictors in ``layers`` layers of ``width``;
    a target of layer i allows the predictors of layers < i (the first layer's allow none); one
    more target (the metric) allows only the last layer's. More observations than predictors, so
    every column's Lasso has one solution."""
    generator = torch.Generator(device="cpu").manual_seed(seed)
    p = layers * width
    x = torch.randn(m, p, generator=generator, dtype=torch.float64, device="cpu")
    layer_of = torch.arange(p, device="cpu") // width
    mixing = torch.randn(p, p, generator=generator, dtype=torch.float64, device="cpu")
    sparse = torch.rand(p, p, generator=generator, device="cpu") < 0.2
    weights = mixing * sparse * (layer_of[:, None] < layer_of[None, :])
    metric_weights = torch.randn(p, 1, generator=generator, dtype=torch.float64, device="cpu")
    y = torch.cat([x @ weights, x @ (metric_weights * (layer_of == layers - 1)[:, None])], dim=1)
    y = y + 0.5 * torch.randn(m, p + 1, generator=generator, dtype=torch.float64, device="cpu")
    allowed = torch.zeros(p, p + 1, dtype=torch.bool, device="cpu")
    allowed[:, :p] = layer_of[:, None] < layer_of[None, :]
    allowed[:, p] = layer_of == layers - 1
    x, y = solver.standardize(x)[0], solver.standardize(y)[0]
    return (*solver.sufficient_statistics(x, y), allowed)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("lam", [0.2, 0.03])
def test_blocks_give_the_solution_of_one_batch(seed, lam):
    """Solved in blocks or over every row at once: the same supports, coefficients and gaps to
    rounding (a block's product skips the rows its columns do not allow), zero wherever a column
    allows nothing, and a plan of more than one block."""
    gram, cross, power, allowed = layered_problem(seed)
    plan = blocks.row_blocks(allowed, "cpu")
    assert plan is not None and len(plan) > 1
    whole = solver.lasso_active_set(gram, cross, power, lam, allowed)
    split = blocks.lasso_in_blocks(gram, cross, power, lam, allowed)
    assert torch.equal(split.coefficients != 0, whole.coefficients != 0)
    torch.testing.assert_close(split.coefficients, whole.coefficients, rtol=0, atol=1e-12)
    torch.testing.assert_close(split.gap, whole.gap, rtol=0, atol=1e-12)
    assert bool((split.coefficients[~allowed] == 0).all())
    assert bool((split.coefficients != 0).any()) and split.converged


def test_the_plan_covers_every_column_once_over_the_rows_it_allows():
    """Every column is in one block; a block's rows are the union of what its columns allow, in
    increasing order; no plan without a mask, elsewhere than on the CPU, or where every column
    allows every row."""
    _, _, _, allowed = layered_problem(0)
    plan = blocks.row_blocks(allowed, "cpu")
    columns = torch.cat([cols for _, cols in plan]).sort().values
    assert torch.equal(columns, torch.arange(allowed.shape[1], device="cpu"))
    for rows, cols in plan:
        union = allowed[:, cols].any(1).nonzero(as_tuple=True)[0]
        assert torch.equal(rows, union)
    assert blocks.row_blocks(None, "cpu") is None
    assert blocks.row_blocks(allowed, "meta") is None
    assert blocks.row_blocks(torch.ones(5, 7, dtype=torch.bool, device="cpu"), "cpu") is None


def test_a_column_allowing_nothing_and_a_single_pattern_of_fewer_rows():
    """A mask with one pattern over half the rows is solved on those rows (one block, not None);
    columns allowing no row are zero with a zero gap."""
    gram, cross, power, _ = layered_problem(2)
    p, t = cross.shape
    allowed = torch.zeros(p, t, dtype=torch.bool, device="cpu")
    allowed[: p // 2, : t // 2] = True
    plan = blocks.row_blocks(allowed, "cpu")
    assert plan is not None
    whole = solver.lasso_active_set(gram, cross, power, 0.05, allowed)
    split = blocks.lasso_in_blocks(gram, cross, power, 0.05, allowed)
    torch.testing.assert_close(split.coefficients, whole.coefficients, rtol=0, atol=1e-12)
    assert bool((split.coefficients[:, t // 2 :] == 0).all()) and bool((split.gap[t // 2 :] == 0).all())


def test_circuit_lasso_fits_the_same_in_blocks(monkeypatch):
    """CircuitLasso's components fit on a tiny Gemma-shaped model, at a fixed lambda and along
    the criterion's path: the same selection and coefficients in blocks as in one batch (a block's
    fixed cost set to zero, so this small problem is split as the embedded model's is)."""
    from test_lasso_speed import gemma_problem

    model = tiny_model("gemma", seed=0)
    spec, observed = gemma_problem(model)
    problem = units.build_component_problem(
        model, spec, observed.writers, observed.activations, observed.metric, 4
    )
    assert blocks.row_blocks(problem.column_allowed(), "cpu") is None  # too small to pay
    for selection in ("0.05", "auto"):
        monkeypatch.setattr(blocks, "_BLOCK_S", 0.0)
        assert len(blocks.row_blocks(problem.column_allowed(), "cpu")) > 1
        split = sem.fit_sem(problem, selection)
        monkeypatch.setattr(blocks, "row_blocks", lambda allowed, device: None)
        whole = sem.fit_sem(problem, selection)
        monkeypatch.undo()
        assert torch.equal(split.coefficients != 0, whole.coefficients != 0)
        torch.testing.assert_close(split.coefficients, whole.coefficients, rtol=0, atol=1e-12)
        assert torch.equal(split.chosen, whole.chosen)


# ----- SAE features identical at every observation (twins) ---------------------------------------
def feature_units(seed: int, m: int = 60, width: int = 40):
    """Two layers of sparse non-negative 'features' with twins: in layer 0, feature 1 is 2.5 x
    feature 0 and feature 5 is feature 4 x 0.1; in layer 1, feature 0 is 3 x layer 0's feature 0
    (a copy across layers, which stays). Fewer observations than features."""
    from circuitviz.lasso.units import SAEUnits

    generator = torch.Generator(device="cpu").manual_seed(seed)
    layers = []
    for _ in range(2):
        values = torch.rand(m, width, generator=generator, device="cpu")
        values = values * (torch.rand(m, width, generator=generator, device="cpu") < 0.15)
        layers.append(values)
    layers[0][:, 1] = 2.5 * layers[0][:, 0]
    layers[0][:, 5] = 0.1 * layers[0][:, 4]
    layers[1][:, 0] = 3.0 * layers[0][:, 0]
    prompt = [torch.zeros(width, device="cpu") for _ in range(2)]
    prompt[0][1], prompt[0][4] = 1.0, 1.0  # the prompt uses feature 1 more than 0; 4 and 5 tie
    features = [torch.arange(width, device="cpu") for _ in range(2)]
    return SAEUnits([3, 9], ["a", "b"], features, layers, prompt, [width, width])


def test_twin_features_are_merged_into_the_one_the_prompt_uses_most():
    """A group of identical (proportional) columns of one layer keeps one predictor, the feature
    most active on the prompt (ties to the lower index); copies across layers are not merged."""
    units_ = feature_units(0)
    metric = torch.randn(60, generator=torch.Generator(device="cpu").manual_seed(1), device="cpu")
    problem = units.build_sae_problem(units_, metric)
    assert problem.info["twins"] == {1: [0], 4: [5]}
    sources = set(problem.source_of.tolist())
    assert 0 not in sources and 5 not in sources and {1, 4, 40} <= sources
    draws = torch.Generator(device="cpu").manual_seed(2)
    columns = torch.randn(20, 3, generator=draws, dtype=torch.float64, device="cpu")
    columns[:, 2] = -columns[:, 0]  # a negative copy is a twin too
    standardised, kept = solver.standardize(columns)
    layer_of = torch.zeros(3, dtype=torch.long, device="cpu")
    assert units.twin_columns(standardised, kept, layer_of, torch.zeros(3, device="cpu")) == {0: [2]}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_feature_fit_does_not_depend_on_how_the_solve_sums(seed, monkeypatch):
    """With twins merged, the SAE feature fit (more features than observations) gives the same
    selection in blocks as in one batch: the Lasso's choice no longer rests on float rounding."""
    problem = units.build_sae_problem(
        feature_units(seed),
        torch.randn(60, generator=torch.Generator(device="cpu").manual_seed(seed), device="cpu"),
    )
    monkeypatch.setattr(blocks, "_BLOCK_S", 0.0)
    assert len(blocks.row_blocks(problem.column_allowed(), "cpu")) > 1
    split = sem.fit_sem(problem, "0.3")
    monkeypatch.setattr(blocks, "row_blocks", lambda allowed, device: None)
    whole = sem.fit_sem(problem, "0.3")
    assert torch.equal(split.selected > 0, whole.selected > 0)
    torch.testing.assert_close(split.coefficients, whole.coefficients, rtol=0, atol=1e-12)


def _unique_groups(keys: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """What ``row_groups`` stands for: torch.unique's groups, numbered by their first row."""
    _, inverse = torch.unique(keys, dim=0, return_inverse=True)
    n = keys.shape[0]
    first = torch.full((int(inverse.max()) + 1,), n, dtype=torch.long, device="cpu")
    first.scatter_reduce_(0, inverse, torch.arange(n, device="cpu"), "amin")
    order = torch.argsort(first)
    rank = torch.empty_like(order)
    rank[order] = torch.arange(order.numel(), device="cpu")
    return first[order], rank[inverse]


def test_row_groups_are_torch_uniques(monkeypatch):
    """``row_groups`` groups rows as ``torch.unique(dim=0)`` does: bool and float64 rows, -0.0
    equal to +0.0, a NaN row its own group; and with every key colliding (the fallback to the
    sort) the same; ``row_blocks`` makes the same plan as from ``torch.unique``'s patterns."""
    generator = torch.Generator(device="cpu").manual_seed(0)
    base = torch.randn(7, 30, generator=generator, dtype=torch.float64, device="cpu")
    pick = torch.randint(0, 7, (60,), generator=generator, device="cpu")
    floats = base[pick].clone()
    floats[pick == pick[3], 5] = 0.0
    floats[3, 5] = -0.0  # equal to its group's +0.0
    floats[10, 2] = float("nan")
    masks = torch.rand(60, 40, generator=generator, device="cpu")[pick] < 0.5
    for keys in (floats[:, :], floats[:, :].T.contiguous().T, masks, masks.T.contiguous().T):
        expected = _unique_groups(keys) if not bool(keys.isnan().any()) else None
        got = blocks.row_groups(keys)
        if expected is not None:
            assert all(torch.equal(a, b) for a, b in zip(got, expected))
    # NaN: its row is its own group (it equals nothing, itself included), every other as unique's
    first, group = blocks.row_groups(floats)
    assert int((group == group[10]).sum()) == 1
    # every key the same: the check finds rows of one key that differ and sorts them instead
    monkeypatch.setattr(
        torch.Tensor, "sum", lambda self, *a, **k: torch.zeros(self.shape[0], dtype=self.dtype, device="cpu")
    )
    got = blocks.row_groups(masks)
    monkeypatch.undo()
    assert all(torch.equal(a, b) for a, b in zip(got, _unique_groups(masks)))
    _, _, _, allowed = layered_problem(0)
    plan = blocks.row_blocks(allowed, "cpu")
    monkeypatch.setattr(blocks, "row_groups", lambda keys: _unique_groups(keys))
    assert all(
        torch.equal(r, r2) and torch.equal(c, c2)
        for (r, c), (r2, c2) in zip(plan, blocks.row_blocks(allowed, "cpu"), strict=True)
    )


def reference_row_blocks(allowed: torch.Tensor):
    """``row_blocks`` as it was before 2026-12-04's last change: each block's columns summed group
    by group inside the cost, for every block the plan weighs."""
    p, t = allowed.shape
    columns_of = allowed.T.cpu()
    firsts, group = blocks.row_groups(columns_of)
    if firsts.shape[0] > blocks._MAX_GROUPS:
        return None
    patterns, sorted_group = torch.unique(columns_of[firsts], dim=0, return_inverse=True)
    inverse = sorted_group[group]
    g = patterns.shape[0]
    columns = torch.bincount(inverse, minlength=g).tolist()
    order = torch.argsort(patterns.sum(1), stable=True).tolist()
    ordered = patterns[order].to(torch.uint8)
    union = [ordered[i:].cummax(0).values.sum(1).tolist() for i in range(g)]

    def cost(i: int, j: int) -> float:
        rows, cols = union[i][j - i], sum(columns[order[k]] for k in range(i, j + 1))
        return rows * rows * cols * blocks._MULTIPLY_ADD_S + rows * cols * blocks._ELEMENT_S + blocks._BLOCK_S

    best, cut = [0.0] * (g + 1), [0] * (g + 1)
    for j in range(1, g + 1):
        best[j], cut[j] = min((best[i] + cost(i, j - 1), i) for i in range(j))
    spans, j = [], g
    while j > 0:
        spans.append((cut[j], j))
        j = cut[j]
    if len(spans) == 1 and union[0][g - 1] == p:
        return None
    plan = []
    for i, j in reversed(spans):
        members = torch.tensor([order[k] for k in range(i, j)], dtype=torch.long, device="cpu")
        rows = patterns[members].any(0).nonzero(as_tuple=True)[0]
        cols = torch.isin(inverse, members).nonzero(as_tuple=True)[0]
        plan.append((rows, cols))
    return plan


def test_the_plan_is_the_one_summed_block_by_block():
    """The plan's costs take each block's column count as a difference of running totals: the
    same whole numbers, so the same plan as summing each block's groups, on layered masks (as the
    feature fit's), nested prefixes with dozens of groups (as the components fit's) and random
    patterns."""
    generator = torch.Generator(device="cpu").manual_seed(3)
    masks = [layered_problem(0)[3], layered_problem(1, layers=8, width=16, m=200)[3]]
    ends = torch.randint(0, 300, (40,), generator=generator, device="cpu")
    pick = torch.randint(0, 40, (900,), generator=generator, device="cpu")
    masks.append(torch.arange(300, device="cpu")[:, None] < ends[pick][None, :])  # 40 nested groups
    masks.append(torch.rand(120, 7, generator=generator, device="cpu")[:, pick % 7] < 0.5)
    for allowed in masks:
        got, expected = blocks.row_blocks(allowed, "cpu"), reference_row_blocks(allowed)
        assert (got is None) == (expected is None)
        if got is not None:
            assert len(got) == len(expected) > 1
            assert all(torch.equal(r, r2) and torch.equal(c, c2) for (r, c), (r2, c2) in zip(got, expected))


@pytest.mark.parametrize("lam", [0.2, 0.03])
def test_an_uncertified_solve_from_none_is_the_certified_one_from_zero(lam):
    """``certify=False`` (no gap, as ``fit_sem`` asks) and ``init=None`` (the first round's G a
    taken as zero, not made): the same coefficients and rounds to the bit as the certified solve
    from an explicit zero start, in blocks and in one batch."""
    gram, cross, power, allowed = layered_problem(1)
    zero = torch.zeros_like(cross)
    for solve in (solver.lasso_active_set, blocks.lasso_in_blocks):
        certified = solve(gram, cross, power, lam, allowed, zero)
        quick = solve(gram, cross, power, lam, allowed, None, certify=False)
        assert torch.equal(quick.coefficients, certified.coefficients)
        assert quick.iterations == certified.iterations and quick.gap is None


def test_slot_blocks_are_the_two_index_gather_in_its_layout():
    """``_slot_blocks`` holds the values of ``gram[order.T[:, :, None], order.T[:, None, :]]`` in
    that gather's strides (a product by a block laid out otherwise sums in another order: the
    path's coefficients moved by 1e-12 when the blocks were contiguous)."""
    generator = torch.Generator(device="cpu").manual_seed(0)
    gram = torch.randn(50, 50, generator=generator, dtype=torch.float64, device="cpu")
    for k, t in ((6, 30), (1, 30), (19, 505), (3, 2)):
        order = torch.randint(0, 50, (k, t), generator=generator, device="cpu")
        index = order.T
        gathered = gram[index[:, :, None], index[:, None, :]]
        blocks_ = solver._slot_blocks(gram, order)
        assert torch.equal(blocks_, gathered) and blocks_.stride() == gathered.stride()


def chained_units(seed: int, layers: int = 3, width: int = 20, m: int = 80):
    """SAE-like features in ``layers`` layers, each layer's a sparse non-negative function of the
    previous one's, and a metric of the last layer's: (SAEUnits, metric [m])."""
    from circuitviz.lasso.units import SAEUnits

    generator = torch.Generator(device="cpu").manual_seed(seed)
    values = [torch.rand(m, width, generator=generator, device="cpu") * 2 - 1]
    for _ in range(layers - 1):
        mixing = torch.randn(width, width, generator=generator, device="cpu")
        mixing = mixing * (torch.rand(width, width, generator=generator, device="cpu") < 0.2)
        noise = 0.3 * torch.randn(m, width, generator=generator, device="cpu")
        values.append(torch.relu(values[-1] @ mixing + noise))
    values[0] = torch.relu(values[0])
    weights = torch.randn(width, generator=generator, device="cpu") * (torch.arange(width, device="cpu") < 4)
    metric = values[-1] @ weights + 0.3 * torch.randn(m, generator=generator, device="cpu")
    features = [torch.arange(width, device="cpu") for _ in range(layers)]
    prompt = [torch.zeros(width, device="cpu") for _ in range(layers)]
    return SAEUnits(list(range(layers)), ["h"] * layers, features, values, prompt, [width] * layers), metric


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("selection", ["0.3", "0.05"])
def test_the_feature_fit_solves_only_the_targets_a_path_into_the_metric_reaches(seed, selection):
    """At a fixed lambda the SAE feature fit solves the metric's Lasso, then those of the features
    it selected, and so on back: their coefficients are the whole fit's (same supports, 1e-12),
    every other column is 0, and fewer columns are solved than the whole fit's."""
    from circuitviz.methods.lasso import _fit_reached

    problem = units.build_sae_problem(*chained_units(seed))
    whole = sem.fit_sem(problem, selection, closeness=False)
    signed = torch.zeros(problem.n_sources, problem.n_targets, dtype=torch.float64)
    signed[problem.source_of[:, None], problem.target_of[None, :]] = whole.coefficients
    edges = (signed != 0) & problem.allowed
    reaches = torch.zeros(problem.n_targets, dtype=torch.bool, device="cpu")
    reaches[-1] = True
    for _ in range(len(problem.info["layers"])):
        reaches[: problem.n_sources] |= (edges & reaches[None, :]).any(1)
    solved_columns = reaches[problem.target_of] & problem.column_allowed().any(0)
    coefficients, regression, solved = _fit_reached(problem, selection, 20)
    assert solved == int(solved_columns.sum()) and 1 < solved < problem.targets.shape[1]
    assert torch.equal(coefficients != 0, whole.coefficients * solved_columns != 0)
    torch.testing.assert_close(coefficients, whole.coefficients * solved_columns, rtol=0, atol=1e-12)
    assert regression["converged"] and regression["distinct_target_columns"] <= solved
