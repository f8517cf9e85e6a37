"""MMLU as a task source: the reader, task building on a tiny model, the MMLU template family, the CLI.

The tiny model has a word-level tokenizer that knows the test questions' words, so the letters
are single tokens; its weights are random, so which letter it prefers is read from its own
logits here, independently of the code under test.
"""

import functools
import json
import random

import pyarrow.parquet as pq
import pytest
import torch
from sentences import assert_one_sentence

from circuitviz.batch import ModelSource, run
from circuitviz.batch import mmlu_tasks as building
from circuitviz.batch.dataset import DatasetError, read_tasks
from circuitviz.batch.mmlu import (
    _FIELDS,
    LETTERS,
    MMLUData,
    MMLUError,
    MMLUQuestion,
    load_mmlu,
    mmlu_path,
    parse_mmlu,
    resolve_subjects,
)
from circuitviz.bench.toy_models import tiny_model
from circuitviz.core.tasks import prepare_task
from circuitviz.entry import cli
from circuitviz.query.families import family, recognise
from circuitviz.services.store import ResultStore

QUESTIONS = [
    MMLUQuestion(
        0, "geography", "What is the capital of France?", ("Rome", "Paris", "Berlin", "Madrid"), "B"
    ),
    MMLUQuestion(1, "geography", "What is the capital of Italy?", ("Paris", "Madrid", "Rome", "Berlin"), "C"),
    MMLUQuestion(2, "geography", "What is the capital of Spain?", ("Berlin", "Rome", "Paris", "Madrid"), "D"),
    MMLUQuestion(
        3, "history", "Who was the first emperor of Rome?", ("Augustus", "Nero", "Caesar", "Paris"), "A"
    ),
]
WORDS = sorted(
    {word for q in QUESTIONS for word in q.prompt().split()} | set(LETTERS) | {"E.", "F.", "G.", "H."}
)  # every word of the prompts, the letters alone, the renamed markers


# a random tiny model that reads the letters as single tokens (real MMLU words are <unk> to it)
LETTERS_MODEL = functools.partial(tiny_model, "gpt2", words=tuple(WORDS), n_ctx=512)


@pytest.fixture(scope="module")
def letters_model():
    return LETTERS_MODEL()


def _letter_logits(model, prompt: str) -> torch.Tensor:
    """The four letters' logits after ``prompt``, from a plain forward pass.  # [4]"""
    ids = [model.tokenizer.convert_tokens_to_ids(letter) for letter in LETTERS]
    with torch.no_grad():
        return model(model.to_tokens(prompt))[0, -1, ids].float()


# ----- the reader -----------------------------------------------------------------------------
def test_the_mmlu_file_has_every_question_of_the_57_subjects():
    data = load_mmlu()
    assert mmlu_path().name == "mmlu.jsonl"
    assert data.rows == 14044
    assert len(data.questions) == 14042 and len(data.problems) == 2  # a CSV header leaked twice
    assert all("not A-D" in problem for problem in data.problems)
    assert len(data.subjects) == 57 and "high school physics" in data.subjects
    assert len(data.of_subject("marketing")) == 234 and len(data.of_subject("astronomy")) == 152
    question = data.of_subject("astronomy")[0]
    assert len(question.options) == 4 and question.correct in LETTERS and question.question
    prompt = question.prompt()
    assert prompt.startswith("The following is a multiple choice question about astronomy.\nQuestion: ")
    assert prompt.endswith("\nAnswer:") and [line[:3] for line in prompt.split("\n")[2:6]] == [
        "A. ",
        "B. ",
        "C. ",
        "D. ",
    ]


def test_a_bad_row_is_a_problem_not_an_error():
    text = (
        '{"question": "q", "answer_a": "a", "answer_b": "b", "answer_c": "c", "answer_d": "d", '
        '"correct_answer": "C", "topic": "x"}\nnot json\n{"question": "q"}\n'
    )
    data = parse_mmlu(text)
    assert data.rows == 3 and len(data.questions) == 1 and data.questions[0].correct == "C"
    assert data.problems == (
        "row 2 is not valid JSON.",
        f"row 3 lacks one of the fields {', '.join(_FIELDS)}.",
    )


