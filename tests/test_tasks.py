"""Task validation: each mistake a user can make ends in one sentence that says the fix."""

import pytest
from sentences import assert_one_sentence

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.core.tasks import PromptTask, TaskError, prepare_task


@pytest.fixture(scope="module")
def model():
    return tiny_model("gpt2")


def check(model, fragment, **changes):
    fields = {**IOI_TASK.to_dict(), **changes}
    with pytest.raises(TaskError, match=fragment) as info:
        prepare_task(model, PromptTask.from_dict(fields), max_tokens=changes.pop("max_tokens", 256))
    message = str(info.value)
    assert_one_sentence(message)
    return message


def test_a_good_task_prepares(model):
    prepared = prepare_task(model, IOI_TASK)
    assert prepared.clean_tokens.shape == prepared.corrupted_tokens.shape
    assert prepared.clean_str_tokens[0] == "<bos>"
    assert model.to_single_str_token(prepared.answer_id) == "Mary"


def test_empty_prompt(model):
    check(model, "prompt is empty", clean="")
    # a prompt of spaces or line breaks was told it is empty, which it is not, to the eye of its typist
    check(model, "prompt is empty or only white space", clean=" \n\t ")


def test_prompt_over_the_limit_names_the_limit(model):
    with pytest.raises(TaskError, match="over the limit of 5"):
        prepare_task(model, IOI_TASK, max_tokens=5)


def test_unequal_lengths_name_where_the_tokenisations_part(model):
    message = check(
        model,
        "has 15 tokens and the corrupted prompt 14",
        corrupted="When Alice and Bob went to the store , gave a drink to",
    )
    # <bos> and 'When' agree; the third token is the first that differs
    assert "they part at token 3: 'Mary' vs 'Alice'" in message
    shorter = check(model, "corrupted prompt 3", corrupted="When Mary")
    assert "they part at token 4: 'and' vs nothing" in shorter


def test_multi_token_answer_shows_the_split(model):
    message = check(model, "is 2 tokens", answer=" Mary John")
    assert "'Mary' | 'John'" in message and "such as 'Mary'" in message


def test_multi_token_answer_says_its_count_once_and_lists_a_few_tokens_whole(model):
    message = check(model, "is 5 tokens", answer=" Mary John went to the")
    assert message.count("tokens") == 1 and "'Mary' | 'John' | 'went' | 'to' | 'the')" in message
    assert "…" not in message


def test_multi_token_answer_of_many_tokens_says_how_many_more(model):
    answer = " Mary John and Mary went to the store then John gave a drink to Mary"
    message = check(model, "is 15 tokens", answer=answer)
    assert message.count("15") == 1 and "'store' | … and 7 more)" in message


def test_answer_equal_to_foil(model):
    check(model, "also given as a foil", foils=[" Mary"])


def test_logit_difference_needs_a_foil_but_logprob_does_not(model):
    check(model, "needs at least one foil", foils=[])
    prepare_task(model, PromptTask.from_dict({**IOI_TASK.to_dict(), "foils": [], "metric": "logprob"}))


def test_empty_corrupted_prompt(model):
    check(model, "corrupted prompt is empty", corrupted="")


def test_unknown_metric(model):
    check(model, "Unknown metric", metric="accuracy")


def test_an_empty_foil_is_asked_for_as_a_wrong_answer(model):
    # 'discover --foil ""' was asked for "the token the model should predict", the answer's wording
    message = check(model, "foil is empty", foils=[""])
    assert "should predict" not in message
    assert "wrong answer" in message
    assert "should predict" in check(model, "answer is empty", answer="")


def test_a_byte_tokens_name_is_refused_without_a_first_piece_to_try(embedded_model):
    """A byte of a character (' <0xE5>', SmolLM2's likeliest token after "The capital of 日本 is";
    Gemma's '<0xE2>') typed or linked as the answer was told "use a single token such as ' <'", a
    piece that means nothing here: the sentence says what the name is and asks for an answer."""
    for answer in (" <0xE5>", "<0xE2>"):
        message = check(embedded_model, "names a byte of a character", answer=answer)
        assert "such as" not in message and "the token the model should predict" in message
    assert "such as" in check(embedded_model, "tokens", answer=" <0xE5> Paris")  # not a byte's name alone


@pytest.mark.parametrize(
    ("answer", "instead"),
    [
        ("  Paris", "' Paris'"),  # was told "use a single token such as '␣␣' (2 spaces)"
        ("\tParis", "' Paris'"),  # was told to use '\t'
        ("Paris\n", "'Paris' (or ' Paris', one token with its leading space)"),
        (" Paris ", "' Paris'"),
    ],
)
def test_white_space_typed_around_an_answer_is_named_and_the_word_offered(embedded_model, answer, instead):
    message = check(
        embedded_model, "white space typed around the word is read as tokens of its own", answer=answer
    )
    assert message.endswith(f"; use {instead}.")


def test_a_first_piece_of_white_space_is_not_offered(embedded_model):
    message = check(embedded_model, "is 2 tokens", answer=" 🍕")  # ' ' | '🍕': it offered ' '
    assert message.endswith("use a single token such as '🍕'.")


def test_a_character_the_model_has_no_token_for_is_not_offered_a_byte(embedded_model):
    # Gemma reads the hieroglyph as 4 byte tokens: it was told "use a single token such as '<0xF0>'",
    # a name that typed is several tokens (SmolLM2 offered ' <0xF0><0x9F>' for ' 🍕')
    for answer in ("𓀀", " 𓀀"):
        message = check(embedded_model, "this model has no token for it", answer=answer)
        assert "such as" not in message and message.endswith(
            "give the token the model should predict, e.g. ' Mary'."
        )
