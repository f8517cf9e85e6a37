"""Prompts as users type them: white space the templates do not write (a story pasted over two
lines, two spaces, a tab, a space before the first word) is read single-spaced to recognise the
task, and the corrupted prompt proposed keeps the prompt's own white space, so the model reads the
prompt as typed and the two prompts differ in their key words alone."""

from __future__ import annotations

import pytest

from circuitviz.core.tasks import PromptTask
from circuitviz.query import proposals
from circuitviz.query.families import recognise
from circuitviz.query.families.base import respaced, single_spaced
from circuitviz.query.templates import propose_corruption, template_rewrites


@pytest.mark.parametrize(
    ("typed", "corrupted"),
    [
        ("The capital of\nFrance is", "The capital of\nItaly is"),
        ("  The capital of France is", "  The capital of Italy is"),
        ("The capital of\u00a0France is", "The capital of\u00a0Italy is"),  # said 'extra spaces' of it
        ("Q: What is the capital of Spain?\nA:", "Q: What is the capital of France?\nA:"),
        (
            "When Mary and\tJohn went to the store,  John gave a drink to",
            "When Alice and\tBob went to the store,  Carl gave a drink to",
        ),
    ],
)
def test_white_space_the_templates_do_not_write_is_read_single_spaced_and_kept(words, typed, corrupted):
    found = recognise(typed)  # each was "No corrupted prompt could be proposed" or a swap, no family
    assert found is not None and found.typed == typed
    assert propose_corruption(words, typed) == corrupted
    made, note = proposals.propose_corruption(words, typed, "")
    assert made == corrupted
    assert "reads the prompt's line breaks, tabs and leading, repeated or no-break spaces as single" in note
    assert "the model reads the prompt as typed" in note
    family, rewrites = template_rewrites(PromptTask(typed, corrupted, " x", (" y",)))
    assert family == found.family and next(rewrites)[0]  # the paraphrase methods draw rewrites too


def test_a_prompt_the_templates_read_as_typed_says_nothing_of_spaces(words):
    found = recognise("The capital of France is")
    assert found.typed is None
    assert proposals.propose_corruption(words, "The capital of France is", "")[1] == (
        "Proposed by the factual recall template; edit it freely."
    )


def test_respacing_keeps_each_kept_words_white_space_and_a_replacements_last():
    typed = "The  Eiffel\tTower is located\nin the city of "
    assert single_spaced(typed) == "The Eiffel Tower is located in the city of "
    assert respaced(typed, "The Colosseum is located in the city of ") == (
        "The  Colosseum is located\nin the city of "
    )
    assert respaced("  a  b\nc\td", "a X Y c d") == "  a  X Y\nc\td"
    assert respaced("a  b\nc", "a c") == "a\nc"


# ----- names: the swap list and the sentence when nothing fits -----------------------------------
def test_the_classic_names_are_swapped_where_no_template_recognises_the_prompt(words):
    # Mary and John were missing from the swap list: "holds no name ... they know"
    assert proposals.swap_known_word(words, "Mary gave John a book because") == (
        "Alice gave John a book because",
        "Mary",
        "Alice",
    )
    assert propose_corruption(words, "When Mary and John went to the store, John gave a drink to") == (
        "When Alice and Bob went to the store, Carl gave a drink to"
    )


def test_an_indirect_object_prompt_no_replacement_fits_is_not_told_it_matches_no_template(words, monkeypatch):
    # 'Zoltan' is two of Gemma's tokens: the ABC names never kept the token count, and the note
    # said the prompt "matches no built-in template and holds no name ... they know"
    from circuitviz.query import templates

    monkeypatch.setattr(templates, "propose_corruption", lambda *args, **kwargs: None)
    prompt = "When Zoltan and Priya went to the market, Priya gave a book to"
    corrupted, note = proposals.propose_corruption(words, prompt, "")
    assert corrupted == ""
    assert note == (
        "No corrupted prompt could be proposed: the indirect object identification template recognises the "
        "prompt, but none of its corruptions has the prompt's token count; write it with 'Zoltan' and 'Priya' "
        "replaced by other names of the same token count."
    )


def test_names_the_templates_do_not_know_are_named_in_the_sentence(words):
    corrupted, note = proposals.propose_corruption(words, "Yesterday Zoltan told Xiaoming that", "")
    assert corrupted == "" and "('Zoltan' and 'Xiaoming' are not among them)" in note
    assert note.endswith("write it with the key word replaced, keeping the token count.")
    assert "are not among" not in proposals.propose_corruption(words, "The cat sat on the mat", "")[1]
    repeated = proposals.propose_corruption(words, "Yesterday Zoltan met Zoltan and Zoltan", "")[1]
    assert "('Zoltan' is not among them)" in repeated  # was "'Zoltan' are not among them"
    known = proposals.no_corruption_sentence("Mary smiled", None)  # a known name no swap fits
    assert "no word the templates know to put in place of 'Mary' keeps its token count" in known