def test_subjects_resolve_or_say_what_is_close():
    known = load_mmlu().subjects
    assert resolve_subjects("High School Physics, marketing") == ["high school physics", "marketing"]
    assert resolve_subjects("high_school_physics") == ["high school physics"]
    assert resolve_subjects("all") == known
    with pytest.raises(MMLUError, match="no subject 'astronomyy'; did you mean 'astronomy'"):
        resolve_subjects("astronomyy")
    with pytest.raises(MMLUError, match="No MMLU subject given"):
        resolve_subjects(" , ")
    with pytest.raises(MMLUError) as both:  # every unknown name in one sentence, not the first
        resolve_subjects("astronomyy,marketing,zzz qqq")
    assert str(both.value).startswith("MMLU has no subjects 'astronomyy' (did you mean 'astronomy'")
    assert " and 'zzz qqq' (choose among " in str(both.value)
    assert_one_sentence(str(both.value))


# ----- task building --------------------------------------------------------------------------
def test_a_question_becomes_a_task_of_the_letter_the_model_prefers(letters_model):
    question = QUESTIONS[0]
    verdict = building.question_verdict(letters_model, question, min_gap=-float("inf"))
    logits = _letter_logits(letters_model, question.prompt())
    order = logits.argsort(descending=True).tolist()
    task = verdict.task
    assert task.answer == " " + LETTERS[order[0]]
    assert task.foils == tuple(" " + LETTERS[i] for i in order[1:])
    assert verdict.clean_metric == pytest.approx(float(logits[order[0]] - logits[order[1:]].mean()), abs=1e-6)
    # the corruption renames the markers E-H; the corrupted metric is the model's own
    renamed = question.prompt()
    for letter, unused in zip(LETTERS, "EFGH"):
        renamed = renamed.replace(f"\n{letter}. ", f"\n{unused}. ")
    assert task.corrupted == renamed
    corrupted = _letter_logits(letters_model, task.corrupted)
    expected = float(corrupted[order[0]] - corrupted[order[1:]].mean())
    assert verdict.corrupted_metric == pytest.approx(expected, abs=1e-6)
    prepared = prepare_task(letters_model, task)  # letters one token each, equal token lengths
    assert prepared.clean_tokens.shape == prepared.corrupted_tokens.shape
    assert len({prepared.answer_id, *prepared.foil_ids}) == 4


def test_a_corruption_that_does_not_lower_the_metric_is_refused(letters_model, monkeypatch):
    monkeypatch.setitem(building.CORRUPTIONS, "none", lambda model, question, answer: question.prompt())
    verdict = building.question_verdict(
        letters_model, QUESTIONS[1], corruption="none", min_gap=building.MIN_GAP
    )
    assert verdict.task is None and "lowers the metric by less than 1 logit" in verdict.reason
    assert verdict.corrupted_metric == pytest.approx(verdict.clean_metric)
    # the threshold is the gap itself: a corruption lowering the metric by less is refused
    kept = building.question_verdict(letters_model, QUESTIONS[1], min_gap=-float("inf"))
    gap = kept.clean_metric - kept.corrupted_metric
    refused = building.question_verdict(letters_model, QUESTIONS[1], min_gap=gap + 1e-3)
    assert refused.task is None and kept.task is not None


def test_tasks_per_subject_report_what_was_kept_and_refused(letters_model):
    data = MMLUData(tuple(QUESTIONS), (), len(QUESTIONS))
    dataset = building.mmlu_tasks(letters_model, "geography,history", 2, data=data, min_gap=-float("inf"))
    per_subject = dataset.summary["per_subject"]
    assert per_subject["geography"]["kept"] == 2 and per_subject["history"]["kept"] == 1
    assert dataset.problems == ["history: only 1 of the 1 questions tried are valid tasks for this model."]
    assert [t.family for t in dataset.tasks] == ["mmlu/geography"] * 2 + ["mmlu/history"]
    again = building.mmlu_tasks(letters_model, "geography,history", 2, data=data, min_gap=-float("inf"))
    assert [t.task for t in again.tasks] == [t.task for t in dataset.tasks]  # the seed decides
    with pytest.raises(DatasetError) as error:  # why, counted (it guessed at two reasons)
        building.mmlu_tasks(letters_model, "geography", 2, data=data, min_gap=float("inf"))
    assert str(error.value) == (
        "No question of geography is a valid task for this model: the 3 questions tried were refused "
        "(corruption lowers the metric by less than inf logit (3))."
    )
    with pytest.raises(DatasetError) as error:  # a token limit below every question: said, with the flag
        building.mmlu_tasks(letters_model, "geography", 1, data=data, max_tokens=5, min_gap=-float("inf"))
    assert str(error.value) == (
        "No question of geography is a valid task for this model: the 3 questions tried were refused "
        "(longer than 5 tokens (3)); raise --max-tokens."
    )
    with pytest.raises(DatasetError, match="did you mean 'geography'"):
        building.mmlu_tasks(letters_model, "geografy", 2, data=data)


