"""Whether a task is meaningful: does its corruption clearly lower the answer's metric?

Every faithfulness score divides by the gap L(M(q)) - L(M(q')) between the clean and the
corrupted run (NDF, NFS and necessity alike). When the corrupted prompt is the prompt, the gap is
zero and the scores are 0/0; when the corruption raises the metric, or lowers it by a hair, the
scores measure noise (a circuit "reaches NDF 0.97" of nothing). A task runs only when the gap is
at least ``MIN_GAP`` of its metric, on that metric's own scale:

- logit difference: 1.0 logit, the answer's odds against the foil change e-fold (x 2.7);
- log-probability: 0.3 nats, the answer's probability falls by a third or more (x 0.74);
- probability: 0.05, five percentage points.

Measured on the embedded Gemma-3-270M (``benchmarks/bench_task_validity.py``): the nine example
prompts have gaps of 1.25 to 19.0 logits (log-probability 0.33 to 11.9 nats, probability 0.10
to 0.85), so every one passes; the meaningless tasks found by hand have negative gaps ("The
capital of Germany is" with ' the' / ' a' against France: -0.36 logits) or zero (corrupted prompt
equal to the prompt). The check reuses the evaluator's clean and corrupted run: no extra pass.

``CIRCUITVIZ_TASK_CHECK=off`` skips the gap threshold (a random model, as the test suite's tiny
ones, has no meaningful task); a corrupted prompt equal to the prompt is refused whatever it says.
"""

from __future__ import annotations

import os

import torch

from ..core.refusals import IDENTICAL_PROMPTS
from ..core.tasks import DEFAULT_MAX_TOKENS, PreparedTask, PromptTask, TaskError, prepare_task
from ..core.text import shown_token
from ..engine.metric import metric_from_residual
from ..models.adapter import adapter_of
from .evaluate import last_residuals, prompt_run

CHECK_ENV = "CIRCUITVIZ_TASK_CHECK"
MIN_GAP = {"logit_diff": 1.0, "logprob": 0.3, "prob": 0.05}
METRIC_WORDS = {
    "logit_diff": "logit difference",
    "logprob": "log-probability",
    "prob": "probability",
}


class WeakCorruptionError(TaskError):
    """The corruption does not lower the metric by the threshold (``gap_problem``); ``what`` is
    the sentence's first half, which the command line ends with its switch (``--no-task-check``)."""

    def __init__(self, problem: str):
        super().__init__(problem)
        self.what = problem.partition("; pick ")[0]


def identical_prompts_problem(task: PromptTask) -> str | None:
    """The sentence saying the corrupted prompt is the prompt itself, or None."""
    if task.corrupted and task.corrupted.strip() == task.clean.strip():
        return IDENTICAL_PROMPTS
    return None


def gap_check_enabled() -> bool:
    """Whether the gap threshold applies (``CIRCUITVIZ_TASK_CHECK`` is not "off")."""
    return os.environ.get(CHECK_ENV, "").strip().lower() not in ("off", "0", "false", "no")


def gap_problem(task: PromptTask, clean: float, corrupted: float, advice: bool = True) -> str | None:
    """The sentence saying the corruption does not clearly lower the metric, or None when it does.

    ``clean`` and ``corrupted``: L(M(q)) and L(M(q')) of the task's metric. ``advice``: end with
    what to change (for the user's own prompt; a paraphrase left out needs only the reason).
    """
    identical = identical_prompts_problem(task)
    if identical:
        return identical
    threshold = MIN_GAP[task.metric]
    gap = clean - corrupted
    if gap >= threshold or not gap_check_enabled():
        return None
    words, answer = METRIC_WORDS[task.metric], shown_token(task.answer, 20)
    values = f"{clean:+.3f} clean, {corrupted:+.3f} corrupted"
    if gap < 0:
        what = f"The corruption raises the {words} of {answer} ({values}) instead of lowering it"
    else:
        what = f"The corruption lowers the {words} of {answer} by only {gap:.3g} ({values})"
    what += f", and faithfulness means something only when it falls by at least {threshold:g}"
    if not advice:
        return what
    return (
        f"{what}; pick an answer the prompt's key word decides (a content word, not ' the') or "
        "corrupt the word that decides it."
    )


def require_meaningful(task: PromptTask, clean: float, corrupted: float) -> None:
    """Raise TaskError with ``gap_problem``'s sentence when the task is not meaningful
    (``WeakCorruptionError`` when the prompts differ but the gap is too small)."""
    problem = gap_problem(task, clean, corrupted)
    if problem:
        raise (TaskError if identical_prompts_problem(task) else WeakCorruptionError)(problem)


@torch.no_grad()
def clean_and_corrupted_metrics(model, prepared: PreparedTask) -> tuple[float, float]:
    """L(M(q)) and L(M(q')) from the two prompts' plain runs (the app's check before Run; a run
    takes them from its evaluator instead). The runs are the model's kept ones
    (``evaluate.prompt_run``): the evaluator of the Run that follows reads them, not runs them again."""

    spec = adapter_of(model).spec
    residuals = [
        prompt_run(model, spec, tokens).residual
        for tokens in (prepared.clean_tokens, prepared.corrupted_tokens)
    ]
    metrics = metric_from_residual(model, prepared, torch.cat(residuals))  # [2]
    clean, corrupted = metrics.float().tolist()
    return float(clean), float(corrupted)


