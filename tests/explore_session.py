"""A new Explore session on the tiny IOI task, as a reload or a restarted server would open it:
the link's values set, the page run once (tests of figures measured on request and kept)."""

from __future__ import annotations

from circuitviz.bench.toy_models import IOI_TASK

# the tiny IOI task as a link gives it (the AppTest pages' shared start)
LINK = {
    "prompt": IOI_TASK.clean,
    "corrupted": IOI_TASK.corrupted,
    "answer": " Mary",
    "foil": " John",
    "budgets": "5,10,20,40",
}
QUERY = {**LINK, "method": "eap"}


def explore_session(query: dict | None = None):
    """The app opened on Explore with ``query`` (default ``QUERY``) as its link, run once."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file("../app.py", default_timeout=300)
    for name, value in (query or QUERY).items():
        at.query_params[name] = value
    return at.run()


def run_it(at):
    """Click Run and run the page (the result is then the session's)."""
    next(b for b in at.button if b.label == "Run").click()
    return at.run()


def other_chip(at, prompt: str, *skip: str) -> str:
    """A chip of Explore's answer or foil row (the model's top tokens after ``prompt`` on the tiny
    app model) that is neither the answer, the foil nor any of ``skip``."""
    from circuitviz.bench.toy_models import tiny_app_model
    from circuitviz.labels.logit_lens import next_token_probabilities

    top = [token for token, _ in next_token_probabilities(tiny_app_model("", ""), prompt, 8)]
    taken = (at.text_input(key="w.answer").value, at.text_input(key="w.foil").value, *skip)
    return next(token for token in top if token not in taken)
