"""RelP (relevance patching) against EAP where the rules change nothing, and against a reference
written from the rules with frozen constants on TransformerLens's own hooks.

The rules (Jafari et al. 2025): norms are linear with their scale fixed at the clean run's value,
attention patterns follow the softmax (the default, the paper's released code) or are constants
(``attention=constant``, the AH rule), an activation y = f(x) is the line through 0 with slope f(x)/x
at the clean run, and a gated MLP's product f(g) * l splits its relevance half and half between
f(g) and l. Under them the model is a linear function of every reader's input, and RelP's score
of u -> v is (z'_u - z_u) . d(that function)/d(input of v), summed over positions.
"""

from __future__ import annotations

import pytest
import torch
from neuron_checks import assert_neuron_circuit_at_4, assert_neuron_scores
from reference_patching import edges, metric_of, reader_hook, writer_outputs

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.core.graph import GraphSpec
from circuitviz.core.tasks import prepare_task
from circuitviz.methods import get_method


def scores_of(model, method: str, settings=None) -> torch.Tensor:
    return get_method(method).run_on(model, IOI_TASK, settings or {}, budgets=[1]).scores.double()


def test_relp_equals_eap_where_the_rules_change_nothing():
    """No norms, ReLU MLPs (f(x)/x is f'(x)) and queries and keys that ignore their input (the
    pattern is then a constant anyway): RelP's backward pass is the gradient."""
    model = tiny_model("gpt2", seed=2, normalization_type=None, act_fn="relu")
    with torch.no_grad():
        for block in model.blocks:
            block.attn.W_Q.zero_()
            block.attn.W_K.zero_()
    eap = scores_of(model, "eap")
    assert eap.abs().max() > 1e-3
    for attention in ("gradient", "constant"):
        relp = scores_of(model, "relp", {"attention": attention})
        torch.testing.assert_close(relp, eap, rtol=1e-9, atol=1e-12)


def test_relp_differs_from_eap_with_norms_and_smooth_activations():
    model = tiny_model("gpt2", seed=2)
    assert (scores_of(model, "relp") - scores_of(model, "eap")).abs().max() > 1e-4


def frozen_reader_gradients(
    model, spec: GraphSpec, prepared, constant_pattern: bool, rules=None
) -> dict[str, torch.Tensor]:
    """{reader: d(frozen model's metric)/d(its input)}: a clean run records every norm's scale,
    every pattern and every MLP's activations; a second run replaces each by the linear function
    the rules make of it, with those records as constants (patterns only with
    ``constant_pattern``; else the softmax stays live), and autograd differentiates that.
    ``rules`` (a subset of ln, identity, half, ah) overrides: only those rules apply, the rest of
    the model keeps its own derivative."""
    if rules is None:
        rules = {"ln", "qk-ln", "identity", "half", *(("ah",) if constant_pattern else ())}

    def is_frozen(name: str) -> bool:  # a scale or pattern the rules hold at the clean run's value
        if name.endswith("hook_pattern"):
            return "ah" in rules
        if name.endswith("hook_scale"):
            return ("qk-ln" if "q_norm" in name or "k_norm" in name else "ln") in rules
        return False

    share = 0.5 if "half" in rules else 1.0
    tokens = prepared.clean_tokens
    records: dict[str, list[torch.Tensor]] = {}

    def record(x, hook):
        records.setdefault(hook.name, []).append(x.detach().clone())

    names = [name for name in model.hook_dict if is_frozen(name)]
    names += [name for name in model.hook_dict if ".mlp.hook_" in name]
    with torch.no_grad():
        model.run_with_hooks(tokens, fwd_hooks=[(name, record) for name in names])
    replay = {name: list(values) for name, values in records.items()}
    live: dict[str, torch.Tensor] = {}

    def constant(x, hook):  # scales and patterns: the clean run's value, no dependence on x
        return replay[hook.name].pop(0)

    def keep_live(x, hook):
        live[hook.name] = x
        return x

    def linear_mlp(x, hook):
        layer = hook.name.split(".")[1]
        gate_name, linear_name = f"blocks.{layer}.mlp.hook_pre", f"blocks.{layer}.mlp.hook_pre_linear"
        act_fn = model.blocks[int(layer)].mlp.act_fn
        gate0 = records[gate_name][0]
        act0 = act_fn(gate0)
        if "identity" in rules:  # the line through 0 and (g0, f(g0))
            slope = torch.where(
                gate0 == 0, torch.zeros_like(gate0), act0 / torch.where(gate0 == 0, 1.0, gate0)
            )
            activated = slope * live[gate_name]
        else:  # the activation itself
            activated = act_fn(live[gate_name])
        if linear_name not in records:  # y = f(g)
            return keep_post(activated + (x.detach() - activated.detach()), hook)
        linear0 = records[linear_name][0]
        # y = f(g) l + b: (half of) the relevance through f(g) . l0, (half) through f(g0) . l
        product = share * activated * linear0 + share * act0 * live[linear_name]
        return keep_post(product + (x.detach() - product.detach()), hook)

    def keep_post(y, hook):  # the hidden activation the output projection reads: a neuron's site
        y.retain_grad()
        kept[hook.name] = y
        return y

    kept: dict[str, torch.Tensor] = {}

    def reader(x, hook):
        x.retain_grad()
        kept[hook.name] = x
        return x

    def leaf(x, hook):
        return x.detach().clone().requires_grad_(True)

    hooks = [("blocks.0.hook_resid_pre", leaf)]
    hooks += [(name, constant) for name in records if is_frozen(name)]
    hooks += [(name, keep_live) for name in records if name.endswith(("mlp.hook_pre", "mlp.hook_pre_linear"))]
    hooks += [(name, linear_mlp) for name in records if name.endswith("mlp.hook_post")]
    hooks += [(name, reader) for name in dict.fromkeys(reader_hook(spec, r)[0] for r in spec.backward_names)]
    with torch.enable_grad():
        logits = model.run_with_hooks(tokens, fwd_hooks=hooks)
        metric_of(model, prepared, logits)[0].backward()
    gradients = {}
    for name in spec.backward_names:
        hook_name, slot = reader_hook(spec, name)
        grad = kept[hook_name].grad
        grad = torch.zeros_like(kept[hook_name]) if grad is None else grad
        gradients[name] = grad[0] if slot is None else grad[0, :, slot]
    for name, value in kept.items():  # each MLP's hidden activation too (RelP's neuron scores)
        if name.endswith("mlp.hook_post"):
            gradients[name] = value.grad[0]
    return gradients


