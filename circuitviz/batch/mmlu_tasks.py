"""MMLU questions as prompt tasks for one model: the letter it prefers, a foil, a corruption, a check.

For each question (``mmlu.MMLUQuestion``, prompt format in ``mmlu``'s docstring):

- answer: the letter among " A" .. " D" the model gives the highest logit after "Answer:",
  right or wrong (the circuit explains the model's choice, not the key's);
- foils: the three other letters, strongest first; the metric is the logit difference between
  the answer and the foils' mean (why this letter rather than the others). Measured on
  Gemma-3-270M: with the strongest other letter alone as the foil the clean margin is a few
  tenths of a logit and 13 of 43 questions pass the check below; with the three, 18 of 43;
- corrupted prompt, by one of ``CORRUPTIONS`` (the same token length, checked):
  ``letters`` (default): the four option markers renamed E-H ("A. Mars" -> "E. Mars"), so the
  letters the model answers with are gone from the prompt while the question and every option's
  text stay; ``label``: only the answer option's marker renamed E; ``filler``: every word of the
  question replaced by as many filler tokens (" x") as it had; ``blank``: the question's and the
  options' words replaced so, and the answer's marker renamed E;
- validity: the corruption must lower the metric by at least ``MIN_GAP`` logits, the yardstick's
  threshold for a logit difference (an e-fold change of the answer's odds against the foil).

Measured on Gemma-3-270M over 37 marketing and astronomy questions (docs/mmlu.md): its letter
preference is mostly positional (it prefers D on most questions), so the question's content
barely moves it: the share of questions whose corruption lowers the metric by 1 logit is 2/37
for ``filler``, 12/37 for ``label``, 17/37 for ``letters`` and 22/37 for ``blank``. ``letters``
is the default: nearly as many kept as ``blank``, and a rule the paraphrases' template family
applies in every marker style without the tokenizer (``blank`` needs it to keep the length). Questions are drawn in
a seeded order per subject until ``n`` are kept or the subject runs out; every refusal is counted
with its reason, per subject.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from ..core.tasks import DEFAULT_MAX_TOKENS, PromptTask
from ..core.text import counted
from ..engine.metric import logits_from_residual
from ..engine.prefix import final_residual
from ..measure.task_validity import MIN_GAP as VALIDITY_GAPS
from ..measure.task_validity import gap_check_enabled
from ..models.adapter import adapter_of, model_device
from .dataset import Dataset, DatasetError, DatasetTask
from .mmlu import (
    LETTERS,
    MMLUData,
    MMLUError,
    MMLUQuestion,
    draw_questions,
    format_prompt,
    load_mmlu,
    resolve_subjects,
    same_question,
)

MIN_GAP = VALIDITY_GAPS["logit_diff"]  # logits: the task validity check's own threshold
UNUSED_LABEL = "E"  # the marker the label corruption gives the answer option
UNUSED_LETTERS = ("E", "F", "G", "H")  # the markers the letters corruption gives A-D
FILLER = "x"
DEFAULT_CORRUPTION = "letters"
TRIES_PER_TASK = 10  # questions tried per task asked for before a subject counts as exhausted


@dataclass(frozen=True)
class QuestionVerdict:
    """What became of one question: its task, or the reason it was refused, and what was measured."""

    question: MMLUQuestion
    task: PromptTask | None
    reason: str | None
    letter_mass: float = float("nan")  # next-token probability on the four letters
    clean_metric: float = float("nan")
    corrupted_metric: float = float("nan")

    @property
    def kept(self) -> bool:
        return self.task is not None


@dataclass
class SubjectReport:
    """Per subject: questions tried, kept and refused (by reason), and the mean measurements."""

    subject: str
    tried: int = 0
    kept: int = 0
    refused: dict[str, int] = field(default_factory=dict)
    letter_mass: list[float] = field(default_factory=list)
    correct: int = 0  # kept questions whose preferred letter is the key's

    def to_dict(self) -> dict:
        mass = self.letter_mass
        return {
            "tried": self.tried,
            "kept": self.kept,
            "refused": sum(self.refused.values()),
            "kept_share": self.kept / self.tried if self.tried else 0.0,
            "refusals": dict(self.refused),
            "letter_mass_mean": sum(mass) / len(mass) if mass else None,
            "accuracy_of_kept": self.correct / self.kept if self.kept else None,
        }


# ----- corruptions ------------------------------------------------------------------------------
def relabelled_prompt(question: MMLUQuestion, answer: int, label: str = UNUSED_LABEL) -> str:
    """The prompt with the answer option's marker renamed (``label``), everything else kept."""
    prompt = question.prompt()
    marker = f"\n{LETTERS[answer]}. "
    if prompt.count(marker) != 1:
        raise MMLUError(f"question {question.id} shows the marker {marker.strip()!r} more than once.")
    return prompt.replace(marker, f"\n{label}. ")


