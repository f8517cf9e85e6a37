"""MMLU questions: a one-line preamble naming the subject, the question, four lettered options, a cue.

The family recognises the prompts ``circuitviz.batch.mmlu`` writes ("The following is a multiple
choice question about marketing." then "Question: ...", "A. ..." .. "D. ...", "Answer:") and
rewrites them keeping the answer letter: every option keeps its letter and its text, and the
rewrite changes only the preamble's wording (or drops it), the instruction before the question,
the option markers (A. / A) / (A) / A:), the spacing (blank lines after the preamble and before
the options) and the answer cue. Its corruption is the MMLU tasks' own (``letters``): the four
markers renamed E-H in the rewrite's marker style, so the letters the model answers with are gone.
"""

from __future__ import annotations

import itertools
import re

from .base import FamilyMatch, split_trailing
from .multiple_choice import MultipleChoiceFamily, option_label

MMLU_PREAMBLES = (
    "The following is a multiple choice question about {subject}.",
    "Here is a question about {subject}.",
    "Answer this question on {subject} with the letter of the correct option.",
    "A multiple choice question on {subject} follows.",
    "",
)
MMLU_HEADERS = ("Question: ", "Q: ", "Problem: ", "")
MMLU_MARKERS = ("A.", "A)", "(A)", "A:")
MMLU_FOOTERS = ("Answer:", "The answer is", "Correct answer:", "Answer (letter):")
MMLU_SPACINGS = (
    ("\n", "\n"),
    ("\n\n", "\n"),
    ("\n", "\n\n"),
    ("\n\n", "\n\n"),
)  # after preamble, before options
UNUSED_LETTERS = ("E", "F", "G", "H")
_LETTERS = ("A", "B", "C", "D")
_SUBJECT = r"(?P<subject>[a-z][a-z ]*?)"
_PREAMBLE_PATTERNS = [
    re.compile("^" + re.escape(p).replace(re.escape("{subject}"), _SUBJECT) + "$")
    for p in MMLU_PREAMBLES
    if p
]
_MARKER_PATTERNS = {
    marker: re.compile("^" + re.escape(marker).replace("A", "(?P<letter>[A-D])") + r" (?P<text>\S.*)$")
    for marker in MMLU_MARKERS
}


class MMLUFamily(MultipleChoiceFamily):
    """An MMLU question (a subject preamble, four options A-D); rewrites keep every option's letter."""

    name = "mmlu"
    label = "MMLU question"
    needs_answer = True

    def match(self, prompt):
        body, trailing = split_trailing(prompt)
        first, _, rest = body.partition("\n")
        subject = next((p.match(first.strip()) for p in _PREAMBLE_PATTERNS if p.match(first.strip())), None)
        if subject is None:
            return None
        lines = [line for line in rest.split("\n")]
        found = self._options(lines)
        if found is None:
            return None
        start, style, options = found
        question = "\n".join(line for line in lines[:start] if line.strip()).strip()
        footer = "\n".join(lines[start + 4 :]).strip()
        if not question or not footer or "\n" in footer:
            return None
        header = next((h for h in MMLU_HEADERS if h and question.startswith(h)), "")
        slots = {
            "preamble": MMLU_PREAMBLES[0],
            "subject": subject["subject"],
            "header": header,
            "question": question[len(header) :],
            "style": style,
            "options": options,
            "footer": footer,
            "spacing": MMLU_SPACINGS[0],
            "trailing": trailing,
        }
        return FamilyMatch(self.name, self.label, slots, None)

    @staticmethod
    def _options(lines: list[str]):
        """(index of the first option line, its marker style, the four texts), or None unless
        four consecutive lines are the options A-D in one marker style."""
        for start in range(len(lines) - 3):
            for style, pattern in _MARKER_PATTERNS.items():
                found = [pattern.match(line.strip()) for line in lines[start : start + 4]]
                if all(found) and [f["letter"] for f in found] == list(_LETTERS):
                    return start, style, [f["text"] for f in found]
        return None

    @staticmethod
    def render(slots: dict, renamed: bool = False) -> str:
        """The prompt of ``slots``; ``renamed``: every marker's letter A-D becomes E-H (the corruption)."""
        after_preamble, before_options = slots["spacing"]
        preamble = slots["preamble"].format(subject=slots["subject"])
        text = (preamble + after_preamble) if preamble else ""
        text += slots["header"] + slots["question"] + before_options
        letters = UNUSED_LETTERS if renamed else _LETTERS
        lines = [
            f"{option_label(letter, slots['style'])} {option}"
            for letter, option in zip(letters, slots["options"])
        ]
        return text + "\n".join(lines + [slots["footer"]]) + slots["trailing"]

    def variants(self, found, rng, answer: str | None = None):
        """Rewrites that keep every option's letter and text: preamble, instruction, markers,
        spacing and cue changed, in the order ``rng`` gives."""
        slots = found.slots
        correct, by_letter = self.correct_option(slots, answer or found.answer)
        if correct < 0 or not by_letter:
            return []
        combos = list(
            itertools.product(MMLU_PREAMBLES, MMLU_HEADERS, MMLU_MARKERS, MMLU_SPACINGS, MMLU_FOOTERS)
        )
        rng.shuffle(combos)
        out, seen = [], {self.render(slots)}
        for preamble, header, style, spacing, footer in combos:
            new = dict(slots, preamble=preamble, header=header, style=style, spacing=spacing, footer=footer)
            text = self.render(new)
            if text not in seen:
                seen.add(text)
                out.append((text, FamilyMatch(self.name, self.label, new, found.answer)))
        return out

    def corruptions(self, found, rng, answer):
        """The four markers renamed E-H (nothing for an answer given as an option's text)."""
        correct, by_letter = self.correct_option(found.slots, answer or found.answer)
        if correct >= 0 and by_letter:
            yield self.render(found.slots, renamed=True)


def corrupt_paraphrase(original: FamilyMatch, text: str) -> tuple[str | None, str | None]:
    """An LLM's paraphrase of an MMLU prompt corrupted the family's way: (its four markers renamed
    E-H, None), or (None, why not) when it lost the options A-D or changed one's letter or text."""
    lines = split_trailing(text)[0].split("\n")
    found = MMLUFamily._options(lines)
    if found is None:
        return None, "the paraphrase lost the four options lettered A-D"
    start, style, options = found
    if [" ".join(o.split()) for o in options] != [" ".join(o.split()) for o in original.slots["options"]]:
        return None, "the paraphrase changed an option's text or moved it to another letter"
    for offset, (letter, unused) in enumerate(zip(_LETTERS, UNUSED_LETTERS)):
        line = lines[start + offset]
        at = line.index(option_label(letter, style))
        lines[start + offset] = (
            line[:at] + option_label(unused, style) + line[at + len(option_label(letter, style)) :]
        )
    return "\n".join(lines) + text[len(split_trailing(text)[0]) :], None
