"""Indirect object identification: "When Mary and John went to the store, John gave a drink to".

Two people are introduced, one of them (the subject) repeats, the other (the indirect object)
is the answer. Rewrites vary the wording, place and object; the corruption replaces all three
names with others (the "ABC" corruption), so no name in the prompt is the answer any more.
Prompts outside the templates are recognised by a loose pattern (two names joined by "and",
one of them repeated later and followed by words, neither named in between) and corrupted in
place.
"""

from __future__ import annotations

import re

from .base import (
    NAME,
    UPPER,
    WORD,
    FamilyMatch,
    TemplateFamily,
    fill_template,
    is_spaced,
    split_trailing,
    template_regex,
)

IOI_TEMPLATES = (
    "When {A} and {B} went to the {place}, {B} gave a {object} to",
    "When {B} and {A} went to the {place}, {B} gave a {object} to",
    "After {A} and {B} went to the {place}, {B} gave a {object} to",
    "Then, {A} and {B} went to the {place}. {B} gave a {object} to",
    "While {A} and {B} were working at the {place}, {B} gave a {object} to",
    "When {A} and {B} arrived at the {place}, {B} handed a {object} to",
    "{A} and {B} went to the {place}, and {B} gave a {object} to",
    "After lunch, {A} and {B} went to the {place}. {B} gave a {object} to",
    "When {B} and {A} got to the {place}, {B} gave a {object} to",
    "Yesterday {A} and {B} went to the {place}, and {B} gave a {object} to",
    "As {A} and {B} walked to the {place}, {B} passed a {object} to",
)
IOI_PLACES = (
    "store",
    "park",
    "school",
    "office",
    "beach",
    "restaurant",
    "hospital",
    "station",
    "market",
    "library",
)
IOI_OBJECTS = ("drink", "ball", "book", "gift", "letter", "flower", "key", "bag", "snack", "ticket")
# corruption names, in the order a proposal tries them ("Alice, Bob, Carl" is the README example)
IOI_NAMES = (
    "Alice", "Bob", "Carl", "Dan", "Emma", "Frank", "Grace", "Henry", "Kate", "Lisa", "Mark", "Nick",
    "Paul", "Rose", "Sam", "Tom", "Anna", "Jack", "Laura", "Mike", "Sarah", "David", "James", "Maria",
)  # fmt: skip
# more first names a user types ("Mary", "John": the IOI paper's), which a prompt no template
# recognises may have swapped for another (``proposals.swap_known_word``); not drawn by the ABC
# corruption or the dataset generator, whose seeded draws stay as they were
COMMON_NAMES = (
    "Mary", "John", "Michael", "Robert", "William", "Richard", "Thomas", "Daniel", "Matthew", "Anthony",
    "Joseph", "Andrew", "Steven", "Kevin", "Brian", "George", "Edward", "Peter", "Eric", "Ryan", "Jason",
    "Justin", "Adam", "Kyle", "Sean", "Scott", "Jessica", "Jennifer", "Elizabeth", "Linda", "Susan",
    "Karen", "Nancy", "Emily", "Sophie", "Rachel", "Amanda", "Ashley", "Michelle", "Nicole", "Megan",
    "Hannah", "Olivia", "Julia", "Helen", "Alex", "Chris", "Ben", "Joe", "Max", "Lucy", "Amy", "Jane",
    "Claire", "Sophia",
)  # fmt: skip
_IOI_LOOSE = re.compile(
    rf"^(?P<head>.*?)\b(?P<X>{NAME}) and (?P<Y>{NAME})\b(?P<body>.*)\b(?P<S>{NAME})(?P<tail>[^{UPPER}]*)$",
    re.DOTALL,
)


def _asks_a_name(loose: re.Match) -> bool:
    """Whether a loose match reads as indirect object identification: words follow the repeated
    name ("... Tom threw a peanut to"; a prompt ending in the name asks what it does), and neither
    name stands between the two and the repeat ("..., John gave a drink to Mary. Then Mary" was
    read as one, its answer 'John', and corrupted to "When Bob and Alice ..., John gave a drink to
    Mary. Then Carl", the names between left as they were)."""
    between = re.findall(rf"\b{NAME}\b", loose["body"])
    return bool(re.search(r"[a-z]", loose["tail"])) and not {loose["X"], loose["Y"]} & set(between)


