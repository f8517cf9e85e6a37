"""EAP, EAP-IG and exact patching against a second implementation written from their definitions.

The re-derivation below shares no code with ``circuitviz.activations``: writers' outputs are read
from TransformerLens's own cache (``hook_z`` times ``W_O`` for a head, ``hook_mlp_out``,
``hook_resid_pre``), a reader's input is patched or differentiated at TransformerLens's own
reader hooks (``hook_q_input``/``hook_k_input``/``hook_v_input``, ``hook_mlp_in``, the last
``hook_resid_post``), and the metric is read off the model's full forward pass (logits of the
whole vocabulary, soft-cap included). Only edge names and indices come from ``GraphSpec``.

Definitions (u a writer, v a reader, z_u and z'_u its output on the clean and corrupted prompt,
L the metric: answer logit minus the foils' mean logit at the last position):
- exact(u -> v) = L(clean run with v's input + z'_u - z_u) - L(clean run);
- EAP(u -> v) = sum over positions of (z'_u - z_u) . dL/d(input of v), at the clean run;
- EAP-IG(u -> v) with m steps = the same with dL/d(input of v) averaged over m runs whose
  embedding is e' + a (e - e'), e and e' the clean and corrupted embeddings. We take
  a = k/m for k = 1..m (so m = 1 is EAP); the public EAP-IG library takes k = 0..m-1. Their
  difference is exactly (g(1) - g(0)) . (z'_u - z_u) / m, g(a) the gradient at a.

Gemma-shaped models normalise the attention output after the heads are summed; a head's output is
then its share of the sum through that norm at the sum's scale (``ln1_post.hook_scale``), which
is how the graph defines a head's contribution there.
"""

from __future__ import annotations

import pytest
import torch

from circuitviz.graph import GraphSpec
from circuitviz.methods import get_method
from circuitviz.tasks import prepare_task
from circuitviz.testing import IOI_TASK, tiny_model

SHAPES = ["gpt2", "llama", "gemma"]


@pytest.fixture(scope="module", params=SHAPES)
def shaped(request):
    model = tiny_model(request.param, seed=1)
    return model, GraphSpec.from_model(model), prepare_task(model, IOI_TASK)


def metric_of(model, prepared, logits: torch.Tensor) -> torch.Tensor:
    """L from full logits [batch, pos, d_vocab]: answer minus the foils' mean, last position."""
    last = logits[:, -1]
    return last[:, prepared.answer_id] - last[:, list(prepared.foil_ids)].mean(-1)


def writer_outputs(model, spec: GraphSpec, tokens: torch.Tensor) -> dict[str, torch.Tensor]:
    """{writer name: its output added to the residual stream [pos, d_model]} from TL's cache."""
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens)
    outputs = {"input": cache["blocks.0.hook_resid_pre"][0]}
    for layer in range(spec.n_layers):
        attention = model.blocks[layer].attn
        z = cache[f"blocks.{layer}.attn.hook_z"][0]  # [pos, n_heads, d_head]
        heads = torch.einsum("phe,hem->phm", z, attention.W_O) + attention.b_O / spec.n_heads
        post_norm = getattr(model.blocks[layer], "ln1_post", None)
        if post_norm is not None and getattr(model.cfg, "use_normalization_before_and_after", False):
            heads = heads / cache[f"blocks.{layer}.ln1_post.hook_scale"][0][:, None, :] * post_norm.w
        for head in range(spec.n_heads):
            outputs[f"a{layer}.h{head}"] = heads[:, head]
        outputs[f"m{layer}"] = cache[f"blocks.{layer}.hook_mlp_out"][0]
    final = cache[f"blocks.{spec.n_layers - 1}.hook_resid_post"][0]
    # the writers are the whole residual stream: they must add up to it
    torch.testing.assert_close(sum(outputs.values()), final, rtol=1e-9, atol=1e-9)
    return outputs


def reader_hook(spec: GraphSpec, reader: str) -> tuple[str, int | None]:
    """(TransformerLens hook holding reader's input, head slot or None) for 'a1.h0<q>', 'm1', 'logits'."""
    if reader == "logits":
        return f"blocks.{spec.n_layers - 1}.hook_resid_post", None
    if reader.startswith("m"):
        return f"blocks.{int(reader[1:])}.hook_mlp_in", None
    head, kind = reader[:-3], reader[-2]
    layer, index = (int(part[1:]) for part in head.split("."))
    return f"blocks.{layer}.hook_{kind}_input", index


def edges(spec: GraphSpec) -> list[tuple[str, str, str]]:
    """(edge name, writer, reader) for every edge of the graph."""
    return [(name, *name.split("->")) for name in spec.edge_names]


def exact_scores(model, spec, prepared) -> torch.Tensor:
    """exact(u -> v), one separately patched forward pass per edge."""
    clean = writer_outputs(model, spec, prepared.clean_tokens)
    corrupted = writer_outputs(model, spec, prepared.corrupted_tokens)
    with torch.no_grad():
        baseline = metric_of(model, prepared, model(prepared.clean_tokens))[0]
    scores = torch.zeros(spec.n_forward, spec.n_backward, dtype=torch.float64)
    for name, writer, reader in edges(spec):
        hook_name, slot = reader_hook(spec, reader)
        delta = corrupted[writer] - clean[writer]  # [pos, d_model]

        def patch(x, hook, delta=delta, slot=slot):
            x = x.clone()
            if slot is None:
                x[0] += delta
            else:
                x[0, :, slot] += delta
            return x

        with torch.no_grad():
            logits = model.run_with_hooks(prepared.clean_tokens, fwd_hooks=[(hook_name, patch)])
        scores[spec.edge_position(name)] = metric_of(model, prepared, logits)[0] - baseline
    return scores


