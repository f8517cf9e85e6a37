"""CD-T against a reference that carries the relevant and irrelevant parts through the model layer
by layer with the paper's rules, written from the equations on TransformerLens's weights and its
cache (scales and patterns), sharing no code with circuitviz.methods.cdt; and, where the model is
linear once norms and patterns are frozen, against the exact contribution of each source, read
off RelP's frozen-linear gradients (an independent backward pass).

Rules (docs/methods.md): linear maps carry each part, biases to the irrelevant one; an activation
gives the irrelevant part f(γ) and the relevant one f(β + γ) - f(γ) (a gated MLP's product: the
irrelevant part f(g_γ) l_γ); norms use the clean run's scale; attention the clean run's pattern.
"""

from __future__ import annotations

import pytest
import torch
from simulated_device import SimulatedDevice

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.core.graph import GraphSpec
from circuitviz.core.tasks import PromptTask, prepare_task
from circuitviz.measure.evaluate import Evaluator
from circuitviz.methods import get_method
from circuitviz.methods.cdt import CDTConfig, decompose, edge_scores


def _norm(module, part, scale, with_bias):
    """A norm applied to one part with the clean run's scale [pos, 1] (or [pos, heads, 1] where
    each head reads its own copy of the residual: the same scale for every head)."""
    if scale.dim() == 3:
        scale = scale[:, 0]
    if "LayerNorm" in type(module).__name__:
        part = part - part.mean(-1, keepdim=True)
    out = part / scale * module.w
    bias = getattr(module, "b", None)
    return out + bias if (with_bias and bias is not None) else out


def _metric(model, prepared, final):
    """Logit difference at the last position from a final-norm output [d_model] (soft-cap kept)."""
    logits = final @ model.W_U + model.b_U
    cap = getattr(model.cfg, "output_logits_soft_cap", None)
    if cap is not None and cap > 0:
        logits = cap * torch.tanh(logits / cap)
    return logits[prepared.answer_id] - logits[list(prepared.foil_ids)].mean()


def _split(module, rel, irr, scale, frozen: bool):
    """A norm on (relevant, irrelevant): linear at the clean scale (frozen), or as an activation:
    the irrelevant part normalised by its own scale, the relevant part the rest."""
    if frozen:
        return _norm(module, rel, scale, False), _norm(module, irr, scale, True)
    normalised = module(irr[None])[0]
    return module((rel + irr)[None])[0] - normalised, normalised


def _rms_scale(module, x):
    return (x.pow(2).mean(-1, keepdim=True) + module.eps).sqrt()


