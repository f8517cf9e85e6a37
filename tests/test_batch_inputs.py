"""What `circuitviz batch` says about a dataset before its runs (the command-line audit of
2026-12-05, session 31): an answer or foil written without the leading space its word takes after
the prompt ('John' for ' John') gets one line per role naming the rows; the tasks' tokenization
shows a progress line (checked / total) instead of silence, and the model's load is said."""

from __future__ import annotations

import json

import pytest
import torch

from circuitviz.batch import ModelSource, run
from circuitviz.batch import runner as batch_runner
from circuitviz.batch.dataset import DatasetTask
from circuitviz.batch.progress import BatchState, ProgressBar
from circuitviz.batch.spaces import space_lines
from circuitviz.bench.toy_models import WORDS, tiny_config, tiny_model
from circuitviz.core.tasks import PromptTask
from circuitviz.entry import cli
from circuitviz.entry.spaces import missing_spaces
from circuitviz.services.store import ResultStore

CLEAN = "When Mary and John went to the store , John gave a drink to"
CORRUPTED = "When Alice and Bob went to the store , Carl gave a drink to"


def spaced_model():
    """A tiny model whose tokenizer keeps a word's leading space, as SentencePiece and BPE do:
    ' John' and 'John' are two tokens (tiny_model's word tokenizer gives both one id)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformer_lens import HookedTransformer
    from transformers import PreTrainedTokenizerFast

    from circuitviz.models import prepare_for_circuits

    words = list(dict.fromkeys(WORDS))
    pieces = ["<bos>", "<pad>", "<unk>", *words, *("▁" + word for word in words)]
    backend = Tokenizer(models.WordLevel(vocab={p: i for i, p in enumerate(pieces)}, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="never")
    backend.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="never")
    backend.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", 0)])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token="<bos>", eos_token="<bos>", pad_token="<pad>", unk_token="<unk>"
    )
    tokenizer.init_kwargs["name_or_path"] = "circuitviz-tiny-spaced"
    tokenizer.init_kwargs["add_bos_token"] = True
    cfg = tiny_config("gpt2", d_vocab=len(pieces), dtype=torch.float64)
    model = HookedTransformer(cfg, tokenizer=tokenizer, move_to_device=False)
    model.cfg.model_name = "tiny-spaced"
    return prepare_for_circuits(model)


def _row(answer, foil, **more):
    return {"clean": CLEAN, "corrupted": CORRUPTED, "answer": answer, "foil": foil, **more}


def _batch(tmp_path, rows, monkeypatch, factory=spaced_model):
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(json.dumps(row) for row in rows) + "\n", encoding="utf-8")
    monkeypatch.setattr(cli, "_batch_source", lambda args: ModelSource("tiny-spaced", factory=factory))
    argv = [
        "batch", "--dataset", str(path), "--out", str(tmp_path / "out"), "--methods", "eap", "--budgets", "3,20",
        "--keep-edges", "20", "--store", str(tmp_path / "store"), "--consensus", "0", "--no-task-check",
    ]  # fmt: skip
    return cli.main(argv)


def test_an_answer_or_foil_without_its_leading_space_is_said_once_per_role(tmp_path, monkeypatch, capsys):
    rows = [
        _row(" Mary", "John"),  # line 1: the foil lacks its space
        _row("Mary", " John", id="b"),  # line 2: the answer
        _row(" Mary", " Bob", id="c"),  # line 3: both have theirs
        _row(" Mary", "Bob|Carl", id="d"),  # line 4: two foils without
    ]
    assert _batch(tmp_path, rows, monkeypatch) == 0
    captured = capsys.readouterr()
    assert "batch: 4 items: 4 finished" in captured.out  # the rows run: a warning, not a refusal
    err = captured.err
    said = [line for line in err.splitlines() if "has no leading space" in line]
    assert said == [
        "The answer of 1 task has no leading space (line 2: 'Mary'), though the prompt ends in a word: "
        "' Mary' with the space is another token, the one the model writes there; add the space, or keep "
        "it if you mean the word without one.",
        "The foil of 2 tasks has no leading space (line 1: 'John'; line 4: 'Bob', 'Carl'), though the prompt "
        "ends in a word: ' John' with the space is another token, the one the model writes there; add the "
        "space, or keep them if you mean the word without one.",
    ]


def test_the_warning_names_the_first_rows_then_a_count():
    tasks = [
        DatasetTask(f"t{i}", PromptTask(CLEAN, CORRUPTED, " Mary", ("John",)), line=i + 1) for i in range(8)
    ]
    (line,) = space_lines(tasks, {i: (("foil", "John"),) for i in range(8)})
    assert line.startswith("The foil of 8 tasks has no leading space (line 1: 'John'; line 2: 'John'; ")
    assert "line 5: 'John'; and 3 more)" in line and "line 6" not in line


def test_nothing_is_said_where_the_space_changes_no_token_or_none_is_taken():
    spaced, words = spaced_model(), tiny_model("gpt2")
    task = PromptTask(CLEAN, CORRUPTED, "Mary", ("John",))
    assert missing_spaces(spaced, task) == (("answer", "Mary"), ("foil", "John"))
    assert missing_spaces(words, task) == ()  # a white-space tokenizer: 'John' and ' John' are one id
    after_space = PromptTask(CLEAN + " ", CORRUPTED + " ", "Mary", ("John",))
    assert missing_spaces(spaced, after_space) == ()  # the prompt ends in the space itself
    after_sign = PromptTask("1 + 2 =", "1 + 3 =", "3", ("4",))
    assert missing_spaces(spaced, after_sign) == ()  # no word before it: '=3' may be meant


def test_discover_says_a_foil_without_its_leading_space(monkeypatch, capsys):
    """The answer has its own sentence (the model barely predicts 'Mary'); the foil had none."""
    model = spaced_model()
    monkeypatch.setattr(cli, "_load", lambda args: (model, "tiny-spaced", 0.0))
    argv = ["discover", "--prompt", CLEAN, "--corrupted", CORRUPTED, "--answer", " Mary", "--method", "eap"]
    argv += ["--budgets", "5", "--no-cache", "--no-task-check"]
    assert cli.main([*argv, "--foil", "John"]) == 0
    assert (
        "--foil 'John' has no leading space, though the prompt ends in a word: ' John' with the space is "
        "another token, the one the model writes there; give --foil ' John', or keep it if you mean the "
        "word without one." in capsys.readouterr().err.splitlines()
    )
    assert cli.main([*argv, "--foil", " John"]) == 0
    assert "leading space" not in capsys.readouterr().err


def test_the_tasks_tokenization_shows_its_progress(tmp_path, monkeypatch, capsys):
    rows = [_row(" Mary", " John"), _row(" Mary", " Bob", id="x"), _row(" Mary", " Carl", id="y")]
    assert _batch(tmp_path, rows, monkeypatch) == 0
    err = capsys.readouterr().err.replace("\r", "\n")
    assert "loading tiny-spaced ..." in err.splitlines()
    ticks = [line for line in err.splitlines() if line.startswith("tokenize ")]
    assert ticks and "3/3 " in ticks[-1] and "tasks/s" in ticks[-1], err
    assert err.index("loading tiny-spaced") < err.index("tokenize ") < err.index("discover ")


def test_the_progress_line_moves_piece_by_piece(tmp_path, monkeypatch):
    """Tokenized in pieces of CHECK_PIECE tasks, each piece one update of checked / total."""
    seen = []

    class Recording(ProgressBar):
        def __call__(self, state: BatchState):
            if state.phase == "tokenize":
                seen.append((state.done, state.total, state.unit))

        def finish(self, state: BatchState):
            self(state)

    monkeypatch.setattr(batch_runner, "CHECK_PIECE", 2)
    tasks = [DatasetTask(name, PromptTask(CLEAN, CORRUPTED, " Mary", (foil,))) for name, foil in
             (("a", " John"), ("b", " Bob"), ("c", " Carl"), ("d", " Tom"), ("e", " Anna"))]  # fmt: skip
    run(tmp_path / "out", tasks=tasks, methods=["eap"], budgets=[3], model=spaced_model(),
        store=ResultStore(tmp_path / "s"), progress=Recording(), consensus=None, keep_edges=3)  # fmt: skip
    assert seen[0] == (0, 5, "tasks") and seen[-1] == (5, 5, "tasks")
    assert [done for done, _, _ in seen[:-1]] == [0, 2, 4, 5]


@pytest.mark.parametrize("rate, shown", [(250.0, "250.00 tasks/s"), (0.05, "3.0 tasks/min")])
def test_the_rate_names_what_it_counts(rate, shown, monkeypatch):
    state = BatchState(total=10, done=1, phase="tokenize", unit="tasks")
    monkeypatch.setattr(BatchState, "rate", property(lambda self: rate))
    assert shown in ProgressBar().line(state)
