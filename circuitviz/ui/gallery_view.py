"""The Gallery's sentence about models: its examples are one model's, stored when the gallery was
built, while the sidebar may hold another (an audit opened ``/gallery?model=smollm2-135m``: the
sidebar said SmolLM2-135M beside Gemma-3-270M's circuits, and "Re-run live" switched the sidebar to
Gemma-3-270M, unsaid)."""

from __future__ import annotations


def other_model_sentence(sidebar_model: str | None, example_model: str) -> str:
    """One sentence when the sidebar's model is not the example's ('' when it is, or none is chosen):
    whose circuit this is, and which model "Re-run live" runs it on."""
    if not sidebar_model or sidebar_model == example_model:
        return ""
    return (
        f"The sidebar's model is {sidebar_model}; this example is {example_model}'s, stored when the gallery "
        f"was built (the gallery has no example of {sidebar_model}). “Re-run live” runs it on {example_model} "
        "and switches the sidebar to it."
    )
