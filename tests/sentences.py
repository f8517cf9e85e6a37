"""What "one clear sentence" means for an error a user can cause, as one check every test shares.

The app shows such a message as it is (``st.error``) and the command line prints it after
``error: ``; a message that spans lines or quotes a whole paste or tokenisation buries the fix.
"""

from __future__ import annotations

import re

MAX_SENTENCE = 300  # characters; long user input is quoted briefly (``circuitviz.core.text.shown``)

# quoted user text (repr's '...' or "...") may hold anything, including full stops
_QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")


def assert_one_sentence(message: str, limit: int = MAX_SENTENCE) -> None:
    """``message`` is one line, at most ``limit`` characters, and one sentence ending in a full stop."""
    assert message.strip(), "an error without a message"
    assert "Traceback" not in message, message[:400]
    assert "\n" not in message and "\r" not in message, f"a message over several lines: {message[:400]!r}"
    assert len(message) <= limit, (
        f"the message quotes too much ({len(message)} characters): {message[:400]!r}"
    )
    assert message.rstrip().endswith((".", ".)")), f"not a finished sentence: {message!r}"
    unquoted = _QUOTED.sub("''", message).rstrip()
    assert not re.search(r"[.!?]\s+[A-Z]", unquoted[:-1]), f"more than one sentence: {message!r}"
