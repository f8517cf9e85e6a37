"""The occupation and landmark templates: enough of them for Best-of-N to leave paraphrases held
out, and none that makes another template's prompt ambiguous (regexes are built from them)."""

import random

from circuitviz.measure.transfer import DEFAULT_PARAPHRASES as HELD_OUT
from circuitviz.methods.bon import QueryCircuitConfig
from circuitviz.query.families import family, recognise
from circuitviz.query.families.factual import FACT_RELATIONS
from circuitviz.query.families.occupation import OCCUPATION_TEMPLATES, OCCUPATIONS

BON_PARAPHRASES = QueryCircuitConfig().n_paraphrases  # Best-of-N's default: 9


def test_every_template_reads_back_as_itself():
    for subject in OCCUPATIONS:
        for index, template in enumerate(OCCUPATION_TEMPLATES):
            found = recognise(template.format(X=subject))
            assert found is not None and found.family == "gender-bias", template
            assert (found.slots["template"], found.slots["X"]) == (index, subject), template
    for relation, (table, templates) in FACT_RELATIONS.items():
        for subject in table:
            for index, template in enumerate(templates):
                found = recognise(template.format(X=subject))
                assert found is not None and found.family == "factual", template
                read = (found.slots["relation"], found.slots["template"], found.slots["X"])
                assert read == (relation, index, subject), template


def test_best_of_n_leaves_rewrites_to_hold_out():
    """The gender-bias and Eiffel Tower prompts of the yardstick: more rewrites than Best-of-N's
    nine plus five held out (on the embedded model 23 of each prompt's 24 pass the checks,
    docs/faithfulness.md)."""
    for prompt in ("The nurse said that", "The Eiffel Tower is located in the city of"):
        found = recognise(prompt)
        variants = family(found.family).variants(found, random.Random(0))
        texts = [text for text, _ in variants]
        assert len(texts) >= BON_PARAPHRASES + HELD_OUT and len(set(texts)) == len(texts)
        assert prompt not in texts
        for text in texts:  # each rewrite is corrupted by the family: the key word replaced
            again = recognise(text)
            assert again.slots["X"] == found.slots["X"], text
            corrupted = next(family(found.family).corruptions(again, random.Random(1), None))
            assert found.slots["X"] not in corrupted and corrupted != text, corrupted
