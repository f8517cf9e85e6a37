"""An answer or foil written without the leading space its word takes after the prompt.

After a prompt that ends in a word ('... gave a drink to'), the model writes the next word with
its space: ' John' is one token and 'John' another, one the model rarely writes there. A task with
the foil 'John' runs (both are single tokens) but contrasts the answer with a token the model
hardly considers, so its logit difference says little. ``discover`` says so for a ``--foil`` (an
answer the model barely predicts has its own sentence, ``api.answer_note``) and ``batch`` in one
line per role naming the rows (``batch.spaces``); both run it: a user may mean the word without
its space. A prompt typed with a space after its last word (``trailing_space_sentence``) is the
same slip the other way round: the model's next word would bring its own space.
"""

from __future__ import annotations

from collections.abc import Callable

from ..core.tasks import PromptTask
from ..core.text import chance_text, lookalike_spaces_sentence, plain_spaces, shown, shown_token
from ..models.adapter import adapter_of

WORD_ENDS = ",.;:!?"  # a prompt ending in one of these (or a letter or digit) is followed by a space


def _ids(model, text: str) -> list[int]:
    return adapter_of(model).to_tokens(text, prepend_bos=False, truncate=False, on_device=False)[0].tolist()


def missing_spaces(model, task: PromptTask) -> tuple[tuple[str, str], ...]:
    """(role, token) for the task's answer and foils that are a word without its leading space
    where the prompt ends in a word and the tokenizer makes the word with the space another
    single token (a tokenizer that splits on white space gives both one id: nothing to say)."""
    roles = (("answer", task.answer), *(("foil", foil) for foil in task.foils))
    return tuple((role, token) for role, token in roles if takes_space(model, task.clean, token))


def takes_space(model, prompt: str, token: str) -> bool:
    """Whether ``token`` is a word written without the leading space it takes after ``prompt``:
    the prompt ends in a word and the tokenizer makes the word with the space another single token."""
    last = prompt[-1:]
    if not last or not (last.isalnum() or last in WORD_ENDS) or not token or not token[0].isalnum():
        return False
    spaced = _ids(model, " " + token)
    return len(spaced) == 1 and spaced != _ids(model, token)


def foil_space_notes(model, task: PromptTask) -> list[str]:
    """discover's line for each foil without its leading space."""
    return [
        f"--foil {shown(token, 20)} has no leading space, though the prompt ends in a word: "
        f"{shown(' ' + token, 20)} with the space is another token, the one the model writes there; "
        f"give --foil {shown(' ' + token, 20)}, or keep it if you mean the word without one."
        for role, token in missing_spaces(model, task)
        if role == "foil"
    ]


def trailing_space_sentence(prompt: str, next_tokens: Callable[[str], list[tuple[str, float]]]) -> str | None:
    """One sentence when ``prompt`` ends in white space after a word and the model, without it,
    would write a word with its own leading space next (``next_tokens(text)``: its likely next
    tokens and their chances) but after it predicts another token: "The capital of France is "
    proposed the answer '<strong>' (Gemma writes ' Paris' with its space, and a bare space is
    rarely followed by a word), and a line break copied with the line proposed 'A' (a new line's
    first word). None otherwise: "14 + 23 = " is followed by a digit either way, and the run goes
    on with the prompt as typed, whose white space a user may mean. A prompt that ends without
    one gets ``bare_space_sentence``'s."""
    body = prompt.rstrip()
    if body == prompt and body:
        return bare_space_sentence(prompt, next_tokens)
    if not body or not (body[-1].isalnum() or body[-1] in WORD_ENDS):
        return None
    without, after = next_tokens(body), next_tokens(prompt)
    if not without or not after:
        return None
    (word, word_chance), (top, top_chance) = without[0], after[0]
    if not (word.startswith(" ") and word[1:2].strip()) or top == word[1:]:
        return None
    trailing = prompt[len(body) :]
    breaks = trailing.count("\n")
    if set(trailing) == {" "}:
        what = "a space" if len(trailing) == 1 else f"{len(trailing)} spaces"
        why = ", and this model writes a word's space with the word"
    else:
        lines = "a line break" if breaks == 1 else f"{breaks} line breaks"
        what = lines if set(trailing) == {"\n"} else "white space"
        why = ", which the model reads as part of the prompt"
    them = "them" if what[0].isdigit() else "it"
    return (
        f"The prompt ends in {what}{why}: without {them} the most likely next token is {shown_token(word)} "
        f"({chance_text(word_chance)}), with {them} {shown_token(top)} ({chance_text(top_chance)}); delete "
        f"{them} unless you mean {them}."
    )


def lookalike_spaces_note(text: str, tokens: Callable[[str], list], what: str = "The prompt") -> str | None:
    """``core.text.lookalike_spaces_sentence`` for ``text`` when the model reads it otherwise than
    with plain spaces (``tokens(text)``: its tokens); None where its tokenizer reads a no-break space
    as a space, or the text has none."""
    plain = plain_spaces(text)
    if plain == text or tokens(plain) == tokens(text):
        return None
    return lookalike_spaces_sentence(text, what)


def bare_space_sentence(prompt: str, next_tokens: Callable[[str], list[tuple[str, float]]]) -> str | None:
    """One sentence when the model's likeliest next token after ``prompt`` is spaces alone, which it
    writes apart from the word or number after them: "14 + 23 =" proposed the answer ' ' (Gemma
    writes ' 37' as ' ', '3', '7'), a circuit for a space; "14 + 23 = " asks for the digit. None
    when the likeliest token is anything else, or what follows the spaces starts with white space."""
    after = next_tokens(prompt)
    if not after or not after[0][0] or set(after[0][0]) != {" "}:
        return None
    (space, chance), follow = after[0], next_tokens(prompt + after[0][0])
    if not follow or not follow[0][0][:1].strip():
        return None
    what = "a space" if len(space) == 1 else f"{len(space)} spaces"
    return (
        f"The model's most likely next token is {what} alone ({chance_text(chance)}), which it writes apart "
        f"from what follows: end the prompt with {what} to ask for that (then its most likely next token is "
        f"{shown_token(follow[0][0])}, {chance_text(follow[0][1])}), or keep the space as the answer if you "
        "mean it."
    )
