"""Corrupted prompts made by swapping a code word, for a line of code no template recognises:
"def add(a, b): return a" (answer ' +') becomes "def mul(a, b): return a", whose likeliest next
token is ' *', and "if a > b:\n    print("a is" (' greater') becomes "if a < b: ...". The words
are names whose meaning decides what follows them (an operation's function name, a library whose
alias comes next, a boolean) and operators between spaces, each swapped for another of its group
that keeps the prompt's token count, at every mention. Like the word swaps and the
number changes, each is measured before it is proposed (``query.trials``), so a swap that does
not move the answer is never offered. Until 2026-12-07 such a prompt got "holds no name,
country or landmark they know" and no corrupted prompt.
"""

from __future__ import annotations

import re

# words of one role, each swapped for the others of its group in this order (the operation
# names first: the operator after "return a" is what a demanding reader asks about)
GROUPS: tuple[tuple[str, ...], ...] = (
    ("add", "mul", "sub", "div"),
    ("add", "multiply", "subtract", "divide"),
    ("sum", "product"),
    ("plus", "times", "minus"),
    ("addition", "multiplication", "subtraction", "division"),
    ("max", "min"),
    ("maximum", "minimum"),
    ("increment", "decrement"),
    ("True", "False"),
    ("true", "false"),
    ("upper", "lower"),
    ("even", "odd"),
    ("numpy", "pandas"),
    ("and", "or"),
    # operators, each between spaces ("if a > b:"; not '-' of "-1" nor '<' of "<=")
    ("+", "-", "*", "/"),
    ("<", ">"),
    ("<=", ">="),
    ("==", "!="),
)
PER_WORD = 3  # the replacements kept for one word

# what marks a prompt as code: a call, braces, a semicolon, '=' or a keyword ("The upper floor"
# and "The answer (in French) is" are prose)
_CODE = re.compile(r"\w\(|[{};=]|\b(def|return|import|lambda|function|const|let|var|class|print)\b")


def looks_like_code(prompt: str) -> bool:
    """Whether ``prompt`` reads as code (``_CODE``): only there are code words swapped, and only
    there does the sentence when none is proposed speak of code."""
    return bool(_CODE.search(prompt))


def _mention(word: str) -> re.Pattern:
    """Where ``word`` stands in a prompt: as a whole word, or an operator between spaces."""
    if word[:1].isalnum():
        return re.compile(rf"\b{re.escape(word)}\b")
    return re.compile(rf"(?<=\s){re.escape(word)}(?=\s)")


def _replacements() -> dict[str, list[str]]:
    """{code word: the words it is swapped for, in order}."""
    found: dict[str, list[str]] = {}
    for group in GROUPS:
        for word in group:
            found.setdefault(word, []).extend(o for o in group if o != word and o not in found[word])
    return found


def code_words_in(prompt: str) -> list[str]:
    """The code words of ``prompt`` (none when it does not read as code), in the prompt's order."""
    if not looks_like_code(prompt):
        return []
    spans = []
    for word in _replacements():
        match = _mention(word).search(prompt)
        if match:
            spans.append((match.start(), word))
    return [word for _, word in sorted(spans)]


def code_candidates(prompt: str, count) -> list[tuple[str, str, str]]:
    """(corrupted prompt, code word replaced, replacement) for each code word of ``prompt``, last
    first (the nearest the next token), with up to ``PER_WORD`` replacements that the prompt does
    not hold and that keep its token count (``count``: text -> its token count)."""
    target = count(prompt) if prompt else 0
    found = []
    for word in reversed(code_words_in(prompt)):
        mention = _mention(word)
        kept = 0
        for other in _replacements()[word]:
            if _mention(other).search(prompt):
                continue
            corrupted = mention.sub(lambda _, other=other: other, prompt)
            if count(corrupted) == target:
                found.append((corrupted, word, other))
                kept += 1
                if kept == PER_WORD:
                    break
    return found
