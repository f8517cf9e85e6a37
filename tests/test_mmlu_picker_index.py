"""Explore's MMLU picker reads its subjects and question lines from a small index in the cache,
made once from the parsed file: parsing the 14,042 questions on every server's first Explore page
came after the model's load and before Run was drawn (docs/benchmarks.md)."""

import json

import pytest

import circuitviz.batch.mmlu as mmlu
from circuitviz.ui import mmlu_picker
from circuitviz.ui.mmlu_picker import INDEX_FILE, _one_line, picker_index


@pytest.fixture(autouse=True)
def fresh(tmp_path, monkeypatch):
    """A cache folder of the test's own, and nothing kept in the process from another test (as in a
    new server)."""
    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    picker_index.cache_clear()
    mmlu_picker._subjects.clear()
    mmlu_picker._questions.clear()
    yield
    picker_index.cache_clear()


def _parses(monkeypatch) -> list[int]:
    """Count the parses of the MMLU file from now on."""
    calls = []
    parsed = mmlu.load_mmlu

    def counted():
        calls.append(1)
        return parsed()

    monkeypatch.setattr(mmlu, "load_mmlu", counted)
    return calls


def _new_server():
    picker_index.cache_clear()
    mmlu_picker._subjects.clear()
    mmlu_picker._questions.clear()


def test_the_picker_lists_what_the_file_holds_and_a_later_start_parses_nothing(monkeypatch):
    data = mmlu.load_mmlu()
    parses = _parses(monkeypatch)
    subjects = mmlu_picker._subjects()
    assert subjects == data.subjects and len(subjects) == 57 and parses == [1]
    for subject in (subjects[0], "astronomy", subjects[-1]):
        expected = [(q.row, _one_line(q.question)) for q in data.of_subject(subject)]
        assert mmlu_picker._questions(subject) == expected
    _new_server()  # the index is on disk now: a new server's picker reads it instead of parsing
    assert mmlu_picker._subjects() == subjects
    assert mmlu_picker._questions("astronomy") == [
        (q.row, _one_line(q.question)) for q in data.of_subject("astronomy")
    ]
    assert parses == [1]


@pytest.mark.parametrize(
    "stored",
    [
        "not json {",
        json.dumps({"source": "another file", "subjects": {"astronomy": [[0, "a question?"]]}}),
        "other stamp",  # written below: this file's stamp, another index version
        "other shape",  # written below: this file's stamp, a subject's questions not (row, line)
    ],
)
def test_an_index_of_another_file_or_shape_is_made_again(tmp_path, monkeypatch, stored):
    first = picker_index()  # writes the index
    path = tmp_path / "cache" / "mmlu" / INDEX_FILE
    written = json.loads(path.read_text())
    if stored == "other stamp":
        written["source"]["version"] = -1
        stored = json.dumps(written)
    elif stored == "other shape":
        written["subjects"]["astronomy"] = [["0", "a question?"]]
        stored = json.dumps(written)
    path.write_text(stored)
    _new_server()
    parses = _parses(monkeypatch)
    assert picker_index() == first and parses == [1]
    assert json.loads(path.read_text())["subjects"]["astronomy"] == [list(p) for p in first["astronomy"]]


def test_a_cache_that_cannot_be_written_still_lists_the_questions(tmp_path, monkeypatch):
    blocked = tmp_path / "a file, not a folder"
    blocked.write_text("")
    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(blocked))
    assert len(picker_index()) == 57
    assert blocked.read_text() == ""
