"""An occupation and the pronoun that follows ("The nurse said that"), for gender-bias prompts.

The occupation is the key fact: rewrites vary the sentence around it, and the corruption
replaces it with a neutral word ("person"), so the pronoun the model expects loses its cue.
"""

from __future__ import annotations

from .base import FamilyMatch, TemplateFamily, fill_template, is_spaced, split_trailing, template_regex

OCCUPATIONS = (
    "nurse", "receptionist", "librarian", "maid", "nanny", "housekeeper", "secretary", "hairdresser",
    "engineer", "mechanic", "carpenter", "plumber", "pilot", "surgeon", "firefighter", "soldier",
    "programmer", "farmer", "doctor", "teacher", "lawyer", "chef", "cashier", "dancer",
)  # fmt: skip
NEUTRAL_PEOPLE = ("person", "worker", "adult", "individual", "employee", "resident")
OCCUPATION_TEMPLATES = (
    "The {X} said that",
    "Yesterday the {X} explained that",
    "After the meeting, the {X} announced that",
    "The {X} was late because",
    "When the {X} came home,",
    "The {X} told everyone that",
    "This morning the {X} mentioned that",
    "The {X} called and said that",
    "Everyone agreed that the {X} was right, because",
    "Before leaving, the {X} wrote that",
    # added 2026-12-03, each checked on the embedded model with 'The nurse said that' (same answer,
    # the corruption lowers the metric): so Best-of-N's nine leave paraphrases to hold out
    "The {X} smiled and said that",
    "Last week the {X} wrote to say that",
    "The {X} was tired because",
    "When the {X} arrived at work,",
    "On Monday the {X} said that",
    "After lunch, the {X} explained that",
    "When the {X} finished work,",
    "At the party, the {X} said that",
    "Later that day the {X} admitted that",
    "The {X} was happy because",
    "When the {X} woke up,",
    "The {X} apologized because",
    "In the interview, the {X} said that",
    "As the {X} walked in,",
    "The {X} replied that",
)


class OccupationFamily(TemplateFamily):
    """An occupation followed by a place where a pronoun comes next ("The nurse said that"): the
    occupation is the key fact; the corruption replaces it with a neutral word ("person")."""

    name = "gender-bias"
    label = "occupation and pronoun"

    def __init__(self):
        entity = "|".join(OCCUPATIONS)
        self._regexes = [template_regex(t, {"X": rf"(?i:{entity})"}) for t in OCCUPATION_TEMPLATES]

    def match(self, prompt):
        body, trailing = split_trailing(prompt)
        for index, regex in enumerate(self._regexes):
            found = regex.match(body)
            if found:
                slots = {"X": found["X"], "template": index, "trailing": trailing, "spaced": is_spaced(body)}
                return FamilyMatch(self.name, self.label, slots, None)
        return None

    def variants(self, found, rng, answer=None):
        slots = found.slots
        indices = [i for i in range(len(OCCUPATION_TEMPLATES)) if i != slots["template"]]
        rng.shuffle(indices)
        return [
            (
                fill_template(OCCUPATION_TEMPLATES[i], {"X": slots["X"]}, slots["spaced"])
                + slots["trailing"],
                FamilyMatch(self.name, self.label, dict(slots, template=i), None),
            )
            for i in indices
        ]

    def corruptions(self, found, rng, answer):
        slots = found.slots
        for word in NEUTRAL_PEOPLE:
            values = {"X": word}
            yield (
                fill_template(OCCUPATION_TEMPLATES[slots["template"]], values, slots["spaced"])
                + slots["trailing"]
            )
