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
# More wordings for rewrites only: the dataset generator (``batch.generate``) draws its prompts
# from ARITHMETIC_TEMPLATES alone, so the datasets it makes from a seed stay as they were.
REWRITE_TEMPLATES = {
    "+": (
        "{a}+{b} =", "{a} plus {b} =", "({a} + {b}) =", "Compute: {a} + {b} =", "Sum: {a} + {b} =",
        "Addition: {a} + {b} =", "Let's add: {a} + {b} =", "Math: {a} + {b} =", "{b} plus {a} is",
        "{a} plus {b} gives", "{a} plus {b} is equal to",
    ),
    "-": (
        "{a}-{b} =", "{a} minus {b} =", "({a} - {b}) =", "Compute: {a} - {b} =", "Difference: {a} - {b} =",
        "Subtraction: {a} - {b} =", "Let's subtract: {a} - {b} =", "Math: {a} - {b} =", "{a} minus {b} gives",
        "{a} minus {b} is equal to",
    ),
    "*": (
        "{a}*{b} =", "{a} times {b} =", "({a} * {b}) =", "Compute: {a} * {b} =", "Product: {a} * {b} =",
        "Multiplication: {a} * {b} =", "Let's multiply: {a} * {b} =", "Math: {a} * {b} =", "{b} times {a} is",
        "{a} times {b} gives", "{a} times {b} is equal to",
    ),
}  # fmt: skip
# how the last worked example may lead into the problem, besides a full stop and a space
JOINS = (", and ", "; ", ".\n", ". and ", ". so ", ". then ")
# every template a prompt is recognised by and rewritten to; an index into it names a template
TEMPLATES = {op: ARITHMETIC_TEMPLATES[op] + REWRITE_TEMPLATES[op] for op in ARITHMETIC_TEMPLATES}
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


def _with_case(text: str, case: str | None) -> str:
    """``text`` with its first letter lower case, upper case, or (None) as it is."""
    return text[:1].lower() + text[1:] if case == "lower" else text[:1].upper() + text[1:] if case else text


def _in_words(template: str) -> bool:
    """Whether a template reads naturally with numbers in words (no symbols)."""
    return not re.search(r"[+\-*=]|\bx\b", template)


