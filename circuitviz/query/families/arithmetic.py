"""Arithmetic: addition, subtraction and multiplication of whole numbers, in digits or words.

The answer is the result's first token; rewrites vary the wording ("14 + 23 =", "The sum of 14
and 23 is"), corruptions change the operands so the result is written differently from its
first character on. Worked examples before the problem ("one plus one is two. one plus two
is") are kept as they are.
"""

from __future__ import annotations

import random
import re

from .base import FamilyMatch, TemplateFamily, fill_template, is_spaced, split_trailing, template_regex

ARITHMETIC_TEMPLATES = {
    "+": (
        "{a} + {b} =", "{a}+{b}=", "{a} plus {b} equals", "{a} plus {b} is", "The sum of {a} and {b} is",
        "What is {a} plus {b}? The answer is", "{b} + {a} =", "Add {a} and {b}. The result is",
        "Calculate {a} + {b} =", "If you add {a} and {b}, you get", "Question: {a} + {b} = ? Answer:",
        "Solve: {a} + {b} =", "The result of {a} + {b} is",
    ),
    "-": (
        "{a} - {b} =", "{a}-{b}=", "{a} minus {b} equals", "{a} minus {b} is",
        "The difference between {a} and {b} is", "What is {a} minus {b}? The answer is",
        "Subtract {b} from {a}. The result is", "Calculate {a} - {b} =",
        "If you subtract {b} from {a}, you get", "Question: {a} - {b} = ? Answer:", "Solve: {a} - {b} =",
        "The result of {a} - {b} is",
    ),
    "*": (
        "{a} * {b} =", "{a}*{b}=", "{a} times {b} equals", "{a} times {b} is", "The product of {a} and {b} is",
        "What is {a} times {b}? The answer is", "{b} * {a} =", "{a} x {b} =", "Multiply {a} by {b}. The result is",
        "Calculate {a} * {b} =", "Question: {a} * {b} = ? Answer:", "Solve: {a} * {b} =",
        "The result of {a} * {b} is",
    ),
}  # fmt: skip
NUMBERWORDS = (
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
    "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty",
)  # fmt: skip
_NUMBER = r"\d+|(?i:" + "|".join(sorted(NUMBERWORDS, key=len, reverse=True)) + r")"
_ARITHMETIC_LOOSE = re.compile(
    rf"^(?P<head>.*?)(?<!\w)(?P<a>{_NUMBER})\s*(?P<op>\+|-|\*|x|×|plus|minus|times)\s*(?P<b>{_NUMBER})(?P<tail>[^\w]*\s*(?:=|equals|is|:)?)$",
    re.DOTALL,
)
_OPERATORS = {"+": "+", "plus": "+", "-": "-", "minus": "-", "*": "*", "x": "*", "×": "*", "times": "*"}
_SENTENCE_END = re.compile(r"(?<=[.?!\n])\s+")


def _apply(op: str, a: int, b: int) -> int:
    return a + b if op == "+" else a - b if op == "-" else a * b


def _number_value(text: str) -> int:
    return int(text) if text.isdigit() else NUMBERWORDS.index(text.lower())


def _number_text(value: int, like: str) -> str:
    """``value`` written as ``like`` is (digits, or a word with the same capitalisation)."""
    if like.isdigit() or not 0 <= value < len(NUMBERWORDS):
        return str(value)
    word = NUMBERWORDS[value]
    return word.capitalize() if like[:1].isupper() else word


def _in_words(template: str) -> bool:
    """Whether a template reads naturally with numbers in words (no symbols)."""
    return not re.search(r"[+\-*=]|\bx\b", template)


