"""A link's JSON values (``settings``, ``bon_settings``, ``acc_settings``, ``view``) and budgets
that Python cannot read as JSON or a number put a traceback over the first page: a number of 5,000
digits (Python reads at most 4,300 as an int: a ValueError that is no JSONDecodeError) or 100,000
'[' (a RecursionError), and budgets ending in 5,000 nines or '²' (a digit int() refuses). Each is
now the link's value left out in one sentence, as any other unreadable value is (2026-12-06)."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from circuitviz.ui.budget_box import budgets_for_graph  # noqa: E402

pytestmark = pytest.mark.usefixtures("tiny_app")

TASK = {
    "prompt": "When Mary and John went to the store , John gave a drink to",
    "answer": " Mary",
    "foil": " John",
}
NINES = "9" * 5000
LINKS = {
    "settings": '{"ig_steps": ' + NINES + "}",
    "bon_settings": '{"ig_steps": ' + NINES + "}",
    "acc_settings": "[" * 100_000,
    "budgets": NINES,
}


@pytest.mark.parametrize("parameter", list(LINKS))
def test_a_links_value_python_cannot_read_is_left_out_in_one_sentence(parameter):
    at = AppTest.from_file("../app.py", default_timeout=300)
    for name, value in {**TASK, parameter: LINKS[parameter]}.items():
        at.query_params[name] = value
    at.run()
    assert not at.exception, str(at.exception)[:400]
    said = " ".join(w.value.replace("\\", "") for w in [*at.warning, *at.error])
    if parameter == "budgets":  # the budgets box says it, as of any budget too large
        assert "more edges than any model's graph holds" in said, said
    else:
        assert f"The link's {parameter} " in said and "is not a JSON object of settings" in said, said


def test_the_budgets_box_reads_only_digits_0_to_9_of_a_sensible_length():
    for text in ("10,²", "10," + NINES):
        assert budgets_for_graph(text, 46, None) == text  # kept as typed, for its own sentence


def test_a_view_with_a_number_python_cannot_read_is_left_out_in_one_sentence():
    at = AppTest.from_file("../app.py", default_timeout=300)
    for name, value in {**TASK, "method": "eap", "view": '{"groups": ' + NINES + "}"}.items():
        at.query_params[name] = value
    at.run()
    next(b for b in at.button if b.label == "Run").click()
    at.run()  # the circuit drawn: its view read from the link
    assert not at.exception, str(at.exception)[:400]
    assert "The view in the link is not readable; it was left out." in [
        i.value.replace("\\", "") for i in at.info
    ]
