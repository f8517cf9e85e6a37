"""Starting a run: the model loaded with its phase shown, the run's progress and its outcome."""

from __future__ import annotations

import time
from collections.abc import Callable

import streamlit as st

from . import loaders


def load_model_or_stop(model_id: str, device: str):
    """The shared model, loaded with a spinner; a load error is one sentence and stops the page."""
    from ..models import ModelLoadError

    try:
        with st.spinner(f"Loading {model_id} (the first load converts its weights and takes a while)…"):
            return loaders.get_model(model_id, device)
    except (ModelLoadError, ValueError, OSError) as error:
        st.error(str(error))
        st.stop()


class ProgressReporter:
    """The engine's progress callback drawn as a bar: phase, percent and an estimate of time left."""

    PHASES = {"score": "scoring edges", "evaluate": "measuring faithfulness"}

    def __init__(self, bar, clock: Callable[[], float] = time.perf_counter):
        self.bar = bar
        self.clock = clock
        self.phase = None
        self.phase_start = clock()
        self.messages: list[str] = []

    def message(self, phase: str, fraction: float) -> str:
        now = self.clock()
        if phase != self.phase:
            self.phase, self.phase_start = phase, now
        elapsed = now - self.phase_start
        fraction = min(max(float(fraction), 0.0), 1.0)
        name = self.PHASES.get(phase, phase)
        if 0 < fraction < 1 and elapsed > 0.5:
            left = elapsed * (1 - fraction) / fraction
            return f"{name}: {100 * fraction:.0f}% — about {left:.0f} s left in this phase"
        return f"{name}: {100 * fraction:.0f}%"

    def __call__(self, phase: str, fraction: float) -> None:
        text = self.message(phase, fraction)
        self.messages.append(text)
        self.bar.progress(min(max(float(fraction), 0.0), 1.0), text=text)


def run_with_status(model, model_id: str, task, method: str, config: dict, budgets):
    """Run a discovery inside ``st.status`` with a progress bar; the result, or None after an
    error sentence is shown."""
    from ..graph import GraphError
    from ..tasks import TaskError

    with st.status(f"Running {method} on {model_id}…", expanded=True) as status:
        bar = st.progress(0.0, text="clean and corrupted runs")
        start = time.perf_counter()
        try:
            result, cached = loaders.discover(
                model, model_id, task, method, config, budgets, progress=ProgressReporter(bar)
            )
        except (TaskError, GraphError, ValueError) as error:
            status.update(label="The run could not start", state="error")
            st.error(str(error))
            return None
        seconds = time.perf_counter() - start
        bar.progress(1.0, text="done")
        source = "from the result store (computed before)" if cached else f"computed in {seconds:.1f} s"
        status.update(label=f"{method} on {model_id}: {source}", state="complete", expanded=False)
    return result
