"""Tiny random-weight models of every family in ``toy_families.FAMILIES``, built offline from a ``transformers``
config and booted through TransformerLens's ``TransformerBridge``: the engine's numbers on them
against definitions that share no code with it (tests/reference_patching.py).

For each family: the bridge's logits are the ``transformers`` model's (grouped-query attention
ungrouped changes nothing); a run continued from the prefix's key/value cache gives the full
run's residual; exact edge patching equals one separately patched forward pass per edge; EAP
equals its gradient definition; the graph's edge count is its shape's; every method runs.
"""

from __future__ import annotations

import functools

import pytest
import torch
from reference_patching import SUM_TOLERANCE, attribution_scores, exact_scores

from circuitviz.bench.toy_families import FAMILIES, random_family_model, random_hf_model
from circuitviz.bench.toy_models import IOI_TASK
from circuitviz.core.graph import GraphSpec
from circuitviz.core.graph_shape import edge_count
from circuitviz.core.tasks import prepare_task
from circuitviz.engine.prefix import final_residual, reusing_prefixes, shared_prefix
from circuitviz.methods import available_methods, get_method
from circuitviz.models.adapter import adapter_of
from circuitviz.models.bridge_adapter import BridgeAdapter

pytestmark = pytest.mark.slow

# (family, method) pairs refused with a sentence: ACC++'s bilinear form has no place for OLMo's
# q/k-norm over the whole key vector (it couples the heads), gpt-oss's attention sinks or MPT's
# ALiBi biases; AtP*'s QK fix recomputes attention and refuses soft-capped scores (Gemma 2), OLMo's
# normalised queries and keys, sink columns and ALiBi biases
REFUSED = {
    ("olmo2", "acc++"): "OLMo",
    ("olmo3", "acc++"): "OLMo",
    ("olmoe", "acc++"): "OLMo",
    ("flex_olmo", "acc++"): "FlexOlmo",
    ("gpt_oss", "acc++"): "sinks",  # gpt-oss's sink logit in every softmax
    ("mpt", "acc++"): "ALiBi",
    ("falcon_rw", "acc++"): "ALiBi",
    ("gemma2", "atp-star"): "soft-capped",
    ("olmo2", "atp-star"): "normalised",
    ("olmo3", "atp-star"): "normalised",
    ("olmoe", "atp-star"): "normalised",
    ("flex_olmo", "atp-star"): "normalised",
    ("gpt_oss", "atp-star"): "sink",
    ("mpt", "atp-star"): "alibi position bias",
    ("falcon_rw", "atp-star"): "alibi position bias",
    # a mixture of experts has no single MLP whose neurons Circuit Lasso reads or whose
    # activation RelP's rules follow
    **{
        (moe, "circuit-lasso"): "no hook point"
        for moe in ("mixtral", "qwen2_moe", "qwen3_moe", "olmoe", "gpt_oss", "glm4_moe", "flex_olmo")
    },
    **{
        (moe, "relp"): "activation"
        for moe in ("mixtral", "qwen2_moe", "qwen3_moe", "olmoe", "gpt_oss", "glm4_moe", "flex_olmo")
    },
}


@functools.cache
def family_model(name: str):
    """Each family's model built once for the module (the methods leave it as they found it)."""
    return random_family_model(name, seed=1)


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def family(request):
    model = family_model(request.param)
    return request.param, model, GraphSpec.from_model(model), prepare_task(model, IOI_TASK)


def ours(model, method: str, **settings) -> torch.Tensor:
    chosen = get_method(method)
    return chosen.run_on(model, IOI_TASK, chosen.make_config(settings), budgets=[1]).scores.double()