def test_a_question_mmlu_repeats_is_drawn_once(letters_model):
    """MMLU holds 27 repeated questions (us foreign policy rows 927 and 938 among them): the
    second is refused, counted, and never becomes a second task (a batch refuses duplicates)."""
    again = MMLUQuestion(9, "geography", QUESTIONS[0].question, QUESTIONS[0].options, "B")
    data = MMLUData((*QUESTIONS[:3], again), (), 4)
    dataset = building.mmlu_tasks(letters_model, "geography", 4, data=data, min_gap=-float("inf"))
    assert len(dataset.tasks) == 3 and len({t.task.clean for t in dataset.tasks}) == 3
    report = dataset.summary["per_subject"]["geography"]
    assert report["tried"] == 4 and report["kept"] == 3
    assert report["refusals"] == {"the same question as one drawn before": 1}


def test_letters_that_are_not_one_token_are_refused():
    with pytest.raises(MMLUError, match="splits"):
        building.letter_token_ids(_SplittingLetters(tiny_model("gpt2")))


class _SplittingLetters:
    """A model whose tokenizer writes ' A' as two tokens."""

    def __init__(self, model):
        self.model = model

    def to_tokens(self, text, prepend_bos=True, truncate=True, move_to_device=True):
        return torch.tensor([[5, 6]], device="cpu")


# ----- the MMLU template family ---------------------------------------------------------------
def test_the_mmlu_family_keeps_every_options_letter(letters_model):
    question = QUESTIONS[0]
    found = recognise(question.prompt())
    assert found is not None and found.family == "mmlu" and found.slots["subject"] == "geography"
    chosen = family("mmlu")
    variants = chosen.variants(found, random.Random(0), answer=" B")
    assert len(variants) >= 9 and len({text for text, _ in variants}) == len(variants)
    kinds = set()
    for text, variant in variants[:60]:
        for letter, option in zip(LETTERS, question.options):
            marker = variant.slots["style"].replace("A", letter)
            assert f"{marker} {option}" in text.split("\n"), text  # the letter keeps its text
        kinds |= {variant.slots["preamble"], variant.slots["style"], variant.slots["footer"]}
        corrupted = next(chosen.corruptions(variant, None, " B"))
        for letter, unused, option in zip(LETTERS, "EFGH", question.options):
            assert variant.slots["style"].replace("A", unused) + " " + option in corrupted.split("\n")
            assert variant.slots["style"].replace("A", letter) + " " not in corrupted
    assert len(kinds) >= 8  # preambles, markers and cues all vary
    # on the base prompt the family's corruption is the task's own
    task = building.question_verdict(letters_model, question, min_gap=-float("inf")).task
    answer = task.answer.strip()
    assert next(chosen.corruptions(found, None, task.answer)) == task.corrupted
    assert answer in LETTERS


def test_a_plain_multiple_choice_prompt_stays_with_its_family():
    prompt = "Question: What is the capital of France?\nA. Rome\nB. Paris\nC. Berlin\nD. Madrid\nAnswer:"
    assert recognise(prompt).family == "multiple-choice"


# ----- the command line -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "extra, fragment",
    [
        (["--dataset", "mmlu"], "--dataset mmlu needs --subjects"),
        (["--dataset", "mmlu", "--subjects", "astronomyy"], "did you mean 'astronomy'"),
        (["--dataset", "mmlu", "--subjects", "quantum cooking"], "choose among"),
        (["--generate", "ioi", "--subjects", "marketing"], "--subjects is for --dataset mmlu only"),
        # docs/datasets.md named '--generate mmlu' (the Python run's generate=); the command said only
        # that --generate knows ioi, arithmetic, factual
        (["--generate", "mmlu", "--n", "3"], "with --dataset mmlu --subjects SUBJECT[,SUBJECT...] --n N."),
    ],
)
def test_cli_mmlu_arguments_fail_in_one_sentence(extra, fragment, tmp_path, capsys, monkeypatch):
    def no_model(args):
        raise AssertionError("the arguments must be refused before a model loads")

    monkeypatch.setattr(cli, "_batch_source", no_model)
    code = cli.main(["batch", *extra, "--out", str(tmp_path / "out")])
    error = capsys.readouterr().err
    assert code == 2 and fragment in error and error.count("\n") == 1, error


