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
