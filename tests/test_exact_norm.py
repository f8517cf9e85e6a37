"""The evaluator is exact under a norm shared by a layer's heads (Gemma's post-attention norm).

Two references that share no code with ``circuitviz.engine.patching``:
- removing every out-edge of a head is patching that head itself: its z replaced by the
  corrupted run's, everything downstream (the post-attention norm of the layer's sum included)
  computed by the model (``node_patched_metrics`` hooks ``hook_z`` only);
- any circuit, by hand: one hooked run in which each reader's input is rebuilt from its own mix,
  the norm applied to the layer's heads before the norm as that reader sees them.
Both on tiny Gemma-shaped models (float64, to 1e-9) and on the two embedded models (to 1e-4 logit
over every head of three prompts).
"""

from __future__ import annotations

import pytest
import torch

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.core.graph import GraphSpec, prune
from circuitviz.core.tasks import PromptTask, prepare_task
from circuitviz.engine.patching import masked_residual, node_patched_metrics
from circuitviz.measure.evaluate import Evaluator

SECOND_TASK = PromptTask(  # another prompt of the toy vocabulary, corrupted late (a prefix runs once)
    clean="When Tom and Anna went to the park , Anna gave a ball to",
    corrupted="When Tom and Anna went to the park , Carl gave a ball to",
    answer=" Tom",
    foils=(" Anna",),
)


def _heads(spec: GraphSpec) -> list[int]:
    return [
        n
        for layer in range(spec.n_layers)
        for n in range(spec.head_forward(layer).start, spec.head_forward(layer).stop)
    ]


def _without_out_edges(spec: GraphSpec, nodes: list[int]) -> torch.Tensor:
    """One circuit per node: every edge of the graph but the node's out-edges. [n, fwd, bwd]"""
    circuits = spec.edge_mask[None].repeat(len(nodes), 1, 1)
    for row, node in enumerate(nodes):
        circuits[row, node] = False
    return circuits


def head_gaps(model, task) -> torch.Tensor:
    """|L(graph without a head's out-edges) - L(that head patched at z)| for every head."""
    spec = GraphSpec.from_model(model)
    prepared = prepare_task(model, task)
    evaluator = Evaluator(model, spec, prepared)
    heads = _heads(spec)
    through_graph = evaluator.metrics(_without_out_edges(spec, heads))
    patched = node_patched_metrics(model, spec, prepared, heads)
    return (through_graph - patched).abs()


def _gemma_with_spread_post_norms(seed: int):
    """A tiny Gemma-shaped model whose ln1_post weights are log-uniform over [0.05, 50], so a
    frozen scale is far off (the yardstick's test model)."""
    model = tiny_model("gemma", seed=seed, n_layers=3, n_heads=4, d_model=64)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for block in model.blocks:
            low, high = torch.log(torch.tensor(0.05)), torch.log(torch.tensor(50.0))
            spread = torch.rand(block.ln1_post.w.shape, generator=generator, dtype=torch.float64)
            block.ln1_post.w.copy_((low + spread * (high - low)).exp())
    return model


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_removing_a_heads_out_edges_is_patching_the_head_on_tiny_gemmas(seed):
    for model in (tiny_model("gemma", seed=seed), _gemma_with_spread_post_norms(seed)):
        for task in (IOI_TASK, SECOND_TASK):
            gaps = head_gaps(model, task)
            assert float(gaps.max()) < 1e-9, gaps