@torch.no_grad()
def prepared_metrics(model, prepared: list[PreparedTask]) -> list[tuple[float, float]]:
    """(L(M(q)), L(M(q'))) of each task, from plain runs of the final residual only: the clean
    and corrupted prompts of every task of one token length in one pass (a prompt run before is
    read, ``evaluate.last_residuals``). For checking many candidate tasks at once (a generated
    dataset drawn until enough pass); one task's check is ``clean_and_corrupted_metrics``."""
    found: list[tuple[float, float]] = [(0.0, 0.0)] * len(prepared)
    by_length: dict[int, list[int]] = {}
    for index, task in enumerate(prepared):
        by_length.setdefault(task.clean_tokens.shape[1], []).append(index)
    for indices in by_length.values():
        rows = [prepared[i].clean_tokens for i in indices] + [prepared[i].corrupted_tokens for i in indices]
        residual = last_residuals(model, torch.cat(rows))  # [2 * tasks, d_model]
        for j, i in enumerate(indices):
            pair = metric_from_residual(model, prepared[i], residual[[j, j + len(indices)]])
            clean, corrupted = pair.float().tolist()
            found[i] = (float(clean), float(corrupted))
    return found


def task_metrics(model, task: PromptTask, max_tokens: int | None = None) -> tuple[float, float]:
    """L(M(q)) and L(M(q')) of a task (TaskError when it cannot be prepared)."""

    return clean_and_corrupted_metrics(model, prepare_task(model, task, max_tokens or DEFAULT_MAX_TOKENS))


def task_verdict(model, task: PromptTask, max_tokens: int | None = None) -> str | None:
    """The one sentence saying why ``task`` is not a meaningful task for ``model``, or None.

    Tokenisation problems come first (``prepare_task``'s sentence); then identical prompts (no
    pass); then the gap, from one plain pass of the prompt and its corruption.
    """

    identical = identical_prompts_problem(task)
    if identical:
        return identical
    try:
        prepared = prepare_task(model, task, max_tokens or DEFAULT_MAX_TOKENS)
    except TaskError as error:
        return str(error)
    return gap_problem(task, *clean_and_corrupted_metrics(model, prepared))


# ----- proposing a meaningful task --------------------------------------------------------------
FUNCTION_WORDS = frozenset(
    "the a an of to in on at and or but is are was were be been it its this that these those he she "
    "they we you i his her their our your for with as by from not no so if then than there here".split()
)


def is_function_word(token: str) -> bool:
    """Whether a token is a function word or no word at all (punctuation, spaces)."""
    word = token.strip().lower()
    return word in FUNCTION_WORDS or not any(character.isalnum() for character in word)


def task_gaps(model, tasks: list[PromptTask]) -> list[float | None]:
    """L(M(q)) - L(M(q')) of each task (None where it cannot be prepared), one plain pass each."""

    gaps: list[float | None] = []
    for task in tasks:
        try:
            clean, corrupted = clean_and_corrupted_metrics(model, prepare_task(model, task))
        except TaskError:
            gaps.append(None)
            continue
        gaps.append(clean - corrupted)
    return gaps


def barely_ranked(index: int, barely: bool) -> int:
    """Where the model's own order ranks an answer among the passing ones of its kind: by its
    ``index`` in that order, except an answer it barely predicts, ranked by its gap alone
    (``preferred_task``; ``query.proposals`` measures in this order)."""
    return 0 if barely else index


def preferred_task(
    tasks: list[PromptTask], gaps: list[float | None], barely: list[bool] | None = None
) -> int:
    """Which task to propose (``tasks`` in the order of the model's own preference for their
    answers): among those that pass the check, one whose answer the model does not barely predict
    (``barely``, where given), then a content word before a function word, then the model's most
    likely answer (a circuit should explain what the model does; the largest gap only breaks what
    is left); when none passes, the first (the check before Run says why). Among answers the model
    barely predicts, the largest gap goes first, the model's order after it (``barely_ranked``):
    it gives each under 5 %, so its order among them says little, and the gap says which answer
    the corrupted word decides. SmolLM2-135M after "the capital of france is" (' the' 15.0 %, ' a' 11.9 %:
    neither passes the check with 'france' swapped for 'italy') was proposed ' located' (4.96 %, a logit
    difference over ' a' lowered by 1.46) before ' Paris' (3.4 %, lowered by 4.21)."""

    def rank(index: int) -> tuple:
        task, gap = tasks[index], gaps[index]
        passes = gap is not None and identical_prompts_problem(task) is None and gap >= MIN_GAP[task.metric]
        if not passes:
            return (1, 0, 0, 0, 0.0, index)
        weak = int(bool(barely and barely[index]))
        return (0, weak, int(is_function_word(task.answer)), barely_ranked(index, weak), -gap, index)

    return min(range(len(tasks)), key=rank) if tasks else 0
