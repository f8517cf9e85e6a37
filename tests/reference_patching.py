"""Edge patching and attribution re-derived from their definitions on TransformerLens's own hooks.

Shares no code with ``circuitviz.engine``: writers' outputs are read from TransformerLens's
cache (``hook_z`` times ``W_O`` for a head, ``hook_mlp_out``, ``hook_resid_pre``), a reader's
input is patched or differentiated at TransformerLens's own reader hooks (``hook_q_input``,
``hook_k_input``, ``hook_v_input``, ``hook_mlp_in``, the last ``hook_resid_post``), and the metric
is read off the model's full forward pass (the whole vocabulary's logits, soft-cap included).
Only edge names and indices come from ``GraphSpec``. Used by tests/test_reference.py and
tests/test_planted_bench.py.

Gemma-shaped models normalise the attention output after the heads are summed; a head's output is
then its share of the sum through that norm at the sum's scale (``ln1_post.hook_scale``), which
is how the graph defines a head's contribution there (the shares add up to what the layer adds).
Patching an edge from a head h to a reader v is the model's own computation with v alone seeing h
corrupted: v reads ``ln1_post(sum of the layer's heads before the norm, h's replaced by its
corrupted one)`` in place of the layer's output (``edge_change``), not the difference of two
runs' shares, whose scales differ.
"""

from __future__ import annotations

import torch

from circuitviz.core.graph import GraphSpec


def metric_of(model, prepared, logits: torch.Tensor) -> torch.Tensor:
    """L from full logits [batch, pos, d_vocab]: answer minus the foils' mean, last position."""
    last = logits[:, -1]
    return last[:, prepared.answer_id] - last[:, list(prepared.foil_ids)].mean(-1)


# a norm on attention's and the MLP's own outputs, none before them (OLMo 2's layout); kept here
# apart from the engine's circuitviz.models.architectures, which tests/test_architectures.py
# checks against this list
POST_NORM_ARCHITECTURES = (
    "Olmo2ForCausalLM",
    "Olmo3ForCausalLM",
    "Exaone4ForCausalLM",
    "FlexOlmoForCausalLM",
)
# architectures whose transformers norms compute in float32 whatever the model's dtype and sit on
# a writer's output (Gemma's and GLM-4's norms after each sublayer, OLMo-2's and 3's) or normalise
# each head's own input (the bridge's per-head inputs go through Cohere's LayerNorm, which rounds
# to float32, where its unsplit forward normalises in the model's dtype), or weigh their experts
# in float32 (GLM-4.5's router: an edge's exact score 2.9476e-6 against 2.9437e-6 separately patched)
SUM_TOLERANCE = {
    name: 1e-5
    for name in (
        "Gemma2ForCausalLM",
        "Gemma3ForCausalLM",
        "Glm4ForCausalLM",
        "CohereForCausalLM",
        "Cohere2ForCausalLM",
        "Glm4MoeForCausalLM",
        *POST_NORM_ARCHITECTURES,
    )
}


def rms_norm_weight(norm, cfg) -> torch.Tensor:
    """An RMS norm's effective weight, read off its own forward pass: norm(1) = w / sqrt(1 + eps)
    (the same for HookedTransformer's w and Gemma's 1 + weight in transformers)."""
    weight = next(norm.parameters(), None)
    device = weight.device if weight is not None else "cpu"  # the norm's own device (CPU without weights)
    ones = torch.ones(1, 1, cfg.d_model, dtype=torch.float64, device=device)
    with torch.no_grad():
        out = norm(ones.to(cfg.dtype) if hasattr(cfg, "dtype") else ones.float())
    return (out[0, 0].double() * (1.0 + cfg.eps) ** 0.5).to(out.dtype)


def writer_outputs(model, spec: GraphSpec, tokens: torch.Tensor) -> dict[str, torch.Tensor]:
    """{writer name: its output added to the residual stream [pos, d_model]} from TL's cache."""
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens)
    outputs = {"input": cache["blocks.0.hook_resid_pre"][0]}
    for layer in range(spec.n_layers):
        attention = model.blocks[layer].attn
        z = cache[f"blocks.{layer}.attn.hook_z"][0]  # [pos, n_heads, d_head]
        heads = torch.einsum("phe,hem->phm", z, attention.W_O)
        if attention.b_O is not None:  # a TransformerBridge has None where a model has no bias
            heads = heads + attention.b_O / spec.n_heads
        post_norm = getattr(model.blocks[layer], "ln1_post", None)
        if post_norm is not None and getattr(model.cfg, "use_normalization_before_and_after", False):
            scale = cache[f"blocks.{layer}.ln1_post.hook_scale"][0][:, None, :]
            heads = heads / scale * rms_norm_weight(post_norm, model.cfg)
        elif model.cfg.original_architecture in POST_NORM_ARCHITECTURES:  # OLMo-2: norm after attention
            scale = cache[f"blocks.{layer}.ln1.hook_scale"][0][:, None, :]
            heads = heads / scale * rms_norm_weight(model.blocks[layer].ln1, model.cfg)
        for head in range(spec.n_heads):
            outputs[f"a{layer}.h{head}"] = heads[:, head]
        outputs[f"m{layer}"] = cache[f"blocks.{layer}.hook_mlp_out"][0]
    final = cache[f"blocks.{spec.n_layers - 1}.hook_resid_post"][0]
    # the writers are the whole residual stream: they must add up to it
    # (to float32 rounding where the model's own norms compute in float32, as transformers' Gemma
    # and OLMo-2 norms do even in a float64 model: SUM_TOLERANCE)
    tolerance = SUM_TOLERANCE.get(str(getattr(model.cfg, "original_architecture", "")), 1e-9)
    scale = float(final.abs().max())
    torch.testing.assert_close(sum(outputs.values()), final, rtol=tolerance, atol=tolerance * scale)
    return outputs


