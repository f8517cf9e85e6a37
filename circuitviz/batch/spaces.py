"""The batch's line per role for the answers and foils of a dataset written without the leading
space their word takes after the prompt (``entry.spaces``: why it matters, and the check)."""

from __future__ import annotations

from ..core.text import shown
from .dataset import DatasetTask

SHOWN_ROWS = 5


def space_lines(tasks: list[DatasetTask], missing: dict[int, tuple]) -> list[str]:
    """One line per role ('answer', then 'foil') naming the rows whose token lacks its space
    (the first ``SHOWN_ROWS``, then how many more); ``missing``: {task index: (role, token), ...}."""
    lines = []
    for role in ("answer", "foil"):
        rows = [
            (index, [token for kind, token in found if kind == role])
            for index, found in sorted(missing.items())
        ]
        rows = [(index, tokens) for index, tokens in rows if tokens]
        if not rows:
            continue
        named = "; ".join(
            f"{_where(tasks, index)}: {', '.join(shown(token, 20) for token in tokens)}"
            for index, tokens in rows[:SHOWN_ROWS]
        )
        more = f"; and {len(rows) - SHOWN_ROWS:,} more" if len(rows) > SHOWN_ROWS else ""
        example = rows[0][1][0]
        lines.append(
            f"The {role} of {len(rows):,} task{'s' if len(rows) > 1 else ''} has no leading space "
            f"({named}{more}), though the prompt ends in a word: {shown(' ' + example, 20)} with the "
            f"space is another token, the one the model writes there; add the space, or keep "
            f"{'them' if len(rows) > 1 else 'it'} if you mean the word without one."
        )
    return lines


def _where(tasks: list[DatasetTask], index: int) -> str:
    item = tasks[index]
    return f"line {item.line}" if item.line else f"task {index + 1:,} ({shown(item.id, 20)})"
