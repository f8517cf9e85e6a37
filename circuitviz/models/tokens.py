"""A token's text as the app names it: one byte-fallback token of a SentencePiece vocabulary
(Gemma's '<0xE2>', a piece of a character split over several tokens) as its piece, since decoded
alone it is U+FFFD and two different bytes read the same ("answers 'U+FFFD', not its original
answer ('U+FFFD')", until 2026-12-06); several ids, and every other token, as the tokenizer
decodes them.

``token_pieces`` is a text as the model's tokens read it, each token's own text: a tokenizer whose
tokens carry no space (a word-level one splitting on spaces) reads ' Mary' as 'Mary', and the
app showed the answer's token as '·Mary' (a leading space marked) where the token has none."""

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


def token_pieces(adapter, text: str) -> list[str]:
    """``text`` as the model reads it: each of its tokens' own text (``token_text``, what the
    prompt's chips show), no <bos>. A tokenizer whose tokens carry their leading space (byte-level
    BPE's 'ĠMary') gives [' Mary'] for ' Mary'; one that splits words on spaces gives ['Mary']."""
    ids = adapter.to_tokens(text, prepend_bos=False, truncate=False, on_device=False)[0].tolist()
    return [adapter.decode([int(token)]) for token in ids]


def own_text(adapter, text: str) -> str:
    """``text`` as the model's tokens read it: ``token_pieces`` joined (' Mary' on a word-level
    tokenizer: 'Mary', the text of the model's likely token it is)."""
    return "".join(token_pieces(adapter, text))