def hand_patched_metric(model, spec: GraphSpec, prepared, circuit: torch.Tensor) -> float:
    """L of the clean run with every edge outside ``circuit`` corrupted, rebuilt by hand: each
    reader's input is the clean-run residual it would read, with each removed non-head writer
    moved by (corrupted - current) output and each post-normed layer's output replaced by the
    norm of that reader's own mix of current and corrupted heads (before the norm)."""
    from reference_patching import metric_of, reader_hook

    def outputs(tokens):
        with torch.no_grad():
            _, cache = model.run_with_cache(tokens)
        return cache

    corrupted = outputs(prepared.corrupted_tokens)
    current: dict = {}

    def raw_of(layer, z):
        attention = model.blocks[layer].attn
        return torch.einsum("phe,hem->phm", z, attention.W_O) + attention.b_O / spec.n_heads

    def keep(name):
        def hook(x, hook):
            current[name] = x[0].clone()
            return x

        return hook

    removed = spec.edge_mask & ~circuit
    names = spec.forward_names

    def patch(reader_names):
        def hook(x, hook):
            x = x.clone()
            for slot, reader in reader_names:
                column = spec.backward_names.index(reader)
                for writer in removed[:, column].nonzero()[:, 0].tolist():
                    name = names[writer]
                    if name.startswith("a"):
                        continue
                    if name == "input":
                        now, was = current["blocks.0.hook_resid_pre"], corrupted["blocks.0.hook_resid_pre"][0]
                    else:
                        site = f"blocks.{int(name[1:])}.hook_mlp_out"
                        now, was = current[site], corrupted[site][0]
                    if slot is None:
                        x[0] += was - now
                    else:
                        x[0, :, slot] += was - now
                for layer in range(spec.n_layers):
                    heads = range(spec.head_forward(layer).start, spec.head_forward(layer).stop)
                    lost = [h - heads.start for h in heads if removed[h, column]]
                    if not lost:
                        continue
                    now = raw_of(layer, current[f"blocks.{layer}.attn.hook_z"])  # [pos, H, d]
                    was = raw_of(layer, corrupted[f"blocks.{layer}.attn.hook_z"][0])
                    mix = now.clone()
                    mix[:, lost] = was[:, lost]
                    norm = model.blocks[layer].ln1_post
                    change = norm(mix.sum(1)[None])[0] - norm(now.sum(1)[None])[0]
                    if slot is None:
                        x[0] += change
                    else:
                        x[0, :, slot] += change
            return x

        return hook

    by_hook: dict = {}
    for reader in spec.backward_names:
        hook_name, slot = reader_hook(spec, reader)
        by_hook.setdefault(hook_name, []).append((slot, reader))
    hooks = [("blocks.0.hook_resid_pre", keep("blocks.0.hook_resid_pre"))]
    for layer in range(spec.n_layers):
        hooks.append((f"blocks.{layer}.attn.hook_z", keep(f"blocks.{layer}.attn.hook_z")))
        hooks.append((f"blocks.{layer}.hook_mlp_out", keep(f"blocks.{layer}.hook_mlp_out")))
    hooks += [(name, patch(readers)) for name, readers in by_hook.items()]
    with torch.no_grad():
        logits = model.run_with_hooks(prepared.clean_tokens, fwd_hooks=hooks)
    return float(metric_of(model, prepared, logits)[0])


@pytest.mark.parametrize("seed", [0, 1])
def test_random_circuits_equal_their_hand_patched_runs(seed):
    model = _gemma_with_spread_post_norms(seed)
    spec = GraphSpec.from_model(model)
    prepared = prepare_task(model, IOI_TASK)
    evaluator = Evaluator(model, spec, prepared)
    generator = torch.Generator().manual_seed(seed)
    shape = (4, spec.n_forward, spec.n_backward)
    circuits = (
        torch.rand(shape, generator=generator, dtype=torch.float64)
        < torch.tensor([[[0.2]], [[0.5]], [[0.8]], [[0.95]]], dtype=torch.float64)
    ) & spec.edge_mask
    measured = evaluator.metrics(circuits).tolist()
    for circuit, value in zip(circuits, measured):
        assert value == pytest.approx(hand_patched_metric(model, spec, prepared, circuit), abs=1e-9)
    # the relaxed mask's run is the same computation at 0/1 masks
    relaxed = masked_residual(
        model, spec, prepared, evaluator.corrupted_writers, circuits.double(), evaluator.corrupted_raw
    )
    from circuitviz.engine.metric import metric_from_residual

    assert torch.allclose(
        metric_from_residual(model, prepared, relaxed), torch.tensor(measured, dtype=torch.float64), atol=1e-9
    )


def test_pruning_dead_ends_changes_nothing_under_the_post_norm():
    """Exact patching makes pruning exact on Gemma too: a node no kept edge feeds computes its
    corrupted output, and a node whose out-edges are all removed is read by no one."""
    model = _gemma_with_spread_post_norms(0)
    spec = GraphSpec.from_model(model)
    evaluator = Evaluator(model, spec, prepare_task(model, IOI_TASK))
    generator = torch.Generator().manual_seed(5)
    circuits = (torch.rand(6, spec.n_forward, spec.n_backward, generator=generator) < 0.3) & spec.edge_mask
    pruned = prune(spec, circuits)
    assert not torch.equal(pruned, circuits)
    assert torch.allclose(evaluator.metrics(circuits), evaluator.metrics(pruned), atol=1e-9)


EMBEDDED_TASKS = [
    IOI_TASK,
    PromptTask(
        "The Eiffel Tower is located in the city of",
        "The Colosseum is located in the city of",
        " Paris",
        (" Rome",),
    ),
    PromptTask("The nurse said that", "The person said that", " she", (" he",)),
]


def test_removing_a_heads_out_edges_is_patching_the_head_on_gemma_3(embedded_model):
    worst = max(float(head_gaps(embedded_model, task).max()) for task in EMBEDDED_TASKS)
    assert worst < 1e-4, worst


@pytest.mark.slow
@pytest.mark.embedded
def test_removing_a_heads_out_edges_is_patching_the_head_on_smollm2():
    from circuitviz.models import load_model
    from circuitviz.models.catalog import SMOLLM2_MODEL

    model = load_model(SMOLLM2_MODEL, device="cpu")
    worst = max(float(head_gaps(model, task).max()) for task in EMBEDDED_TASKS[1:])
    assert worst < 1e-4, worst
