"""The foil proposed for an answer: the other name of an indirect-object prompt, else the answer the
corrupted prompt leads to, read from the model's likeliest next tokens after it.

Where the corruption makes the answer ``RISE`` times less likely, the foil is the first of those
tokens of the answer's kind (a content word or number for an answer that is one, a function word
or mark for one that is one: ``task_validity.is_function_word``) that the corruption makes
``RISE`` times likelier than the prompt does; else, as before, the likeliest one. "What is the
capital of Japan?" with the answer ' Tokyo' and the corrupted prompt "What is the capital of
France?" got the foil ' The' until 2026-12-07 (4.2% there, 3.1% after the prompt: the corruption
hardly moves it), so its logit difference measured ' Tokyo' over a sentence's start; now ' Paris'
(1.6% there, under 0.1% after the prompt). ' What' (2.1%, 2.4% after the prompt) is a content
word too, but the corruption does not lead to it.
"""

from __future__ import annotations

from collections.abc import Callable

from ..core.text import chance_text

RISE = 2.0  # the corruption makes the foil at least this many times likelier than the prompt does

# (token, its chance after the corrupted prompt, its chance after the prompt: None when not known)
Likely = list[tuple[str, float, float | None]]


def single_token(model, text: str) -> bool:
    """Whether ``text`` reads as one token of ``model`` (a byte of a character, ' <0xE5>', does not:
    typed, its name is several tokens)."""
    # here, not at the top: keeps torch out of the first paint
    from ..models.adapter import adapter_of  # torch is loaded once a model is

    return adapter_of(model).token_count(text, prepend_bos=False) == 1


def text_token(model, token: str) -> bool:
    """Whether ``token`` can be a run's answer or foil: text (not a control token,
    ``models.control_tokens``) that reads as one token again (``single_token``)."""
    from ..models.control_tokens import control_token_texts

    return token not in control_token_texts(model) and single_token(model, token)


def same_word(token: str, answer: str) -> bool:
    """Whether ``token`` is ``answer`` spelt otherwise: the same text but for spaces around it and
    case ('+' and ' +', 'np' and ' np', ' Paris' and ' paris'). Never a foil: a logit difference
    between two spellings of one answer measures the spelling, not the answer (Gemma-3-270M's
    likeliest other token after "def f(a, b): return a", answered ' +', is '+', 18.2%)."""
    word = token.strip().casefold()
    return bool(word) and word == answer.strip().casefold()


def _own_text(model, text: str) -> str:
    """``text`` as the model's tokens read it (``models.tokens.token_pieces``, joined)."""
    from ..models.adapter import adapter_of
    from ..models.tokens import own_text

    return own_text(adapter_of(model), text)


def propose_foil(
    model, prompt: str, corrupted: str, answer: str, after: Callable[[], Likely] | None = None
) -> tuple[str, str]:
    """(foil, the sentence saying where it came from) for ``answer``: the other name of an
    indirect-object prompt, else what the model predicts after ``corrupted`` (``after``: gives its
    most likely next tokens there with their chances, ``trials.Trials.likely``, when measured
    already; ``corrupted_foil``); ('', '') when neither gives one."""
    from .families import recognise  # here, not at the top: the templates import torch

    found = recognise(prompt)
    if found is not None and found.family == "ioi":
        other = " " + str(found.slots.get("B", ""))
        if other.strip() and single_token(model, other):
            # the model's token as its tokenizer has it: a word-level tokenizer's has no space
            # (' John' was proposed, and shown as '·John', for its token 'John')
            other = _own_text(model, other)
            if other != answer:
                return other, "The foil is the other name of the prompt (the repeated subject)."
    if not corrupted.strip():
        return "", ""
    likely = after() if after is not None else likely_after(model, prompt, corrupted, answer)
    return corrupted_foil(model, answer, likely)


def likely_after(model, prompt: str, corrupted: str, answer: str) -> Likely:
    """The model's ``trials.LIKELY`` most likely next tokens after ``corrupted``, and ``answer``,
    each with its chance there and after ``prompt`` (None where its text is not one token again),
    from the prompts' plain runs: what ``trials.Trials.likely`` reads from its batch."""
    # here, not at the top: keeps torch out of the first paint
    from ..core.tasks import TaskError, single_token_id
    from ..labels.logit_lens import next_token_distribution, next_token_probabilities
    from .trials import LIKELY

    found: Likely = []
    likely = next_token_probabilities(model, corrupted, LIKELY)
    there = next_token_distribution(model, corrupted)  # [d_vocab]
    before = next_token_distribution(model, prompt) if prompt.strip() else None  # [d_vocab]
    for token in [token for token, _ in likely] + ([answer] if answer not in dict(likely) else []):
        try:
            token_id = single_token_id(model, token, "foil")
        except TaskError:
            found.append((token, dict(likely).get(token, 0.0), None))
            continue
        found.append((token, float(there[token_id]), None if before is None else float(before[token_id])))
    return found


def corrupted_foil(model, answer: str, likely: Likely) -> tuple[str, str]:
    """(foil, why) among ``likely``, the next tokens after the corrupted prompt (and the answer):
    where the corruption makes the answer ``RISE`` times less likely, the first token of its kind
    that it makes ``RISE`` times likelier (the answer the corruption leads to); else the first at
    all (the foil the metric then falls towards); ('', '') when none. An answer the corruption
    does not move keeps that foil: "What is the capital of Japan?" answered ' What' (2.4%, 2.1%
    after "... France?") would pass the check against ' Paris' on the rise of ' Paris' alone.
    Only a token other than the answer and its other spellings (``same_word``), with text that is
    one token again and not a control token
    (``text_token``), is taken: a prompt pasted with no-break spaces proposed Gemma's
    byte token '<0xC2>', which the foil box refused at once, and Gemma's likeliest after "the
    capital of italy is" is '<start_of_image>' (13.9%), proposed as the foil of ' paris' and
    refused by the foil box as not text."""
    from ..measure.task_validity import is_function_word

    own = next((row for row in likely if row[0] == answer), None)
    falls = own is not None and own[2] is not None and own[2] >= RISE * own[1]
    usable = [
        row
        for row in likely
        if row[0] != answer and row[0].strip() and not same_word(row[0], answer) and text_token(model, row[0])
    ]
    kind = is_function_word(answer)
    for token, chance, before in usable if falls else []:
        if is_function_word(token) == kind and before is not None and chance >= RISE * before:
            word = "a function word or mark" if kind else "a content word or number"
            # short: it ran to 9 lines under the foil box at 1,000 px; the line above it gives
            # the foil's chance after the prompt
            return token, (
                f"The foil is what the corrupted prompt leads to ({chance_text(chance)} there), {word} as "
                "the answer is."
            )
    if usable:
        return usable[0][0], "The foil is the model's likeliest other answer after the corrupted prompt."
    return "", ""
