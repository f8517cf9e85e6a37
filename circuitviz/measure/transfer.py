"""Transfer: how faithful a prompt's circuit stays on the prompt's template paraphrases.

A circuit chosen on one sentence (Edge Pruning's learned mask, Best-of-N's pick by the prompt's
own NDF) can fit that sentence rather than the task. Its NDF on the template paraphrases of the
prompt (``circuitviz.query`` families, each with its corruption) says which: every circuit is
evaluated on every paraphrase that passes the template check (same token length as its
corruption, the same answer from the model) and the meaningful-task check
(``task_validity``), all circuits of a paraphrase in one batched evaluation (NDF only).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

import torch

from ..core.tasks import PromptTask, prepare_task
from ..methods.paraphrase_pairs import template_tasks
from ..models.adapter import adapter_of
from .evaluate import Evaluator, curves_of_tasks
from .task_validity import gap_problem

DEFAULT_PARAPHRASES = 5


@dataclass
class Transfer:
    """NDF of each circuit on the paraphrases that passed both checks (``ndf``: {name: [...]})."""

    paraphrases: int = 0
    valid: int = 0
    note: str = ""
    ndf: dict = field(default_factory=dict)

    def mean(self, name: str) -> float:
        values = self.ndf.get(name, [])
        return statistics.fmean(values) if values else math.nan


def paraphrase_ndf(
    model, task: PromptTask, circuits: dict[str, torch.Tensor], count: int = DEFAULT_PARAPHRASES
) -> Transfer:
    """Each circuit's NDF on up to ``count`` template paraphrases of ``task``.

    circuits: {name: [n_forward, n_backward] bool}. Paraphrases that fail either check are left
    out and counted (``paraphrases`` passed the template check, ``valid`` both).
    """

    tasks, note = template_tasks(model, task, count, seed=0)
    found = Transfer(paraphrases=len(tasks), note=note, ndf={name: [] for name in circuits})
    if not tasks or not circuits:
        return found
    spec = adapter_of(model).spec
    names = list(circuits)
    stacked = torch.stack([circuits[name].bool() & spec.edge_mask for name in names])
    for paraphrase in tasks:
        evaluator = Evaluator(model, spec, prepare_task(model, paraphrase))
        if gap_problem(paraphrase, evaluator.baseline.clean, evaluator.baseline.corrupted):
            continue
        found.valid += 1
        points = curves_of_tasks(
            [evaluator], stacked[None], [int(c.sum()) for c in stacked], with_necessity=False
        )[0]
        for name, point in zip(names, points):
            found.ndf[name].append(point.ndf)
    return found
