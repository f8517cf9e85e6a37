"""The run panel every page that runs a method shares.

One request per method, priced once, its estimate (or the sentence that refuses it) above the
button; a press runs it, a run of the same request under way (this session's or another's, a
page reloaded meanwhile) is attached to; otherwise the result on screen is the one kept for
exactly this request (model, task, method, settings and budgets) or the stored one; and when what
is on screen is an earlier request's, the panel says so.
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from . import kept_results, run, state

EARLIER = "The result below is for earlier inputs; press {button} to compute the current ones."
# the same while an input above has a problem (Run is disabled): it was said only once Run could run
EARLIER_BLOCKED = "The result below is for earlier inputs; fix the input above to compute the current ones."


@dataclass
class Panel:
    """What a page shows below its run panel: the request (None while the inputs have a problem
    or the run is refused) and the result on screen (None when there is none)."""

    request: object | None
    result: object | None

    @property
    def current(self) -> bool:
        """Whether the result is that of exactly the request."""
        return matches(self.result, self.request)


def matches(result, request) -> bool:
    """Whether ``result`` is the outcome of exactly ``request`` (``kept_results.answers``)."""
    return kept_results.answers(result, request)


def kept_or_stored(request, kept):
    """The result of exactly ``request``: ``kept`` when it is, else the stored one (read, never
    computed); ``kept`` again when there is none."""
    if request is None or matches(kept, request):
        return kept
    return kept_results.stored_result(request) or kept


def run_panel(
    model,
    model_id: str,
    task,
    method: str,
    settings,
    budgets,
    *,
    button: str = "Run",
    key: str | None = None,
    autorun: bool = False,
    prompt: str | None = None,
) -> Panel:
    """Price this page's one request, show the estimate and the button, and return what to show.

    ``task``/``settings``/``budgets``: None while an input has a problem (the button is then
    disabled); ``autorun``: run without a press (a task opened from another page); ``prompt``: the prompt
    whose kept result may show when the task is not ready."""
    request = None
    if task is not None and settings is not None and budgets is not None:
        request, _ = run.request_line(model, model_id, task, method, settings, budgets)
    clicked = run.run_button(button, request is not None, key=key)
    state.write_to_url()  # before the run: a reload while it goes on comes back to it
    kept = kept_results.result_for(method, model_id, task.clean if task is not None else prompt or "")
    stopped = run.cancelled_sentence(request.key) if request is not None else None
    if request is not None and (clicked or autorun or run.running(request.key)):
        result = run.run_with_status(model, request) or kept
    else:
        if stopped:  # Cancel pressed (here or in another session): the page says so once more
            st.info(stopped)
        result = kept_or_stored(request, kept)
    panel = Panel(request, result)
    if result is not None and not panel.current:
        st.info(EARLIER.format(button=button) if request is not None else EARLIER_BLOCKED)
    return panel


def run_many(model, model_id: str, requests: dict, *, button: str, key: str, usable=None) -> dict:
    """Compare's panel: one request per method (each priced just before it runs, so the runs
    before it calibrate its estimate), one button for all; {method: the result on screen}, each
    the kept or stored result of exactly its request, else its earlier one (said once). An earlier
    one that ``usable`` refuses is not shown (None), and not said to be below."""
    clicked = run.run_button(button, bool(requests), key=key)
    state.write_to_url()  # before the runs: a reload while they go on comes back to them
    shown = {}
    for name, request in requests.items():
        shown[name] = kept_or_stored(request, kept_results.result_for(name, model_id, request.task.clean))
    if clicked or any(run.running(request.key) for request in requests.values()):
        for name, request in requests.items():  # each estimate, then its run (or the one under way)
            if matches(shown[name], request) and not clicked:
                continue
            priced, refused = run.request_line(
                model, model_id, request.task, name, request.config, request.budgets
            )
            if refused is None:
                shown[name] = run.run_with_status(model, priced, named=True) or shown[name]
    else:
        for name, request in requests.items():  # Cancel pressed: the sentence stays after the rerun
            stopped = run.cancelled_sentence(request.key)
            if stopped:
                st.info(f"{name}: {stopped}")
    if usable is not None:  # (Compare: another prompt's result, or a circuit over positions)
        shown = {
            name: r if r is None or matches(r, requests[name]) or usable(r) else None
            for name, r in shown.items()
        }
    if any(r is not None and not matches(r, requests[n]) for n, r in shown.items()):
        st.info(EARLIER.format(button=button))
    return shown
