"""Corrupted prompts made by changing a number of the prompt, for prompts no template recognises
("1, 2, 3, 4," or "The year after 1999 is"): the last number, then the first, becomes another of
the same digit count and token count. Like the word swaps, each is measured before it is proposed
(``query.trials``), so a change that does not move the answer is never offered.
"""

from __future__ import annotations

import re

_NUMBER = re.compile(r"(?<![\w.])\d+(?!\w|\.\d)")  # a whole number, not a part of a word or a decimal
STEPS = (3, 5, 1)  # added to the number (modulo its digit count's range), in the order tried
PER_NUMBER = 2  # the replacements kept for one number


def _others(number: str) -> list[str]:
    """Numbers of the same digit count as ``number``, other than it, in the order tried (no
    leading zero where it had none: '1999' -> '2002', '2004', '2000')."""
    digits, value = len(number), int(number)
    low = 0 if digits == 1 or number.startswith("0") else 10 ** (digits - 1)  # '07' keeps its zero
    span = 10**digits - low
    found = []
    for step in STEPS:
        other = low + (value - low + step) % span
        text = str(other).zfill(digits) if number.startswith("0") else str(other)
        if text != number and len(text) == digits and text not in found:
            found.append(text)
    return found


def number_candidates(prompt: str, count) -> list[tuple[str, str, str, str]]:
    """(corrupted prompt, number replaced, replacement, which: 'last' or 'first' or '' for the
    only one) for the prompt's last number and then its first, each with up to ``PER_NUMBER``
    replacements that keep the prompt's token count (``count``: text -> its token count)."""
    spans = [match.span() for match in _NUMBER.finditer(prompt)]
    if not spans:
        return []
    target = count(prompt)
    which = [("last" if len(spans) > 1 else "", spans[-1])]
    if len(spans) > 1:
        which.append(("first", spans[0]))
    found = []
    for mention, (start, end) in which:
        number = prompt[start:end]
        kept = 0
        for other in _others(number):
            corrupted = prompt[:start] + other + prompt[end:]
            if count(corrupted) == target:
                found.append((corrupted, number, other, mention))
                kept += 1
                if kept == PER_NUMBER:
                    break
    return found
