"""The sentences an input is refused in, written once.

The backend raises them (``tasks.prepare_task``, ``limits.check_run``, ``task_validity``) and the
app's inputs show the same sentence before Run, so a user reads one wording wherever the problem
is caught. A leaf without torch: the first paint's inputs import it.
"""

from __future__ import annotations

from .text import shown_token

IDENTICAL_PROMPTS = (
    "The corrupted prompt is the prompt itself, so nothing is corrupted and every faithfulness "
    "score is 0/0; replace the key fact or name in the corrupted prompt (e.g. the repeated name)."
)
EMPTY_PROMPT = "The prompt is empty or only white space; type the text whose next token you want explained."
EMPTY_CORRUPTED = (
    "The corrupted prompt is empty; give the prompt with its key fact or name replaced, same token count."
)
NO_FOIL = (
    "The logit-difference metric needs at least one foil token: a wrong answer the model could give "
    "instead, such as the one the corrupted prompt leads to; add one, or choose the logprob metric."
)


def prompt_over_limit(n_tokens: int, limit: int, how_to_raise: str) -> str:
    """A prompt longer than the token limit; ``how_to_raise``: "with CIRCUITVIZ_MAX_TOKENS"."""
    return f"The prompt is {n_tokens:,} tokens, over the limit of {limit:,}; shorten it or raise the limit {how_to_raise}."


def prompt_over_context(n_tokens: int, context: int) -> str:
    """A prompt longer than the model's context."""
    return f"The prompt is {n_tokens} tokens, longer than this model's context of {context}; shorten it."


def unequal_lengths(n_clean: int, n_corrupted: int, where: str) -> str:
    """A corrupted prompt of another token count; ``where`` says where they part."""
    return (
        f"The prompt has {n_clean} tokens and the corrupted prompt {n_corrupted}; edit the corrupted "
        f"prompt so each replaced word is one token too ({where})."
    )


def foil_is_answer(answer: str) -> str:
    """A foil equal to the answer."""
    return f"The answer {shown_token(answer, 30)} is also given as a foil; a foil must be a different token."
