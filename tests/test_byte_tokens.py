"""A byte-fallback token of a SentencePiece vocabulary (Gemma's '<0xF0>') reads as its piece: decoded
alone it is U+FFFD, so a sentence naming two different such tokens read "'\ufffd' ... ('\ufffd')" (found
by the command-line audit on Gemma 3, whose rare characters split into byte tokens)."""

from circuitviz.models.tokens import token_text


class _Pieces:
    """A tokenizer whose ids 1-3 are byte pieces and 4 a word (as Gemma's: '<0xF0>' decodes to U+FFFD)."""

    pieces = {1: "<0xF0>", 2: "<0x9F>", 3: "<0xE2>", 4: "▁Paris", 5: "<unused>"}

    def decode(self, ids):
        return "".join(" Paris" if i == 4 else "\ufffd" for i in ids)

    def convert_ids_to_tokens(self, token_id):
        return self.pieces[token_id]


def _decode(ids):
    return token_text(_Pieces(), ids)


def test_one_byte_token_reads_as_its_piece():
    assert [_decode([i]) for i in (1, 2, 3)] == ["<0xF0>", "<0x9F>", "<0xE2>"]  # distinct, as they are


def test_other_tokens_and_several_ids_decode_as_the_tokenizer_does():
    assert _decode([4]) == " Paris"
    assert _decode([5]) == "\ufffd"  # not a byte piece: the tokenizer's text
    assert _decode([1, 2]) == "\ufffd\ufffd"  # several ids: their text together


def test_the_adapters_decode_names_a_byte_token_by_its_piece():
    from types import SimpleNamespace

    from circuitviz.models.base_adapter import ModelAdapter

    assert ModelAdapter.decode(SimpleNamespace(tokenizer=_Pieces()), [3]) == "<0xE2>"


def _byte_level(decoder: bool):
    """A byte-level BPE tokenizer trained in a moment on text without '日' (its bytes stay single
    tokens), with GPT-2's decoder or none."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    backend.train_from_iterator(["When Mary went to the café"] * 20, trainer)
    if decoder:
        backend.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=backend)


def test_a_byte_level_token_that_is_part_of_a_character_names_its_bytes():
    """SmolLM2's ' 日' is three tokens ('Ġæ', 'Ĺ', '¥'), each decoded alone U+FFFD: they read ' �',
    '�', '�', three different tokens the same. Each byte that is no character alone is named as
    Gemma's byte tokens are; whole characters and several ids read as the tokenizer decodes them."""
    from circuitviz.models.tokens import byte_level_piece

    for decoder in (True, False):
        tokenizer = _byte_level(decoder)
        ids = tokenizer(" 日 café", add_special_tokens=False).input_ids
        texts = [token_text(tokenizer, [i]) for i in ids]
        assert texts[:4] == [" ", "<0xE6>", "<0x97>", "<0xA5>"], (decoder, texts)
        assert "\ufffd" not in "".join(texts) and "é" in "".join(texts)
        assert token_text(tokenizer, ids) == " 日 café"  # several ids: the text
    assert byte_level_piece("\u0120\u00e6", " \ufffd") == " <0xE6>"  # 'Ġæ': its space, then the byte
    assert (
        byte_level_piece("<|endoftext|>\u2603", "x\ufffd") == "x\ufffd"
    )  # not the byte alphabet: as decoded


def test_a_token_whose_text_is_no_single_token_is_not_proposed(words):
    """SmolLM2's likeliest token after "The capital of 日本 is" is a byte of a Chinese character,
    ' <0xE5>': proposed as the answer, the box held text of 6 tokens and refused it at once. Only
    tokens whose text is one token again are proposed ("Mary John" stands for such a text here)."""
    from circuitviz.bench.toy_models import IOI_TASK
    from circuitviz.query.proposals import propose

    prompt = IOI_TASK.clean.replace(" to", "")
    proposal = propose(words, prompt, ["Mary John", "Mary", "John"])
    assert proposal.answer in ("Mary", "John") and proposal.foil != "Mary John"
    assert propose(words, prompt, ["Mary John"]).answer == "Mary John"  # none is: as before


def test_the_choices_leave_out_a_token_no_box_can_hold_and_say_so(words):
    """A byte of a character among the likely next tokens (SmolLM2's ' <0xE5>' after "The capital of
    日本 is") was offered as a choice: clicked, the answer box refused its name as 6 tokens. The
    choices offer the tokens whose text is one token again and name the others in one line ("Mary
    John" stands for such a text here); where none is one token, all are offered."""
    from circuitviz.core.text import left_out_sentence
    from circuitviz.query.proposals import offered_tokens

    assert offered_tokens(words, ["Mary John", "Mary", "John"]) == (["Mary", "John"], ["Mary John"])
    assert offered_tokens(words, ["Mary", "John"]) == (["Mary", "John"], [])
    assert offered_tokens(words, ["Mary John"]) == (["Mary John"], [])  # never no choice at all
    sentence = left_out_sentence([" <0xE5>", " <0xE7>"], {" <0xE5>": 0.249, " <0xE7>": 0.198})
    assert sentence.startswith("Not offered: \u2068' <0xE5>'\u2069 24.9%, \u2068' <0xE7>'\u2069 19.8%.")
    assert "a run's answer and foil are one token each" in sentence