def post_norm(model, layer: int):
    """The layer's norm after attention (Gemma's ln1_post) or None."""
    if getattr(model.cfg, "use_normalization_before_and_after", False):
        return model.blocks[layer].ln1_post
    if model.cfg.original_architecture in POST_NORM_ARCHITECTURES:  # OLMo-2: ln1 comes after attention
        return model.blocks[layer].ln1
    return None


def raw_heads(model, spec: GraphSpec, tokens: torch.Tensor) -> dict[int, torch.Tensor]:
    """{layer: every head's output before the post-attention norm [pos, n_heads, d_model]}."""
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens)
    heads = {}
    for layer in range(spec.n_layers):
        attention = model.blocks[layer].attn
        z = cache[f"blocks.{layer}.attn.hook_z"][0]  # [pos, n_heads, d_head]
        heads[layer] = torch.einsum("phe,hem->phm", z, attention.W_O)
        if attention.b_O is not None:  # a TransformerBridge has None where a model has no bias
            heads[layer] = heads[layer] + attention.b_O / spec.n_heads
    return heads


def edge_change(model, spec: GraphSpec, clean: dict, corrupted: dict, writer: str, raw=None) -> torch.Tensor:
    """What patching writer -> v adds to v's input [pos, d_model]: z'_u - z_u, or under a
    post-attention norm, the norm of the layer's clean heads with the writer's corrupted (raw
    = (clean raw heads, corrupted raw heads) by layer) minus the layer's clean output."""
    if writer.startswith("a") and raw is not None:
        layer, head = (int(part[1:]) for part in writer.split("."))
        norm = post_norm(model, layer)
        if norm is not None:
            clean_raw, corrupted_raw = raw[0][layer], raw[1][layer]  # [pos, n_heads, d_model]
            mixed = clean_raw.sum(1) - clean_raw[:, head] + corrupted_raw[:, head]
            with torch.no_grad():
                return norm(mixed[None])[0] - norm(clean_raw.sum(1)[None])[0]
    return corrupted[writer] - clean[writer]


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


def edge_patch(spec: GraphSpec, clean: dict, corrupted: dict, name: str, model=None, raw=None):
    """(hook name, hook) that moves edge ``name``'s reader input by z'_u - z_u (under a
    post-attention norm: ``edge_change``), all else clean."""
    writer, reader = name.split("->")
    hook_name, slot = reader_hook(spec, reader)
    delta = edge_change(model, spec, clean, corrupted, writer, raw)  # [pos, d_model]

    def patch(x, hook):
        x = x.clone()
        if slot is None:
            x[0] += delta
        else:
            x[0, :, slot] += delta
        return x

    return hook_name, patch


def exact_scores(model, spec, prepared) -> torch.Tensor:
    """exact(u -> v), one separately patched forward pass per edge."""
    clean = writer_outputs(model, spec, prepared.clean_tokens)
    corrupted = writer_outputs(model, spec, prepared.corrupted_tokens)
    raw = (raw_heads(model, spec, prepared.clean_tokens), raw_heads(model, spec, prepared.corrupted_tokens))
    with torch.no_grad():
        baseline = metric_of(model, prepared, model(prepared.clean_tokens))[0]
    scores = torch.zeros(spec.n_forward, spec.n_backward, dtype=torch.float64, device=baseline.device)
    for name, _, _ in edges(spec):
        with torch.no_grad():
            logits = model.run_with_hooks(
                prepared.clean_tokens, fwd_hooks=[edge_patch(spec, clean, corrupted, name, model, raw)]
            )
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

    def keeper(name):  # keyed by the name asked for (a bridge's hook.name is the canonical one)
        def keep(x, hook):  # the reader's own input: a copy (a bridge hooks the residual itself)
            x = x.clone()
            x.retain_grad()
            kept[name] = x
            return x

        return keep

    hooks = [("blocks.0.hook_resid_pre", embedding)]
    names = dict.fromkeys(reader_hook(spec, r)[0] for r in spec.backward_names)
    hooks += [(name, keeper(name)) for name in names]
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
    device = prepared.clean_tokens.device
    scores = torch.zeros(spec.n_forward, spec.n_backward, device=device, dtype=torch.float64)
    for name, writer, reader in edges(spec):
        gradient = sum(run[reader] for run in runs) / len(runs)
        scores[spec.edge_position(name)] = ((corrupted[writer] - clean[writer]) * gradient).sum()
    return scores
