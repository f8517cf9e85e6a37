"""A token's text as the app names it: one byte-fallback token of a SentencePiece vocabulary
(Gemma's '<0xE2>', a piece of a character split over several tokens) as its piece, since decoded
alone it is U+FFFD and two different bytes read the same ("answers 'U+FFFD', not its original
answer ('U+FFFD')", until 2026-12-06); several ids, and every other token, as the tokenizer
decodes them.

``token_pieces`` is a text as the model's tokens read it, each token's own text: a tokenizer whose
tokens carry no space (a word-level one splitting on spaces) reads ' Mary' as 'Mary', and the
app showed the answer's token as '·Mary' (a leading space marked) where the token has none.

A SentencePiece token marks its leading space '▁' ('▁Mary'): read alone it is ' Mary', as
byte-level BPE's 'ĠMary' is, and the chips draw that space '·'. Some tokenizers decode one such
token otherwise: one saved with no decoder gave '▁Mary' (the chips read '▁Mary' beside '·Mary' for
the same space), and one whose decoder drops the first space of a text (Llama's, or Metaspace's
'always') gave 'Mary', a space the token has, unsaid. A byte-level BPE tokenizer saved with no
decoder gave its tokens' byte alphabet ('ĠMary', and 'When ĠMary' for two): its tokens are read
through the byte-level decoder, ' Mary' as a tokenizer with its decoder reads them.

``leading_spaces`` says which of the two conventions a model's tokenizer follows, for the boxes'
labels: whether a word's token carries the space before it."""

from __future__ import annotations

import codecs
import functools
import re

BYTE_PIECE = re.compile(r"<0x[0-9A-Fa-f]{2}>")  # SentencePiece's byte-fallback tokens
SPACE_MARK = "\u2581"  # '▁': SentencePiece's mark of a space inside a token
PROBES = (" the", " a", " I")  # words to ask a tokenizer whether a word's token keeps its space


def token_text(tokenizer, ids) -> str:
    """The text of ``ids`` (a list of token ids) by ``tokenizer``, a lone byte token as its piece (a
    byte-level token that is part of a character with its bytes named, ``byte_level_piece``),
    a lone token marking its space '▁' with that space (``spaced_piece``), a byte-level token of a
    tokenizer with no decoder ('ĠMary') as its bytes read (``byte_level_text``)."""
    text = byte_level_text(tokenizer, ids)
    if text is None:
        text = tokenizer.decode(ids)
    if len(ids) != 1:
        return text
    convert = getattr(tokenizer, "convert_ids_to_tokens", None)
    piece = convert(int(ids[0])) if convert is not None else None
    if not isinstance(piece, str):
        return text
    if "\ufffd" in text and BYTE_PIECE.fullmatch(piece):
        return piece
    if "\ufffd" in text and byte_level(tokenizer):
        return byte_level_piece(piece, text)
    return spaced_piece(piece, text)


def byte_level_piece(piece: str, text: str) -> str:
    """A byte-level token that is part of a character (SmolLM2's 'Ġæ', 'Ĺ' and '¥' of ' 日'), its
    text with each byte that is no character alone written as Gemma's byte tokens are named, '<0xE6>':
    decoded alone each is U+FFFD, and three different tokens read ' �', '�' and '�'. ``text`` as
    it is where the piece is not all of the byte alphabet (an added token)."""
    codes = _byte_codes()
    if not piece or any(char not in codes for char in piece):
        return text
    return bytes(codes[char] for char in piece).decode("utf-8", errors=_BYTE_NAMES)


_BYTE_NAMES = "circuitviz-byte-names"
codecs.register_error(
    _BYTE_NAMES,
    lambda error: ("".join(f"<0x{b:02X}>" for b in error.object[error.start : error.end]), error.end),
)


@functools.cache
def _byte_codes() -> dict[str, int]:
    """Byte-level BPE's alphabet: the character standing for each byte (GPT-2's ``bytes_to_unicode``:
    printable bytes as themselves, the others from U+0100 on, the space 'Ġ'), read back to the byte."""
    kept = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = {}, 0
    for byte in range(256):
        if byte in kept:
            chars[chr(byte)] = byte
        else:
            chars[chr(256 + extra)] = byte
            extra += 1
    return chars


def byte_level_text(tokenizer, ids) -> str | None:
    """The text of ``ids`` by a byte-level BPE tokenizer that has no decoder, read through the
    byte-level decoder ('ĠMary' -> ' Mary', 'Ã©' -> 'é'); None for any other tokenizer (one
    with a decoder decodes its own tokens)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or backend.decoder is not None or not byte_level(tokenizer):
        return None
    from tokenizers import decoders

    return decoders.ByteLevel().decode(tokenizer.convert_ids_to_tokens([int(i) for i in ids]))


def byte_level(tokenizer) -> bool:
    """Whether ``tokenizer`` is byte-level BPE: its pre-tokenizer byte-level, alone or in a sequence."""
    from tokenizers import pre_tokenizers

    pre_tokenizer = getattr(getattr(tokenizer, "backend_tokenizer", None), "pre_tokenizer", None)
    if isinstance(pre_tokenizer, pre_tokenizers.ByteLevel):
        return True
    if isinstance(pre_tokenizer, pre_tokenizers.Sequence):
        return "ByteLevel(" in repr(pre_tokenizer)  # its members (indexing it is recent)
    return False


def spaced_piece(piece: str, text: str) -> str:
    """A SentencePiece token's text: ``text`` (its decoding alone) with each space its ``piece``
    marks '▁' given back where the decoder left the mark ('▁Mary', no decoder) or dropped the first
    space ('Mary', a decoder that strips a text's leading space); any other ``text`` as it is."""
    if SPACE_MARK not in piece:
        return text
    spaced = piece.replace(SPACE_MARK, " ")
    if text == piece or (piece.startswith(SPACE_MARK) and text == spaced[1:]):
        return spaced
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


def leading_spaces(adapter) -> bool | None:
    """Whether the model's tokens carry the space before a word: True where ' the' is one token
    ' the' (byte-level BPE, SentencePiece), False where it is 'the' (a word-level tokenizer splitting
    on spaces), None where neither tells (' the' two tokens, or unknown, for each of ``PROBES``)."""
    for probe in PROBES:
        pieces = token_pieces(adapter, probe)
        if pieces == [probe]:
            return True
        if pieces == [probe.strip()]:
            return False
    return None