def assert_every_edge(spec, mine, theirs, model):
    """Equal on every edge to float32 rounding of the stored scores (1e-6 of each); where the
    model's own norms compute in float32 (transformers' Gemma and OLMo-2, even in a float64
    model), also to 1e-5 of the largest score."""
    float32_norms = str(model.cfg.original_architecture) in SUM_TOLERANCE
    floor = 1e-5 * float(theirs[spec.edge_mask].abs().max()) if float32_norms else 0.0
    gaps = ((mine - theirs).abs() - 1e-6 * theirs.abs() - floor)[spec.edge_mask]
    worst = int(gaps.argmax())
    assert float(gaps.max()) <= 1e-10, (
        f"{spec.edge_names[worst]}: {float(mine[spec.edge_mask][worst]):.9g} "
        f"vs {float(theirs[spec.edge_mask][worst]):.9g}"
    )
    assert float(theirs[spec.edge_mask].abs().max()) > 1e-4  # the comparison is not of zeros


def test_the_bridge_computes_what_the_grouped_transformers_model_does(family):
    name, model, _, prepared = family
    assert isinstance(adapter_of(model), BridgeAdapter)
    original = random_hf_model(name, seed=1)  # the same weights, never ungrouped
    with torch.no_grad():
        expected = original(prepared.clean_tokens).logits
        got = adapter_of(model).logits(prepared.clean_tokens)
    # float32 softmax in both (a wrongly ungrouped head would be off by the logits' own size)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)


def test_a_continued_run_equals_the_full_run(family):
    _, model, _, prepared = family
    if adapter_of(model).positions_inside_attention:  # MPT keeps no key/value cache: never continued
        assert shared_prefix(model, [prepared]) == 0
        return
    tokens = torch.cat([prepared.clean_tokens, prepared.corrupted_tokens])  # two distinct rows
    with torch.no_grad():
        full = final_residual(model, tokens, [])
        continued = final_residual(model, tokens, [], prefix=4)
    # both bridges and transformers take attention's softmax in float32, even in a float64 model
    torch.testing.assert_close(continued, full, rtol=1e-6, atol=1e-8)
    # a prefix kept by reusing_prefixes serves batches of other rows of it: what a fresh run gives
    with torch.no_grad(), reusing_prefixes():
        again = final_residual(model, tokens, [], prefix=4)
        clean_only = final_residual(model, tokens[:1].expand(3, -1), [], prefix=4)
    assert torch.equal(again, continued)
    with torch.no_grad():
        assert torch.equal(clean_only, final_residual(model, tokens[:1].expand(3, -1), [], prefix=4))


def test_the_graph_has_the_edges_its_shape_counts(family):
    _, model, spec, _ = family
    cfg = model.cfg
    assert spec.n_edges == edge_count(cfg.n_layers, cfg.n_heads, bool(cfg.parallel_attn_mlp))
    assert int(spec.edge_mask.sum()) == spec.n_edges


def test_exact_scores_equal_separately_patched_forward_passes(family):
    _, model, spec, prepared = family
    assert_every_edge(spec, ours(model, "exact"), exact_scores(model, spec, prepared), model)


def test_eap_equals_its_definition_on_every_edge(family):
    _, model, spec, prepared = family
    assert_every_edge(spec, ours(model, "eap"), attribution_scores(model, spec, prepared, [1.0]), model)


