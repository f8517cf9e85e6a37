"""The corrupted prompt follows the foil picked on Explore while it is the app's own proposal:
until 2026-12-07 only another answer proposed it again, so a new foil chip kept a corrupted prompt
measured against the old foil, its note's gap the old foil's. A corrupted prompt the user wrote
stays, and an unchanged foil proposes nothing again."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")

from explore_session import explore_session, other_chip  # noqa: E402

from circuitviz.query.proposals import Proposal  # noqa: E402
from circuitviz.ui import loaders  # noqa: E402

PROMPT = "The cat sat on the mat"  # no template knows it: its own proposal has no corrupted prompt


@pytest.fixture
def proposed_with(monkeypatch):
    """The (answer, foil) each corrupted prompt was proposed again with; each gets a corrupted
    prompt and a note that name the foil."""
    asked = []

    def completion(model, model_id, prompt, answer, corrupted, top_tokens, foil=None):
        asked.append((answer, foil))
        return Proposal(answer, foil or "sat", f"The dog sat on the {foil}", f"Measured against {foil!r}.")

    monkeypatch.setattr(loaders, "completion", completion)
    return asked


def _explore():
    return explore_session({"prompt": PROMPT, "method": "eap"})


def _other_chip(at, *skip: str) -> str:
    return other_chip(at, PROMPT, *skip)


def test_another_foil_proposes_the_corrupted_prompt_again_against_it(tiny_app, proposed_with):
    at = _explore()
    assert not at.exception, at.exception
    answer, proposed = at.text_input(key="w.answer").value, at.text_input(key="w.foil").value
    assert proposed_with == []  # the prompt's own proposal made it
    other = _other_chip(at)
    at.pills(key="pick.foil").set_value(other).run()
    assert not at.exception, at.exception
    assert proposed_with == [(answer, other)]
    assert at.text_area(key="w.corrupted").value == f"The dog sat on the {other}"
    assert any("Measured against" in c.value for c in [*at.caption, *at.warning])
    assert not any("No corrupted prompt could be proposed" in w.value for w in at.warning)
    at.run()  # the same foil: nothing proposed again
    assert proposed_with == [(answer, other)]
    at.pills(key="pick.foil").set_value(proposed).run()  # back to the proposed foil: its own proposal
    assert proposed_with[1] == (answer, None)
    # the stand-in proposes 'sat' with it, not the box's foil: measured against the box's
    assert proposed_with[2:] == [(answer, proposed)]
    assert at.text_area(key="w.corrupted").value == f"The dog sat on the {proposed}"


def test_a_corrupted_prompt_the_user_wrote_stays_when_the_foil_changes(tiny_app, proposed_with):
    at = _explore()
    written = "The dog sat on the mat"
    at.text_area(key="w.corrupted").set_value(written).run()
    at.pills(key="pick.foil").set_value(_other_chip(at)).run()
    assert not at.exception, at.exception
    assert proposed_with == []
    assert at.text_area(key="w.corrupted").value == written


def test_a_foil_that_is_not_one_token_proposes_nothing(tiny_app, proposed_with):
    at = _explore()
    at.text_input(key="w.foil").set_value("not one token at all").run()
    assert not at.exception, at.exception
    assert proposed_with == []
