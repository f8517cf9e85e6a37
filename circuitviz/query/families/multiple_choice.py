"""Multiple choice: a question, lettered options on their own lines, then an answer cue.

The prompt cannot say which option is correct, so the task's answer does (its letter, or the
option's text for a model that answers with it). Rewrites vary the header, the label style and
the cue and reorder the options that do not move the answer; the corruption swaps the correct
option's text with a wrong one's, so the right letter changes.
"""

from __future__ import annotations

import itertools
import re

from .base import FamilyMatch, TemplateFamily, split_trailing

_OPTION = re.compile(r"^(?P<open>\(?)(?P<letter>[A-Z])(?P<close>[.)])\s+(?P<text>\S.*)$")
MCQ_HEADERS = ("Question: ", "Q: ", "")
MCQ_STYLES = ("A.", "A)", "(A)")
MCQ_FOOTERS = ("Answer:", "The answer is", "Correct answer:")


def option_label(letter: str, style: str) -> str:
    return style.replace("A", letter)


class MultipleChoiceFamily(TemplateFamily):
    """A question, lettered options (A. / A) / (A)) on their own lines, then an answer cue."""

    name = "multiple-choice"
    label = "multiple choice"
    needs_answer = True

    def match(self, prompt):
        body, trailing = split_trailing(prompt)
        lines = body.split("\n")
        first = next((i for i, line in enumerate(lines) if _OPTION.match(line.strip())), None)
        if first is None or first == 0:
            return None
        options, index = [], first
        while index < len(lines) and _OPTION.match(lines[index].strip()):
            options.append(_OPTION.match(lines[index].strip()))
            index += 1
        letters = [o["letter"] for o in options]
        if len(options) < 2 or letters != [chr(ord("A") + i) for i in range(len(options))]:
            return None
        footer = "\n".join(lines[index:]).strip()
        if not footer or "\n" in footer:
            return None
        question = "\n".join(lines[:first])
        header = next((h for h in MCQ_HEADERS if h and question.startswith(h)), "")
        style = "(A)" if options[0]["open"] else "A" + options[0]["close"]
        slots = {
            "header": header,
            "question": question[len(header) :],
            "style": style,
            "options": [o["text"] for o in options],
            "footer": footer,
            "trailing": trailing,
        }
        return FamilyMatch(self.name, self.label, slots, None)

    @staticmethod
    def render(slots: dict) -> str:
        letters = [chr(ord("A") + i) for i in range(len(slots["options"]))]
        lines = [slots["header"] + slots["question"]]
        lines += [
            f"{option_label(letter, slots['style'])} {text}"
            for letter, text in zip(letters, slots["options"])
        ]
        return "\n".join(lines + [slots["footer"]]) + slots["trailing"]

    @staticmethod
    def correct_option(slots: dict, answer: str | None) -> tuple[int, bool]:
        """(index of the correct option, whether the answer is its letter rather than its text);
        index -1 when the answer is neither an option's letter nor an option's text."""
        text = (answer or "").strip()
        count = len(slots["options"])
        if len(text) == 1 and text.isupper() and 0 <= ord(text) - ord("A") < count:
            return ord(text) - ord("A"), True
        if text and text in slots["options"]:
            return slots["options"].index(text), False
        return -1, True

    def unusable_answer(self, answer: str) -> str:
        """Why no rewrite keeps ``answer``: it names no option."""
        return (
            f"The answer {answer!r} is neither an option's letter nor an option's text; "
            "give the correct option's letter (' B') or its text as the answer."
        )

    def variants(self, found, rng, answer: str | None = None):
        """Other headers, label styles and answer cues; the wrong options reordered (a letter
        answer keeps its letter) or all options reordered (a model that answers with the
        option's text keeps that text)."""
        slots = found.slots
        correct, by_letter = self.correct_option(slots, answer or found.answer)
        if correct < 0:
            return []
        count = len(slots["options"])
        moved = [i for i in range(count) if i != correct] if by_letter else list(range(count))
        orders = list(itertools.permutations(moved))
        combos = [
            (h, s, f, order) for h in MCQ_HEADERS for s in MCQ_STYLES for f in MCQ_FOOTERS for order in orders
        ]
        rng.shuffle(combos)
        out, seen = [], {self.render(slots)}
        for header, style, footer, order in combos:
            options = list(slots["options"])
            for slot, source in zip(moved, order):
                options[slot] = slots["options"][source]
            new = dict(slots, header=header, style=style, footer=footer, options=options)
            text = self.render(new)
            if text not in seen:
                seen.add(text)
                out.append((text, FamilyMatch(self.name, self.label, new, found.answer)))
        return out

    def corruptions(self, found, rng, answer):
        """The correct option's text swapped with a wrong option's: the key fact moves letter.
        (For an answer given as the option's text there is none: the question must change.)"""
        slots = found.slots
        correct, by_letter = self.correct_option(slots, answer or found.answer)
        count = len(slots["options"])
        if correct < 0 or not by_letter:
            return
        wrong = [i for i in range(count) if i != correct]
        if rng is not None:
            rng.shuffle(wrong)
        for other in wrong:
            options = list(slots["options"])
            options[correct], options[other] = options[other], options[correct]
            yield self.render(dict(slots, options=options))