def reference(model, spec: GraphSpec, prepared, sources, base: dict | None = None, frozen: bool = True):
    """(R(sources), {writer: its (relevant, irrelevant) output}) by the rules, one layer at a time.

    ``base``: each writer's corrupted output before any post-attention norm (baseline
    "corrupted"), else the zero baseline (a head keeps its share of the output bias)."""
    sources = {sources} if isinstance(sources, str) else set(sources)
    tokens = prepared.clean_tokens
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens)
    embedding = cache["blocks.0.hook_resid_pre"][0]
    outputs = {}

    def at_source(name, rel, irr, own_bias=0.0):
        """At a source the relevant part becomes the whole output less what stays irrelevant: its
        corrupted output, or (zero baseline) the share of the output bias a head is given."""
        if name in sources:
            total = rel + irr
            kept = base[name] if base is not None else torch.zeros_like(total) + own_bias
            rel, irr = total - kept, kept
        return rel, irr

    rel, irr = at_source("input", torch.zeros_like(embedding), embedding)
    outputs["input"] = (rel, irr)
    post = getattr(model.cfg, "use_normalization_before_and_after", False)
    for layer, block in enumerate(model.blocks):
        attention = block.attn
        s1 = cache[f"blocks.{layer}.ln1.hook_scale"][0]
        rel_n, irr_n = _split(block.ln1, rel, irr, s1, frozen)
        pattern = cache[f"blocks.{layer}.attn.hook_pattern"][0]  # [H, i, j]
        own_bias = attention.b_O / spec.n_heads if attention.b_O is not None else torch.zeros_like(rel[0])
        raw = []  # each head's (relevant, irrelevant) output before any post-attention norm
        for head in range(spec.n_heads):
            value_r = rel_n @ attention.W_V[head]
            value_i = irr_n @ attention.W_V[head] + attention.b_V[head]
            parts = (
                (pattern[head] @ value_r) @ attention.W_O[head],
                (pattern[head] @ value_i) @ attention.W_O[head] + own_bias,
            )
            raw.append(at_source(f"a{layer}.h{head}", *parts, own_bias=own_bias))
        heads = raw
        if post:
            norm = block.ln1_post
            if frozen:
                scale = cache[f"blocks.{layer}.ln1_post.hook_scale"][0]
                heads = [(r / scale * norm.w, i / scale * norm.w) for r, i in raw]
            else:  # each head's share at its own sum's scale
                total_scale = _rms_scale(norm, sum(r + i for r, i in raw))
                irr_scale = _rms_scale(norm, sum(i for _, i in raw))
                heads = [
                    ((r + i) / total_scale * norm.w - i / irr_scale * norm.w, i / irr_scale * norm.w)
                    for r, i in raw
                ]
        for head in range(spec.n_heads):
            outputs[f"a{layer}.h{head}"] = heads[head]
        rel = rel + sum(h[0] for h in heads)
        irr = irr + sum(h[1] for h in heads)
        s2 = cache[f"blocks.{layer}.ln2.hook_scale"][0]
        rel_n, irr_n = _split(block.ln2, rel, irr, s2, frozen)
        mlp = block.mlp
        if model.cfg.gated_mlp:
            gate_r, gate_i = rel_n @ mlp.W_gate, irr_n @ mlp.W_gate
            lin_r, lin_i = rel_n @ mlp.W_in, irr_n @ mlp.W_in
            hidden_i = mlp.act_fn(gate_i) * lin_i
            hidden_r = mlp.act_fn(gate_r + gate_i) * (lin_r + lin_i) - hidden_i
            hidden_i = hidden_i + mlp.b_in
        else:
            pre_r, pre_i = rel_n @ mlp.W_in, irr_n @ mlp.W_in + mlp.b_in
            hidden_i = mlp.act_fn(pre_i)
            hidden_r = mlp.act_fn(pre_r + pre_i) - hidden_i
        out_r, out_i = hidden_r @ mlp.W_out, hidden_i @ mlp.W_out + mlp.b_out
        if post:
            s_post = cache[f"blocks.{layer}.ln2_post.hook_scale"][0]
            out_r, out_i = _split(block.ln2_post, out_r, out_i, s_post, frozen)
        out_r, out_i = at_source(f"m{layer}", out_r, out_i)
        outputs[f"m{layer}"] = (out_r, out_i)
        rel, irr = rel + out_r, irr + out_i
    sf = cache["ln_final.hook_scale"][0][-1]
    final_r, final_i = _split(model.ln_final, rel[-1:], irr[-1:], sf, frozen)
    return _metric(model, prepared, (final_r + final_i)[0]) - _metric(model, prepared, final_i[0]), outputs


def corrupted_outputs(model, spec, prepared):
    """Each writer's corrupted output, a head's before any post-attention norm (the rules apply
    that norm to the parts): the corrupted embedding, MLP output, and each head's corrupted mixed
    values through W_O with its share of the output bias."""
    with torch.no_grad():
        _, corrupted = model.run_with_cache(prepared.corrupted_tokens)
    outputs = {"input": corrupted["blocks.0.hook_resid_pre"][0]}
    for layer, block in enumerate(model.blocks):
        attention = block.attn
        for head in range(spec.n_heads):
            out = corrupted[f"blocks.{layer}.attn.hook_z"][0, :, head] @ attention.W_O[head]
            if attention.b_O is not None:
                out = out + attention.b_O / spec.n_heads
            outputs[f"a{layer}.h{head}"] = out
        outputs[f"m{layer}"] = corrupted[f"blocks.{layer}.hook_mlp_out"][0]
    return outputs


@pytest.mark.parametrize("shape", ["gpt2", "llama", "gemma"])
@pytest.mark.parametrize("baseline", ["zero", "corrupted"])
@pytest.mark.parametrize("norms", ["nonlinear", "frozen"])
def test_decomposition_equals_the_reference_from_the_rules(shape, baseline, norms):
    model = tiny_model(shape, seed=3)
    spec = GraphSpec.from_model(model)
    prepared = prepare_task(model, IOI_TASK)
    evaluator = Evaluator(model, spec, prepared)
    found = decompose(model, spec, prepared, evaluator.clean_writers[0], baseline == "corrupted", norms)
    names = list(spec.forward_names)
    base = corrupted_outputs(model, spec, prepared) if baseline == "corrupted" else None
    frozen = norms == "frozen"
    runs = {source: reference(model, spec, prepared, source, base, frozen) for source in names}
    # a target's own relevant output: its clean output less its output with every writer replaced
    _, replaced = reference(model, spec, prepared, names, base, frozen)
    for u, source in enumerate(names):
        relevance, outputs = runs[source]
        assert found.relevance[u].item() == pytest.approx(relevance.item(), abs=1e-9, rel=1e-7)
        for v, target in enumerate(names):
            own = sum(replaced[target]) - replaced[target][1]
            share = (outputs[target][0] * own).sum() / (own * own).sum()
            assert found.shares[u, v].item() == pytest.approx(share.item(), abs=1e-9, rel=1e-7), (
                source,
                target,
            )
    assert found.relevance.abs().max() > 1e-3