class IOIFamily(TemplateFamily):
    """Two people are introduced, one of them (the subject) repeats, the other is the answer."""

    name = "ioi"
    label = "indirect object identification"
    _slots = {"A": NAME, "B": NAME, "place": WORD, "object": WORD}

    def __init__(self):
        self._regexes = [template_regex(t, self._slots) for t in IOI_TEMPLATES]

    def match(self, prompt):
        body, trailing = split_trailing(prompt)
        for index, regex in enumerate(self._regexes):
            found = regex.match(body)
            if found and found["A"] != found["B"]:
                slots = dict(found.groupdict(), template=index, trailing=trailing, spaced=is_spaced(body))
                return FamilyMatch(self.name, self.label, slots, found["A"])
        loose = _IOI_LOOSE.match(body)
        if (
            loose
            and loose["X"] != loose["Y"]
            and loose["S"] in (loose["X"], loose["Y"])
            and _asks_a_name(loose)
        ):
            io = loose["Y"] if loose["S"] == loose["X"] else loose["X"]
            spans = {key: loose.span(key) for key in ("X", "Y", "S")}
            place = re.search(r"\bthe ([a-z]+)\b", loose["body"])
            obj = re.search(r"\ban? ([a-z]+)\b", loose["body"])
            slots = {
                "A": io,
                "B": loose["S"],
                "place": place.group(1) if place else IOI_PLACES[0],
                "object": obj.group(1) if obj else IOI_OBJECTS[0],
                "template": None,
                "trailing": trailing,
                "spaced": is_spaced(body),
                "text": body,
                "spans": spans,
            }
            return FamilyMatch(self.name, self.label, slots, io)
        return None

    def variants(self, found, rng, answer=None):
        slots = found.slots
        combos = [
            (t, place, obj)
            for t in range(len(IOI_TEMPLATES))
            for place in IOI_PLACES
            for obj in IOI_OBJECTS
            if (t, place, obj) != (slots["template"], slots["place"], slots["object"])
        ]
        rng.shuffle(combos)
        # vary the wording first: one combination per template before any template repeats
        by_template: dict[int, list] = {}
        for combo in combos:
            by_template.setdefault(combo[0], []).append(combo)
        ordered = []
        while any(by_template.values()):
            for t in sorted(by_template, key=lambda k: rng.random()):
                if by_template[t]:
                    ordered.append(by_template[t].pop())
        out = []
        for t, place, obj in ordered:
            values = {"A": slots["A"], "B": slots["B"], "place": place, "object": obj}
            text = fill_template(IOI_TEMPLATES[t], values, slots["spaced"]) + slots["trailing"]
            new = dict(slots, template=t, place=place, object=obj, text=None, spans=None)
            out.append((text, FamilyMatch(self.name, self.label, new, slots["A"])))
        return out

    def corruptions(self, found, rng, answer):
        """ABC corruption: the two introduced names and the repeated subject become three others."""
        slots = found.slots
        names = [n for n in IOI_NAMES if n not in (slots["A"], slots["B"])]
        if rng is not None:
            rng.shuffle(names)
        for offset in range(len(names) - 2):
            c, d, e = names[offset], names[offset + 1], names[offset + 2]
            if slots.get("spans"):
                text = slots["text"]
                pieces, last = [], 0
                x_is_io = text[slice(*slots["spans"]["X"])] == slots["A"]
                replacement = {"X": c if x_is_io else d, "Y": d if x_is_io else c, "S": e}
                for key in sorted(slots["spans"], key=lambda k: slots["spans"][k][0]):
                    start, end = slots["spans"][key]
                    pieces.append(text[last:start] + replacement[key])
                    last = end
                yield "".join(pieces) + text[last:] + slots["trailing"]
                continue
            template = IOI_TEMPLATES[slots["template"]]
            # first B (in the introduction) -> d, the repeated B (the subject) -> e
            values = {"A": c, "B": d, "place": slots["place"], "object": slots["object"]}
            text = fill_template(template, values, slots["spaced"])
            subject = text.rfind(d)
            yield text[:subject] + e + text[subject + len(d) :] + slots["trailing"]
