"""Comma-separated whole numbers typed by a user (budgets, anchor budgets, layers), read once.

Every list of numbers the app and the command line accept is read by ``parse_whole_numbers``:
spaces are ignored, empty pieces skipped, the values returned sorted without repeats. What a
caller may word differently is the sentence for a piece that is no number, the check of each
value, and the sentence for an empty list.
"""

from __future__ import annotations

from collections.abc import Callable

from .text import shown


def parse_whole_numbers(
    text: str,
    not_whole: str,
    refuse: Callable[[int], str | None] | None = None,
    empty: str | None = None,
) -> list[int]:
    """'50, 100,20' -> [20, 50, 100]; ValueError in one sentence otherwise.

    not_whole: the sentence for a piece that is not a whole number; ``{part}`` in it becomes the
    piece, quoted (briefly when long). refuse: the sentence for a value that is not allowed, or
    None when it is. empty: the sentence when no number is given (None: an empty list is fine).
    """
    values = []
    for part in str(text).replace(" ", "").split(","):
        if not part:
            continue
        try:
            value = int(part)
        except ValueError:
            raise ValueError(not_whole.format(part=shown(part))) from None
        problem = refuse(value) if refuse is not None else None
        if problem:
            raise ValueError(problem)
        values.append(value)
    if not values and empty is not None:
        raise ValueError(empty)
    return sorted(set(values))