def test_the_logits_edges_are_the_direct_parts_and_queries_keys_score_nothing():
    model = tiny_model("llama", seed=1)
    spec = GraphSpec.from_model(model)
    prepared = prepare_task(model, IOI_TASK)
    evaluator = Evaluator(model, spec, prepared)
    found = decompose(model, spec, prepared, evaluator.clean_writers[0], norms="frozen")
    scores = edge_scores(spec, found)
    with torch.no_grad():
        _, cache = model.run_with_cache(prepared.clean_tokens)
    final = cache[f"blocks.{spec.n_layers - 1}.hook_resid_post"][0, -1]
    sf = cache["ln_final.hook_scale"][0, -1]
    clean = _metric(model, prepared, _norm(model.ln_final, final, sf, True))
    writers = evaluator.clean_writers[0][-1].clone()
    for layer in range(spec.n_layers):  # a head's share of the output bias stays irrelevant
        writers[spec.head_forward(layer)] -= model.blocks[layer].attn.b_O / spec.n_heads
    for u in range(spec.n_forward):
        without = _metric(model, prepared, _norm(model.ln_final, final - writers[u], sf, True))
        assert scores[u, spec.logits_backward].item() == pytest.approx((clean - without).item(), abs=1e-9)
    for layer in range(spec.n_layers):
        for kind in "qk":
            assert scores[:, spec.head_backward(layer, kind)].abs().max() == 0


def test_where_the_model_is_linear_the_relevance_is_the_exact_contribution():
    """Identity activations, norms and patterns frozen: the model is affine in every writer's
    output, so R(u) with the corrupted baseline is exactly -(z'_u - z_u) . dL/dz_u, and dL/dz_u is
    the sum of the frozen-linear gradients at every reader downstream of u (RelP's, which on this
    model are the exact gradients of the frozen model): minus RelP's row sum."""
    model = tiny_model("gpt2", seed=2)
    for block in model.blocks:
        block.mlp.act_fn = lambda x: x
    spec = GraphSpec.from_model(model)
    prepared = prepare_task(model, IOI_TASK)
    evaluator = Evaluator(model, spec, prepared)
    found = decompose(model, spec, prepared, evaluator.clean_writers[0], corrupted=True, norms="frozen")
    relp = get_method("relp").run_on(model, IOI_TASK, budgets=[1]).scores.double()
    torch.testing.assert_close(found.relevance.double().cpu(), -relp.sum(1), rtol=1e-7, atol=1e-9)
    torch.testing.assert_close(
        found.direct.double().cpu(), -relp[:, spec.logits_backward], rtol=1e-7, atol=1e-9
    )
    assert relp.abs().max() > 1e-3


def test_without_a_corrupted_prompt_it_runs_and_says_what_its_curve_used():
    model = tiny_model("gemma", seed=0)
    task = PromptTask(IOI_TASK.clean, "", IOI_TASK.answer, IOI_TASK.foils)
    result = get_method("cd-t").run_on(model, task, None, budgets=[5, 20])
    assert not get_method("cd-t").needs_corrupted
    assert any("neutral prompt" in note for note in result.details.notes)
    assert list(result.details.relevance) == list(GraphSpec.from_model(model).forward_names)
    assert len(result.curve) == 2 and 0.0 <= result.curve[1].ndf <= 1.0
    with_prompt = get_method("cd-t").run_on(model, IOI_TASK, None, budgets=[5])
    assert "task's corrupted prompt" in with_prompt.details.notes[0]


def test_a_baseline_or_norm_rule_it_does_not_know_is_refused_in_one_sentence():
    with pytest.raises(ValueError, match="baseline"):
        CDTConfig(baseline="mean")
    with pytest.raises(ValueError, match="norms"):
        CDTConfig(norms="layer")


@pytest.mark.parametrize("shape", ["gemma", "llama"])
def test_the_corrupted_baseline_runs_on_a_simulated_device_and_equals_the_host(shape):
    model = tiny_model(shape, seed=0)
    host = get_method("cd-t").run_on(model, IOI_TASK, {"baseline": "corrupted"}, budgets=[5])
    with SimulatedDevice(model):
        device = get_method("cd-t").run_on(model, IOI_TASK, {"baseline": "corrupted"}, budgets=[5])
    torch.testing.assert_close(device.scores, host.scores, rtol=1e-9, atol=1e-12)
