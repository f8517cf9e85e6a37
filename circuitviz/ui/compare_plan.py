"""What "Run the comparison" will do, said before it is pressed: each chosen method's estimate (or
the stored result it reads back), their total, and the methods the limits refuse. Each method was
priced only just before it ran, so three methods, one of them Edge Pruning at about a minute, told
the wait only as it went by (an audit, 2026-12-07)."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from ..core.text import joined, markdown_sentence, rough_duration
from ..methods import available_methods
from . import kept_results, loaders, panel

STORED = "from the store, no wait"


@dataclass
class Step:
    """One method's part of the run: its seconds (a range where the estimate has one), 0 when its
    stored result is read back; ``shares``: priced without the prompt's clean and corrupted runs an
    earlier method of the same run makes."""

    label: str
    seconds: tuple[float, float]
    stored: bool = False
    shares: bool = False
    busy: str = ""  # the estimate's note that it is for a quiet machine, when this one is busy


def _prompt_runs(model, request, n_tokens: int) -> tuple[float, float]:
    """(the passes of the prompt's clean and corrupted runs this method's run makes, those of them
    it would read back had an earlier method of the run made them): ``limits.kept_prompt_passes``."""
    from ..entry.limits import kept_prompt_passes
    from ..models.adapter import adapter_of

    method, task = request.method_object, request.task
    spec = adapter_of(model).spec
    cost = method.estimate_for_task(model, task, request.config, spec, n_tokens, len(request.budgets))
    if cost.prompt_passes <= 0:
        return 0.0, 0.0
    runs = 1 + bool(task.corrupted.strip())  # an empty corrupted prompt is never kept
    kept_now = kept_prompt_passes(model, task, cost.prompt_passes)
    return cost.prompt_passes, max(cost.prompt_passes * runs / 2 - kept_now, 0.0)


def plan(model, requests: dict) -> tuple[dict, dict]:
    """({method: its ``Step``} for the requests the limits let run, {method: the sentence that
    refuses it}), in the order the run takes them (one after another)."""
    registered = available_methods()
    store = loaders.get_store()
    steps, refused = {}, {}
    made_prompt_runs = False  # an earlier method of this run makes the prompt's runs
    for name, request in requests.items():
        label = registered[name].label if name in registered else name
        kept = kept_results.result_for(name, request.model_id, request.task.clean)
        if panel.matches(panel.kept_or_stored(request, kept), request):  # the run reads it back
            steps[name] = Step(label, (0.0, 0.0), stored=True)
            continue
        priced = request.priced(model, store=store)
        if priced.refusal is not None:
            refused[name] = f"{label}: {priced.refusal}"
            continue
        estimate = priced.estimate
        low, high = estimate.seconds_range or (estimate.seconds, estimate.seconds)
        makes, saved = _prompt_runs(model, request, estimate.n_tokens)
        shares = made_prompt_runs and saved > 0 and estimate.sequences > 0
        if shares:
            keep = max(1.0 - saved / estimate.sequences, 0.02)
            once = estimate.one_off
            low, high = ((value - once) * keep + once for value in (low, high))
        steps[name] = Step(label, (low, high), shares=shares, busy=estimate.busy.strip())
        made_prompt_runs = made_prompt_runs or makes > 0
    return steps, refused


def _duration(seconds: tuple[float, float]) -> str:
    low, high = seconds
    if rough_duration(low) == rough_duration(high):
        return f"about {rough_duration(low)}"
    return f"{rough_duration(low)} to {rough_duration(high)}"


def plan_sentence(steps: dict) -> str:
    """The line above the button: the total, then each method's part, in the run's order."""
    parts = [f"{s.label}: {STORED if s.stored else _duration(s.seconds)}" for s in steps.values()]
    if all(s.stored for s in steps.values()):
        head = "Running the comparison reads every chosen method's result from the store, no wait"
    else:
        total = tuple(sum(s.seconds[i] for s in steps.values()) for i in (0, 1))
        head = f"Running the comparison takes {_duration(total)} in all, the methods one after another"
    sharing = [s.label for s in steps.values() if s.shares]
    note = ""
    if sharing:
        note = (
            f" {joined(sharing)} {'is' if len(sharing) == 1 else 'are'} priced without the prompt's clean and "
            "corrupted runs, which a method before it makes and the run reads back."
        )
    busy = next((s.busy for s in steps.values() if s.busy), "")  # the run's first method's, as Explore's
    return markdown_sentence(" ".join(filter(None, [f"{head} ({'; '.join(parts)}).{note}", busy])))


def plan_line(model, requests: dict) -> dict:
    """Say what the run will do above its button, and each refused method's sentence; the requests
    the run may take (a refused one is left out, as Explore's Run is held back)."""
    if not requests:
        return requests
    steps, refused = plan(model, requests)
    for sentence in refused.values():
        st.error(markdown_sentence(f"{sentence} It is left out of this comparison."))
    if steps:
        st.caption(plan_sentence(steps))
    return {name: request for name, request in requests.items() if name not in refused}
