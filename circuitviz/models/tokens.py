"""A token's text as the app names it: one byte-fallback token of a SentencePiece vocabulary
(Gemma's '<0xE2>', a piece of a character split over several tokens) as its piece, since decoded
alone it is U+FFFD and two different bytes read the same ("answers 'U+FFFD', not its original
answer ('U+FFFD')", until 2026-12-06); several ids, and every other token, as the tokenizer
decodes them."""

from __future__ import annotations

import re

BYTE_PIECE = re.compile(r"<0x[0-9A-Fa-f]{2}>")  # SentencePiece's byte-fallback tokens


def token_text(tokenizer, ids) -> str:
    """The text of ``ids`` (a list of token ids) by ``tokenizer``, a lone byte token as its piece."""
    text = tokenizer.decode(ids)
    if "\ufffd" in text and len(ids) == 1:
        piece = tokenizer.convert_ids_to_tokens(int(ids[0]))
        if isinstance(piece, str) and BYTE_PIECE.fullmatch(piece):
            return piece
    return text
