"""Every paraphrase pair checked against the model before Best-of-N may score it.

Per pair: paraphrase and corruption of the same token length, within the token limit, the
prompt's answer and foils, not a copy of the prompt or of an earlier pair, not ending with the
answer itself (it would ask for the word after it), and the model's top-1 next token on the
paraphrase the same as on the original prompt (or the stated answer itself). Pairs that fail are
kept, flagged with the reason, and left out of Best-of-N by default; a corruption that barely
moves the metric, or moves it the other way from the prompt's, is kept with a warning. Prompts of equal token length
run through the model in shared batches.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import torch

from ..core.phases import Report
from ..core.tasks import PreparedTask, PromptTask, prepare_task
from ..core.text import shown_token
from ..engine.metric import metric_from_residual
from ..measure.evaluate import last_residuals
from ..models.adapter import adapter_of, model_device
from .pairs import PROMPT_ITSELF, ParaphrasePair

# a corruption whose metric moves less than this fraction of the original's move is flagged
_WEAK_CORRUPTION = 0.05


def token_text(model, token_id: int) -> str:
    """One token id as text (decoded alone)."""
    return adapter_of(model).decode([int(token_id)])


@torch.no_grad()
def _last_position(
    model, prepared, tokens: torch.Tensor, top_of: Sequence[int] | None = None
) -> tuple[torch.Tensor | None, torch.Tensor]:
    """Metric and top-1 token at the last position for a batch of equal-length prompts.

    tokens: [batch, pos]; each row's run is read when it was kept (``evaluate.last_residuals``:
    the prompt's own run, or the paraphrase checks' runs that their evaluators read again).
    ``top_of``: the rows whose top-1 token is read (None: every row); the others get -1, without
    their vocabulary-wide logits. Returns (metrics [batch] or None without ``prepared``, top-1
    ids [batch]).
    """
    residual = last_residuals(model, tokens.to(model_device(model)))  # [batch, d_model]
    metrics = None if prepared is None else metric_from_residual(model, prepared, residual).float().cpu()
    rows = list(range(tokens.shape[0])) if top_of is None else list(top_of)
    top = torch.full((tokens.shape[0],), -1, dtype=torch.long, device="cpu")
    if rows:
        logits = adapter_of(model).unembed(residual[rows])  # [rows, d_vocab]
        top[rows] = logits.argmax(-1).cpu()
    return metrics, top


def model_answer(model, prompt: str) -> str:
    """The model's top-1 next token after ``prompt``, as text."""
    _, top = _last_position(model, None, adapter_of(model).to_tokens(prompt))
    return token_text(model, int(top[0]))


def validate_pairs(
    model,
    task: PromptTask,
    pairs: Sequence[ParaphrasePair],
    max_tokens: int = 256,
    batch_size: int = 16,
    progress=None,
    need_corrupted: bool = True,
) -> list[ParaphrasePair]:
    """Check every pair against the model and fill its flags; returns new pair objects.

    The original prompt must itself be valid (TaskError otherwise). A pair whose source is
    "original" (the prompt itself, candidate 0 of Best-of-N) is checked the same way but is
    never a copy. ``progress``, a run's, hears ``Report.PARAPHRASES`` before each batch (a run
    can stop between two). ``need_corrupted`` False: the prompt may have no corrupted prompt (the
    held-out pairs of a method that needs none each bring their own; none is then weak against it).
    """
    prepared = prepare_task(model, task, max_tokens=max_tokens, need_corrupted=need_corrupted)
    original_metrics, original_top = _last_position(
        model, prepared, torch.cat([prepared.clean_tokens, prepared.corrupted_tokens]), top_of=[0]
    )
    checked: list[ParaphrasePair] = []
    seen: set[str] = set()
    runs: list[tuple[int, torch.Tensor, torch.Tensor]] = []
    for pair in pairs:
        pair, clean_tokens, corrupted_tokens = _checked_alone(model, task, pair, seen, max_tokens)
        if pair.same_length and pair.n_tokens <= max_tokens:
            runs.append((len(checked), clean_tokens, corrupted_tokens))
        checked.append(pair)
    _check_on_model(model, prepared, checked, runs, int(original_top[0]), batch_size, progress)
    _flag_weak_corruptions(checked, float(original_metrics[0] - original_metrics[1]))
    return checked


# what may follow an answer that ends a text: a sentence's end, a closing quote or bracket
_CLOSING = ".,;:!?\"')]}\u00bb\u201d\u2019 \t\n"


def ends_with_answer(text: str, answer: str) -> bool:
    """Whether ``text`` ends with the answer's word, a sentence's end or closing marks aside
    ("... gave a drink to Mary." for ' Mary'): such a paraphrase asks the model for what follows
    the answer, so a top-1 equal to the answer there is not the prompt's question answered. Only
    answers holding a letter or digit, and only as a whole word (' Mary' does not end 'Rosemary')."""
    word = answer.strip()
    if not any(ch.isalnum() for ch in word):
        return False
    tail = text.rstrip(_CLOSING)
    if not tail.endswith(word):
        return False
    before = tail[: len(tail) - len(word)]
    return not before or not before[-1].isalnum()


