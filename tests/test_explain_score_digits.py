"""The explanation of a method whose scores are its own gave each score to three significant digits
and dropped trailing zeros: the Gallery's gender-bias example, in demo mode before an audience, read
"(the method's score +1)" above "(the method's score +0.999)", as if the first were exactly 1. Every
score keeps its three digits now ('+1.00')."""

from __future__ import annotations

from circuitviz.render.explain import edge_sentence
from circuitviz.render.graph_html import GraphEdge


def _said(score: float) -> str:
    return edge_sentence(GraphEdge("input->m3", "input", "m3", "mlp", score), None, estimates_metric=False)


def test_a_method_s_own_score_keeps_its_three_digits():
    assert "(the method's score +1.00)" in _said(0.99962)
    assert "(the method's score +0.999)" in _said(0.99912)
    assert "(the method's score -0.500)" in _said(-0.5)
