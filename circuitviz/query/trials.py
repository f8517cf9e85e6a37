"""Corrupted prompts measured before one is proposed: the page's check before Run refuses a task
whose corruption does not clearly lower the answer's metric (``measure.task_validity``), so each
candidate (the template family's corruption, then known words swapped:
``proposals.corruption_candidates``) is measured as that check measures it, and the first that
passes is proposed (``proposals.proposal_for``).

"When Zoltan and Mary went to the store, Mary gave a drink to" (Gemma-3-270M's answer ' Zol', the
foil ' Mary') was proposed with 'Mary' swapped for 'Alice' at both mentions, which raises the
logit difference (+4.90 clean, +10.44 corrupted) and was refused by the check beside it; swapped
at the last mention alone it falls to +0.43.

The cost: the final residual of each candidate (the prompt's own is the run the next tokens
made), the first candidates in one batched pass, the others, only where the first fails, in a
second; nothing else. The app keeps the proposal per model and prompt (``entry.memos.proposal``),
so a page rerun measures nothing again.
"""

from __future__ import annotations

import torch

from ..core.tasks import PromptTask, TaskError, prepare_task
from ..engine.metric import logits_from_residual, metric_from_residual
from ..measure.evaluate import last_residuals
from ..measure.task_validity import gap_problem
from ..models.adapter import adapter_of

# A batch rounds otherwise than the check's one-row pass (within 1e-4 of a logit on Gemma-3-270M):
# a candidate passes here only when it clears the check's threshold by this much more.
MARGIN = 1e-3
# the next tokens read after a candidate (the foil: ``foils.propose_foil``): ' Paris', the answer
# "What is the capital of France?" leads to, is Gemma-3-270M's eighth there
LIKELY = 10


class Trials:
    """The final residual of a prompt and of its candidate corruptions, each computed once: a row
    the model ran before is read (``evaluate.last_residuals``), the others run in one pass per
    call of ``run``."""

    def __init__(self, model, prompt: str):
        self.model, self.prompt = model, prompt
        self._residual: dict[str, torch.Tensor] = {}  # [1, d_model] each
        self._likely: dict[tuple[str, str], list[tuple[str, float, float]]] = {}
        self._before: torch.Tensor | None = None  # [d_vocab]

    def run(self, texts) -> None:
        """The residuals of the prompt and of ``texts`` not measured yet, one pass per token count."""
        adapter = adapter_of(self.model)
        by_length: dict[int, list[tuple[str, torch.Tensor]]] = {}
        for text in dict.fromkeys([self.prompt, *texts]):
            if text and text not in self._residual:
                tokens = adapter.to_tokens(text, truncate=False)  # [1, pos]
                by_length.setdefault(tokens.shape[1], []).append((text, tokens))
        for group in by_length.values():
            residual = last_residuals(self.model, torch.cat([tokens for _, tokens in group]))
            for row, (text, _) in enumerate(group):
                self._residual[text] = residual[row : row + 1]

    def residual(self, text: str) -> torch.Tensor:
        """The final residual after ``text``.  # [1, d_model]"""
        self.run([text])
        return self._residual[text]

    def likely(self, text: str, answer: str = "") -> list[tuple[str, float, float]]:
        """The model's ``LIKELY`` most likely next tokens after ``text``, each with its probability
        there and after the prompt, and ``answer``'s where it is one token and not among them
        (``foils.corrupted_foil`` reads how a corruption moves each; the whole vocabulary
        unembedded: 0.1 s on Gemma-3-270M's 262,144 tokens, once a text)."""
        from ..core.tasks import single_token_id

        if (text, answer) in self._likely:
            return self._likely[text, answer]
        probabilities = self._probabilities(text)
        if self._before is None:  # the prompt's, once: each candidate's is read against it
            self._before = self._probabilities(self.prompt)
        before = self._before
        ids = probabilities.topk(min(LIKELY, probabilities.shape[-1])).indices.tolist()
        if answer:
            try:
                ids += [own for own in [single_token_id(self.model, answer, "answer")] if own not in ids]
            except TaskError:
                pass
        self._likely[text, answer] = [
            (adapter_of(self.model).decode([token]), float(probabilities[token]), float(before[token]))
            for token in ids
        ]
        return self._likely[text, answer]

    def _probabilities(self, text: str) -> torch.Tensor:
        """The model's next-token probabilities after ``text``.  # [d_vocab]"""
        return torch.softmax(logits_from_residual(self.model, self.residual(text))[0].float(), dim=-1)

    def chances(self, answers: list[str]) -> tuple[list[float | None], str]:
        """(the model's probability of each of ``answers`` after the prompt, None for one that is not
        one token; its top next token there)."""
        from ..core.tasks import single_token_id

        logits = logits_from_residual(self.model, self.residual(self.prompt))[0].float()  # [d_vocab]
        probabilities = torch.softmax(logits, dim=-1)
        found: list[float | None] = []
        for answer in answers:
            try:
                found.append(float(probabilities[single_token_id(self.model, answer, "answer")]))
            except TaskError:
                found.append(None)
        return found, adapter_of(self.model).decode([int(probabilities.argmax())])

    def metrics(self, task: PromptTask) -> tuple[float, float] | None:
        """L(M(q)) and L(M(q')) of ``task`` (its prompt is this one), None when it cannot be
        prepared (a foil that is not one token)."""
        try:
            prepared = prepare_task(self.model, task)
        except TaskError:
            return None
        residual = torch.cat([self.residual(task.clean), self.residual(task.corrupted)])  # [2, d_model]
        clean, corrupted = metric_from_residual(self.model, prepared, residual).float().tolist()
        return float(clean), float(corrupted)


def passes(task: PromptTask, metrics: tuple[float, float]) -> bool:
    """Whether the check before Run lets ``task`` through, by ``MARGIN`` to spare."""
    return gap_problem(task, metrics[0], metrics[1] + MARGIN) is None
