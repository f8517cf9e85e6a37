"""The Steer page's feature picker: each feature offered once, under the node that drives it most."""

from __future__ import annotations

from circuitviz.ui.steer import feature_options


def _entry(layer, *features):
    return {
        "sae": "sae",
        "sae_layer": layer,
        "features": [
            {"feature": f, "label": f"L{layer}/{f}: fires on names", "share": share, "activation": 100.0}
            for f, share in features
        ],
    }


def test_a_feature_is_named_by_the_node_with_the_largest_share():
    """An audit found L15/1938 offered under a11.h3 (20 %) while the table beside it showed a13.h3
    driving it more (24 %): the first node in the circuit's order named it."""
    labels = {
        "a11.h3": _entry(15, (1938, 20.0), (714, 10.0), (5, 30.0)),
        "a13.h3": _entry(15, (1938, 24.0), (714, 11.0)),
        "m14": _entry(15, (1938, 22.0), (5, 30.0)),
    }
    options = feature_options(labels)
    assert options[(15, 1938)] == "a13.h3: L15/1938: fires on names (also m14, a11.h3)"
    assert options[(15, 714)].startswith("a13.h3: ")
    assert options[(15, 5)] == "a11.h3: L15/5: fires on names (also m14)"  # a tie: the circuit's order
    assert len(options) == 3  # once each
