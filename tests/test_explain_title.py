"""'Explain this circuit' promises edges "that matter most" only where the scores estimate an edge's
effect: a learned mask's kept edges all score about 0.99, so ranking them says nothing of that."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest


def _page(method):
    from types import SimpleNamespace

    import torch

    from circuitviz.core.graph import GraphSpec
    from circuitviz.core.tasks import PromptTask
    from circuitviz.ui import result_view

    spec = GraphSpec(n_layers=2, n_heads=2)
    scores = torch.rand(
        spec.n_forward, spec.n_backward, generator=torch.Generator().manual_seed(0), device="cpu"
    )
    result = SimpleNamespace(
        method=method,
        graph=spec,
        scores=scores * spec.edge_mask,
        task=PromptTask("a b", "a c", " x", (" y",), "logit_diff"),
        details=None,  # a result of a method with no details of its own, as a real one reads
        circuit=lambda budget: spec.edge_mask,
    )
    result_view.explain(result, 10, {}, expanded=True)


@pytest.mark.parametrize(
    "method, title",
    [
        ("eap-ig", "Explain this circuit: the 5 edges that matter most, in words"),
        (
            "edge-pruning",
            "Explain this circuit: the 5 edges of highest score (the method's own, not an effect), in words",
        ),
    ],
)
def test_the_explanations_title_says_what_ranks_the_edges(method, title):
    at = AppTest.from_function(_page, args=(method,)).run()
    assert not at.exception, at.exception
    assert [e.label for e in at.expander] == [title]


def test_an_edges_effect_is_said_as_the_estimate_it_is():
    """The score is the method's linear estimate of the metric's change, not a patch measured: the
    sentence read "(score -3.4: it raises ' were' over ' was' by 3.4)" as if it were measured."""
    from circuitviz.core.tasks import PromptTask
    from circuitviz.render.explain import edge_sentence
    from circuitviz.render.graph_html import GraphEdge

    task = PromptTask("a b", "a c", " x", (" y",), "logit_diff")
    edge = GraphEdge("a1.h0->logits", "a1.h0", "logits", "logits", -3.4)
    said = edge_sentence(edge, {}, task)
    assert "(score -3.4: estimated to raise ' x' over ' y' by 3.4)" in said, said
    against = edge_sentence(GraphEdge("a1.h0->logits", "a1.h0", "logits", "logits", 0.5), {}, task)
    assert "(score +0.5: estimated to lower ' x' against ' y' by 0.5)" in against, against
    # the amount to the score's own digits: "score -13.5: ... by 14" read as two numbers
    wide = edge_sentence(GraphEdge("a1.h0->logits", "a1.h0", "logits", "logits", -13.5), {}, task)
    assert "(score -13.5: estimated to raise ' x' over ' y' by 13.5)" in wide, wide
    nothing = edge_sentence(GraphEdge("a1.h0->logits", "a1.h0", "logits", "logits", 0.0), {}, task)
    assert "(score +0: estimated to change nothing)" in nothing, nothing


def _small_page(kept: int):
    from types import SimpleNamespace

    import torch

    from circuitviz.core.graph import GraphSpec
    from circuitviz.core.tasks import PromptTask
    from circuitviz.ui import result_view

    spec = GraphSpec(n_layers=2, n_heads=2)
    scores = torch.rand(
        spec.n_forward, spec.n_backward, generator=torch.Generator().manual_seed(0), device="cpu"
    )
    scores = scores * spec.edge_mask
    circuit = torch.zeros_like(spec.edge_mask)
    for row, column in spec.edge_mask.nonzero()[:kept].tolist():
        circuit[row, column] = True
    result = SimpleNamespace(
        method="eap-ig",
        graph=spec,
        scores=scores,
        task=PromptTask("a b", "a c", " x", (" y",), "logit_diff"),
        details=None,
        circuit=lambda budget: circuit,
    )
    result_view.explain(result, 10, {}, expanded=True)


@pytest.mark.parametrize(
    "kept, title, said",
    [
        (0, "Explain this circuit: it has no edges at this budget", 0),
        (1, "Explain this circuit: the one edge that matters most, in words", 1),
        (3, "Explain this circuit: the 3 edges that matter most, in words", 3),
        (7, "Explain this circuit: the 5 edges that matter most, in words", 5),
    ],
)
def test_the_title_counts_the_edges_it_says(kept, title, said):
    """It read "the 5 edges that matter most" over SmolLM2's empty circuit at budget 20."""
    at = AppTest.from_function(_small_page, args=(kept,)).run()
    assert not at.exception, at.exception
    assert [e.label for e in at.expander] == [title]
    assert len([m for m in at.markdown if m.value.startswith("- ")]) == said
