"""Node captions that mean something: a logit-lens token only where it bears on the answer,
otherwise the node's role in words.

A node's top logit-lens token is what its output pushes up at the last position, read through
the unembedding. For most nodes of a circuit that token is unrelated to the task (a head that
moves a name to the last position need not promote any word itself), and captioning every node
with it drew noise. The rule here:

1. **Lens token, only when it bears on the task**: the node sits at the last position (or has no
   position: the position-agnostic graph) and the answer or a foil is among the top tokens its
   output promotes (or suppresses) in the logit lens (``DEFAULT_TOP_K`` = 5 of them). Caption:
   ``promotes ' Mary'`` / ``suppresses ' John'``.
2. **Otherwise its role**: what the circuit's scores say it does to the metric, ``raises ' Mary'
   over ' John' by 1.2`` (for the logit difference; ``raises log p(' Mary') by 0.8`` for a
   log-probability metric). The amount is the node's contribution: minus the summed scores of
   its edges out, i.e. how much the metric is estimated to fall if the node's edges are
   corrupted.

Captions are plain text; whoever renders them escapes them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..core.text import shown_token

LENS_TOP_K = 5  # how many of a node's promoted tokens are searched for the answer and foils


def lens_caption(
    labels: Mapping[str, object] | None, answer: str, foils: Sequence[str], top_k: int = LENS_TOP_K
) -> str | None:
    """``promotes ' Mary'`` when the answer or a foil is among the node's top promoted tokens
    (``suppresses ...`` among its suppressed ones), else None."""
    wanted = [answer, *foils]
    for key, verb in (("promotes", "promotes"), ("suppresses", "suppresses")):
        tokens = (labels or {}).get(key)
        if not isinstance(tokens, (list, tuple)):
            continue
        for token in tokens[:top_k]:
            if str(token) in wanted:
                return f"{verb} {shown_token(str(token), 60)}"
    return None


def role_caption(
    contribution: float | None,
    answer: str,
    foils: Sequence[str],
    metric: str = "logit_diff",
    digits: int = 2,
) -> str | None:
    """The node's effect on the metric in words: ``raises ' Mary' over ' John' by 1.2``.

    ``contribution``: how much the metric is estimated to fall when the node is corrupted
    (minus its summed edge scores); None or 0 gives None. ``digits``: the amount's significant
    digits (a sentence that gives the score beside it gives both alike).
    """
    if contribution is None or contribution == 0 or contribution != contribution:
        return None
    verb = "raises" if contribution > 0 else "lowers"
    amount = f"{abs(contribution):.{int(digits)}g}"
    if metric == "logit_diff" and foils:
        against = "over" if contribution > 0 else "against"
        foil = foils[0] if len(foils) == 1 else f"{len(foils)} foils"
        foil_text = shown_token(foil, 60) if len(foils) == 1 else foil
        return f"{verb} {shown_token(answer, 60)} {against} {foil_text} by {amount}"
    what = "p" if metric == "prob" else "log p"
    return f"{verb} {what}({shown_token(answer, 60)}) by {amount}"


def short_role(contribution: float | None) -> str | None:
    """The role in a few characters for the canvas: ``+1.2`` (the full sentence is in the hover,
    and the legend says what the number is)."""
    if contribution is None or contribution == 0 or contribution != contribution:
        return None
    return f"{contribution:+.2g}"


def short_lens(caption: str) -> str:
    """A lens caption in a few characters: ``↑' Mary'`` (promotes), ``↓' John'`` (suppresses)."""
    verb, _, token = caption.partition(" ")
    return ("↑" if verb == "promotes" else "↓") + token


def node_caption(
    labels: Mapping[str, object] | None,
    contribution: float | None,
    answer: str,
    foils: Sequence[str],
    metric: str = "logit_diff",
    at_last_position: bool = True,
    short: bool = False,
) -> str | None:
    """A node's caption by the rule of this module: the lens token where it bears on the task
    (only at the last position, where the lens reads), else its role, else None. ``short``
    gives the canvas's form (``short_lens``, ``short_role``)."""
    if at_last_position:
        lens = lens_caption(labels, answer, foils)
        if lens is not None:
            return short_lens(lens) if short else lens
    if short:
        return short_role(contribution)
    return role_caption(contribution, answer, foils, metric)


CAPTION_KEY = (
    "under each name: ↑/↓ a token when the answer or foil is among the tokens the node's output "
    f"promotes/suppresses most (top {LENS_TOP_K}, logit lens at the last position); otherwise +x: "
    "how much the node raises the answer's metric (the logit difference over the foil), estimated "
    "from the scores of all its edges out, so the same at every budget"
)
# for a method whose scores do not estimate the metric, no number is written under a name
LENS_CAPTION_KEY = (
    "under a name: ↑/↓ a token when the answer or foil is among the tokens the node's output "
    f"promotes/suppresses most (top {LENS_TOP_K}, logit lens at the last position)"
)
