"""Any relation of a named subject ("The currency of Japan is the"): recognised by its shape,
rewritten keeping relation, subject and the words before the answer, corrupted as the prompt is."""

import itertools
import random

import pytest

from circuitviz.core.tasks import PromptTask
from circuitviz.query.families import family, recognise
from circuitviz.query.families.factual import FACT_RELATIONS
from circuitviz.query.families.relation import RECOGNISED, RELATION_TEMPLATES
from circuitviz.query.pairs import ParaphraseError
from circuitviz.query.templates import NO_FAMILY, template_rewrites

CURRENCY = PromptTask("The currency of Japan is the", "The currency of France is the", " yen", (" franc",))


@pytest.mark.parametrize(
    ("prompt", "relation", "subject", "before"),
    [
        ("The currency of Japan is the", "currency", "Japan", " the"),
        ("Japan's currency is the", "currency", "Japan", " the"),
        ("In Japan, the currency is the", "currency", "Japan", " the"),
        ("The largest city of Australia is", "largest city", "Australia", ""),
        ("The national animal of Scotland is a", "national animal", "Scotland", " a"),
        ("The currency of the United States is the", "currency", "the United States", " the"),
        ("The founder of Microsoft is", "founder", "Microsoft", ""),
    ],
)
def test_the_shape_is_recognised_with_its_slots(prompt, relation, subject, before):
    found = recognise(prompt)
    assert found is not None and found.family == "relation", prompt
    assert (found.slots["R"], found.slots["X"], found.slots["D"]) == (relation, subject, before)
    assert found.answer is None  # the family knows no facts: the model's own answer is kept


def test_known_relations_stay_factual_recall_and_other_shapes_are_not_taken():
    assert recognise("The capital of France is").family == "factual"
    assert recognise("The official language of France is").family == "factual"
    assert recognise("The nurse said that").family == "gender-bias"
    for prompt in ("The cat sat on the mat", "The colour of the sky is", "the currency of Japan is the"):
        assert recognise(prompt) is None, prompt  # no capitalised subject / not a sentence's start


def test_rewrites_keep_relation_subject_and_words_and_read_back():
    found = recognise(CURRENCY.clean)
    variants = family("relation").variants(found, random.Random(0))
    texts = [text for text, _ in variants]
    assert len(texts) == len(RELATION_TEMPLATES) - 1 and len(set(texts)) == len(texts)
    assert CURRENCY.clean not in texts and "Japan's currency is the" in texts
    for text, match in variants:
        assert "Japan" in text and "currency" in text and text.endswith(" is the"), text
        assert text[0].isupper(), text
        if match.slots["template"] < RECOGNISED:  # the recognised shapes read back as themselves
            again = recognise(text)
            assert (again.family, again.slots["X"], again.slots["R"]) == ("relation", "Japan", "currency")
    lowered = recognise("The currency of the United States is the")
    rewrites = [text for text, _ in family("relation").variants(lowered, random.Random(0))]
    assert "The United States's currency is the" in rewrites  # a sentence starts with a capital


def test_the_prompts_corruption_comes_first_then_subjects_of_the_same_kind():
    _, rewrites = template_rewrites(CURRENCY)
    for text, corruptions in itertools.islice(rewrites, 8):
        first, second = itertools.islice(corruptions, 2)
        assert first == text.replace("Japan", "France"), (text, first)
        countries = {*FACT_RELATIONS["capital"][0], *FACT_RELATIONS["language"][0]}
        others = countries - {"Japan", "France"}
        assert any(second == text.replace("Japan", x) for x in others), (text, second)  # a country
    landmark = recognise("The height of the Eiffel Tower is")
    assert landmark.slots["X"] == "the Eiffel Tower"  # other landmarks stand in, article kept
    swapped = list(family("relation").corruptions(landmark, random.Random(0), None))
    assert swapped and all(t.startswith("The height of the ") and "Eiffel" not in t for t in swapped)
    assert "The height of the Colosseum is" in swapped and not any("Japan" in t for t in swapped)
    microsoft = recognise("The founder of Microsoft is")
    assert list(family("relation").corruptions(microsoft, random.Random(0), None)) == []


def test_an_unrecognised_prompt_names_the_shapes_the_templates_know():
    with pytest.raises(ParaphraseError) as error:
        template_rewrites(PromptTask("The cat sat on the", "The dog sat on the", " mat", (" rug",)))
    assert str(error.value) == NO_FAMILY and "The currency of Japan is the" in NO_FAMILY


@pytest.mark.slow
def test_on_the_embedded_model_a_typed_relation_gets_paraphrases_to_hold_out(embedded_model):
    """'The currency of Japan is the' found no family before this one: paraphrase pruning said
    no paraphrase could be held out. Now 20 of 23 rewrites pass the checks (docs/methods.md),
    each answered ' yen' and corrupted to France as the prompt is: Best-of-N's nine candidates
    and five held out."""
    from circuitviz.query.sources import gather_paraphrases

    pairs = gather_paraphrases(embedded_model, CURRENCY, "template", n=30, seed=0)
    usable = [pair for pair in pairs if pair.usable()]
    assert len(usable) >= 14
    for pair in usable:
        assert pair.model_answer == " yen" and pair.corrupted == pair.clean.replace("Japan", "France")
        assert pair.metric_corrupted < 0 < pair.metric_clean
