"""Multiple choice on one line ("Q: Is fire hot? A) yes B) no. Answer:"), possibly after
answered examples of the same form. The answer is the correct option's letter, given by the
task; rewrites vary the header, label style and cue in every block, corruptions swap the correct
option's text with another's in every block (fixing the examples' given letters to match).
"""

from __future__ import annotations

import itertools
import re

from .base import FamilyMatch, TemplateFamily, split_trailing
from .multiple_choice import MCQ_STYLES, option_label

_INLINE_BLOCK = re.compile(
    r"^(?P<header>Q:|Question:)\s+(?P<question>[^?]+\?)\s+(?P<options>.+?)(?P<end>\.?)\s+"
    r"(?P<footer>Answer:|The answer is)(?:\s+(?P<given>[A-H])\.)?$",
    re.DOTALL,
)
_INLINE_LABEL = re.compile(r"(?:^|\s)(?P<open>\(?)(?P<letter>[A-H])(?P<close>[.)])\s+")
INLINE_HEADERS = ("Q:", "Question:")
INLINE_FOOTERS = ("Answer:", "The answer is")


class InlineChoiceFamily(TemplateFamily):
    """Questions with their options on one line ("Q: Is fire hot? A) yes B) no. Answer:"),
    possibly after answered examples of the same form."""

    name = "inline-choice"
    label = "multiple choice (inline)"
    needs_answer = True

    @staticmethod
    def _block(text: str) -> dict | None:
        found = _INLINE_BLOCK.match(text.strip())
        if not found:
            return None
        labels = list(_INLINE_LABEL.finditer(found["options"]))
        letters = [label["letter"] for label in labels]
        if len(labels) < 2 or letters != [chr(ord("A") + i) for i in range(len(labels))] or labels[0].start():
            return None
        texts = [
            found["options"][label.end() : labels[i + 1].start() if i + 1 < len(labels) else None].strip()
            for i, label in enumerate(labels)
        ]
        style = "(A)" if labels[0]["open"] else "A" + labels[0]["close"]
        return {
            "header": found["header"], "question": found["question"], "options": texts, "style": style,
            "end": found["end"], "footer": found["footer"], "given": found["given"],
        }  # fmt: skip

    def match(self, prompt):
        body, trailing = split_trailing(prompt)
        pieces = re.split(r"(?<=\.)\s+(?=Q:|Question:)", body)
        blocks = [self._block(piece) for piece in pieces]
        if not blocks or any(block is None for block in blocks) or blocks[-1]["given"]:
            return None
        if any(not block["given"] for block in blocks[:-1]):
            return None
        return FamilyMatch(self.name, self.label, {"blocks": blocks, "trailing": trailing}, None)

    @staticmethod
    def render(slots: dict) -> str:
        parts = []
        for block in slots["blocks"]:
            options = " ".join(
                f"{option_label(chr(ord('A') + i), block['style'])} {text}"
                for i, text in enumerate(block["options"])
            )
            text = f"{block['header']} {block['question']} {options}{block['end']} {block['footer']}"
            parts.append(text + (f" {block['given']}." if block["given"] else ""))
        return " ".join(parts) + slots["trailing"]

    def unusable_answer(self, answer: str) -> str:
        """Why no rewrite keeps ``answer``: it is no option's letter."""
        return (
            f"The answer {answer!r} is not one of the options' letters; give the correct "
            "option's letter as the answer, e.g. ' A'."
        )

    def variants(self, found, rng, answer: str | None = None):
        """Other headers, label styles and answer cues, the same in every block; the final
        question's wrong options reordered."""
        blocks = found.slots["blocks"]
        final = blocks[-1]
        letter = (answer or "").strip()
        count = len(final["options"])
        if not (len(letter) == 1 and 0 <= ord(letter) - ord("A") < count):
            return []
        correct = ord(letter) - ord("A")
        wrong = [i for i in range(count) if i != correct]
        combos = [
            (h, s, f, order)
            for h in INLINE_HEADERS
            for s in MCQ_STYLES
            for f in INLINE_FOOTERS
            for order in itertools.permutations(wrong)
        ]
        rng.shuffle(combos)
        out, seen = [], {self.render(found.slots)}
        for header, style, footer, order in combos:
            options = list(final["options"])
            for slot, source in zip(wrong, order):
                options[slot] = final["options"][source]
            new_blocks = [dict(b, header=header, style=style, footer=footer) for b in blocks]
            new_blocks[-1]["options"] = options
            new = dict(found.slots, blocks=new_blocks)
            text = self.render(new)
            if text not in seen:
                seen.add(text)
                out.append((text, FamilyMatch(self.name, self.label, new, None)))
        return out

    def corruptions(self, found, rng, answer):
        """The correct option's text swapped with another's in every block (an example whose
        answer was one of the two follows it), so the right letter changes."""
        blocks = found.slots["blocks"]
        letter = (answer or "").strip()
        count = len(blocks[-1]["options"])
        if not (len(letter) == 1 and 0 <= ord(letter) - ord("A") < count):
            return
        correct = ord(letter) - ord("A")
        others = [i for i in range(count) if i != correct]
        if rng is not None:
            rng.shuffle(others)
        for other in others:
            swapped = []
            for block in blocks:
                options = list(block["options"])
                if max(correct, other) < len(options):
                    options[correct], options[other] = options[other], options[correct]
                given = block["given"]
                names = {
                    chr(ord("A") + correct): chr(ord("A") + other),
                    chr(ord("A") + other): chr(ord("A") + correct),
                }
                swapped.append(
                    dict(block, options=options, given=names.get(given, given) if given else given)
                )
            yield self.render(dict(found.slots, blocks=swapped))
