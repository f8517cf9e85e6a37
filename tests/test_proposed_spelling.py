"""The answer and foil the app proposed, as the model in use reads them (``ui.spelling``), and the
sentences that quote them. The boxes belong to the prompt: Gemma's proposal ' Mary' stayed in the
answer box when the sidebar loaded a model whose tokenizer splits words on spaces (its token is
'Mary'), under the label "no leading space"; and "The model gives ' Mary' only 0.1% ..." quoted a
text that model has no token for, beside a chance that was its token 'Mary''s."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from circuitviz.bench.toy_models import IOI_TASK  # noqa: E402
from circuitviz.models.catalog import EMBEDDED_MODEL, SUPPORTED_MODELS  # noqa: E402
from circuitviz.query.proposals import Proposal  # noqa: E402

OTHER_MODEL = next(m for m in SUPPORTED_MODELS if m != EMBEDDED_MODEL and not SUPPORTED_MODELS[m].needs_hub)


def test_the_unlikely_answer_sentence_quotes_the_models_token(words, spaced, monkeypatch):
    from circuitviz.ui import loaders
    from circuitviz.ui.inputs import unlikely_answer

    likely = {"Anna": 0.89, "Mary": 0.001}
    said = unlikely_answer(words, "tiny", IOI_TASK.clean, " Mary", likely)
    assert "gives 'Mary' only 0.1%" in said and "' Mary'" not in said
    # not among the likely tokens: its own figure, the token still the model's
    monkeypatch.setattr(loaders, "token_probability", lambda *args: (0.001, "Anna", 0.89))
    said = unlikely_answer(words, "tiny", IOI_TASK.clean, " Mary", {"Anna": 0.89})
    assert "gives 'Mary' only 0.1%" in said
    # a tokenizer whose token carries the space: quoted with it
    said = unlikely_answer(spaced, "tiny", IOI_TASK.clean, " Mary", {" Anna": 0.89, " Mary": 0.001})
    assert "gives ' Mary' only 0.1%" in said


def test_discover_and_the_results_note_quote_the_models_token(words, monkeypatch):
    from circuitviz.entry import api
    from circuitviz.ui import loaders, result_view

    monkeypatch.setattr(api, "answer_chance", lambda model, task: (0.001, "Anna", 0.89))
    said = api.answer_note(words, IOI_TASK)  # its answer ' Mary', its foil ' John'
    assert "gives 'Mary' only 0.1%" in said and "' Mary'" not in said
    monkeypatch.setattr(loaders, "next_tokens", lambda *args, **kwargs: [("Anna", 0.89), ("Mary", 0.001)])
    said = result_view.own_answer_note(SimpleNamespace(task=IOI_TASK, model_id="tiny"), words)
    assert "not the answer 'Mary' (0.1%)" in said and "over 'John'" in said and "' Mary'" not in said


@pytest.fixture
def two_tokenizers(tmp_path, monkeypatch, words, spaced):
    """The embedded model's tokens carry their space, the other model's do not; both propose
    ' Mary' over ' John' for the IOI prompt (as Gemma does)."""
    from circuitviz.ui import loaders

    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(
        loaders, "MODEL_LOADER", lambda model_id, device: spaced if model_id == EMBEDDED_MODEL else words
    )
    proposal = Proposal(" Mary", " John", IOI_TASK.corrupted, "", "The foil is the other name of the prompt.")
    monkeypatch.setattr(loaders, "proposal", lambda *args: proposal)


def _boxes(at) -> tuple[str, str]:
    return at.text_input(key="w.answer").value, at.text_input(key="w.foil").value


@pytest.mark.usefixtures("two_tokenizers")
def test_a_proposal_kept_from_another_model_is_spelled_as_this_one_reads_it():
    at = AppTest.from_file("../app.py", default_timeout=300).run()
    assert not at.exception, at.exception
    assert _boxes(at) == (" Mary", " John")
    at.sidebar.selectbox(key="w.model").set_value(OTHER_MODEL).run()
    assert not at.exception, at.exception
    assert _boxes(at) == ("Mary", "John")  # the word-level model's tokens
    assert any(c.value.startswith("The foil is the other name") for c in at.caption)  # its note kept
    at.sidebar.selectbox(key="w.model").set_value(EMBEDDED_MODEL).run()
    assert _boxes(at) == (" Mary", " John")  # back: the proposal as it was
    # what the user types is theirs: kept as typed on every model
    at.text_input(key="w.answer").set_value(" Anna").run()
    at.sidebar.selectbox(key="w.model").set_value(OTHER_MODEL).run()
    assert _boxes(at) == (" Anna", "John")