# ----- a space typed after the last word -----------------------------------------------------------
def _likely(table):
    return lambda text: table[text]


def test_a_trailing_space_the_model_would_write_with_its_next_word_is_said():
    from circuitviz.entry.spaces import trailing_space_sentence

    prompt = "The capital of France is "  # Gemma proposed the answer '<strong>' (59.6%) after it
    likely = _likely({prompt.rstrip(): [(" Paris", 0.2)], prompt: [("<strong>", 0.6)]})
    assert trailing_space_sentence(prompt, likely) == (
        "The prompt ends in a space, and this model writes a word's space with the word: without it the "
        "most likely next token is ' Paris' (20.0%), with it '<strong>' (60.0%); delete it unless you mean it."
    )
    # a digit after '= ' either way, the word itself after the space, or no space typed: nothing to say
    assert (
        trailing_space_sentence(
            "14 + 23 = ", _likely({"14 + 23 =": [(" ", 0.5)], "14 + 23 = ": [("3", 0.4)]})
        )
        is None
    )
    assert (
        trailing_space_sentence(
            prompt, _likely({prompt.rstrip(): [(" Paris", 0.2)], prompt: [("Paris", 0.3)]})
        )
        is None
    )
    two = _likely({prompt.rstrip(): [(" Paris", 0.2)], prompt + " ": [("<em>", 0.3)]})
    assert "ends in 2 spaces, and" in trailing_space_sentence(prompt + " ", two)
    assert "without them the most likely" in trailing_space_sentence(prompt + " ", two)
    assert trailing_space_sentence("The capital of France is", likely) is None
    assert trailing_space_sentence("   ", likely) is None
    copied = "The capital of France is\n"  # a line copied with its line break: Gemma proposed 'A'
    likely = _likely({copied.rstrip(): [(" Paris", 0.2)], copied: [("A", 0.1)]})
    assert trailing_space_sentence(copied, likely) == (
        "The prompt ends in a line break, which the model reads as part of the prompt: without it the most "
        "likely next token is ' Paris' (20.0%), with it 'A' (10.0%); delete it unless you mean it."
    )
    assert (
        trailing_space_sentence(
            "def f():\n", _likely({"def f():": [("\n", 0.9)], "def f():\n": [(" ", 0.5)]})
        )
        is None
    )


# ----- the loose indirect-object pattern ------------------------------------------------------------
@pytest.mark.parametrize(
    "prompt",
    [
        # read as IOI, answer 'John', corrupted to "When Bob and Alice ..., John gave a drink to Mary. Then Carl"
        "When Mary and John went to the store, John gave a drink to Mary. Then Mary",
        "Mary and John met at the park. John",  # ends in the name: asks what John does, not a name
    ],
)
def test_a_prompt_that_asks_no_name_is_not_read_as_indirect_object_identification(words, prompt):
    found = recognise(prompt)
    assert found is None or found.family != "ioi"
    _, note = proposals.propose_foil(words, prompt, "", " said")
    assert note != "The foil is the other name of the prompt (the repeated subject)."


def test_the_loose_pattern_still_reads_stories_that_ask_a_name():
    for prompt, answer in [
        ("Mary and Tom were at the zoo. Tom threw a peanut to", "Mary"),
        ("After the meeting, Mary and John walked home.\nJohn handed the keys to", "Mary"),
        ("Mary and John went to see Tom. John gave a ball to", "Mary"),
    ]:
        found = recognise(prompt)
        assert (found.family, found.answer) == ("ioi", answer)


@pytest.mark.parametrize(
    ("prompt", "corrupted"),
    [
        # only the first mention was swapped: "Italy is in Europe. The capital of France is", still ' Paris'
        ("France is in Europe. The capital of France is", "Italy is in Europe. The capital of Italy is"),
        # the replacement was a word the prompt held: "Italy and Italy are neighbours ..."
        (
            "France and Italy are neighbours. The capital of France is",
            "Germany and Italy are neighbours. The capital of Germany is",
        ),
    ],
)
def test_a_swapped_word_is_swapped_at_every_mention_for_a_word_the_prompt_lacks(words, prompt, corrupted):
    assert proposals.swap_known_word(words, prompt)[0] == corrupted


def test_discover_says_the_trailing_space_too(capsys, monkeypatch):
    from circuitviz.bench.toy_models import IOI_TASK, tiny_model
    from circuitviz.entry import cli
    from circuitviz.labels import logit_lens

    model = tiny_model("gpt2")
    monkeypatch.setattr(cli, "_load", lambda args: (model, "tiny-gpt2", 0.0))
    clean = IOI_TASK.clean + " "
    likely = {IOI_TASK.clean: [(" Mary", 0.6)], clean: [("<em>", 0.3)]}
    monkeypatch.setattr(logit_lens, "next_token_probabilities", lambda model, text, k: likely[text])
    args = ["discover", "--prompt", clean, "--corrupted", IOI_TASK.corrupted + " ", "--answer", "Mary"]
    cli.main([*args, "--foil", "John", "--method", "eap", "--budgets", "5", "--no-task-check", "--no-cache"])
    assert "The prompt ends in a space, and this model writes a word's space with the word" in (
        capsys.readouterr().err
    )