@pytest.mark.parametrize("attention", ["gradient", "constant"])
@pytest.mark.parametrize("shape", ["gpt2", "llama", "gemma"])
def test_relp_equals_a_frozen_linear_reference(shape, attention):
    model = tiny_model(shape, seed=3)
    spec = GraphSpec.from_model(model)
    prepared = prepare_task(model, IOI_TASK)
    clean = writer_outputs(model, spec, prepared.clean_tokens)
    corrupted = writer_outputs(model, spec, prepared.corrupted_tokens)
    gradients = frozen_reader_gradients(model, spec, prepared, attention == "constant")
    reference = torch.zeros(spec.n_forward, spec.n_backward, dtype=torch.float64, device="cpu")
    for name, writer, reader in edges(spec):
        reference[spec.edge_position(name)] = ((corrupted[writer] - clean[writer]) * gradients[reader]).sum()
    ours = scores_of(model, "relp", {"attention": attention})
    assert reference.abs().max() > 1e-3
    torch.testing.assert_close(ours, reference, rtol=1e-7, atol=1e-9)
    query_key = torch.cat(
        [ours[:, spec.head_backward(layer, kind)] for layer in range(spec.n_layers) for kind in "qk"], 1
    )
    if attention == "constant":  # queries and keys read nothing back through a constant pattern
        assert query_key.abs().max() == 0
    else:  # through the softmax they do
        assert query_key.abs().max() > 1e-4


def relp_with_rules(model, rules) -> torch.Tensor:
    """RelP's scores with only ``rules`` applied (the benchmark's ablation, ``bench_relp.py``)."""
    from circuitviz.methods.relp import RelP

    class Chosen(RelP):
        def rules(self, config):
            return frozenset(rules)

    return Chosen().run_on(model, IOI_TASK, {}, budgets=[1]).scores.double()


