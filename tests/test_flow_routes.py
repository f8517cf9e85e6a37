"""Information flow routes against a reference written from the paper's formulas with plain loops
over TransformerLens's own cache (tests/reference_patching.writer_outputs gives the writers)."""

from __future__ import annotations

import math

import pytest
import torch
from reference_patching import writer_outputs

from circuitviz.bench.toy_models import IOI_TASK, planted_model, tiny_model
from circuitviz.core.graph import GraphSpec, prune, top_n
from circuitviz.core.tasks import PromptTask, prepare_task
from circuitviz.measure.evaluate import Evaluator
from circuitviz.methods import get_method
from circuitviz.methods.flow_routes import (
    FlowRoutesConfig,
    neutral_task,
    proximity_shares,
    route_graph,
    route_scores,
)

SHAPES = ("gpt2", "gemma", "llama")


def _share(parts: list[torch.Tensor], k: int) -> float:
    """Part k's proximity share of the sum of ``parts``, from the formula, one part at a time."""
    total = sum(parts)
    closer = [max(0.0, float(total.abs().sum() - (total - part).abs().sum())) for part in parts]
    return closer[k] / sum(closer) if sum(closer) > 0 else 0.0


def _reference(model, spec: GraphSpec, tokens: torch.Tensor, tau: float) -> torch.Tensor:
    """Routes from the last position, node by node, position by position."""
    outputs = writer_outputs(model, spec, tokens)
    names = list(spec.forward_names)
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens)
    n = tokens.shape[1]
    scores = torch.zeros(spec.n_forward, spec.n_backward, dtype=torch.float64)
    reach_writer = {name: set() for name in names}
    reach_reader = {spec.logits_backward: {n - 1}}

    def feed(reader: int, upstream: int) -> None:
        for p in sorted(reach_reader.get(reader, set())):
            parts = [outputs[names[u]][p] for u in range(upstream)]
            for u in range(upstream):
                share = _share(parts, u)
                if share >= tau:
                    scores[u, reader] += share
                    reach_writer[names[u]].add(p)

    feed(spec.logits_backward, spec.n_forward)
    for layer in reversed(range(spec.n_layers)):
        reach_reader[spec.mlp_backward(layer)] = set(reach_writer[f"m{layer}"])
        feed(spec.mlp_backward(layer), spec.upstream_of_mlp(layer))
        attention = model.blocks[layer].attn
        pattern = cache[f"blocks.{layer}.attn.hook_pattern"][0]  # [H, i, j]
        values = cache[f"blocks.{layer}.attn.hook_v"][0]  # [j, H or groups, d_head]
        post = getattr(model.cfg, "use_normalization_before_and_after", False)
        for head in range(spec.n_heads):
            group = head * values.shape[1] // spec.n_heads
            reached = set()
            for i in reach_writer[f"a{layer}.h{head}"]:
                parts = []
                for j in range(n):
                    part = pattern[head, i, j] * (values[j, group] @ attention.W_O[head])
                    if post:
                        scale = cache[f"blocks.{layer}.ln1_post.hook_scale"][0, i]
                        part = part / scale * model.blocks[layer].ln1_post.w
                    parts.append(part)
                reached |= {j for j in range(n) if _share(parts, j) >= tau}
            reach_reader[spec.head_backward(layer, "v").start + head] = reached
            feed(spec.head_backward(layer, "v").start + head, spec.upstream_of_heads(layer))
    return scores