def pairs_to_run(families: list[str], methods: list[str]) -> list[tuple[str, str]]:
    """(family, method) pairs that run every method on two families (one from each half of the
    sorted list, a different pair for neighbouring methods) and every family through three or
    four methods, plus every refused pair; the whole cross product was 190 runs (14.5 min at load
    15) for what each family's exact-patching and EAP checks above already prove edge by edge."""
    n = len(families)
    chosen = {(families[(2 * i) % n], m) for i, m in enumerate(methods)}
    chosen |= {(families[(2 * i + n // 2) % n], m) for i, m in enumerate(methods)}
    # with more families than methods, each family's own three, in turn through the methods
    chosen |= {
        (family, methods[(3 * k + j) % len(methods)]) for k, family in enumerate(families) for j in range(3)
    }
    return sorted(chosen | {pair for pair in REFUSED if pair[1] in methods})


# fewer of what a method repeats (paraphrases, integration and optimisation steps): it runs or it
# is refused on the first as on the last
LIGHT = {"n_paraphrases": 4, "ig_steps": 5, "steps": 3}


def test_the_pairs_cover_every_method_twice_and_every_family_thrice():
    pairs = pairs_to_run(sorted(FAMILIES), sorted(available_methods()))
    for method in available_methods():
        assert len({f for f, m in pairs if m == method}) >= 2, method
    for family in FAMILIES:
        assert len({m for f, m in pairs if f == family}) >= 3, family
    assert set(REFUSED) <= set(pairs)


@pytest.mark.parametrize("pair", pairs_to_run(sorted(FAMILIES), sorted(available_methods())), ids="-".join)
def test_every_method_runs(pair):
    name, method = pair
    model = family_model(name)
    spec = GraphSpec.from_model(model)
    chosen = get_method(method)
    fields = set(chosen.Config.__dataclass_fields__)
    defaults = chosen.make_config({})
    settings = {"cache_scores": False} if "cache_scores" in fields else {}
    settings.update({k: v for k, v in LIGHT.items() if k in fields and getattr(defaults, k) > v})
    config = chosen.make_config(settings)
    if pair in REFUSED:
        with pytest.raises(ValueError, match=REFUSED[pair]) as refused:
            chosen.run_on(model, IOI_TASK, config, budgets=[4])
        if pair[1] == "atp-star":  # it said "switch qk_fix off", a flag the command line does not have
            assert "--no-qk-fix on the command line" in str(refused.value)
        return
    result = chosen.run_on(model, IOI_TASK, config, budgets=[4])
    assert result.scores.shape == (spec.n_forward, spec.n_backward)
    assert torch.isfinite(result.scores).all()


def test_prompts_of_two_lengths_share_a_padded_pass(family):
    """Paraphrase pruning's learning and measurement run prompts of several lengths in one pass,
    the shorter padded at the end: on every family each row is its own run's, to float rounding
    (attention's softmax runs in float32 here)."""
    from circuitviz.core.tasks import PromptTask
    from circuitviz.engine.metric import metric_from_residual, task_metric
    from circuitviz.engine.patching import masked_residual, padded_to
    from circuitviz.measure.evaluate import Evaluator, metrics_of_tasks

    _, model, spec, prepared = family
    longer = PromptTask(
        "When Mary and John went to the big old store , John gave a drink to",
        "When Alice and Bob went to the big old store , Carl gave a drink to",
        IOI_TASK.answer,
        IOI_TASK.foils,
    )
    evaluators = [Evaluator(model, spec, prepared), Evaluator(model, spec, prepare_task(model, longer))]
    lengths = [e.prepared.n_positions for e in evaluators]
    assert lengths[0] < lengths[1]
    generator = torch.Generator().manual_seed(3)
    kept = torch.rand((2, spec.n_forward, spec.n_backward), generator=generator, device="cpu") > 0.5
    keep = kept.to(evaluators[0].corrupted_writers.dtype)
    alone = torch.stack(
        [
            metric_from_residual(
                model,
                e.prepared,
                masked_residual(model, spec, e.prepared, e.corrupted_writers, keep, e.corrupted_raw),
            )
            for e in evaluators
        ]
    )
    raw = [e.corrupted_raw for e in evaluators]
    tasks = [e.prepared for e in evaluators]
    residual = masked_residual(
        model,
        spec,
        tasks,
        torch.cat([padded_to(e.corrupted_writers, lengths[1]) for e in evaluators]),
        keep.repeat(2, 1, 1),
        torch.cat([padded_to(r, lengths[1]) for r in raw]) if raw[0] is not None else None,
    )
    owner = torch.arange(2, device="cpu").repeat_interleave(2)
    together = task_metric(model, tasks, owner, same_length=False)(residual).view(2, 2)
    torch.testing.assert_close(together, alone, rtol=1e-6, atol=1e-7)
    circuit = kept[:1] & spec.edge_mask
    padded = metrics_of_tasks(evaluators, circuit[None].expand(2, -1, -1, -1), padded=True)
    own = torch.stack([e.metrics(circuit) for e in evaluators])
    torch.testing.assert_close(padded, own, rtol=1e-6, atol=1e-7)
