"""Template paraphrases of a prompt for the methods that check or resample over them.

Edge Pruning measures its circuits on paraphrases of the prompt (a mask fitted to one sentence
shows up as such) and the ensemble resamples its scores over them. Both reach the paraphrase
generator through this module only, so where the generator lives is named once.
"""

from __future__ import annotations

from ..core.tasks import PromptTask
from ..query.pairs import ParaphraseError
from ..query.templates import template_paraphrases


def template_tasks(
    model, task: PromptTask, n: int, seed: int = 0, max_tokens: int = 256
) -> tuple[list[PromptTask], str]:
    """Up to ``n`` checked template paraphrases of ``task`` (each with its corruption), and a
    sentence saying why there are fewer when there are ('' otherwise)."""
    if n <= 0:
        return [], ""
    try:
        pairs = template_paraphrases(model, task, n, seed, max_tokens=max_tokens)
    except ParaphraseError as error:
        return [], str(error)
    usable = [pair.task() for pair in pairs if pair.usable()][:n]
    note = ""
    if len(usable) < n:
        note = (
            f"{len(usable)} of the {n} template paraphrases asked for passed the check (same token "
            "length as their corruption, the same answer from the model)."
        )
    return usable, note
