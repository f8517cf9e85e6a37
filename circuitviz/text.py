"""Text helpers for the sentences circuitviz says to a user: quoting their input briefly."""

from __future__ import annotations


def shown(text: str, limit: int = 60) -> str:
    """A user's text quoted for an error sentence: repr, cut at ``limit`` characters with the
    full length named, so a 100 kB paste never becomes a 100 kB message. The cut applies to the
    quoted form, so text of control characters (4 characters each in a repr) stays short too."""
    quoted = repr(text)
    if len(quoted) <= limit + 2:
        return quoted
    return f"{quoted[: limit + 1]}{quoted[0]}… ({len(text)} characters)"


def shown_number(value, limit: int = 12) -> str:
    """A number from a user's input as it is, cut short (digits counted) when absurdly long."""
    digits = str(value)
    return digits if len(digits) <= limit else f"{digits[:limit]}… ({len(digits)} digits)"
