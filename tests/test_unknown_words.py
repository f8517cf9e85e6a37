"""A word-level tokenizer reads every word outside its vocabulary as its unknown token. On a
random-weight model of a family built offline (the toy word tokenizer), the Japan prompt ran with
'Japan' and 'Spain' both '<unk>' (a clean-corrupted difference of +0, NFS nan), unexplained, and ' Tokyo' against
' Madrid' was refused as "the answer is also given as a foil" (a command-line audit)."""

import pytest
from sentences import assert_one_sentence

from circuitviz.bench.toy_models import tiny_model
from circuitviz.entry import cli
from circuitviz.measure.task_validity import CHECK_ENV

JAPAN = ["--prompt", "The capital of Japan is", "--corrupted", "The capital of Spain is"]


@pytest.fixture
def words(monkeypatch, tmp_path):
    model = tiny_model("gpt2", n_layers=2, n_heads=2)
    monkeypatch.setattr(cli, "_load", lambda args: (model, "tiny-gpt2", 0.0))
    monkeypatch.setenv(CHECK_ENV, "off")
    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    return model


def _error(capsys) -> str:
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("error: ")
    assert_one_sentence(error.removeprefix("error: "))
    return error


def test_an_answer_outside_the_vocabulary_is_said_as_such(capsys, words):
    prompt = ["--prompt", "The capital of France is", "--corrupted", "The capital of Italy is"]
    argv = ["discover", *prompt, "--answer", " Tokyo", "--foil", " Madrid", "--budgets", "5"]
    assert cli.main(argv) == 2
    assert "The answer ' Tokyo' is not in this model's vocabulary" in _error(capsys)


def test_prompts_that_read_as_the_same_tokens_are_said_to(capsys, words):
    argv = ["discover", *JAPAN, "--answer", " Rome", "--foil", " Paris", "--budgets", "5", "--no-cache"]
    assert cli.main(argv) == 0  # --no-task-check (the fixture): run, and said why nothing is corrupted
    said = capsys.readouterr().err
    assert (
        "does not know 'Japan' of the prompt and 'Spain' of the corrupted prompt: it reads each as '<unk>', "
        "so the prompt and the corrupted prompt are the same tokens and nothing is corrupted" in said
    )


def test_an_unknown_word_of_the_prompt_is_said_and_the_run_goes_on(capsys, words):
    prompt = ["--prompt", "The capital of Japan is", "--corrupted", "The capital of Italy is"]
    argv = ["discover", *prompt, "--answer", " Rome", "--foil", " Paris", "--budgets", "5", "--no-cache"]
    assert cli.main(argv) == 0
    said = capsys.readouterr().err
    assert "This model's tokenizer does not know 'Japan' of the prompt: it reads each as '<unk>'" in said
    assert "corrupted prompt:" not in said  # 'Italy' is a word it knows
