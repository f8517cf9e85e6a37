"""Any relation of a named subject ("The currency of Japan is the", "Japan's currency is the").

Factual recall's own family knows three relations and their answers (a country's capital and
language, a landmark's city). A user types others: a country's currency, a city's river, a
company's founder. This family recognises the shape of such a sentence, not its facts: a relation
(one to three lower-case words), a capitalised subject and the words before the answer ("is the").
Rewrites keep the relation, the subject and those words and vary the sentence around them; the
model's checks decide which rewrites keep its answer. The subject is the key fact: the prompt's
own corruption (another subject) is carried over to each rewrite, and with no corrupted prompt
the subject is replaced by other subjects of factual recall's tables when it is one of them.
The family does not know the answer, so it never proposes one.
"""

from __future__ import annotations

from .base import FamilyMatch, TemplateFamily, fill_template, is_spaced, split_trailing, template_regex
from .factual import FACT_RELATIONS

# {R}: the relation; {X}: the subject; {D}: the words between "is" and the answer (" the", " a")
RELATION_TEMPLATES = (
    "The {R} of {X} is{D}",
    "{X}'s {R} is{D}",
    "In {X}, the {R} is{D}",
    "The {R} in {X} is{D}",
    "As for {X}, its {R} is{D}",
    "Everyone knows that the {R} of {X} is{D}",
    "It is well known that the {R} of {X} is{D}",
    "When it comes to {X}, the {R} is{D}",
    "For {X}, the {R} is{D}",
    "Here is a fact about {X}: its {R} is{D}",
    "In the case of {X}, the {R} is{D}",
    "The {R} of {X}, as everyone knows, is{D}",
    "Fact: the {R} of {X} is{D}",
    "Ask anyone about {X}: the {R} is{D}",
    # more, so Best-of-N's nine candidates leave five or more to hold out
    "Here is something about {X}. The {R} of {X} is{D}",
    "Many people know that the {R} of {X} is{D}",
    "In short, the {R} of {X} is{D}",
    "I read that the {R} of {X} is{D}",
    "Speaking of {X}, its {R} is{D}",
    "Today we learn about {X}. Its {R} is{D}",
    "A simple fact: the {R} of {X} is{D}",
    "Most people agree that the {R} of {X} is{D}",
    "Our teacher said that the {R} of {X} is{D}",
    "The answer is easy: the {R} of {X} is{D}",
)
# The first three are the shapes a prompt is recognised by; the others only rewrite one.
RECOGNISED = 3
_RELATION = r"[a-z]+(?: [a-z]+){0,2}"
_SUBJECT = r"(?:the )?[A-Z][\w'-]*(?: [A-Z][\w'-]*){0,3}"
_BEFORE_ANSWER = r"(?: (?:the|a|an|called|named))?"
# subjects to swap in when no corrupted prompt is given: factual recall's, one kind at a time
_KINDS = (
    tuple(dict.fromkeys([*FACT_RELATIONS["capital"][0], *FACT_RELATIONS["language"][0]])),  # countries
    tuple(FACT_RELATIONS["landmark"][0]),
)


def _sentence(text: str) -> str:
    """A rewrite that starts with the subject starts with a capital ("The United States's ...")."""
    return text[:1].upper() + text[1:]


class RelationFamily(TemplateFamily):
    """A relation of a named subject ("The currency of Japan is the"): the subject is the key."""

    name = "relation"
    label = "relation"  # "Proposed by the relation template"
    keeps_prompt_corruption = True

    def __init__(self):
        slots = {"R": _RELATION, "X": _SUBJECT, "D": _BEFORE_ANSWER}
        self._regexes = [template_regex(t, slots) for t in RELATION_TEMPLATES[:RECOGNISED]]

    def match(self, prompt):
        body, trailing = split_trailing(prompt)
        for index, regex in enumerate(self._regexes):
            found = regex.match(body)
            if found:
                slots = {key: found[key] for key in ("R", "X", "D")}
                slots.update(template=index, trailing=trailing, spaced=is_spaced(body))
                return FamilyMatch(self.name, self.label, slots, None)
        return None

    def _text(self, template: int, slots: dict, subject: str) -> str:
        values = {"R": slots["R"], "X": subject, "D": slots["D"]}
        return (
            _sentence(fill_template(RELATION_TEMPLATES[template], values, slots["spaced"]))
            + slots["trailing"]
        )

    def variants(self, found, rng, answer=None):
        slots = found.slots
        indices = [i for i in range(len(RELATION_TEMPLATES)) if i != slots["template"]]
        rng.shuffle(indices)
        return [
            (
                self._text(i, slots, slots["X"]),
                FamilyMatch(self.name, self.label, dict(slots, template=i), None),
            )
            for i in indices
        ]

    def corruptions(self, found, rng, answer):
        """Subjects of the same kind from factual recall's tables (countries, landmarks) when the
        prompt's subject is one of them; another subject has no known stand-in, and the prompt's
        own corruption, carried over, is the rewrite's only one."""
        slots = found.slots
        article = "the " if slots["X"].startswith("the ") else ""  # "the Eiffel Tower"
        name = slots["X"][len(article) :]
        kind = next((subjects for subjects in _KINDS if name in subjects), ())
        subjects = [x for x in kind if x != name]
        if rng is not None:
            rng.shuffle(subjects)
        for subject in subjects:
            yield self._text(slots["template"], slots, article + subject)