# ----- batches: local and Ray, resumable --------------------------------------------------------
def _mmlu_batch(tmp_path, name, executor, **options):
    return run(
        tmp_path / name,
        generate=("mmlu", 2, 0),
        subjects="marketing, astronomy",
        methods=["eap"],
        budgets=[3, 10],
        source=ModelSource("tiny-mmlu", factory=LETTERS_MODEL),
        executor=executor,
        store=ResultStore(tmp_path / f"store-{name}"),
        max_tokens=200,
        consensus=None,
        **options,
    )


def test_an_mmlu_batch_reports_its_selection_and_resumes(tmp_path, monkeypatch):
    monkeypatch.setenv("CIRCUITVIZ_TASK_CHECK", "off")  # a random model has no meaningful task
    report = _mmlu_batch(tmp_path, "local", "local")
    selection = report.manifest["dataset"]["selection"]
    assert selection["subjects"] == ["marketing", "astronomy"] and selection["corruption"] == "letters"
    tasks = read_tasks(tmp_path / "local" / "tasks.jsonl")
    for subject in ("marketing", "astronomy"):
        counts = selection["per_subject"][subject]
        assert counts["kept"] + counts["refused"] == counts["tried"] and counts["kept"] <= 2
        assert sum(t.family == f"mmlu/{subject}" for t in tasks) == counts["kept"]
    assert report.items == len(tasks) >= 1 and report.failed == 0
    again = _mmlu_batch(tmp_path, "local", "local")  # the same questions again, all from the store
    assert again.skipped == again.items == report.items and again.computed == 0


@pytest.mark.slow
def test_an_mmlu_batch_on_ray_gives_the_local_tasks_and_results(tmp_path, monkeypatch):
    monkeypatch.setenv("CIRCUITVIZ_TASK_CHECK", "off")  # the Ray workers inherit it
    _mmlu_batch(tmp_path, "local", "local")
    remote = _mmlu_batch(tmp_path, "ray", "ray", ray_options={"workers": 1, "local_cpus": 1})
    assert remote.executor == "ray"
    assert read_tasks(tmp_path / "ray" / "tasks.jsonl") == read_tasks(tmp_path / "local" / "tasks.jsonl")
    mine = pq.read_table(tmp_path / "ray" / "results.parquet").to_pylist()
    theirs = pq.read_table(tmp_path / "local" / "results.parquet").to_pylist()
    assert [r["key"] for r in mine] == [r["key"] for r in theirs]
    for a, b in zip(mine, theirs):
        assert a["ndf"] == pytest.approx(b["ndf"], abs=1e-9)


