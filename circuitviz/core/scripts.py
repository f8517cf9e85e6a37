"""Characters of scripts many fonts lack, named after them: a browser on a machine without those
fonts draws each as an empty box ('日本の首都は' was six boxes on the Signals page in Chromium), so a
token is written with its script's name beside it ('ことなく [Hiragana ×4]'); a reader whose fonts
draw them still reads the characters themselves. The Steer page's labels, the Signals page's tables,
its decision picker and its cards' lines use it."""

from __future__ import annotations

# Scripts whose glyphs the fonts of many Latin-script systems lack (a browser there draws each of
# their characters as an empty box: the Gemma vocabulary's CJK, Hangul, Indic and Thai tokens among the
# embedded SAEs' top promoted tokens): {(first, last code point): the script's name}
FONTLESS = {
    (0x0700, 0x074F): "Syriac",
    (0x0780, 0x07BF): "Thaana",
    (0x0900, 0x097F): "Devanagari",
    (0x0980, 0x09FF): "Bengali",
    (0x0A00, 0x0A7F): "Gurmukhi",
    (0x0A80, 0x0AFF): "Gujarati",
    (0x0B00, 0x0B7F): "Oriya",
    (0x0B80, 0x0BFF): "Tamil",
    (0x0C00, 0x0C7F): "Telugu",
    (0x0C80, 0x0CFF): "Kannada",
    (0x0D00, 0x0D7F): "Malayalam",
    (0x0D80, 0x0DFF): "Sinhala",
    (0x0E00, 0x0E7F): "Thai",
    (0x0F00, 0x0FFF): "Tibetan",
    (0x1000, 0x109F): "Myanmar",
    (0x1100, 0x11FF): "Hangul",
    (0x1200, 0x139F): "Ethiopic",
    (0x13A0, 0x13FF): "Cherokee",
    (0x1780, 0x17FF): "Khmer",
    (0x1800, 0x18AF): "Mongolian",
    (0x1950, 0x19DF): "Tai",
    (0x1A20, 0x1AAF): "Tai Tham",
    (0x1B00, 0x1B7F): "Balinese",
    (0x1B80, 0x1BBF): "Sundanese",
    (0x1BC0, 0x1BFF): "Batak",
    (0x1C50, 0x1C7F): "Ol Chiki",
    (0x2E80, 0x303F): "CJK",
    (0x3040, 0x309F): "Hiragana",
    (0x30A0, 0x30FF): "Katakana",
    (0x3100, 0x312F): "Bopomofo",
    (0x3130, 0x318F): "Hangul",
    (0x3190, 0x9FFF): "CJK",
    (0xA000, 0xA4CF): "Yi",
    (0xA960, 0xA97F): "Hangul",
    (0xA980, 0xA9DF): "Javanese",
    (0xAA80, 0xAADF): "Tai Viet",
    (0xABC0, 0xABFF): "Meetei Mayek",
    (0xAC00, 0xD7FF): "Hangul",
    (0xF900, 0xFAFF): "CJK",
    (0xFF00, 0xFFEF): "fullwidth",
    (0x20000, 0x3FFFF): "CJK",
}
FONTLESS_HELP = (
    "characters of scripts many fonts lack (CJK, Hangul, Indic, Thai, ...) are followed by their "
    "script's name in brackets, with how many there are: 'ことなく [Hiragana ×4]' is four Hiragana "
    "characters, named so where the browser draws them as empty boxes"
)


def script_of(character: str) -> str | None:
    """The script of ``character`` when it is one of ``FONTLESS``'s, else None."""
    point = ord(character)
    return next((name for (first, last), name in FONTLESS.items() if first <= point <= last), None)


def _names(scripts: list[str]) -> str:
    """'[Hiragana ×4]' for four Hiragana characters; '[CJK, Hiragana]' for a kanji then a kana."""
    counted: list[list] = []
    for script in scripts:
        if counted and counted[-1][0] == script:
            counted[-1][1] += 1
        else:
            counted.append([script, 1])
    return "[" + ", ".join(f"{name}{f' ×{count}' if count > 1 else ''}" for name, count in counted) + "]"


def script_names(text: str) -> str:
    """The names of ``text``'s characters of ``FONTLESS`` scripts, in order ('[CJK ×2, Hiragana]'
    for '日本の'), or '' when it has none: for a cell that must keep its end in view, where
    ``readable`` would put the names inside it."""
    scripts = [name for name in map(script_of, text) if name is not None]
    return _names(scripts) if scripts else ""


def readable(text: str) -> str:
    """``text`` with each run of characters of ``FONTLESS`` scripts kept and followed by their
    names and counts ('ことなく' is 'ことなく [Hiragana ×4]'): the Steer page's labels quote a
    feature's top tokens, and Chromium on a machine without CJK fonts drew '蜍' and 'ことなく' as
    empty boxes; a reader whose fonts draw them still reads the characters themselves."""
    pieces: list[str] = []
    scripts: list[str] = []
    for character in text + "\0":  # a sentinel that closes the last run
        script = script_of(character)
        if script is None and scripts:
            pieces.append(f" {_names(scripts)}")
            scripts = []
        if script is not None:
            scripts.append(script)
        pieces.append(character)
    return "".join(pieces)[:-1]