def _strengths_reference(model, spec: GraphSpec, tokens: torch.Tensor, tau: float) -> torch.Tensor:
    """Each edge's strongest complete route (the product of the shares along it), from the
    definition with plain loops: the strongest product from the input to every writer and from
    every reader to the prediction, position by position, then joined edge by edge."""
    outputs = writer_outputs(model, spec, tokens)
    names = list(spec.forward_names)
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens)
    n = tokens.shape[1]
    post = getattr(model.cfg, "use_normalization_before_and_after", False)

    def share(p: int, upstream: int, u: int) -> float:
        value = _share([outputs[names[k]][p] for k in range(upstream)], u)
        return value if value >= tau else 0.0

    def source_share(layer: int, head: int, i: int, j: int) -> float:
        pattern = cache[f"blocks.{layer}.attn.hook_pattern"][0]
        values = cache[f"blocks.{layer}.attn.hook_v"][0]
        group = head * values.shape[1] // spec.n_heads
        parts = []
        for k in range(n):
            part = pattern[head, i, k] * (values[k, group] @ model.blocks[layer].attn.W_O[head])
            if post:
                part = (
                    part / cache[f"blocks.{layer}.ln1_post.hook_scale"][0, i] * model.blocks[layer].ln1_post.w
                )
            parts.append(part)
        value = _share(parts, j)
        return value if value >= tau else 0.0

    def upstream_of(reader: int) -> int:
        if reader == spec.logits_backward:
            return spec.n_forward
        layer = next(
            layer
            for layer in range(spec.n_layers)
            if reader == spec.mlp_backward(layer)
            or spec.head_backward(layer, "v").start <= reader < spec.head_backward(layer, "v").stop
        )
        if reader == spec.mlp_backward(layer):
            return spec.upstream_of_mlp(layer)
        return spec.upstream_of_heads(layer)

    value_readers = [spec.logits_backward]
    for layer in range(spec.n_layers):
        index = spec.head_backward(layer, "v")
        value_readers += list(range(index.start, index.stop)) + [spec.mlp_backward(layer)]
    # onwards: from the prediction backwards
    down = {r: [0.0] * n for r in value_readers}
    writer_down = {u: [0.0] * n for u in range(spec.n_forward)}
    down[spec.logits_backward][n - 1] = 1.0

    def push(reader: int) -> None:
        for p in range(n):
            for u in range(upstream_of(reader)):
                writer_down[u][p] = max(writer_down[u][p], share(p, upstream_of(reader), u) * down[reader][p])

    push(spec.logits_backward)
    for layer in reversed(range(spec.n_layers)):
        down[spec.mlp_backward(layer)] = list(writer_down[names.index(f"m{layer}")])
        push(spec.mlp_backward(layer))
        for head in range(spec.n_heads):
            own = writer_down[names.index(f"a{layer}.h{head}")]
            reader = spec.head_backward(layer, "v").start + head
            down[reader] = [max(source_share(layer, head, i, j) * own[i] for i in range(n)) for j in range(n)]
            push(reader)
    # from the input forwards
    up = {u: [0.0] * n for u in range(spec.n_forward)}
    up[0] = [1.0] * n

    def arriving(reader: int, p: int) -> float:
        return max(up[u][p] * share(p, upstream_of(reader), u) for u in range(upstream_of(reader)))

    for layer in range(spec.n_layers):
        for head in range(spec.n_heads):
            reader = spec.head_backward(layer, "v").start + head
            into = [arriving(reader, j) for j in range(n)]
            up[names.index(f"a{layer}.h{head}")] = [
                max(source_share(layer, head, i, j) * into[j] for j in range(n)) for i in range(n)
            ]
        up[names.index(f"m{layer}")] = [arriving(spec.mlp_backward(layer), p) for p in range(n)]
    strengths = torch.zeros(spec.n_forward, spec.n_backward, dtype=torch.float64, device="cpu")
    for reader in value_readers:
        upstream = upstream_of(reader)
        for u in range(upstream):
            strengths[u, reader] = max(up[u][p] * share(p, upstream, u) * down[reader][p] for p in range(n))
    return strengths


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("tau", [0.0, 0.05, 0.2])
def test_routes_equal_the_reference_from_the_formulas(shape, tau):
    model = tiny_model(shape, seed=3)
    spec = GraphSpec.from_model(model)
    prepared = prepare_task(model, IOI_TASK)
    expected = _reference(model, spec, prepared.clean_tokens, tau)
    found, _ = route_scores(model, spec, prepared.clean_tokens, tau)
    assert torch.allclose(found.double(), expected, atol=1e-9)
    assert (found > 0).any()
    if tau > 0:
        assert ((found == 0) & spec.edge_mask).any()  # the threshold cut some edges


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("tau", [0.0, 0.05])
def test_route_strengths_equal_the_reference_and_rank_whole_routes(shape, tau):
    model = tiny_model(shape, seed=3)
    spec = GraphSpec.from_model(model)
    tokens = prepare_task(model, IOI_TASK).clean_tokens
    scores, _, strengths = route_graph(model, spec, tokens, tau)
    expected = _strengths_reference(model, spec, tokens, tau)
    assert torch.allclose(strengths.double(), expected, atol=1e-7)
    if tau > 0:  # an edge is strong exactly when it lies on a route (a route's shares are positive)
        assert torch.equal((strengths > 0) & spec.edge_mask, (scores > 0) & spec.edge_mask)
    # the top N by strength are whole routes from the input to the prediction: pruning keeps every
    # edge stronger than the N-th (a route's edges tie at its product, so the cut may split one)
    values = strengths[spec.edge_mask].sort(descending=True).values
    positive = int((values > 0).sum())
    for n in sorted({1, 3, positive // 4, positive // 2, positive}):
        kept = prune(spec, top_n(spec, strengths, n))
        stronger = (strengths > values[n - 1]) & spec.edge_mask
        assert (kept | ~stronger).all()
    assert int(prune(spec, top_n(spec, strengths, positive)).sum()) == positive


def test_the_method_ranks_by_strength_and_draws_whole_routes_at_small_budgets():
    model = tiny_model("gemma", seed=1)
    spec = GraphSpec.from_model(model)
    result = get_method("flow-routes").run_on(model, IOI_TASK, None, budgets=[2, 6])
    _, _, strengths = route_graph(model, spec, prepare_task(model, IOI_TASK).clean_tokens, 0.04)
    assert torch.allclose(result.scores, strengths.float().cpu() * spec.edge_mask)
    values = result.scores[spec.edge_mask].sort(descending=True).values
    for budget in (2, 6):  # every edge stronger than the budget's last survives pruning
        stronger = (result.scores > values[budget - 1]) & spec.edge_mask
        assert (result.circuit(budget) | ~stronger).all()


def test_budgets_above_its_own_circuit_say_they_take_edges_of_score_0():
    """On a reviewer's random Qwen 3 the routes held 18 edges and the 60-edge circuit 39, 21 of
    them off every route (score 0, in graph order), under a line saying 'the top N edges are whole
    routes': the lines now say which budgets are above its own circuit and how many such edges."""
    model = tiny_model("gemma", seed=1)
    spec = GraphSpec.from_model(model)
    own = len(get_method("flow-routes").run_on(model, IOI_TASK, None, budgets=[2]).details.circuit_edges)
    above = min(own + 10, spec.n_edges - 1)
    result = get_method("flow-routes").run_on(model, IOI_TASK, None, budgets=[2, above])
    zeros = int(((result.scores == 0) & result.circuit(above) & spec.edge_mask).sum())
    assert zeros > 0
    line = next(line for line in result.details.report_lines(result) if line.startswith("budgets above"))
    assert f"its own circuit's {own:,} edges: {above:,} ({zeros:,} of score 0)" in line
    assert "in the graph's order" in line


def test_shares_of_a_sum_add_to_one_and_refuse_parts_pointing_away():
    parts = torch.tensor([[1.0, 0.0], [0.0, 2.0], [-0.5, 0.0]], dtype=torch.float64, device="cpu")
    shares = proximity_shares(parts, parts.sum(0))
    assert shares.sum().item() == pytest.approx(1.0)
    assert shares[2].item() == 0.0  # pointing away from the sum: no share
    assert shares[1].item() > shares[0].item()  # the larger part brings the sum closer


def test_queries_and_keys_are_routed_only_when_asked():
    model = tiny_model("llama", seed=4)
    spec = GraphSpec.from_model(model)
    tokens = prepare_task(model, IOI_TASK).clean_tokens
    values_only, _ = route_scores(model, spec, tokens, 0.02)
    with_qk, _ = route_scores(model, spec, tokens, 0.02, queries_keys=True)
    qk = torch.tensor([kind in ("q", "k") for kind in spec.backward_kind], device="cpu")
    assert not values_only[:, qk].any()
    assert with_qk[:, qk].any()
    # queries and keys reach more writers, never fewer: every value-route score can only grow
    assert (with_qk[:, ~qk] >= values_only[:, ~qk] - 1e-12).all()


def test_the_method_on_a_planted_model_finds_its_circuit_writers():
    """On a planted model the circuit's nodes carry the signal to the prediction, so the routes
    reach the planted writers that feed the logits."""
    planted = planted_model()
    spec = GraphSpec.from_model(planted.model)
    result = get_method("flow-routes").run_on(planted.model, planted.task, None, budgets=[10])
    own = spec.mask_from_edge_names(result.details.circuit_edges)
    into_logits = planted.true_edges[:, spec.logits_backward]
    assert own[into_logits, spec.logits_backward].all()
    assert len(result.curve) == 1 and not math.isnan(result.curve[0].ndf)


def test_without_a_corrupted_prompt_its_curve_uses_the_neutral_prompt_and_says_so():
    model = tiny_model("gemma", seed=0)
    task = PromptTask(IOI_TASK.clean, "", IOI_TASK.answer, IOI_TASK.foils)
    result = get_method("flow-routes").run_on(model, task, None, budgets=[5, 20])
    neutral = neutral_task(model, prepare_task(model, task, need_corrupted=False))
    assert neutral.corrupted_tokens[0, 0] == neutral.clean_tokens[0, 0]
    assert len(set(neutral.corrupted_tokens[0, 1:].tolist())) == 1
    # the curve is the shared evaluator's against that neutral run
    evaluator = Evaluator(model, GraphSpec.from_model(model), neutral)
    assert result.baseline.corrupted == pytest.approx(evaluator.baseline.corrupted, abs=1e-9)
    assert result.baseline.corrupted != pytest.approx(result.baseline.clean, abs=1e-6)
    metric = evaluator.metrics(result.circuit(5)[None])[0].item()
    assert result.curve[0].metric == pytest.approx(metric, abs=1e-9)
    assert any("neutral prompt" in note for note in result.details.notes)
    assert not get_method("flow-routes").needs_corrupted


@pytest.mark.parametrize("value", [-0.1, 1.5, True])
def test_a_threshold_out_of_range_is_refused_in_one_sentence(value):
    with pytest.raises(ValueError, match="threshold must be"):
        FlowRoutesConfig(threshold=value)