# ----- Explore's picker -----------------------------------------------------------------------
@pytest.mark.slow
def test_the_explore_picker_makes_a_question_the_prompt(tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    import circuitviz.ui.loaders as loaders

    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(loaders, "MODEL_LOADER", lambda model_id, device: LETTERS_MODEL())
    at = AppTest.from_file("../app.py", default_timeout=300).run()
    at.selectbox(key="mmlu.subject").set_value("astronomy").run()
    question = load_mmlu().of_subject("astronomy")[0]
    assert at.selectbox(key="mmlu.question").value == question.row
    at.button(key="mmlu.use").click().run()
    state = at.session_state
    assert state["prompt"] == question.prompt()
    assert state["answer"] in {" A", " B", " C", " D"} and state["foil"] in {" A", " B", " C", " D"}
    assert (
        state["answer"] != state["foil"]
        and "\nE. " in state["corrupted"]
        and "\nA. " not in state["corrupted"]
    )
    assert "astronomy, question mmlu-" in state["mmlu.note"]
    assert not at.exception


def test_a_refused_picked_question_says_to_pick_another(tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    import circuitviz.ui.loaders as loaders
    from circuitviz.core.text import markdown_text
    from circuitviz.ui.mmlu_picker import REFUSED_HINT

    refusal = "The corruption lowers the logit difference by less than 1."
    monkeypatch.setenv("CIRCUITVIZ_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(loaders, "MODEL_LOADER", lambda model_id, device: LETTERS_MODEL())
    monkeypatch.setattr(loaders, "task_verdict", lambda model, model_id, task: refusal)
    at = AppTest.from_file("../app.py", default_timeout=300).run()
    at.selectbox(key="mmlu.subject").set_value("astronomy").run()
    at.button(key="mmlu.use").click().run()
    assert markdown_text(refusal + REFUSED_HINT) in [e.value for e in at.error]  # shown as plain text
    at.text_area(key="w.prompt").set_value("The capital of France is").run()  # no longer the question
    assert not any(markdown_text(REFUSED_HINT) in e.value for e in at.error)


def test_the_pickers_question_labels_are_cut_visibly():
    from circuitviz.ui.mmlu_picker import _one_line

    long = "Which of these " + "very " * 40 + "long\nquestions?"
    shown = _one_line(long)
    assert len(shown) <= 100 and shown.endswith("…") and "\n" not in shown
    assert _one_line("A short\n question?") == "A short question?"


def test_an_llm_paraphrase_of_a_question_is_corrupted_the_mmlu_way():
    from circuitviz.core.tasks import PromptTask
    from circuitviz.query.llm_source import mmlu_corruptions, parse_llm_reply

    question = QUESTIONS[0]
    task = PromptTask(question.prompt(), "", " B", (" A", " C", " D"))
    kept = (
        "Here is a question about geography.\nQ: Which city is the capital of France?\n"
        + "\n".join(f"({letter}) {option}" for letter, option in zip(LETTERS, question.options))
        + "\nThe answer is"
    )
    moved = kept.replace("(A) Rome", "(A) Paris").replace("(B) Paris", "(B) Rome")
    reply = json.dumps(
        {
            "pairs": [
                {"paraphrase": text, "corrupted": "what the LLM wrote"} for text in (kept, moved, "Paris?")
            ]
        }
    )
    pairs = mmlu_corruptions(task, parse_llm_reply(reply, task, 3, "openai:test"))
    assert pairs[0].corrupted == kept.replace("(A)", "(E)").replace("(B)", "(F)").replace(
        "(C)", "(G)"
    ).replace("(D)", "(H)")
    assert not pairs[0].problems
    assert "moved it to another letter" in pairs[1].problems[0]
    assert "lost the four options" in pairs[2].problems[0]


def test_cli_batch_on_mmlu_runs_and_reports_the_selection(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CIRCUITVIZ_TASK_CHECK", "off")  # a random model has no meaningful task
    monkeypatch.setattr(cli, "_batch_source", lambda args: ModelSource("tiny-mmlu", factory=LETTERS_MODEL))
    out = tmp_path / "out"
    argv = ["batch", "--dataset", "mmlu", "--subjects", "Astronomy", "--n", "2", "--methods", "eap"]
    argv += ["--budgets", "3,10", "--consensus", "0", "--store", str(tmp_path / "store"), "--out", str(out)]
    assert cli.main(argv) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["dataset"]["selection"]["per_subject"]["astronomy"]["kept"] == 2
    err = capsys.readouterr().err
    assert "drawing 2 valid MMLU questions of astronomy on the model (seed 0)" in err
    assert "generated 2 mmlu tasks (seed 0)" in err
    assert "  astronomy: kept 2 of 2 tried (100%)" in err


def test_a_refused_questions_note_gives_the_figures_of_its_own_metric():
    """The picker's refusal ("lowers the metric by less than 1 logit") measures the preferred
    letter over the other three letters' mean; the check under the boxes measures it over one
    foil, and on SmolLM2-135M said the corruption "raises" it beside the note: the note names its
    metric and its two figures, so the two sentences are read as two measures."""
    from circuitviz.batch.mmlu_tasks import QuestionVerdict
    from circuitviz.ui.mmlu_picker import refusal_words

    question = load_mmlu().of_subject("astronomy")[0]
    reason = "corruption lowers the metric by less than 1 logit"
    said = refusal_words(QuestionVerdict(question, None, reason, 0.2, 1.234, 0.9), " A", " D")
    assert said.startswith(reason)
    assert "the logit of ' A' over the mean of the other three letters: +1.23" in said
    assert "+0.90 lettered E-H" in said and "' A' over ' D' alone" in said
    # a refusal that measured nothing (too long) is said as it is
    assert refusal_words(QuestionVerdict(question, None, "longer than 128 tokens"), " A", " D") == (
        "longer than 128 tokens"
    )
