"""Work a page can do before the user asks for it, in the background: the node captions.

A result's graph carries each node's logit-lens caption, one forward pass over the prompt that
depends on the prompt alone, not on the method or its run. Computed only after a run, it sat
between the run's end and the graph on screen; started as soon as the inputs can run, it is in
the result store by the time Run is pressed (the page reads it back in milliseconds).
"""

from __future__ import annotations

import threading

from . import background, loaders

_STARTED: dict[tuple[str, str], threading.Thread] = {}  # (model key, prompt) -> its thread
_GUARD = threading.Lock()


def node_labels_soon(model, model_id: str, task) -> None:
    """Start computing the node captions of ``task``'s prompt in a background thread, once per
    model and prompt (a failure is left for the page, which computes them again when it needs them)."""
    key = (loaders.model_key(model), task.clean)
    store = loaders.get_store()  # here, in the page's thread: the worker cannot reach streamlit's caches
    with _GUARD:
        if key in _STARTED:
            return
        while len(_STARTED) >= 64:
            _STARTED.pop(next(iter(_STARTED)))

        def work() -> None:
            try:
                loaders.node_labels(model, model_id, task, store=store)
            except Exception:  # the page's own call says what went wrong, where it is shown
                pass

        _STARTED[key] = background.start(work, name="node captions")  # stopped at the process's exit
