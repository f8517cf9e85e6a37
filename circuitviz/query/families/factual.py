"""Factual recall: facts about a named subject (a country's capital or language, a landmark's
city). The subject is the key fact: rewrites vary the wording, corruptions take another subject
of the same relation whose answer differs.
"""

from __future__ import annotations

from .base import FamilyMatch, TemplateFamily, fill_template, is_spaced, split_trailing, template_regex

FACT_RELATIONS = {
    "capital": (
        {
            "France": "Paris", "Italy": "Rome", "Germany": "Berlin", "Spain": "Madrid", "Japan": "Tokyo",
            "China": "Beijing", "Russia": "Moscow", "Egypt": "Cairo", "Greece": "Athens", "England": "London",
            "Poland": "Warsaw", "Portugal": "Lisbon", "Austria": "Vienna", "Ireland": "Dublin", "Norway": "Oslo",
            "Sweden": "Stockholm", "Canada": "Ottawa", "Kenya": "Nairobi", "Peru": "Lima", "Cuba": "Havana",
        },
        (
            "The capital of {X} is", "The capital city of {X} is", "{X}'s capital is", "{X}'s capital city is",
            "The capital of the country {X} is", "In {X}, the capital city is", "The seat of government of {X} is in",
            "{X} has its capital in", "The capital of {X} is the city of", "Q: What is the capital of {X}? A:",
            "The name of the capital of {X} is", "The government of {X} sits in the city of",
        ),
    ),
    "language": (
        {
            "France": "French", "Italy": "Italian", "Germany": "German", "Spain": "Spanish", "Japan": "Japanese",
            "China": "Chinese", "Russia": "Russian", "Greece": "Greek", "Portugal": "Portuguese", "Poland": "Polish",
            "Sweden": "Swedish", "Norway": "Norwegian", "Turkey": "Turkish", "Netherlands": "Dutch",
            "Finland": "Finnish", "Korea": "Korean",
        },
        (
            "The official language of {X} is", "People in {X} speak", "In {X}, people speak",
            "The language spoken in {X} is", "The main language of {X} is", "Most people in {X} speak",
            "In {X}, the official language is", "The national language of {X} is", "The people of {X} speak",
            "Q: What language do people speak in {X}? A:", "The primary language in {X} is",
            "Most people who live in {X} speak",
        ),
    ),
    "landmark": (
        {
            "Eiffel Tower": "Paris", "Colosseum": "Rome", "Big Ben": "London", "Brandenburg Gate": "Berlin",
            "Kremlin": "Moscow", "Acropolis": "Athens", "Sagrada Familia": "Barcelona", "Forbidden City": "Beijing",
            "Little Mermaid statue": "Copenhagen", "Leaning Tower": "Pisa",
        },
        (
            "The {X} is located in the city of", "The {X} is in the city of", "You can see the {X} in the city of",
            "The {X} can be found in the city of", "Tourists visit the {X} in the city of",
            "The famous {X} stands in the city of", "The city where the {X} stands is",
            "Q: In which city is the {X}? A:", "The {X} is a landmark in the city of",
            "To see the {X}, you travel to the city of",
            # added 2026-12-03 (checked on the Eiffel Tower prompt, as the occupation family's)
            "The {X} is situated in the city of", "The {X} was built in the city of",
            "The {X} stands in the city of", "The {X} is a famous landmark in the city of",
            "The home of the {X} is the city of", "The {X} is found in the city of",
            "The {X} is a well-known sight in the city of", "Every year, tourists visit the {X} in the city of",
            "The {X} is located in the heart of the city of", "The {X} attracts visitors to the city of",
            "The {X} is a popular attraction in the city of", "Q: Where is the {X}? A: In the city of",
            "The {X} is one of the landmarks of the city of", "If you visit the {X}, you are in the city of",
            "The {X} is a famous sight in the city of",
        ),
    ),
}  # fmt: skip
_ENTITY = r"[A-Z][\w'-]*(?: [A-Za-z][\w'-]*)*?"


class FactualFamily(TemplateFamily):
    """Facts about a named subject (capital, language, a landmark's city): the subject is the key."""

    name = "factual"
    label = "factual recall"
    keeps_prompt_corruption = True

    def __init__(self):
        self._regexes = [
            (relation, index, template_regex(t, {"X": _ENTITY}))
            for relation, (_, templates) in FACT_RELATIONS.items()
            for index, t in enumerate(templates)
        ]

    def match(self, prompt):
        body, trailing = split_trailing(prompt)
        for relation, index, regex in self._regexes:
            found = regex.match(body)
            if found:
                table = FACT_RELATIONS[relation][0]
                slots = {"relation": relation, "X": found["X"], "template": index}
                slots.update(trailing=trailing, spaced=is_spaced(body))
                return FamilyMatch(self.name, self.label, slots, table.get(found["X"]))
        return None

    def variants(self, found, rng, answer=None):
        slots = found.slots
        templates = FACT_RELATIONS[slots["relation"]][1]
        indices = [i for i in range(len(templates)) if i != slots["template"]]
        rng.shuffle(indices)
        out = []
        for index in indices:
            text = fill_template(templates[index], {"X": slots["X"]}, slots["spaced"]) + slots["trailing"]
            out.append((text, FamilyMatch(self.name, self.label, dict(slots, template=index), found.answer)))
        return out

    def corruptions(self, found, rng, answer):
        """Another subject of the same relation, whose answer differs: the table's answer for a
        subject it holds, else the task's (a Louvre prompt answered ' Paris' was corrupted into
        "The Eiffel Tower is located in the city of", whose answer is Paris too)."""
        slots = found.slots
        table, templates = FACT_RELATIONS[slots["relation"]]
        known = found.answer or (answer or "").strip()
        subjects = [x for x in table if x != slots["X"] and table[x] != known]
        if rng is not None:
            rng.shuffle(subjects)
        for subject in subjects:
            yield (
                fill_template(templates[slots["template"]], {"X": subject}, slots["spaced"])
                + slots["trailing"]
            )