@pytest.mark.parametrize(
    ("prompt", "names"),
    [
        ("When José and María went to the market, María gave a book to", ("José", "María")),  # a template's
        (
            "When Łukasz and Zoë went to the park, Zoë threw a ball to",
            ("Łukasz", "Zoë"),
        ),  # the loose pattern's
    ],
)
def test_names_with_accents_are_read_as_names(words, prompt, names):
    # unread until 2026-12-06: no family, the foil the model's next likely token, no corrupted prompt
    found = recognise(prompt)
    assert (found.family, found.answer, found.slots["B"]) == ("ioi", *names)
    corrupted = propose_corruption(words, prompt)
    assert corrupted and not any(name in corrupted for name in names)


# ----- spaces that look plain -------------------------------------------------------------------------
def test_no_break_spaces_a_page_pastes_are_said_where_the_model_reads_them_otherwise(embedded_model):
    from circuitviz.entry.spaces import lookalike_spaces_note
    from circuitviz.models.adapter import adapter_of

    def tokens(text):
        return adapter_of(embedded_model).to_tokens(text, on_device=False)[0].tolist()

    # Gemma reads each as its byte tokens '<0xC2>' '<0xA0>', and predicted '<0xC2>' next (73%), unsaid
    prompt = "The\u00a0capital\u00a0of\u00a0France\u2003is"
    assert lookalike_spaces_note(prompt, tokens) == (
        "The prompt holds 4 spaces that are not plain (U+00A0 NO-BREAK SPACE, U+2003 EM SPACE; the first "
        "after 'The', character 4): the text box shows them as a space, but the model reads them as other "
        "tokens; replace them with plain spaces unless you mean them."
    )
    assert lookalike_spaces_note("The capital of France is", tokens) is None
    assert lookalike_spaces_note("東京\u3000は", tokens) is None  # how Japanese is written
    # a tokenizer that reads a no-break space as a space: nothing to say
    assert (
        lookalike_spaces_note(prompt, lambda text: text.replace("\u00a0", " ").replace("\u2003", " ")) is None
    )


def test_a_byte_token_is_never_the_proposed_foil(embedded_model, monkeypatch):
    # after a prompt pasted with no-break spaces, Gemma's likeliest token on the corruption was '<0xC2>':
    # proposed as the foil, the box refused it at once ("names a byte of a character")
    from circuitviz.labels import logit_lens

    likely = [("<0xC2>", 0.4), (" Rome", 0.2), (" the", 0.1)]
    monkeypatch.setattr(logit_lens, "next_token_probabilities", lambda model, text, k: likely)
    foil, _ = proposals.propose_foil(
        embedded_model, "The capital\u00a0of France is", "The capital\u00a0of Italy is", " Paris"
    )
    assert foil == " Rome"
    made = proposals.proposal_for(embedded_model, "x y", " Paris", ["<0xC2>", " the"], corrupted="")
    assert made.foil == " the"  # nothing after an empty corrupted prompt: the likeliest one-token other


def test_a_bare_space_the_model_writes_apart_is_said_with_the_prompt_that_asks_past_it():
    from circuitviz.entry.spaces import trailing_space_sentence

    # Gemma writes ' 37' as ' ', '3', '7': "14 + 23 =" proposed the answer ' ' (69.1%), a circuit for a space
    likely = _likely({"14 + 23 =": [(" ", 0.691)], "14 + 23 = ": [("3", 0.514)]})
    assert trailing_space_sentence("14 + 23 =", likely) == (
        "The model's most likely next token is a space alone (69.1%), which it writes apart from what follows: "
        "end the prompt with a space to ask for that (then its most likely next token is '3', 51.4%), or keep "
        "the space as the answer if you mean it."
    )
    words = _likely({"The capital of France is": [(" Paris", 0.2)]})
    assert trailing_space_sentence("The capital of France is", words) is None  # a word with its space
    lines = _likely({"Total:": [("\n", 0.5)]})
    assert trailing_space_sentence("Total:", lines) is None  # a line break is no bare space
    spaced = _likely({"x =": [(" ", 0.5)], "x = ": [(" y", 0.3)]})
    assert trailing_space_sentence("x =", spaced) is None  # what follows brings its own space


def test_a_pill_of_several_spaces_does_not_read_as_one_space():
    from circuitviz.core.text import token_label

    # the page collapsed Gemma's '  ' to "' ' 0.8%", beside "' ' 69.1%" for ' ' after "14 + 23 ="
    assert token_label("  ") == "\u2068'␣␣' (2 spaces)\u2069"
    assert token_label(" ") == "\u2068' '\u2069" and token_label(" Paris") == "\u2068' Paris'\u2069"
