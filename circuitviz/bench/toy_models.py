"""Tiny models whose answers are known: for tests, benchmarks and the planted-circuit bench.

- ``tiny_model``: a small random TransformerLens model, GPT-2-shaped (LayerNorm, absolute
  positions) or Gemma-3-shaped (RMSNorm before and after each sublayer, rotary positions,
  q/k norms, grouped-query attention ungrouped, logit soft-cap), with a word-level tokenizer
  built offline.
- ``planted_model``: a transformer whose every writer puts its output into its own block of
  the residual stream and whose readers read only chosen blocks, so the true circuit is known by
  construction. No normalisation (a norm's scale would couple every block to every other).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch

from ..core.tasks import PromptTask
from ..models import prepare_for_circuits
from ..models.adapter import adapter_of

WORDS = (
    "When Mary John went to the store , gave a drink Alice Bob Carl and at park ball "
    "Tom Anna Paris France Rome Italy capital of is 1 2 3 4 5 + = The answer The cat sat on mat"
).split()


def word_tokenizer(words=WORDS):
    """A whitespace word-level tokenizer that prepends <bos>; needs no download."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocabulary = {
        token: index for index, token in enumerate(["<bos>", "<pad>", "<unk>", *dict.fromkeys(words)])
    }
    backend = Tokenizer(models.WordLevel(vocab=vocabulary, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    backend.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", 0)])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token="<bos>", eos_token="<bos>", pad_token="<pad>", unk_token="<unk>"
    )
    # TransformerLens re-creates tokenizers without these; ours already adds <bos> itself
    tokenizer.init_kwargs["name_or_path"] = "circuitviz-tiny-words"
    tokenizer.init_kwargs["add_bos_token"] = True
    return tokenizer


def tiny_config(
    shape: str = "gpt2", n_layers: int = 2, n_heads: int = 2, d_model: int = 16, seed: int = 0, **overrides
):
    """A HookedTransformerConfig for a tiny model of the given architecture shape."""
    from transformer_lens import HookedTransformerConfig

    tokenizer_size = len(dict.fromkeys(WORDS)) + 3
    common = dict(
        n_layers=n_layers,
        n_heads=n_heads,
        d_model=d_model,
        d_head=d_model // n_heads,
        d_mlp=2 * d_model,
        d_vocab=tokenizer_size,
        n_ctx=64,
        seed=seed,
        # built on the CPU, meant and said: left unset, TransformerLens records "cuda" whenever a GPU
        # exists while the weights stay on the CPU, and the tokens of a host run go to the GPU
        device="cpu",
    )
    if shape == "gpt2":
        common.update(act_fn="gelu_new", normalization_type="LN")
    elif shape == "gemma":
        common.update(
            act_fn="gelu_pytorch_tanh",
            normalization_type="RMS",
            positional_embedding_type="rotary",
            rotary_dim=d_model // n_heads,
            n_key_value_heads=1,
            ungroup_grouped_query_attention=True,
            gated_mlp=True,
            final_rms=True,
            use_normalization_before_and_after=True,
            use_qk_norm=True,
            output_logits_soft_cap=30.0,
            original_architecture="Gemma3ForCausalLM",
        )
    elif shape == "llama":
        common.update(
            act_fn="silu",
            normalization_type="RMS",
            positional_embedding_type="rotary",
            rotary_dim=d_model // n_heads,
            n_key_value_heads=max(1, n_heads // 2),
            ungroup_grouped_query_attention=True,
            gated_mlp=True,
            final_rms=True,
        )
    else:
        raise ValueError(f"unknown shape {shape!r}; use gpt2, gemma or llama")
    common.update(overrides)
    return HookedTransformerConfig(**common)


def _randomise_norms(model, generator: torch.Generator) -> None:
    """Give norm weights values away from 1 so tests notice a norm that is handled wrongly."""
    for name, parameter in model.named_parameters():
        if (".ln" in name or name.startswith("ln_final") or "_norm" in name) and name.endswith(".w"):
            parameter.data = 0.5 + torch.rand(parameter.shape, generator=generator)
        if name.endswith(".b") and (".ln" in name or name.startswith("ln_final")):
            parameter.data = 0.1 * torch.randn(parameter.shape, generator=generator)


def tiny_model(shape: str = "gpt2", seed: int = 0, words=None, **config):
    """A small random model ready for circuit discovery (float64 for exact comparisons);
    ``words``: its tokenizer's vocabulary instead of ``WORDS``."""
    from transformer_lens import HookedTransformer

    if words is not None:
        config.setdefault("d_vocab", len(dict.fromkeys(words)) + 3)
    cfg = tiny_config(shape, seed=seed, dtype=torch.float64, **config)
    model = HookedTransformer(cfg, tokenizer=word_tokenizer(words or WORDS), move_to_device=False)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        _randomise_norms(model, generator)
        for name, parameter in model.named_parameters():
            if name.endswith("b_O") or name.endswith("b_U") or "b_in" in name:
                parameter.data = 0.05 * torch.randn(
                    parameter.shape, generator=generator, dtype=parameter.dtype
                )
    model.cfg.model_name = f"tiny-{shape}-{seed}"
    return prepare_for_circuits(model)


# ----- real models' shapes with random weights (timings on machines the weights never reach) ----
REAL_SHAPES = {
    "gemma-3-270m": dict(
        n_layers=18,
        d_model=640,
        n_heads=4,
        d_head=256,
        d_mlp=2048,
        d_vocab=262144,
        n_ctx=2048,
        act_fn="gelu_pytorch_tanh",
        normalization_type="RMS",
        positional_embedding_type="rotary",
        rotary_dim=256,
        rotary_base=1_000_000,
        rotary_base_local=10_000,
        n_key_value_heads=1,
        ungroup_grouped_query_attention=True,
        gated_mlp=True,
        final_rms=True,
        use_normalization_before_and_after=True,
        use_qk_norm=True,
        attn_types=(["local"] * 5 + ["global"]) * 3,
        window_size=512,
        use_local_attn=True,
        attn_scale=16.0,
        original_architecture="Gemma3ForCausalLM",
    ),
    "llama-3.2-1b": dict(
        n_layers=16,
        d_model=2048,
        n_heads=32,
        d_head=64,
        d_mlp=8192,
        d_vocab=128256,
        n_ctx=2048,
        act_fn="silu",
        normalization_type="RMS",
        positional_embedding_type="rotary",
        rotary_dim=64,
        rotary_base=500_000,
        n_key_value_heads=8,
        ungroup_grouped_query_attention=True,
        gated_mlp=True,
        final_rms=True,
        original_architecture="LlamaForCausalLM",
    ),
    "llama-3.1-8b": dict(
        n_layers=32,
        d_model=4096,
        n_heads=32,
        d_head=128,
        d_mlp=14336,
        d_vocab=128256,
        n_ctx=2048,
        act_fn="silu",
        normalization_type="RMS",
        positional_embedding_type="rotary",
        rotary_dim=128,
        rotary_base=500_000,
        n_key_value_heads=8,
        ungroup_grouped_query_attention=True,
        gated_mlp=True,
        final_rms=True,
        original_architecture="LlamaForCausalLM",
    ),
}


def random_model(shape: str, dtype=torch.float32, device="cpu", seed: int = 0, sharpen: float = 1.0):
    """A model in a real model's shape (``REAL_SHAPES``) with random weights and the word tokenizer.

    Made directly on ``device`` in ``dtype`` (an 8B shape never passes through the CPU's memory).
    ``sharpen`` scales the query weights, so attention makes decisions (ACC++ timings).
    """
    from transformer_lens import HookedTransformer, HookedTransformerConfig

    if shape not in REAL_SHAPES:
        raise ValueError(f"unknown shape {shape!r}; choose one of {', '.join(REAL_SHAPES)}")
    cfg = HookedTransformerConfig(**REAL_SHAPES[shape], dtype=dtype, device=str(device), seed=seed)
    with torch.device(device):
        model = HookedTransformer(cfg, tokenizer=word_tokenizer(), move_to_device=False)
    if sharpen != 1.0:
        with torch.no_grad():
            for block in model.blocks:
                block.attn.W_Q.mul_(sharpen)
    model.cfg.model_name = f"random-{shape}-shape"
    return prepare_for_circuits(model)


def compare_results(first, second) -> dict:
    """How far two results of one request are apart: largest score and metric gaps, and whether
    every budget's circuit is the same (to compare devices, dtypes or code versions)."""
    scores = (
        float((first.scores.double() - second.scores.double()).abs().max()) if first.scores.numel() else 0.0
    )
    metrics = max(
        (abs(a.metric - b.metric) for a, b in zip(first.curve, second.curve)),
        default=0.0,
    )
    same_budgets = first.budgets == second.budgets
    circuits_equal = same_budgets and all(
        bool(torch.equal(first.circuit(b).cpu(), second.circuit(b).cpu())) for b in first.budgets
    )
    return {"scores": scores, "metrics": metrics, "circuits_equal": circuits_equal}


IOI_TASK = PromptTask(
    clean="When Mary and John went to the store , John gave a drink to",
    corrupted="When Alice and Bob went to the store , Carl gave a drink to",
    answer=" Mary",
    foils=(" John",),
)


NUDGES = (1e-15, 1e-12, 1e-9)


def nudged_tiny_model(shape: str, seed: int = 0, scale: float = 1e-12):
    """``tiny_model(shape, seed)`` with every weight times (1 + scale x a standard normal draw):
    a change in the last bits of float64, the size of another summation order's rounding."""
    model = tiny_model(shape, seed=seed)
    generator = torch.Generator(device="cpu").manual_seed(seed + 1)
    with torch.no_grad():
        for parameter in model.parameters():
            noise = torch.randn(parameter.shape, generator=generator, dtype=parameter.dtype, device="cpu")
            parameter.mul_(1 + scale * noise.to(parameter.device))
    return model


def rounding_band(method, shape: str, config, budgets, task=None, seed: int = 0) -> dict:
    """How far ``method``'s result moves on rounding alone, on the CPU: the largest score and curve
    gaps (``compare_results``) between its run on ``tiny_model(shape, seed)`` and its runs on that
    model nudged by each of ``NUDGES``. An optimisation that ends in hard decisions (Edge Pruning's
    masks) can move far on the last bit; a device whose other summation order moves it no further
    than this agrees with the CPU as well as the CPU agrees with itself."""
    task = task or IOI_TASK
    host = method.run_on(tiny_model(shape, seed=seed), task, config, budgets=budgets)
    gaps = [
        compare_results(
            method.run_on(nudged_tiny_model(shape, seed, scale), task, config, budgets=budgets), host
        )
        for scale in NUDGES
    ]
    return {
        "scores": max(gap["scores"] for gap in gaps),
        "metrics": max(gap["metrics"] for gap in gaps),
        "circuits_move": not all(gap["circuits_equal"] for gap in gaps),
    }


@dataclass
class PlantedCircuit:
    """A planted model, a task on it, and the true edges.  true_edges: [n_forward, n_backward] bool."""

    model: object
    task: PromptTask
    true_edges: torch.Tensor
    circuit_nodes: list[str]


def planted_model(
    n_layers: int = 3,
    n_heads: int = 2,
    block: int = 4,
    seed: int = 0,
    parents: int = 2,
    distractors: int = 2,
    nodes_per_layer: tuple[int, int] = (1, 2),
    distractors_read: str = "input",
    distractor_mlps: int = 0,
    nonlinear_gain: float = 1.0,
) -> PlantedCircuit:
    """Build a model whose circuit is known by construction.

    Each writer w (input, every head, every MLP) owns residual dimensions [w*block, (w+1)*block).
    A random set of circuit nodes reads (through its q, k and v or MLP input weights) only the
    blocks of up to ``parents`` earlier circuit nodes (always including one, so every circuit
    node hangs off the input); logits read the last layer's circuit nodes. Every circuit node
    reaches logits. ``distractors`` other heads read the input's block but write where nobody
    reads: their input edges exist in the model and carry signal, yet change nothing downstream.
    True edges: source -> reader for every block a circuit node reads, and circuit node -> logits.

    Options for the planted-circuit benchmark (the defaults build exactly the model above):
    - ``nodes_per_layer`` (low, high): how many circuit nodes each layer gets (circuit density);
    - ``distractors_read="circuit"``: distractor heads read a random earlier circuit node instead
      of the input, so their outputs correlate with the circuit's without feeding it;
    - ``distractor_mlps``: non-circuit MLPs that read a circuit node and write where nobody reads;
    - ``nonlinear_gain`` > 1: circuit units work in their nonlinear regime: queries and MLP
      input weights are scaled up (sharper attention, GELU acting as a switch) and MLP output
      weights scaled down by the same factor. The true edges do not change.
    """
    if distractors_read not in ("input", "circuit"):
        raise ValueError(f"distractors_read must be 'input' or 'circuit', not {distractors_read!r}.")
    from transformer_lens import HookedTransformer

    rng = random.Random(seed)
    generator = torch.Generator().manual_seed(seed)
    cfg = tiny_config(
        "gpt2",
        n_layers=n_layers,
        n_heads=n_heads,
        d_model=(1 + n_layers * (n_heads + 1)) * block,
        seed=seed,
        normalization_type=None,
        act_fn="gelu",
        dtype=torch.float64,
    )
    cfg.d_head = block
    cfg.d_mlp = 4 * block
    model = HookedTransformer(cfg, tokenizer=word_tokenizer(), move_to_device=False)
    spec = adapter_of(model).spec

    def dims(writer: int) -> slice:
        return slice(writer * block, (writer + 1) * block)

    def rand(*shape):
        return torch.randn(*shape, generator=generator, dtype=torch.float64)

    # choose circuit nodes layer by layer: at least one per layer so a path runs to the last layer
    circuit: list[int] = [0]
    for layer in range(n_layers):
        writers = [
            *range(spec.head_forward(layer).start, spec.head_forward(layer).stop),
            spec.mlp_forward(layer),
        ]
        low, high = nodes_per_layer
        chosen = rng.sample(writers, k=min(len(writers), rng.randint(max(1, low), max(1, low, high))))
        circuit += sorted(chosen)
    reads: dict[int, list[int]] = {}
    for node in circuit[1:]:
        earlier = [w for w in circuit if w < node and _can_read(spec, w, node)]
        # the newest earlier circuit node keeps the chain connected; others are random extras
        picks = {max(earlier)} | set(rng.sample(earlier, k=min(len(earlier), parents - 1)))
        reads[node] = sorted(picks)
    read_by_someone = {w for sources in reads.values() for w in sources}
    last_layer = [w for w in circuit if spec.forward_layer[w] == n_layers - 1]
    sinks = sorted(set(last_layer) | {w for w in circuit[1:] if w not in read_by_someone})

    with torch.no_grad():
        for parameter in model.parameters():
            parameter.zero_()
        model.embed.W_E[:, dims(0)] = rand(cfg.d_vocab, block)
        model.pos_embed.W_pos[:, dims(0)] = 0.5 * rand(cfg.n_ctx, block)
        circuit_set = set(circuit)
        candidates = [
            h
            for layer in range(n_layers)
            for h in range(spec.head_forward(layer).start, spec.head_forward(layer).stop)
            if h not in circuit_set
        ]
        distractor_heads = rng.sample(candidates, k=min(distractors, len(candidates)))
        distractor_sources = {head: [0] for head in distractor_heads}
        if distractors_read == "circuit":
            for head in distractor_heads:
                readable = [w for w in circuit if w < head and _can_read(spec, w, head)]
                distractor_sources[head] = [rng.choice(readable)]
        for layer in range(n_layers):
            attn = model.blocks[layer].attn
            for head in range(n_heads):
                writer = spec.head_forward(layer).start + head
                sources = reads.get(writer) or distractor_sources.get(writer, [])
                for source in sources:
                    attn.W_Q[head, dims(source)] = rand(block, block)
                    attn.W_K[head, dims(source)] = rand(block, block)
                    attn.W_V[head, dims(source)] = rand(block, block)
                if sources:
                    attn.W_O[head, :, dims(writer)] = rand(block, block)
            mlp_writer = spec.mlp_forward(layer)
            mlp = model.blocks[layer].mlp
            for source in reads.get(mlp_writer, []):
                mlp.W_in[dims(source)] = rand(block, cfg.d_mlp)
            if mlp_writer in reads:
                mlp.b_in[:] = 0.1 * rand(cfg.d_mlp)
                mlp.W_out[:, dims(mlp_writer)] = rand(cfg.d_mlp, block) / 2
        for sink in sinks:
            model.unembed.W_U[dims(sink)] = rand(block, cfg.d_vocab)
        _add_distractor_mlps(model, spec, circuit, distractor_mlps, rng, rand, dims)
        if nonlinear_gain != 1.0:
            for node in circuit[1:]:
                layer = int(spec.forward_layer[node])
                if node == spec.mlp_forward(layer):
                    mlp = model.blocks[layer].mlp
                    mlp.W_in.mul_(nonlinear_gain)
                    mlp.b_in.mul_(nonlinear_gain)
                    mlp.W_out.div_(nonlinear_gain)
                else:
                    model.blocks[layer].attn.W_Q[node - spec.head_forward(layer).start].mul_(nonlinear_gain)

    true_edges = torch.zeros(spec.n_forward, spec.n_backward, dtype=torch.bool)
    for node, sources in reads.items():
        layer = int(spec.forward_layer[node])
        for source in sources:
            if node == spec.mlp_forward(layer):
                true_edges[source, spec.mlp_backward(layer)] = True
            else:
                head = node - spec.head_forward(layer).start
                for qkv in ("q", "k", "v"):
                    true_edges[source, spec.head_backward(layer, qkv).start + head] = True
    for sink in sinks:
        true_edges[sink, spec.logits_backward] = True
    model.cfg.model_name = f"planted-{n_layers}x{n_heads}-{seed}"
    return PlantedCircuit(
        model=prepare_for_circuits(model),
        task=PromptTask(
            clean="When Mary and John went to the store , John gave a drink to",
            # the last token differs too, so a head's query at the answer position can matter
            corrupted="When Alice and Bob went to the park , Carl gave a ball at",
            answer=" Mary",
            foils=(" John",),
        ),
        true_edges=true_edges,
        circuit_nodes=[spec.forward_names[w] for w in circuit],
    )


def _add_distractor_mlps(model, spec, circuit: list[int], count: int, rng, rand, dims) -> None:
    """Give ``count`` non-circuit MLPs an input from one circuit node and an output nobody reads."""
    if count <= 0:
        return
    circuit_set = set(circuit)
    mlps = [spec.mlp_forward(layer) for layer in range(spec.n_layers)]
    idle = [writer for writer in mlps if writer not in circuit_set]
    block = dims(0).stop  # the width of one writer's residual block
    for writer in rng.sample(idle, k=min(count, len(idle))):
        layer = int(spec.forward_layer[writer])
        source = rng.choice([w for w in circuit if w < writer and _can_read(spec, w, writer)])
        mlp = model.blocks[layer].mlp
        mlp.W_in[dims(source)] = rand(block, mlp.W_in.shape[1])
        mlp.b_in[:] = 0.1 * rand(mlp.W_in.shape[1])
        mlp.W_out[:, dims(writer)] = rand(mlp.W_in.shape[1], block) / 2


def _can_read(spec, source: int, reader: int) -> bool:
    """Whether writer ``reader`` may read writer ``source`` (the graph's edge rule)."""
    layer = int(spec.forward_layer[reader])
    if reader == spec.mlp_forward(layer):
        return source < spec.upstream_of_mlp(layer)
    return source < spec.upstream_of_heads(layer)


def tiny_app_model(model_id: str = "", device: str = "cpu"):
    """The app tests' model loader: a 2-layer, 2-head GPT-2 (its ``(model_id, device)`` signature is
    ``ui.loaders.MODEL_LOADER``'s; both are ignored, the model is built on the CPU)."""
    return tiny_model("gpt2", n_layers=2, n_heads=2)
