"""The results a session keeps for its current prompt, shared by every page.

A result computed (or loaded from the store) on any page is kept per method for the prompt on
screen, with the key of the request it answers, so every other page shows it without running
again. A new prompt drops them (``state.adopt_prompt``). The values live in the session's typed
fields (``state.session.results``, ``state.session.result_requests``); this module never touches
Streamlit's session itself.
"""

from __future__ import annotations

from . import loaders, state


def results() -> dict:
    """{method: result} computed for the current prompt on any page (newest per method)."""
    return state.session.results


def keep_result(result, request_key: str | None = None) -> None:
    """Remember a result for every page, and the key of the request it answers (None: not known).
    The first result of a prompt (or of another model) opens at a readable budget; a later one
    (ACC++ on Signals, a method added on Compare) leaves the budget (``result_view.open_budget``)."""
    if result is None:
        return
    # here, not at the top: keeps torch out of the first paint
    from ..render import readable_budget

    session = state.session
    results()[result.method] = result
    session.result_requests[result.method] = request_key
    chosen = session.budget_chosen
    other_model = isinstance(chosen, tuple) and chosen[0] != result.model_id
    if result.curve and (not isinstance(session.budget, int) or other_model):
        session.budget = readable_budget(result.curve)
        del session.budget_chosen


def answers(result, request) -> bool:
    """Whether ``result`` is the kept outcome of exactly ``request`` (its model, task, method,
    every setting and its budgets: its key). A method's curve need not hold the budgets asked
    for (ACC++ stops at its circuit's size), so the request's key is what tells."""
    return request is not None and request_key_of(result) == request.key


def request_key_of(result) -> str | None:
    """The key of the request ``result`` answers, when it is the kept result of its method; None
    when that is not known (a result opened from a file, or one no longer kept)."""
    if result is None or results().get(result.method) is not result:
        return None
    return state.session.result_requests.get(result.method)


def result_for(method: str, model_id: str, prompt: str):
    """The kept result of ``method`` for this model and prompt, or None."""
    result = results().get(method)
    if result is None or result.model_id != model_id or result.task.clean != prompt:
        return None
    return result


def stored_result(request):
    """The stored result of exactly this ``Request`` (any session, any page, a run finished after
    a reload), kept for every page like a fresh one; None when it was never computed. Never computes."""
    found = loaders.stored_result(request)
    if found is not None:
        keep_result(found, request.key)
    return found