def test_relp_without_rules_is_eap():
    model = tiny_model("gemma", seed=3)
    torch.testing.assert_close(relp_with_rules(model, ()), scores_of(model, "eap"), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize(
    "rules", [("ln",), ("qk-ln",), ("identity",), ("half",), ("ah",), ("ln", "identity", "half")]
)
def test_each_rule_alone_equals_the_frozen_reference(rules):
    """Every rule on its own (and all but the AH rule and the q/k-norms' LN rule) against the
    reference with only that part frozen, on the Gemma-shaped model (sandwich and q/k norms, a gated MLP)."""
    model = tiny_model("gemma", seed=3)
    spec = GraphSpec.from_model(model)
    prepared = prepare_task(model, IOI_TASK)
    clean = writer_outputs(model, spec, prepared.clean_tokens)
    corrupted = writer_outputs(model, spec, prepared.corrupted_tokens)
    gradients = frozen_reader_gradients(model, spec, prepared, False, rules=set(rules))
    reference = torch.zeros(spec.n_forward, spec.n_backward, dtype=torch.float64, device="cpu")
    for name, writer, reader in edges(spec):
        reference[spec.edge_position(name)] = ((corrupted[writer] - clean[writer]) * gradients[reader]).sum()
    ours = relp_with_rules(model, rules)
    torch.testing.assert_close(ours, reference, rtol=1e-7, atol=1e-9)
    assert (ours - scores_of(model, "eap")).abs().max() > 1e-6  # the rule changes something


def test_unknown_rule_is_one_sentence():
    from circuitviz.engine.relevance import relevance_hooks

    model = tiny_model("gpt2", seed=2)
    with pytest.raises(ValueError, match="Unknown relevance rules"):
        relevance_hooks(model, GraphSpec.from_model(model), rules={"epsilon"})


@pytest.mark.parametrize("shape", ["gpt2", "gemma"])
def test_attention_half_rule_in_one_layer(shape):
    """AttnLRP's rule for attention ("attn-half") on a one-layer model, from its equations: the
    pattern and the values each get half of what z passes back, and q and k each half of what
    the scores pass back, which are the softmax's gradient of the pattern's half. So against the
    same rules without it, edges into values score 1/2, into queries and keys 1/4, into the MLP
    and the logits the same."""
    model = tiny_model(shape, seed=4, n_layers=1)
    spec = GraphSpec.from_model(model)
    plain = {"ln", "qk-ln", "identity", "half"}
    without, with_half = relp_with_rules(model, plain), relp_with_rules(model, plain | {"attn-half"})
    factor = torch.ones(spec.n_backward, dtype=torch.float64, device="cpu")
    factor[spec.head_backward(0, "v")] = 0.5
    factor[spec.head_backward(0, "q")] = 0.25
    factor[spec.head_backward(0, "k")] = 0.25
    # keys score (queries do not: only the last one reaches the metric in one layer, and the
    # corruption changes earlier tokens)
    assert without[:, spec.head_backward(0, "k")].abs().max() > 1e-4
    torch.testing.assert_close(with_half, without * factor, rtol=1e-9, atol=1e-12)


def hidden_activations(model, tokens) -> torch.Tensor:
    """Every MLP's hidden activation (what its output projection reads).  # [pos, n_layers, d_mlp]"""
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens)
    return torch.stack([cache[f"blocks.{i}.mlp.hook_post"][0] for i in range(model.cfg.n_layers)], dim=1)


@pytest.mark.parametrize("shape", ["gpt2", "llama", "gemma"])
def test_relp_neuron_scores_equal_the_frozen_reference_and_their_circuit_is_patched(shape):
    """With neurons on, each MLP neuron scores (a' - a) . r at its hidden activation, r the frozen
    linear model's gradient there (the relevance rules); the edges' scores do not change; and the
    neuron circuit's metric is the clean run with every other neuron patched by hand."""
    model = tiny_model(shape, seed=3)
    spec = GraphSpec.from_model(model)
    prepared = prepare_task(model, IOI_TASK)
    gradients = frozen_reader_gradients(model, spec, prepared, constant_pattern=True)
    clean = hidden_activations(model, prepared.clean_tokens)
    corrupted = hidden_activations(model, prepared.corrupted_tokens)
    posts = torch.stack([gradients[f"blocks.{i}.mlp.hook_post"] for i in range(spec.n_layers)], dim=1)
    expected = ((corrupted - clean) * posts).sum(0)  # [n_layers, d_mlp]
    assert expected.abs().max() > 1e-3
    d_mlp = model.cfg.d_mlp
    result = get_method("relp").run_on(model, IOI_TASK, {"neurons": True, "neuron_top_k": d_mlp}, budgets=[1])
    assert_neuron_scores(result, expected)
    assert torch.equal(result.scores.double(), scores_of(model, "relp"))
    # the neuron circuit at k = 4: the 4 neurons of largest |reference score| in each MLP kept
    assert_neuron_circuit_at_4(model, prepared, result, expected, corrupted)