def reader_gradients(model, spec, prepared, alpha: float) -> dict[str, torch.Tensor]:
    """{reader: dL/d(its input) [pos, d_model]} on the clean prompt whose embedding is
    e' + alpha (e - e')."""
    clean = writer_outputs(model, spec, prepared.clean_tokens)["input"]
    corrupted = writer_outputs(model, spec, prepared.corrupted_tokens)["input"]
    kept: dict[str, torch.Tensor] = {}

    def embedding(x, hook):
        return (corrupted + alpha * (clean - corrupted))[None].clone().requires_grad_(True)

    def keep(x, hook):
        x.retain_grad()
        kept[hook.name] = x

    hooks = [("blocks.0.hook_resid_pre", embedding)]
    hooks += [(name, keep) for name in dict.fromkeys(reader_hook(spec, r)[0] for r in spec.backward_names)]
    with torch.enable_grad():
        logits = model.run_with_hooks(prepared.clean_tokens, fwd_hooks=hooks)
        metric_of(model, prepared, logits)[0].backward()
    gradients = {}
    for reader in spec.backward_names:
        hook_name, slot = reader_hook(spec, reader)
        grad = kept[hook_name].grad[0]
        gradients[reader] = grad if slot is None else grad[:, slot]
    return gradients


def attribution_scores(model, spec, prepared, alphas) -> torch.Tensor:
    """sum over positions of (z'_u - z_u) . mean over alphas of dL/d(input of v)."""
    clean = writer_outputs(model, spec, prepared.clean_tokens)
    corrupted = writer_outputs(model, spec, prepared.corrupted_tokens)
    runs = [reader_gradients(model, spec, prepared, float(alpha)) for alpha in alphas]
    scores = torch.zeros(spec.n_forward, spec.n_backward, dtype=torch.float64)
    for name, writer, reader in edges(spec):
        gradient = sum(run[reader] for run in runs) / len(runs)
        scores[spec.edge_position(name)] = ((corrupted[writer] - clean[writer]) * gradient).sum()
    return scores


def ours(model, method: str, **settings) -> torch.Tensor:
    chosen = get_method(method)
    return chosen.run_on(model, IOI_TASK, chosen.make_config(settings), budgets=[1]).scores.double()


def assert_every_edge(spec, mine, theirs, scale=None):
    """Equal on every edge up to float32 rounding: results store scores as float32, so each may
    be off by half a float32 step (6e-8 of its size; 1e-6 allowed); ``scale`` sets the size for
    differences of scores."""
    size = theirs.abs() if scale is None else scale.abs()
    gaps = ((mine - theirs).abs() - 1e-6 * size)[spec.edge_mask]
    worst = int(gaps.argmax())
    assert float(gaps.max()) <= 1e-12, (
        f"{spec.edge_names[worst]}: {float(mine[spec.edge_mask][worst]):.9g} vs {float(theirs[spec.edge_mask][worst]):.9g}"
    )
    assert float(theirs[spec.edge_mask].abs().max()) > 1e-3  # the comparison is not of zeros


def test_exact_scores_equal_separately_patched_forward_passes(shaped):
    """Every edge's exact score is the metric change of its own patched forward pass (the
    circuit evaluator is not used to check itself)."""
    model, spec, prepared = shaped
    assert_every_edge(spec, ours(model, "exact"), exact_scores(model, spec, prepared))


def test_eap_equals_its_definition_on_every_edge(shaped):
    """What the public EAP-IG library computes as EAP, edge by edge (float64, every shape)."""
    model, spec, prepared = shaped
    assert_every_edge(spec, ours(model, "eap"), attribution_scores(model, spec, prepared, [1.0]))


def test_eap_ig_with_one_step_is_eap(shaped):
    """The documented identity: with a = k/m, k = 1..m, one step is the gradient at the clean run."""
    model, spec, _ = shaped
    assert torch.allclose(ours(model, "eap-ig", ig_steps=1), ours(model, "eap"), rtol=0, atol=1e-12)


def test_eap_ig_equals_its_definition_and_the_public_librarys_sum_up_to_one_step():
    """On a Llama-shaped model, edge by edge: our EAP-IG is the k = 1..m sum, and it differs from
    the k = 0..m-1 sum the public library computes by exactly (g(1) - g(0)) . (z' - z) / m."""
    model = tiny_model("llama", seed=1)
    spec, prepared = GraphSpec.from_model(model), prepare_task(model, IOI_TASK)
    steps = 5
    mine = ours(model, "eap-ig", ig_steps=steps)
    assert_every_edge(
        spec, mine, attribution_scores(model, spec, prepared, [k / steps for k in range(1, steps + 1)])
    )
    library = attribution_scores(model, spec, prepared, [k / steps for k in range(steps)])
    at_clean = attribution_scores(model, spec, prepared, [1.0])
    at_corrupted = attribution_scores(model, spec, prepared, [0.0])
    assert_every_edge(spec, mine - library, (at_clean - at_corrupted) / steps, scale=mine)
