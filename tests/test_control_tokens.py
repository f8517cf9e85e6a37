"""Control tokens are neither offered nor taken as a run's answer or foil (``models.control_tokens``).

Gemma-3-270M's likely next tokens after 'Here is the photo:' hold '<start_of_image>' (19.3%), and
SmolLM2-135M's after 'Thank you.' hold '<|im_end|>' (11.0%): both were offered as the answer and the
foil. Gemma's tokenizer marks '<start_of_image>' as it marks '<strong>' (an added token, not special,
matched whole), so the names cannot tell them; the tests run the models' real tokenizers.
"""

import pytest

from circuitviz.core.tasks import TaskError, single_token_id
from circuitviz.core.text import left_out_sentence


@pytest.fixture(scope="module")
def smollm2():
    from circuitviz.models import load_model
    from circuitviz.models.catalog import SMOLLM2_MODEL

    return load_model(SMOLLM2_MODEL, device="cpu")


GEMMA_CONTROLS = ["<start_of_image>", "<end_of_image>", "<start_of_turn>", "<end_of_turn>", "<eos>", "<pad>"]
GEMMA_CONTROLS += ["<mask>", "<bos>", "<unused0>", "[multimodal]"]  # the last: Gemma's reserved marker, id 5
SMOLLM2_CONTROLS = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<repo_name>", "<file_sep>"]
TEXT = ["<strong>", "</strong>", "<table>", "<b>", "\n", "\n\n", " The", " Paris"]  # tokens of text


def test_gemma_control_tokens_are_told_from_markup(embedded_model):
    from circuitviz.models.control_tokens import control_token_texts

    controls = control_token_texts(embedded_model)
    assert set(GEMMA_CONTROLS) <= controls
    assert not set(TEXT) & controls


@pytest.mark.embedded
def test_smollm2_control_tokens(smollm2):
    from circuitviz.models.control_tokens import control_token_texts

    controls = control_token_texts(smollm2)
    assert set(SMOLLM2_CONTROLS) <= controls
    assert not set(TEXT) & controls


def test_choices_leave_out_gemmas_image_marker_and_say_why(embedded_model):
    from circuitviz.labels.logit_lens import next_token_probabilities
    from circuitviz.query.proposals import left_out_line, offered_tokens, propose

    top = next_token_probabilities(embedded_model, "Here is the photo:", 8)
    probability = dict(top)
    tokens = [token for token, _ in top]
    assert "<start_of_image>" in tokens
    offered, left_out = offered_tokens(embedded_model, tokens)
    assert "<start_of_image>" not in offered and left_out == ["<start_of_image>"]
    line = left_out_line(embedded_model, left_out, probability)
    chance = f"{probability['<start_of_image>']:.1%}"
    assert line.startswith(
        f"Not offered: \u2068'<start_of_image>'\u2069 {chance}: it is the model's control token"
    )
    assert "not text" in line
    assert offered_tokens(embedded_model, ["<strong>", "<eos>", " The"]) == (["<strong>", " The"], ["<eos>"])
    proposal = propose(embedded_model, "Here is the photo:", tokens)
    assert "<start_of_image>" not in (proposal.answer, proposal.foil)


@pytest.mark.embedded
def test_choices_leave_out_smollm2s_end_of_turn(smollm2):
    from circuitviz.query.proposals import offered_tokens

    after = ["\n", " I", "<|im_end|>", " She"]  # its likeliest next tokens after 'Thank you.'
    assert offered_tokens(smollm2, after) == (["\n", " I", " She"], ["<|im_end|>"])


def test_a_typed_control_token_gets_one_sentence(embedded_model, smollm2):
    for model, name in (
        (embedded_model, "<start_of_image>"),
        (embedded_model, "<eos>"),
        (embedded_model, "[multimodal]"),  # taken as text until 2026-12-07
        (smollm2, "<|im_end|>"),
    ):
        with pytest.raises(TaskError) as caught:
            single_token_id(model, name, "answer")
        assert "names a control token of this model" in str(caught.value)
    assert single_token_id(embedded_model, "<strong>", "foil") == 198  # markup is text


def test_left_out_sentence_names_both_reasons():
    probability = {" <0xE5>": 0.249, "<eos>": 0.05}
    both = left_out_sentence([" <0xE5>"], probability, ["<eos>"])
    assert both == (
        "Not offered: \u2068' <0xE5>'\u2069 24.9%: typed into a box, each reads as several tokens (a byte of a "
        "character has no text of its own); \u2068'<eos>'\u2069 5.0%: it is the model's control token (marking "
        "a turn, an image or the end of a text), not text. A run's answer and foil are one token of text each."
    )


def test_a_control_token_is_never_the_proposed_foil(embedded_model):
    # Gemma's likeliest token after "the capital of italy is" is '<start_of_image>' (13.9%): proposed
    # as the foil of ' paris', the foil box refused it as not text
    from circuitviz.query.proposals import proposal_for, propose_foil

    foil, _ = propose_foil(embedded_model, "the capital of france is", "the capital of italy is", " paris")
    # the content word the corruption leads to (``query.foils``), not the control token
    assert foil == " rome"
    made = proposal_for(embedded_model, "x y", " paris", ["<start_of_image>", " the"], corrupted="")
    assert made.foil == " the"  # nothing after an empty corrupted prompt: the likeliest text token