class ArithmeticFamily(TemplateFamily):
    """Addition, subtraction and multiplication of whole numbers, in digits or words, optionally
    after worked examples ("one plus one is two. one plus two is")."""

    name = "arithmetic"
    label = "arithmetic"

    def __init__(self):
        self._regexes = [
            (op, index, template_regex(t, {"a": _NUMBER, "b": _NUMBER}))
            for op, templates in ARITHMETIC_TEMPLATES.items()
            for index, t in enumerate(templates)
        ]

    def _match_template(self, problem: str) -> dict | None:
        for op, index, regex in self._regexes:
            found = regex.match(problem)
            if found and found["a"].isdigit() == found["b"].isdigit():
                if not found["a"].isdigit() and not _in_words(ARITHMETIC_TEMPLATES[op][index]):
                    continue
                return {"op": op, "a": found["a"], "b": found["b"], "template": index}
        return None

    @staticmethod
    def _match_loose(problem: str) -> dict | None:
        loose = _ARITHMETIC_LOOSE.match(problem)
        if loose and loose["a"].isdigit() == loose["b"].isdigit() and re.search(r"(=|equals|is|:)$", problem):
            cut = len(loose["head"])  # the words before the problem are kept as they are
            spans = {
                "a": (loose.start("a") - cut, loose.end("a") - cut),
                "b": (loose.start("b") - cut, loose.end("b") - cut),
            }
            return {"op": _OPERATORS[loose["op"]], "a": loose["a"], "b": loose["b"], "template": None,
                    "text": problem[cut:], "spans": spans, "head": loose["head"]}  # fmt: skip
        return None

    def match(self, prompt):
        body, trailing = split_trailing(prompt)
        # a template on the whole prompt or on its last sentences (after worked examples), else
        # the loose pattern the same way
        starts = [0] + [m.end() for m in _SENTENCE_END.finditer(body)]
        for matcher in (self._match_template, self._match_loose):
            for start in starts:
                slots = matcher(body[start:])
                if slots is None:
                    continue
                slots.update(
                    prefix=body[:start] + slots.pop("head", ""), trailing=trailing, spaced=is_spaced(body)
                )
                value = _apply(slots["op"], _number_value(slots["a"]), _number_value(slots["b"]))
                return FamilyMatch(self.name, self.label, slots, _number_text(value, slots["a"]))
        return None

    def _render(self, slots: dict, index: int, a: str, b: str) -> str:
        template = ARITHMETIC_TEMPLATES[slots["op"]][index]
        text = fill_template(template, {"a": a, "b": b}, slots["spaced"])
        if slots["prefix"] and not a.isdigit() and slots["a"][:1].islower():
            text = text[:1].lower() + text[1:]  # after worked examples in lower case, stay lower case
        return slots["prefix"] + text + slots["trailing"]

    def variants(self, found, rng, answer=None):
        slots = found.slots
        words = not slots["a"].isdigit()
        # inside a sentence ("..., so 3 - 1 =") only templates that start with the first operand fit
        inside = bool(slots["prefix"]) and not re.search(r"[.?!\n]\s*$", slots["prefix"])
        templates = ARITHMETIC_TEMPLATES[slots["op"]]
        indices = [
            i
            for i in range(len(templates))
            if i != slots["template"]
            and (not words or _in_words(templates[i]))
            and (not inside or templates[i].startswith("{a}"))
        ]
        rng.shuffle(indices)
        out = []
        for index in indices:
            text = self._render(slots, index, slots["a"], slots["b"])
            new = dict(slots, template=index, text=None, spans=None)
            out.append((text, FamilyMatch(self.name, self.label, new, found.answer)))
        return out

    def corruptions(self, found, rng, answer):
        """Operands of the same form (digit count, or words) whose result is written differently
        from its first character on."""
        slots = found.slots
        a, b, op = slots["a"], slots["b"], slots["op"]
        result = found.answer or ""
        words = not a.isdigit()

        def numbers(like: str) -> list[int]:
            if not like.isdigit():
                return list(range(len(NUMBERWORDS)))
            low = 0 if len(like) == 1 else 10 ** (len(like) - 1)
            return list(range(low, 10 ** len(like)))

        order = random.Random(0) if rng is None else rng
        firsts, seconds = numbers(a), numbers(b)
        order.shuffle(firsts)
        order.shuffle(seconds)
        tried = 0
        for value_a in firsts:
            for value_b in seconds[:20]:
                value = _apply(op, value_a, value_b)
                new_a, new_b = _number_text(value_a, a), _number_text(value_b, b)
                written = _number_text(value, a)
                if value < 0 or (words and value >= len(NUMBERWORDS)) or (new_a, new_b) == (a, b):
                    continue
                if (written.lower() == result.lower()) if words else (written[:1] == result[:1]):
                    continue
                tried += 1
                if slots.get("spans"):
                    text = slots["text"]
                    (a0, a1), (b0, b1) = slots["spans"]["a"], slots["spans"]["b"]
                    problem = text[:a0] + new_a + text[a1:b0] + new_b + text[b1:]
                    yield slots["prefix"] + problem + slots["trailing"]
                else:
                    yield self._render(slots, slots["template"], new_a, new_b)
                if tried > 200:
                    return