def renamed_letters_prompt(question: MMLUQuestion) -> str:
    """The prompt with every option marker renamed (A-D -> E-H), everything else kept."""
    prompt = question.prompt()
    for letter, unused in zip(LETTERS, UNUSED_LETTERS):
        prompt = prompt.replace(f"\n{letter}. ", f"\n{unused}. ", 1)
    return prompt


def filler_words(model, text: str, filler: str = FILLER) -> str:
    """Each word of ``text`` replaced by as many filler words as it has tokens (after a space)."""
    words = []
    for word in text.split():
        count = int(
            adapter_of(model)
            .to_tokens(" " + word, prepend_bos=False, truncate=False, on_device=False)
            .shape[1]
        )
        words.append(" ".join([filler] * count))
    return " ".join(words)


def filler_prompt(model, question: MMLUQuestion, answer: int) -> str:
    """The prompt with the question's words replaced by filler; the options kept."""
    return format_prompt(question.subject, filler_words(model, question.question), question.options)


def blank_prompt(model, question: MMLUQuestion, answer: int) -> str:
    """The prompt with the question's and the options' words replaced by filler and the answer's
    marker renamed: neither content nor cue left."""
    options = [filler_words(model, option) for option in question.options]
    blank = MMLUQuestion(question.row, question.subject, filler_words(model, question.question), options, "A")
    return relabelled_prompt(blank, answer)


CORRUPTIONS: dict[str, Callable] = {
    "letters": lambda model, question, answer: renamed_letters_prompt(question),
    "label": lambda model, question, answer: relabelled_prompt(question, answer),
    "filler": filler_prompt,
    "blank": blank_prompt,
}


# ----- measuring a question ---------------------------------------------------------------------
def letter_token_ids(model) -> list[int]:
    """The ids of " A" .. " D"; MMLUError when a letter is not one token for this tokenizer."""
    ids = []
    for letter in LETTERS:
        tokens = (
            adapter_of(model)
            .to_tokens(" " + letter, prepend_bos=False, truncate=False, on_device=False)[0]
            .tolist()
        )
        if len(tokens) != 1:
            raise MMLUError(
                f"This model's tokenizer splits ' {letter}' into {len(tokens)} tokens; MMLU needs one."
            )
        ids.append(int(tokens[0]))
    return ids


@torch.no_grad()
def next_token_logits(model, tokens: torch.Tensor) -> torch.Tensor:
    """Logits of the next token after each row.  # tokens [batch, pos] -> [batch, d_vocab]"""
    residual = final_residual(model, tokens.to(model_device(model)), [])  # [batch, d_model]
    return logits_from_residual(model, residual).float()


def default_min_gap() -> float:
    """``MIN_GAP``, or no threshold at all when the validity check is off (``CIRCUITVIZ_TASK_CHECK``)."""
    return MIN_GAP if gap_check_enabled() else -math.inf


def _refused(question, reason, **measured) -> QuestionVerdict:
    return QuestionVerdict(question, None, reason, **measured)


# prompts per forward pass of ``question_verdicts``: on the CPU a pass is compute-bound and larger
# passes were slower (SmolLM2-135M, one thread, 16 astronomy questions of about one length: 1.04
# CPU s a question one prompt a pass, 0.90 four, 1.54 sixteen); an accelerator takes 16
CHECK_ROWS = 16
CPU_CHECK_ROWS = 4


