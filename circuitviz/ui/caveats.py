"""A method's figures as the pages write them: a score's text, and the caveats written beside the
figures on every page that shows them (Explore, Compare, Paraphrases, the Gallery, the position
view), from the method's traits in the registry."""

from __future__ import annotations

from ..methods.registry import method_traits


def caveats(result, point=None) -> list[str]:
    """What the method's figures need said beside them, from its traits in the registry: a
    circuit fitted to the prompt (its NDF here may flatter it), and an NDF of 0 at this budget
    from scores that do not estimate the answer's metric (a curve flat at 0 is said under the
    curve, ``curve_notes``)."""
    traits = method_traits(result.method)
    found = [traits.fitted_note] if traits.fitted_note else []
    flat = bool(result.curve) and max(p.ndf for p in result.curve) < 0.05
    if point is not None and abs(point.ndf) < 5e-4 and not traits.scores_estimate_metric and not flat:
        found.append(
            f"NDF {abs(point.ndf):.3f} at this budget: {traits.label}'s edge scores do not estimate the "
            "change of the answer's metric under patching, so its strongest edges at a given budget need "
            "not carry the answer; the curve below shows the budgets where they do."
        )
    return found
