"""The graph: names, counts and selection, checked on hand-built configs and matrices."""

import pytest
import torch

from circuitviz.core.graph import GraphError, GraphSpec, prune, top_n


def edge_formula(n_layers: int, n_heads: int) -> int:
    L, H = n_layers, n_heads
    return (3 * H + 1) * (L + (H + 1) * L * (L - 1) // 2) + L * H + 1 + L * (H + 1)


@pytest.mark.parametrize(
    "n_layers, n_heads, expected",
    [(12, 12, 32_491), (16, 32, 386_713), (18, 4, 10_342), (2, 2, 46)],
    ids=["gpt2-small", "llama-3.2-1b", "gemma-3-270m", "tiny"],
)
def test_edge_count_matches_formula(n_layers, n_heads, expected):
    spec = GraphSpec(n_layers=n_layers, n_heads=n_heads)
    assert edge_formula(n_layers, n_heads) == expected
    assert spec.n_edges == expected == int(spec.edge_mask.sum())
    assert len(spec.edge_names) == expected
    assert len(set(spec.edge_names)) == expected


def test_parallel_attention_mlp_drops_same_layer_head_to_mlp_edges():
    sequential = GraphSpec(n_layers=3, n_heads=2)
    parallel = GraphSpec(n_layers=3, n_heads=2, parallel_attn_mlp=True)
    assert sequential.n_edges - parallel.n_edges == 3 * 2
    assert "a1.h0->m1" in sequential.edge_names and "a1.h0->m1" not in parallel.edge_names


def test_names_and_indices_follow_eap_ig():
    spec = GraphSpec(n_layers=3, n_heads=2)
    assert spec.forward_names[:5] == ("input", "a0.h0", "a0.h1", "m0", "a1.h0")
    assert spec.backward_names[:7] == (
        "a0.h0<q>",
        "a0.h1<q>",
        "a0.h0<k>",
        "a0.h1<k>",
        "a0.h0<v>",
        "a0.h1<v>",
        "m0",
    )
    assert spec.edge_position("input->a2.h0<q>") == (0, 2 * 7 + 0)
    assert spec.edge_position("a0.h1->m2") == (2, 2 * 7 + 6)
    assert spec.edge_position("m2->logits") == (spec.mlp_forward(2), spec.n_backward - 1)
    for name in ["input->a2.h0<q>", "a0.h1->m2", "m2->logits", "a1.h1->a2.h0<v>"]:
        assert name in spec.edge_names


@pytest.mark.parametrize(
    "name, fragment",
    [
        ("a5.h0->logits", "no node 'a5.h0'"),
        ("input->a0.h0", "need <q>, <k> or <v>"),
        ("input->m1<q>", "only attention heads"),
        ("input->a0.h7<q>", "no node 'a0.h7'"),
        ("m1->a0.h0<q>", "does not read from"),
        ("a1.h0->m0", "does not read from"),
        ("nonsense", "not an edge name"),
    ],
)
def test_bad_edge_names_say_why(name, fragment):
    spec = GraphSpec(n_layers=3, n_heads=2)
    with pytest.raises(GraphError, match=fragment):
        spec.edge_position(name)


def test_top_n_takes_largest_absolute_scores_and_clips_the_budget():
    spec = GraphSpec(n_layers=2, n_heads=2)
    scores = torch.zeros(spec.n_forward, spec.n_backward, device="cpu")
    scores[spec.edge_position("input->logits")] = -5.0
    scores[spec.edge_position("a0.h0->m1")] = 3.0
    scores[spec.edge_position("m0->logits")] = 1.0
    scores[0, 0] = 4.0  # input->a0.h0<q>
    scores[3, 0] = 100.0  # not an edge (m0 cannot feed a0), must never be chosen
    chosen = top_n(spec, scores, 3)
    assert set(spec.edge_names_of(chosen)) == {"input->logits", "input->a0.h0<q>", "a0.h0->m1"}
    assert top_n(spec, scores, 0).sum() == 0
    assert top_n(spec, scores, 10**9).sum() == spec.n_edges
    signed = top_n(spec, scores, 1, absolute=False)
    assert spec.edge_names_of(signed) == ["input->a0.h0<q>"]


def test_prune_keeps_exactly_the_paths_from_input_to_logits():
    spec = GraphSpec(n_layers=2, n_heads=2)
    mask = spec.mask_from_edge_names(
        [
            "input->a0.h0<v>",  # on a path: input -> a0.h0 -> m1 -> logits
            "a0.h0->m1",
            "m1->logits",
            "input->a0.h1<q>",  # dead end: a0.h1 reaches nothing
            "m0->a1.h0<k>",  # dangling: m0 is never reached from input
            "a1.h0->logits",
        ]
    )
    kept = prune(spec, mask)
    assert set(spec.edge_names_of(kept)) == {"input->a0.h0<v>", "a0.h0->m1", "m1->logits"}
    assert prune(spec, spec.edge_mask).sum() == spec.n_edges


def test_cfg_dict_round_trip():
    spec = GraphSpec(n_layers=4, n_heads=3, parallel_attn_mlp=True, d_model=32)
    assert GraphSpec.from_cfg_dict(spec.to_cfg_dict()) == spec
    with pytest.raises(GraphError, match="n_layers"):
        GraphSpec.from_cfg_dict({"n_heads": 2})