@torch.no_grad()
def _letter_scores(
    model, rows: list[torch.Tensor], letters: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The four letters' next-token logits after each prompt and the probability the model puts on
    them, in one forward pass of the prompts padded at the end to one length (causal attention:
    the padding changes nothing a prompt's last position holds).  # rows [pos_i] -> [n, 4], [n]"""
    device = model_device(model)
    width = max(len(row) for row in rows)
    tokens = torch.stack([torch.cat([row, row.new_full((width - len(row),), int(row[-1]))]) for row in rows])
    last = torch.tensor([len(row) - 1 for row in rows], device=device)  # [n]
    residual = final_residual(model, tokens.to(device), [], last=last)  # [n, d_model]
    logits = logits_from_residual(model, residual).float()  # [n, d_vocab]
    ids = letters.to(logits.device)
    return logits[:, ids].cpu(), logits.softmax(-1)[:, ids].sum(-1).cpu()


def question_verdict(
    model,
    question: MMLUQuestion,
    corruption: str = DEFAULT_CORRUPTION,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    min_gap: float | None = None,
) -> QuestionVerdict:
    """The question as a task for ``model`` (module docstring), or the reason it is refused
    (too long, a corruption of another token length, or one lowering the metric by less than
    ``min_gap``, by default ``MIN_GAP`` unless ``CIRCUITVIZ_TASK_CHECK=off``): ``question_verdicts``
    of the one question."""
    return question_verdicts(model, [question], corruption, max_tokens, min_gap)[0]


def question_verdicts(
    model,
    questions,
    corruption: str = DEFAULT_CORRUPTION,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    min_gap: float | None = None,
) -> list[QuestionVerdict]:
    """``question_verdict`` of each question, the one rule for one question or many: their clean
    prompts ``CHECK_ROWS`` to a forward pass (``CPU_CHECK_ROWS`` on the CPU), shortest first, then
    their corrupted prompts alike (the picker's "which questions this model keeps",
    ``mmlu_kept``). One question is a pass of one prompt, unpadded; in a padded pass a metric may
    differ from the unpadded one by float rounding (at most 7.6e-6 logit on 8 astronomy questions,
    on SmolLM2-135M and on Gemma-3-270M alike, every verdict the same; docs/mmlu.md)."""
    min_gap = default_min_gap() if min_gap is None else min_gap
    letters = torch.tensor(letter_token_ids(model), device="cpu")  # [4] ids, read on the CPU
    adapter = adapter_of(model)
    verdicts: list[QuestionVerdict | None] = [None] * len(questions)
    context = getattr(getattr(model, "cfg", None), "n_ctx", None)  # a longer prompt cannot run at all
    clean_rows: dict[int, torch.Tensor] = {}
    for index, question in enumerate(questions):
        tokens = adapter.to_tokens(question.prompt(), truncate=False, on_device=False)[0]  # [pos]
        if len(tokens) > max_tokens:
            verdicts[index] = _refused(question, f"longer than {max_tokens} tokens")
        elif context and len(tokens) > context:
            verdicts[index] = _refused(question, f"longer than the model's context of {context} tokens")
        else:
            clean_rows[index] = tokens
    # shortest first, so a pass pads its prompts little: on the CPU a forward pass costs about its
    # rows x its longest prompt, and 4 of astronomy's questions padded to the longest cost 1.5x
    # the four alone (SmolLM2-135M, one thread)
    waiting = sorted(clean_rows, key=lambda index: len(clean_rows[index]))
    per_pass = CPU_CHECK_ROWS if model_device(model).type == "cpu" else CHECK_ROWS
    for start in range(0, len(waiting), per_pass):
        piece = waiting[start : start + per_pass]
        scores, masses = _letter_scores(model, [clean_rows[index] for index in piece], letters)
        corrupted_rows: dict[int, tuple] = {}
        for row, index in enumerate(piece):
            question = questions[index]
            order = scores[row].argsort(descending=True).tolist()
            answer, foils = order[0], order[1:]
            measured = {
                "letter_mass": float(masses[row]),
                "clean_metric": float(scores[row, answer] - scores[row, foils].mean()),
            }
            corrupted = CORRUPTIONS[corruption](model, question, answer)
            tokens = adapter.to_tokens(corrupted, truncate=False, on_device=False)[0]  # [pos]
            if tokens.shape != clean_rows[index].shape:
                verdicts[index] = _refused(question, "corruption changes the token length", **measured)
            else:
                corrupted_rows[index] = (tokens, corrupted, answer, foils, measured)
        if not corrupted_rows:
            continue
        corrupted_scores, _ = _letter_scores(model, [rows[0] for rows in corrupted_rows.values()], letters)
        for row, (index, (_, corrupted, answer, foils, measured)) in enumerate(corrupted_rows.items()):
            question = questions[index]
            measured["corrupted_metric"] = float(
                corrupted_scores[row, answer] - corrupted_scores[row, foils].mean()
            )
            if measured["clean_metric"] - measured["corrupted_metric"] < min_gap:
                reason = f"corruption lowers the metric by less than {min_gap:g} logit"
                verdicts[index] = _refused(question, reason, **measured)
                continue
            task = PromptTask(
                question.prompt(), corrupted, f" {LETTERS[answer]}", tuple(f" {LETTERS[i]}" for i in foils)
            )
            verdicts[index] = QuestionVerdict(question, task, None, **measured)
    return verdicts


def _reason_kind(reason: str) -> str:
    """A refusal's reason without its numbers, to count refusals by kind."""
    return re.sub(r"\s+", " ", reason).strip()


def mmlu_tasks(
    model,
    subjects,
    n: int,
    seed: int = 0,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    corruption: str = DEFAULT_CORRUPTION,
    progress=None,
    data: MMLUData | None = None,
    min_gap: float | None = None,
) -> Dataset:
    """Up to ``n`` valid tasks per subject (a name, a comma-separated list or 'all'), drawn in the
    order ``seed`` gives, at most ``TRIES_PER_TASK`` x ``n`` of them; the Dataset's ``summary``
    holds each subject's kept and refused counts. ``progress(subject, kept, tried)`` follows it;
    ``data`` replaces the MMLU file (tests).

    DatasetError in one sentence for an unknown subject or corruption, ``n`` below 1, or no
    question kept at all.
    """
    if corruption not in CORRUPTIONS:
        raise DatasetError(f"Unknown MMLU corruption {corruption!r}; choose one of {', '.join(CORRUPTIONS)}.")
    if n < 1:
        raise DatasetError(f"--n must be 1 or more, not {n}.")
    try:
        data = data or load_mmlu()
        chosen = resolve_subjects(subjects, data.subjects)
        letter_token_ids(model)
    except MMLUError as error:
        raise DatasetError(str(error)) from None
    tasks, problems, summary = [], [], {}
    seen: dict[str, str] = {}  # the question -> the id of its first copy drawn (MMLU repeats 27)
    for subject in chosen:
        report = SubjectReport(subject)
        for question in draw_questions(subject, seed, data):
            if report.kept == n or report.tried >= TRIES_PER_TASK * n:
                break
            report.tried += 1
            first = seen.setdefault(same_question(question), question.id)
            if first != question.id:  # the same task twice would be counted twice in every mean
                kind = "the same question as one drawn before"
                report.refused[kind] = report.refused.get(kind, 0) + 1
                continue
            verdict = question_verdict(model, question, corruption, max_tokens, min_gap)
            if verdict.letter_mass == verdict.letter_mass:  # measured (not NaN)
                report.letter_mass.append(verdict.letter_mass)
            if not verdict.kept:
                kind = _reason_kind(verdict.reason or "refused")
                report.refused[kind] = report.refused.get(kind, 0) + 1
                continue
            report.kept += 1
            report.correct += verdict.task.answer.strip() == question.correct
            tasks.append(DatasetTask(id=question.id, task=verdict.task, family=f"mmlu/{subject}"))
            if progress:
                progress(subject, report.kept, report.tried)
        if report.kept < n:
            problems.append(
                f"{subject}: only {report.kept} of the {report.tried} questions tried are valid tasks for this model."
            )
        summary[subject] = report.to_dict()
    if (
        not tasks
    ):  # why, counted: the sentence guessed at two reasons, one of them wrong under --max-tokens 10
        tried = sum(row["tried"] for row in summary.values())
        refused: dict[str, int] = {}
        for row in summary.values():
            for kind, count in row.get("refusals", {}).items():
                refused[kind] = refused.get(kind, 0) + count
        reasons = "; ".join(
            f"{kind} ({count:,})" for kind, count in sorted(refused.items(), key=lambda i: -i[1])
        )
        which = ", ".join(chosen) if len(chosen) <= 3 else f"the {len(chosen)} subjects"
        longer = any(kind.startswith("longer than") for kind in refused)
        raise DatasetError(
            f"No question of {which} is a valid task for this model: the {counted(tried, 'question')} tried "
            f"were refused ({reasons})" + ("; raise --max-tokens" if longer else "") + "."
        )
    selection = {"dataset": "mmlu", "subjects": chosen, "n": n, "seed": seed, "corruption": corruption}
    return Dataset(
        tasks=tasks, problems=problems, source="mmlu", summary={**selection, "per_subject": summary}
    )
