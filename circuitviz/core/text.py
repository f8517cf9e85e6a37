"""Small text helpers every layer shares: a user's text quoted for a sentence, numbers read from
text, durations in words, text made safe for markdown. Standard library only (no torch), so the
model loader, the limits and the app's first paint import it freely.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence


def shown(text: str, limit: int = 60) -> str:
    """A user's text quoted for an error sentence: repr, cut at ``limit`` characters with the
    full length named, so a 100 kB paste never becomes a 100 kB message. The cut applies to the
    quoted form, so text of control characters (4 characters each in a repr) stays short too. A
    text the cut would not shorten is quoted whole (a 61-character paraphrase read "'When John and
    Mary went to the library, John gave a flower t'… (61 characters)")."""
    quoted = repr(text)
    cut = f"{quoted[: limit + 1]}{quoted[0]}… ({len(text):,} characters)"
    return quoted if len(quoted) <= len(cut) else cut


def shown_token(token: str, limit: int = 20) -> str:
    """A token (an answer, a foil, the model's next token) quoted for a sentence as ``shown``
    quotes it, its spaces made visible where a page would collapse them: in a token with a run of
    two or more spaces each space reads '␣' and their count is said ("'␣␣␣' (3 spaces)"),
    since HTML shows "'   '" as "' '"; a token that begins with a combining mark (a byte-level
    piece of ' Jo̶hn') writes the mark as its code, "'\\u0336'": drawn, it sat on the opening
    quote ("' Jo' | '̶' | 'hn'"); any other token as ``shown`` quotes it."""
    token = str(token)
    marks = len(token) - len(token.lstrip("".join(c for c in token if unicodedata.combining(c))))
    if marks:
        quoted = shown_token(token[marks:], limit)
        return quoted[0] + "".join(f"\\u{ord(c):04x}" for c in token[:marks]) + quoted[1:]
    if "  " not in token:
        return shown(token, limit)
    return f"{shown(token.replace(' ', '␣'), limit)} ({counted(token.count(' '), 'space')})"


def read_token(token: str, limit: int = 30) -> str:
    """A token (an answer, a foil) as a reader reads it in a title or a heading: its word in
    double quotes, the spaces around it left out (' Mary' reads "Mary": titles and the demo's
    heading read "' Mary'", the token's own leading space drawn as part of the word). A token of
    spaces alone, or one holding a control or format character, is quoted as ``shown_token``
    quotes it (its spaces said, the character as its code); where the exact token matters (its
    chip, the sentences, a table of tokens) the token is shown as it is."""
    words = " ".join(str(token).split())
    if not words or any(unicodedata.category(c)[0] == "C" for c in words):
        return shown_token(token, limit)
    return f'"{words[:limit]}…"' if len(words) > limit else f'"{words}"'


def title_quoted(text: str) -> str:
    """A prompt quoted for a title as the headings quote it, in double quotes, with what a repr
    escapes escaped: line breaks, control and format characters as their codes (a U+202E would
    turn the rest of the title round), a double quote and a backslash with a backslash. Graph titles
    quoted the prompt by its repr, 'When Mary ... to', beside the answer's "Mary"."""
    body = json.dumps(str(text), ensure_ascii=False)[1:-1]
    return '"' + "".join(c if c.isprintable() else repr(c)[1:-1] for c in body) + '"'


def possessive(label: str) -> str:
    """A method's label made possessive without its bracketed gloss: "Edge Pruning's" for "Edge
    Pruning (learned masks)", which read "Edge Pruning (learned masks)'s own score" before an
    audience (demo mode on the Gallery, 2026-12-06)."""
    name = str(label).split(" (", 1)[0].strip() or str(label)
    return f"{name}'" if name.endswith("s") and not name.endswith("ss") else f"{name}'s"


def given(value, limit: int = 40) -> str:
    """A value the user gave (a setting from a form, a link or the command line), quoted for a
    sentence: text as ``shown`` quotes it, anything else by its repr, each cut at ``limit``
    characters with the full length named."""
    if isinstance(value, str):
        return shown(value, limit)
    return cut(repr(value), limit, keep=limit + 2)


def json_given(value, limit: int = 40) -> str:
    """A value read from a JSON file, quoted as the file writes it (null, true, "x"), cut at
    ``limit`` characters with the full length named: a cfg.json's null read as Python's None."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return cut(text, limit, keep=limit + 2)


def cut(text: str, limit: int, keep: int | None = None) -> str:
    """``text`` whole when it is at most ``keep`` characters (``limit`` when None), else its first
    ``limit`` with the full length named: '…' and '(3,002 characters)'."""
    return (
        text
        if len(text) <= (limit if keep is None else keep)
        else f"{text[:limit]}… ({len(text):,} characters)"
    )


def after_colon(text: str) -> str:
    """A sentence of ours to follow a colon inside another ("The held-out measurement: fewer than
    5 ...", where it read "The held-out measurement: Fewer than 5 ..."): its first letter lower
    case when its first word is an ordinary capitalised word, left as it is when that word is an
    acronym or a name with more than one capital or a digit ("NDF", "OpenAI", "Gemma-3"), a
    number or a quotation. Our own sentences only: a name such as "Mary" is not told apart."""
    found = re.match(r"[^\W\d_]+(?![\w-])", text)  # the first word, whole ("Gemma-3" is not "Gemma")
    word = found.group(0) if found else ""
    if word[:1].isupper() and (word[1:].islower() or word == "A"):  # "I" stays
        return word[0].lower() + text[1:]
    return text


def first_sentence(error: BaseException, limit: int = 120) -> str:
    """The first sentence of an exception's first line, cut at ``limit`` characters, to quote
    inside a sentence of ours (third-party messages run on: "Unrecognized model in X. Should have
    a `model_type` key...", "Parquet magic bytes not found in footer. Either the file is...")."""
    lines = str(error).strip().splitlines()
    if not lines:
        return type(error).__name__
    sentence = re.split(r"(?<=[a-z0-9)`'\"])\.\s+(?=[A-Z])", lines[0].strip(), maxsplit=1)[0]
    return cut(sentence.rstrip(". "), limit)


def os_error_sentence(error: OSError) -> str:
    """An operating system's refusal (no such file, permission denied, a folder where a file
    belongs, a full disk) as one sentence naming the path; a message of ours raised as an OSError
    (no ``strerror``) as it is."""
    if not error.strerror:
        return str(error)
    names = " -> ".join(repr(str(name)) for name in (error.filename, error.filename2) if name)
    return f"{error.strerror}{f' ({names})' if names else ''}; check the path and its permissions."


def settings_text(config: Mapping, limit: int = 80) -> str:
    """A method's settings as one line of JSON for a header, each long value given as its size: a
    text over ``limit`` characters (a pasted paraphrase list) as '<N lines>', a list of more than
    eight items or over ``limit`` characters as JSON (reference edges, paraphrase pairs) as '<N
    items>'. The result's JSON keeps them whole."""

    def brief(value):
        if isinstance(value, str) and len(value) > limit:
            return f"<{len(value.splitlines())} lines>"
        if isinstance(value, (list, tuple)) and (
            len(value) > 8 or len(json.dumps(value, default=str)) > limit
        ):
            return f"<{len(value)} items>"
        return value

    return json.dumps({key: brief(value) for key, value in config.items()}, default=str)


def shown_number(value, limit: int = 12) -> str:
    """A number from a user's input as it is, cut short (digits counted) when absurdly long."""
    digits = str(value)
    return digits if len(digits) <= limit else f"{digits[:limit]}… ({len(digits)} digits)"


def method_settings(method: str, config: Mapping) -> str:
    """A method's name with its settings as a header writes them ('eap-ig {"ig_steps": 20}'),
    the name alone for a method without settings: EAP's header read "eap {} on smollm2-135m"."""
    return f"{method} {settings_text(config)}" if config else str(method)


def score_text(value: float) -> str:
    """A score to three decimals, never "-0.000" (a value that rounds to 0 is 0)."""
    text = f"{value:.3f}"
    return "0.000" if text == "-0.000" else text


def percent_text(share: float) -> str:
    """A share in percent to two decimals, never "0.00%" for a share above 0 ("<0.01%"): SmolLM2's
    2 edges of 123,211 read "2 (0.00%)" beside a circuit that is not empty."""
    return "<0.01%" if 0 < share < 0.005 else f"{share:.2f}%"


def chance_text(chance: float) -> str:
    """A probability in percent: one decimal, or two significant digits under 0.1 % ("0.02%",
    "4.4e-05%"), never "0.0%" for a token the model gives a chance: a random-weight model's
    answer read "only 0.0%" and its eight likeliest tokens "0.0%" each, with 49,152 of them."""
    share = 100 * chance
    return f"{share:.1f}%" if share >= 0.1 or share <= 0 else f"{share:.2g}%"


def token_label(token: str) -> str:
    """A token as the user sees it: quotes keep leading spaces visible, and Unicode's first-strong
    isolate (U+2068 ... U+2069) keeps a right-to-left token from reordering the label around it
    ("'مدينة' 23.9%" stays in that order) in widgets that take no HTML (pills, select boxes). A run
    of two or more spaces reads '␣' each, with their count, as ``shown_token`` writes it: the page
    collapsed Gemma's '  ' to "' ' 0.8%", a pill beside "' ' 69.1%" for ' ' after "14 + 23 =", two
    tokens that read the same."""
    if "  " in token:
        return f"\u2068{token.replace(' ', '␣')!r} ({counted(token.count(' '), 'space')})\u2069"
    return f"\u2068{token!r}\u2069"


def left_out_sentence(
    left_out: list[str], probability: dict[str, float], controls: Sequence[str] = ()
) -> str:
    """The line under the choices naming the likely next tokens they leave out, with their chances,
    and why: ``left_out`` read as several tokens once typed (a byte of a character), ``controls``
    are the model's control tokens ('<start_of_image>', '<eos>'), which are not text."""

    def named(tokens) -> str:
        return ", ".join(f"{token_label(token)} {chance_text(probability[token])}" for token in tokens)

    several = "typed into a box, each reads as several tokens (a byte of a character has no text of its own)"
    one = len(controls) == 1
    control = (
        f"{'it is' if one else 'they are'} the model's control token{'' if one else 's'} (marking a turn, "
        "an image or the end of a text), not text"
    )
    if not controls:
        return f"Not offered: {named(left_out)}. {several[0].upper()}{several[1:]}, and a run's answer and foil are one token each."
    if not left_out:
        return f"Not offered: {named(controls)}: {control}, and a run's answer and foil are one token of text each."
    return (
        f"Not offered: {named(left_out)}: {several}; {named(controls)}: {control}. "
        "A run's answer and foil are one token of text each."
    )


def joined(items: Sequence[str]) -> str:
    """'a', 'a and b', 'a, b and c' (items as given: quote or escape them first)."""
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and the noun in the number it takes: '1 paraphrase', '3 paraphrases'."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def parse_whole_numbers(
    text: str,
    not_whole: str,
    refuse: Callable[[int], str | None] | None = None,
    empty: str | None = None,
) -> list[int]:
    """'50, 100,20' -> [20, 50, 100]; ValueError in one sentence otherwise.

    The comma-separated lists of numbers a user types (anchor budgets, SAE layers; edge budgets
    have their own, stricter rules in ``entry.budgets``) are read here: spaces around a piece are
    ignored, empty pieces skipped, the values returned sorted without repeats. A space inside a
    piece is not: '10 20' is refused as not a whole number (it read as 1020 until 2026-12-05).
    not_whole: the sentence for a piece that is not a whole number; ``{part}`` in it becomes the
    piece, quoted (briefly when long). refuse: the sentence for a value that is not allowed, or
    None when it is. empty: the sentence when no number is given (None: an empty list is fine).
    """
    values = []
    for part in (piece.strip() for piece in str(text).split(",")):
        if not part:
            continue
        try:
            value = int(part)
        except ValueError:
            raise ValueError(not_whole.format(part=shown(part))) from None
        problem = refuse(value) if refuse is not None else None
        if problem:
            raise ValueError(problem)
        values.append(value)
    if not values and empty is not None:
        raise ValueError(empty)
    return sorted(set(values))


def rough_duration(seconds: float) -> str:
    """A duration as an estimate says it: '1 s', '40 s', '12 min', '2.5 h'."""
    if seconds < 1.5:
        return "1 s"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def clock_duration(seconds: float | None) -> str:
    """A duration as a progress line says it: '3m07s', '1h05m'; '--' when not known yet."""
    if seconds is None:
        return "--"
    seconds = int(round(seconds))
    return (
        f"{seconds // 3600}h{seconds // 60 % 60:02d}m"
        if seconds >= 3600
        else f"{seconds // 60}m{seconds % 60:02d}s"
    )


# what GitHub markdown makes a live link after parsing, whatever was escaped: a bare http(s)://
# or www. address, or an e-mail address (the autolink-literal extension Streamlit's markdown runs)
_AUTOLINKED = re.compile(r"(?:https?://|www\.)\S*|[-.\w+]+@[-\w]+(?:\.[-\w]+)+", re.IGNORECASE)


def markdown_text(text: str) -> str:
    """Plain text (tokens, prompts) made safe to put inside markdown: its markup characters escaped,
    and any address markdown would make a live link (``http://...``, ``www....``, ``a@b.c``) shown
    as code instead, written as typed: a backslash escape does not stop the link (markdown links
    such addresses in the text after parsing), and a crafted shared link or prompt must not put a
    clickable link the app seems to vouch for into a message or demo mode's headline.

    Its line breaks stay line breaks inside one paragraph (a backslash before each, markdown's hard
    break), and '=' is escaped: a blank line followed by an indented line made a code block, and a
    line of '=' under a line a heading (a typed task id or label of several lines, 2026-12-06)."""
    text, parts, start = str(text), [], 0
    for match in _AUTOLINKED.finditer(text):
        parts += [_escaped(text[start : match.start()]), _code_span(match.group())]
        start = match.end()
    return _hard_breaks("".join([*parts, _escaped(text[start:])]))


def _escaped(text: str) -> str:
    return re.sub(r"([\\`*_{}\[\]()#+\-.!|<>~$&:=])", r"\\\1", text)


def _hard_breaks(text: str) -> str:
    """Each line break followed by more text made a hard break (a backslash ends the line), so no
    line after it starts a block of its own; a break at the very end is left (a backslash there is
    drawn as one)."""
    return re.sub(r"\r\n|\r|\n", "\\\n", text.rstrip("\r\n")) + text[len(text.rstrip("\r\n")) :]


def _code_span(text: str) -> str:
    """``text`` as one markdown code span, whatever backticks it holds: fenced by a longer run of
    backticks, padded with a space where it starts or ends with one (markdown strips that space)."""
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def markdown_sentence(text: str) -> str:
    """A sentence that may quote the user's text, made safe for markdown like `markdown_text`,
    except that its own code spans (a command such as `circuitviz batch --out FOLDER`) stay code.

    A span is kept only where the text's backticks pair up unambiguously (single backticks, an
    even number of them), so that markdown reads the same spans: inside a code span nothing is
    markup, so its content needs no escaping and shows as written. Anything else (a stray or
    doubled backtick, as a typed folder name may hold) is escaped whole, shown as written too.
    A user's text that itself holds a pair of backticks shows between them in code type.
    """
    text = str(text)
    parts = text.split("`")
    if (
        len(parts) % 2 == 0
        or "``" in text
        or any(not part.strip() or "\n" in part or "\r" in part for part in parts[1::2])
    ):  # a span over a line break is the user's (a blank line inside it ended the paragraph)
        return markdown_text(text)
    return "`".join(part if inside % 2 else markdown_text(part) for inside, part in enumerate(parts))


def read_user_file(path, what: str, error: type[Exception], fix: str) -> str:
    """The text of a file the user named, ``what`` (e.g. 'the circuit file'); ``error`` in one
    sentence when it cannot be read or is not UTF-8 text (``fix``: how to save it instead)."""
    try:
        with open(path, encoding="utf-8") as stream:
            return stream.read()
    except OSError as problem:
        raise error(f"Cannot read {what} {path} ({problem.strerror or problem}).") from None
    except UnicodeDecodeError as problem:
        raise error(
            f"{what[0].upper()}{what[1:]} {path} is not UTF-8 text (byte {problem.start + 1}); {fix}."
        ) from None


# ----- characters a reader cannot see -----------------------------------------------------------
def invisible_characters(text: str) -> list[tuple[int, str]]:
    """(index, character) of each format character in ``text`` (Unicode's Cf: zero-width spaces
    and joiners, soft hyphens, direction marks and overrides, the byte-order mark) and each control
    character but a line break or tab (Cc: NUL, ESC, DEL...; named since 2026-12-06, when a link's
    NUL, ESC, BEL and DEL ran unsaid, drawn as empty boxes): a text box shows nothing for them, a
    box, or the text around them reordered, but the model reads them."""
    text = str(text)
    if text.isprintable():  # no Cf or Cc character (Python calls both unprintable): most texts, at once
        return []
    return [
        (index, char)
        for index, char in enumerate(text)
        if (unicodedata.category(char) == "Cf" and not _joins_writing(text, index)) or _control(char)
    ]


def _control(char: str) -> bool:
    return unicodedata.category(char) == "Cc" and char not in "\n\r\t"


def _joins_writing(text: str, index: int) -> bool:
    """A zero-width joiner or non-joiner between two characters of a non-Latin script or of an
    emoji (a family emoji, Persian and Indic words): part of how those are written, not hidden."""
    if text[index] not in "\u200c\u200d" or index == 0 or index + 1 >= len(text):
        return False
    return all(not char.isascii() and not char.isspace() for char in (text[index - 1], text[index + 1]))


def only_invisible(text: str) -> bool:
    """Whether ``text`` is blank once its invisible characters are left out (it looks empty)."""
    return (
        bool(invisible_characters(text))
        and not "".join(
            char for char in str(text) if unicodedata.category(char) != "Cf" and not _control(char)
        ).strip()
    )


def invisible_sentence(text: str, what: str = "The prompt") -> str | None:
    """One sentence naming the invisible characters of ``text`` and where they are, or None."""
    found = invisible_characters(text)
    if not found:
        return None
    if only_invisible(text):
        return (
            f"{what} is empty but for {counted(len(found), 'invisible character')} ({_kinds(found)}); "
            "type the text whose next token you want explained."
        )
    first, after = found[0][0], str(text)[: found[0][0]].split()
    where = f"after {after[-1][-20:]!r}" if after else "at its start"
    it = "it" if len(found) == 1 else "them"
    # a control character (NUL, ESC) is drawn as an empty box by some browsers, as nothing by others
    shows = (
        "shows nothing or an empty box for" if any(_control(char) for _, char in found) else "does not show"
    )
    return (
        f"{what} holds {counted(len(found), 'invisible character')} ({_kinds(found)}; "
        + ("the first " if len(found) > 1 else "")
        + f"{where}, character {first + 1}): the text box {shows} {it}, or shows the text around {it} "
        f"reordered, but the model reads {it}; delete {it} unless you mean {it}."
    )


# spaces a text box draws as a plain one that a model reads as other tokens: the no-break space a
# web page or a word processor pastes, and the typographic ones (the ideographic space U+3000 is how
# Chinese and Japanese are written, and is left out)
LOOKALIKE_SPACES = "\u00a0\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f"


def plain_spaces(text: str) -> str:
    """``text`` with each space that looks plain but is not (``LOOKALIKE_SPACES``) a plain space."""
    return str(text).translate({ord(char): " " for char in LOOKALIKE_SPACES})


def lookalike_spaces_sentence(text: str, what: str = "The prompt") -> str | None:
    """One sentence when ``text`` holds spaces that look plain but are not (``LOOKALIKE_SPACES``),
    naming their kinds and where the first is, or None. "The capital of France is" pasted from a
    page with no-break spaces reads as Gemma's byte tokens '<0xC2>' '<0xA0>' between the words, and
    its likeliest next token was '<0xC2>' (73%), unsaid."""
    found = [(index, char) for index, char in enumerate(str(text)) if char in LOOKALIKE_SPACES]
    if not found:
        return None
    after = str(text)[: found[0][0]].split()
    where = f"after {after[-1][-20:]!r}" if after else "at its start"
    it = "it" if len(found) == 1 else "them"
    return (
        f"{what} holds {counted(len(found), 'space')} that {'is' if len(found) == 1 else 'are'} not plain "
        f"({_kinds(found)}; " + ("the first " if len(found) > 1 else "") + f"{where}, character "
        f"{found[0][0] + 1}): the text box shows {it} as a space, but the model reads {it} as other tokens; "
        f"replace {it} with plain spaces unless you mean {it}."
    )


def invisible_kinds(text: str) -> str:
    """The kinds of ``text``'s invisible characters by code point and name ('U+202E RIGHT-TO-LEFT
    OVERRIDE'), the first three, or "" when it has none."""
    found = invisible_characters(text)
    return _kinds(found) if found else ""


def invisible_as_codes(text: str) -> str:
    """``text`` with each of its invisible characters (``invisible_characters``) written as its code,
    as Python writes it ('\\u202e', '\\x1b'): for a name the app draws as a label (a group's), where
    a right-to-left override would show the rest of it reversed and a zero-width space nothing."""
    text = str(text)
    found = {index for index, _ in invisible_characters(text)}
    if not found:
        return text
    return "".join(repr(char)[1:-1] if index in found else char for index, char in enumerate(text))


def _kinds(found: list[tuple[int, str]]) -> str:
    """The kinds of invisible characters found, by code point and name (the first three)."""
    named = [f"U+{ord(char):04X} {unicodedata.name(char, 'CONTROL CHARACTER')}" for _, char in found]
    kinds = list(dict.fromkeys(named))
    return ", ".join(kinds[:3]) + (
        f" and {len(kinds) - 3} more {'kind' if len(kinds) == 4 else 'kinds'}" if len(kinds) > 3 else ""
    )


def first_piece_note(token: str, prompt: str) -> str:
    """' · the first piece of the prompt's 'Zoltan': a circuit for it explains that piece' (HTML,
    the prompt's word escaped) when
    ``token`` (a capitalised word piece such as ' Zol') begins a longer word of ``prompt`` and is
    no whole word of it, else ''. A name the model writes as several tokens is proposed as its
    first piece ('Zoltan' is ' Zol' 'tan' on Gemma-3-270M), and nothing said that the answer is
    part of a name rather than a name."""
    piece = token.strip()
    if len(piece) < 2 or not piece.isalpha() or not piece[0].isupper():
        return ""
    words = re.findall(r"[^\W\d_]+", prompt)
    if piece in words:
        return ""
    longer = next((word for word in words if word.startswith(piece) and len(word) > len(piece)), None)
    if longer is None:
        return ""
    import html

    word = html.escape(shown_token(longer), quote=False)
    return f" · the first piece of the prompt's {word}: a circuit for it explains that piece"


def unseen_breaks_note(token: str) -> str:
    """' · the box holds 2 line breaks it cannot show, so it looks empty' when ``token`` holds line
    breaks, else '': a one-line box drops them from what it shows, so the answer '\\n\\n' Gemma-3-270M
    proposes after "What is the capital of Japan?" (49.9%) stood in a box that looked empty, the
    line under it saying '↵↵'."""
    breaks = token.count("\n") + token.count("\r")
    if not breaks:
        return ""
    empty = ", so it looks empty" if not token.replace("\n", "").replace("\r", "").strip() else ""
    return f" · the box holds {counted(breaks, 'line break')} it cannot show{empty}"
