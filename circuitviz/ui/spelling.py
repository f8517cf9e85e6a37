"""The answer and foil the app proposed, spelled as the model in use reads them.

The answer box and the foil box belong to the prompt, not to the model: a proposal made on one
model stays when the sidebar loads another, so that both answer the same task. Gemma proposes
' Mary' (its token carries the space before the word); a model whose tokenizer splits words on
spaces has the token 'Mary'. The box kept ' Mary', and the app went on proposing it there: the
label said "no leading space" above a box that had one, the pills' 'Mary' was not highlighted,
and the sentences quoted ' Mary', a text the model has no token for.

``remember`` notes what the app wrote into a box (a proposal); ``follow_tokenizer`` rewrites a
box the user has not typed over as the model in use reads the proposal (``models.tokens``): one
token ' Mary' gives 'Mary' on a word-level tokenizer and ' Mary' again on Gemma. What the user
typed is theirs and stays as it is (the line under the box says how the model reads it)."""

from __future__ import annotations

from . import state
from .state import session

ROLES = ("answer", "foil")


def remember(prompt: str, role: str, text: str | None) -> None:
    """The app wrote ``text`` into ``role``'s box as a proposal for ``prompt``."""
    record = dict(session.proposed_spelling) if session.proposed_spelling.get("prompt") == prompt else {}
    record["prompt"] = prompt
    if text:
        record[role] = (text, text)
    else:
        record.pop(role, None)
    session.proposed_spelling = record


def spelled(adapter, text: str) -> str | None:
    """``text`` as the model's one token reads it (``models.tokens.token_pieces``); None when the
    model reads it as several tokens, or none (a proposal another model's vocabulary made)."""
    from ..models.tokens import token_pieces  # here, not at the top: keeps torch out of the first paint

    pieces = token_pieces(adapter, text)
    return pieces[0] if len(pieces) == 1 and pieces[0] else None


def follow_tokenizer(model, prompt: str) -> None:
    """Each proposed box of ``prompt`` the user has not typed over, rewritten as ``model`` reads
    the proposal (before its widget is drawn); the foil's note follows its foil."""
    record = session.proposed_spelling
    if record.get("prompt") != prompt:
        return
    from ..models.adapter import adapter_of  # here, not at the top: keeps torch out of the first paint

    adapter = adapter_of(model)
    changed = dict(record)
    for role in ROLES:
        if role not in record:
            continue
        proposed, shown = record[role]
        if state.coming_value(role) != shown:  # typed over: the user's own from now on
            changed.pop(role)
            continue
        own = spelled(adapter, proposed)
        if own is None or own == shown:
            continue
        state.set_value(role, own)
        if role == "foil" and session.foil_proposed == shown:
            session.foil_proposed = own  # its note ("the other name of the prompt") still true of it
        if role == "foil" and session.corrupted_foil == shown:
            session.corrupted_foil = own  # the same foil: the corrupted prompt is not proposed again
        if role == "answer" and session.corrupted_answer == shown:
            session.corrupted_answer = own  # the same answer: the corrupted prompt is not proposed again
        changed[role] = (proposed, own)
    if changed != record:
        session.proposed_spelling = changed
