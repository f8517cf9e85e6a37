"""The corrupted prompt and its note follow the answer picked on Explore: after "No corrupted
prompt is proposed" for one answer, another answer's chip left that note up, still about the old
answer ("What is the capital of Japan?": '\\n\\n' proposed, ' Tokyo' picked, where 'Japan' swapped
for 'France' passes). A corrupted prompt the user wrote stays."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
from explore_session import explore_session, other_chip  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from circuitviz.bench.toy_models import IOI_TASK  # noqa: E402
from circuitviz.models.catalog import EMBEDDED_MODEL, SUPPORTED_MODELS  # noqa: E402
from circuitviz.query.proposals import Proposal  # noqa: E402
from circuitviz.ui import loaders  # noqa: E402

PROMPT = "The cat sat on the mat"  # no template knows it: nothing is proposed for any answer


@pytest.fixture
def proposed_for(monkeypatch):
    """The answers a corrupted prompt was proposed for after the prompt's own proposal; each gets
    a note that names it and a foil of its own."""
    asked = []

    def completion(model, model_id, prompt, answer, corrupted, top_tokens, foil=None):
        asked.append((answer, foil))
        return Proposal(answer, foil or "sat", "", f"Nothing proposed for {answer!r}.", "foil note")

    monkeypatch.setattr(loaders, "completion", completion)
    return asked


def _explore():
    return explore_session({"prompt": PROMPT, "method": "eap"})


def _other_chip(at, *skip: str) -> str:
    return other_chip(at, PROMPT, *skip)


def test_another_answer_proposes_its_own_corrupted_prompt_and_note(tiny_app, proposed_for):
    at = _explore()
    assert not at.exception, at.exception
    assert any("No corrupted prompt could be proposed" in w.value for w in at.warning)
    assert proposed_for == []  # the prompt's own proposal made it
    other = _other_chip(at)
    at.pills(key="pick.answer").set_value(other).run()
    assert not at.exception, at.exception
    assert at.text_input(key="w.answer").value == other
    assert proposed_for == [(other, None)]  # the foil box held the proposed foil: the new answer's own
    warnings = [w.value for w in at.warning]
    assert not any("No corrupted prompt could be proposed" in w for w in warnings)  # the old answer's
    assert any(f"Nothing proposed for {other!r}" in w for w in warnings)
    assert at.text_input(key="w.foil").value == "sat"
    at.run()  # a rerun with the same answer proposes nothing again
    assert proposed_for == [(other, None)]


def test_a_foil_of_the_users_is_kept_and_measured_against(tiny_app, proposed_for):
    at = _explore()
    answer = at.text_input(key="w.answer").value
    at.text_input(key="w.foil").set_value("mat").run()  # proposed again against it (``follow_foil``)
    other = _other_chip(at, "mat")
    at.pills(key="pick.answer").set_value(other).run()
    assert not at.exception, at.exception
    assert proposed_for == [(answer, "mat"), (other, "mat")]
    assert at.text_input(key="w.foil").value == "mat"


def test_a_corrupted_prompt_the_user_wrote_stays(tiny_app, proposed_for):
    at = _explore()
    written = "The dog sat on the mat"
    at.text_area(key="w.corrupted").set_value(written).run()
    at.pills(key="pick.answer").set_value(_other_chip(at)).run()
    assert not at.exception, at.exception
    assert proposed_for == []
    assert at.text_area(key="w.corrupted").value == written


def test_another_models_spelling_of_the_same_answer_proposes_nothing_again(
    tmp_path, monkeypatch, words, spaced, proposed_for
):
    """The sidebar's other model reads the proposed ' Mary' as its token 'Mary' (``ui.spelling``):
    the same answer, so the corrupted prompt proposed for it stays."""
    other = next(m for m in SUPPORTED_MODELS if m != EMBEDDED_MODEL and not SUPPORTED_MODELS[m].needs_hub)
    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(
        loaders, "MODEL_LOADER", lambda model_id, device: spaced if model_id == EMBEDDED_MODEL else words
    )
    made = Proposal(" Mary", " John", IOI_TASK.corrupted, "Proposed by the template.", "")
    monkeypatch.setattr(loaders, "proposal", lambda *args: made)
    at = AppTest.from_file("../app.py", default_timeout=300).run()
    at.sidebar.selectbox(key="w.model").set_value(other).run()
    assert not at.exception, at.exception
    assert at.text_input(key="w.answer").value == "Mary"
    at.run()
    assert proposed_for == []
    assert at.text_area(key="w.corrupted").value == IOI_TASK.corrupted


def test_an_answer_typed_into_the_box_proposes_its_own_too(tiny_app, proposed_for):
    at = _explore()
    other = _other_chip(at)
    at.text_input(key="w.answer").set_value(other).run()
    assert not at.exception, at.exception
    assert proposed_for == [(other, None)]
    assert any(f"Nothing proposed for {other!r}" in w.value for w in at.warning)
    at.text_input(key="w.answer").set_value("not one token at all").run()  # refused: nothing proposed
    assert proposed_for == [(other, None)]