class ArithmeticFamily(TemplateFamily):
    """Addition, subtraction and multiplication of whole numbers, in digits or words, optionally
    after worked examples ("one plus one is two. one plus two is")."""

    name = "arithmetic"
    label = "arithmetic"
    keeps_prompt_corruption = True

    def __init__(self):
        self._regexes = [
            (op, index, template_regex(t, {"a": _NUMBER, "b": _NUMBER}))
            for op, templates in TEMPLATES.items()
            for index, t in enumerate(templates)
        ]

    def _match_template(self, problem: str) -> dict | None:
        for op, index, regex in self._regexes:
            found = regex.match(problem)
            if found and found["a"].isdigit() == found["b"].isdigit():
                if not found["a"].isdigit() and not _in_words(TEMPLATES[op][index]):
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
        template = TEMPLATES[slots["op"]][index]
        text = fill_template(template, {"a": a.lower(), "b": b.lower()}, slots["spaced"])
        case = slots.get("case")
        if case is None and not a.isdigit():
            # after worked examples in lower case, stay lower case; a capital stays a capital
            case = "upper" if slots["a"][:1].isupper() else "lower" if slots["prefix"] else None
        return slots["prefix"] + _with_case(text, case) + slots["trailing"]

    def _worked_examples(self, slots: dict) -> list[tuple[str, str, str, str]] | None:
        """The worked examples before the problem as (a, b, result, the white space after), when
        every sentence before it is one, solved in the problem's own template; else None."""
        if slots["template"] is None or not slots["prefix"].strip():
            return None
        solved = template_regex(
            TEMPLATES[slots["op"]][slots["template"]] + " {c}.", {"a": _NUMBER, "b": _NUMBER, "c": _NUMBER}
        )
        examples, rest = [], slots["prefix"]
        while rest:
            for end in [m.end() for m in re.finditer(r"[.?!](?=\s|$)", rest)]:
                found = solved.match(rest[:end])
                if found:
                    space = re.match(r"\s*", rest[end:]).group()
                    examples.append((found["a"], found["b"], found["c"], space))
                    rest = rest[end + len(space) :]
                    break
            else:
                return None
        return examples

    def _examples_text(self, slots: dict, examples: list, index: int, case: str, join: str | None) -> str:
        """The worked examples written in template ``index`` (the same operands and results), each
        sentence's first letter in ``case``; ``join`` after the last (None: its full stop and space)."""
        template = TEMPLATES[slots["op"]][index] + " {c}"
        out = ""
        for number, (a, b, c, space) in enumerate(examples):
            words = {"a": a.lower(), "b": b.lower(), "c": c.lower()}
            text = _with_case(fill_template(template, words, slots["spaced"]), case)
            last = number == len(examples) - 1
            out += text + (join if last and join is not None else "." + space)
        return out

    def _choices(self, slots: dict, indices: list[int]) -> list[tuple[int, str, str | None]]:
        """(template, kind, join) of every rewrite: ``problem``, the problem alone in another
        template; and, when the worked examples are solved in the problem's own template,
        ``whole``, examples and problem in another template alike; ``case``, every sentence's
        first letter the other case; ``join``, the last example leading into the problem another way."""
        choices = [(i, "problem", None) for i in indices]
        if self._worked_examples(slots) is None:
            return choices
        choices += [(i, "whole", None) for i in indices]
        if not slots["a"].isdigit():
            choices.append((slots["template"], "case", None))
        return choices + [(slots["template"], "join", join) for join in JOINS]

    def variants(self, found, rng, answer=None):
        slots = found.slots
        words = not slots["a"].isdigit()
        # inside a sentence ("..., so 3 - 1 =") only templates that start with the first operand fit
        inside = bool(slots["prefix"]) and not re.search(r"[.?!\n]\s*$", slots["prefix"])
        templates = TEMPLATES[slots["op"]]
        indices = [
            i
            for i in range(len(templates))
            if i != slots["template"]
            and (not words or _in_words(templates[i]))
            and (not inside or templates[i].startswith("{a}"))
        ]
        examples = self._worked_examples(slots)
        choices = self._choices(slots, indices)
        rng.shuffle(choices)
        # the sentences' first letters: lower case as the prompt's, else as each template has it
        lower = slots["prefix"][:1].islower()
        case = "lower" if lower else "upper" if slots["prefix"][:1].isupper() else None
        out, seen = [], set()
        for index, kind, join in choices:
            new = dict(slots, template=index, text=None, spans=None)
            if kind == "whole":
                new["prefix"] = self._examples_text(slots, examples, index, case, None)
            elif kind == "case":
                new["case"] = "upper" if lower else "lower"
                new["prefix"] = self._examples_text(slots, examples, index, new["case"], None)
            elif kind == "join":
                new["case"] = "lower"  # the problem goes on the sentence ("..., and one plus two is")
                if not lower and join[:2] == ". ":
                    join = join[:2] + join[2:].capitalize()  # ". So one plus two is"
                new["prefix"] = self._examples_text(slots, examples, index, case, join)
            text = self._render(new, index, slots["a"], slots["b"])
            if text not in seen:  # two ways can write the same ("one plus one", operands swapped)
                seen.add(text)
                out.append((text, FamilyMatch(self.name, self.label, new, found.answer)))
        return out

    def prompt_corruption(self, found, corrupted, carried):
        """The rewrite with the corrupted prompt's operands (its worked examples untouched)."""
        if corrupted is None or corrupted.family != self.name:
            return carried
        slots, other = found.slots, corrupted.slots
        if other["op"] != slots["op"] or other["a"].isdigit() != slots["a"].isdigit():
            return carried
        if (other["a"].lower(), other["b"].lower()) == (slots["a"].lower(), slots["b"].lower()):
            return None
        return (
            self._render(slots, slots["template"], other["a"], other["b"])
            if slots["template"] is not None
            else carried
        )

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
