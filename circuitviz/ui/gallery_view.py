"""The Gallery's sentence about models: its examples are one model's, stored when the gallery was
built, while the sidebar may hold another (an audit opened ``/gallery?model=smollm2-135m``: the
sidebar said SmolLM2-135M beside Gemma-3-270M's circuits, and "Re-run live" switched the sidebar to
Gemma-3-270M, unsaid); and about a link's example (``example``) the gallery does not have."""

from __future__ import annotations

from ..core.text import cut, markdown_text


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


def unknown_example_sentence(slug: str | None, examples: list[dict]) -> str:
    """One sentence (markdown, the link's text escaped) when a link names an example the gallery
    does not have ('' when none is named): which, the ones it has, and the one shown instead."""
    if slug is None:
        return ""
    names = ", ".join(entry["slug"] for entry in examples)
    first = examples[0]["title"].split(":")[0]
    return markdown_text(
        f"The link's example {cut(str(slug), 40)!r} is not one of the gallery's ({names}): {first} is shown."
    )


def unknown_example_budget_sentence(asked: int, budgets: list[int], opening: int) -> str:
    """One sentence when a link's budget for its example (``example_budget``) is not one the
    example was evaluated at: the budget asked, those it has, the one opened."""
    have = ", ".join(f"{budget:,}" for budget in budgets)
    return f"The link's budget {asked:,} is not one this example was evaluated at ({have}): it opens at {opening:,}."