def _checked_alone(
    model, task: PromptTask, pair: ParaphrasePair, seen: set[str], max_tokens: int
) -> tuple[ParaphrasePair, torch.Tensor, torch.Tensor]:
    """A copy of the pair with what its text alone says (lengths, answer, repeats) filled in;
    ``seen`` collects the paraphrases so far. Returns (pair, clean tokens, corrupted tokens)."""
    pair = replace(pair, problems=list(pair.problems), warnings=list(pair.warnings))
    pair.answer_single_token = True  # the task's answer passed prepare_task
    clean_tokens = adapter_of(model).to_tokens(pair.clean)  # [1, pos]
    corrupted_tokens = adapter_of(model).to_tokens(pair.corrupted)  # [1, pos']
    pair.n_tokens, pair.corrupted_n_tokens = int(clean_tokens.shape[1]), int(corrupted_tokens.shape[1])
    pair.same_length = pair.n_tokens == pair.corrupted_n_tokens
    if not pair.same_length:
        pair.problems.append(
            f"the paraphrase has {pair.n_tokens} tokens and its corruption {pair.corrupted_n_tokens}"
        )
    if pair.n_tokens > max_tokens:
        pair.problems.append(f"the paraphrase is {pair.n_tokens:,} tokens, over the limit of {max_tokens:,}")
    if pair.answer != task.answer or tuple(pair.foils) != tuple(task.foils):
        if not any("answer/foils" in p for p in pair.problems):
            pair.problems.append("its answer or foils differ from the prompt's")
    is_original = pair.source == "original"
    if not is_original and pair.clean.strip() == task.clean.strip():
        pair.problems.append(PROMPT_ITSELF)
    elif not is_original and pair.clean.strip() in seen:
        pair.problems.append("it repeats an earlier paraphrase")
    seen.add(pair.clean.strip())
    if pair.clean.strip() == pair.corrupted.strip():
        pair.problems.append("its corrupted version is the paraphrase itself")
    # a prompt that itself ends with its answer (a repetition) makes this the task's own pattern
    if (
        not is_original
        and ends_with_answer(pair.clean, pair.answer)
        and not ends_with_answer(task.clean, task.answer)
    ):
        pair.problems.append(
            f"it already ends with the answer {shown_token(pair.answer, 30)}, so the model would be "
            "asked for the word after it"
        )
    return pair, clean_tokens, corrupted_tokens


def _check_on_model(
    model,
    prepared: PreparedTask,
    checked: list[ParaphrasePair],
    runs: list[tuple[int, torch.Tensor, torch.Tensor]],
    original_top: int,
    batch_size: int,
    progress=None,
) -> None:
    """Metric and top-1 token of every runnable pair's paraphrase and corruption, in batches of
    equal token length; fills ``metric_clean``, ``metric_corrupted`` and the answer flags."""
    original_answer = token_text(model, original_top)
    sequences = [t for _, clean, corrupted in runs for t in (clean, corrupted)]
    owners = [(index, kind) for index, _, _ in runs for kind in ("clean", "corrupted")]
    for _, members in sorted(_grouped_by_length(sequences).items()):
        for start in range(0, len(members), batch_size):
            if progress is not None:  # the share of the whole check is unknown (more may be drawn)
                progress(Report.PARAPHRASES, 0.0)
            chunk = members[start : start + batch_size]
            clean_rows = [row for row, member in enumerate(chunk) if owners[member][1] == "clean"]
            tokens = torch.cat([sequences[i] for i in chunk])
            metrics, top = _last_position(model, prepared, tokens, top_of=clean_rows)
            for row, member in enumerate(chunk):
                index, kind = owners[member]
                pair = checked[index]
                if kind == "clean":
                    pair.metric_clean = float(metrics[row])
                    pair.model_answer = token_text(model, int(top[row]))
                    pair.original_answer = original_answer
                    # the same top-1 as on the prompt, or the stated answer itself
                    pair.answer_matches = int(top[row]) in (original_top, prepared.answer_id)
                else:
                    pair.metric_corrupted = float(metrics[row])


def _grouped_by_length(tokens: list[torch.Tensor]) -> dict[int, list[int]]:
    groups: dict[int, list[int]] = {}
    for index, row in enumerate(tokens):
        groups.setdefault(int(row.shape[1]), []).append(index)
    return groups


def _flag_weak_corruptions(checked: list[ParaphrasePair], original_move: float) -> None:
    """Warn on pairs whose corruption moves the metric far less than the prompt's does, or the
    other way. ``original_move``: the prompt's clean metric less its corrupted one."""
    for pair in checked:
        if pair.metric_clean is None or pair.metric_corrupted is None:
            continue
        move = pair.metric_clean - pair.metric_corrupted
        if abs(move) < _WEAK_CORRUPTION * abs(original_move):
            pair.warnings.append("its corruption barely moves the metric, so its scores carry little signal")
        elif move * original_move < 0:  # "When Mary ... to Mary. Then he gave one to": 1.95 -> 2.54
            direction = "raises" if move < 0 else "lowers"
            pair.warnings.append(
                f"its corruption {direction} the metric where the prompt's moves it the other way, "
                "so its scores point the other way"
            )
