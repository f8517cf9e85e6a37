"""The nine prompts of the yardstick (``benchmarks/bench_faithfulness.py``, ``assets/faithfulness.md``)
and of the benchmarks that compare methods on the same ground: the app's three Gallery tasks and
six more of five kinds, corrupted as the app's ``propose_corruption`` does (the text-answered
multiple choice: its subject replaced, which carries over to its paraphrases).

Kept in the package rather than in a benchmark script so that the check that the yardstick's
stored figures still hold (``bench.stored_figures.yardstick_figures``) reads the very tasks the
figures were computed on.
"""

from __future__ import annotations

from ..core.tasks import PromptTask
from ..query.families import EXAMPLE_TASKS

INLINE_MCQ = "Q: Is the sky blue? A) yes B) no. Answer: A. Q: Is fire hot? A) yes B) no. Answer:"
INLINE_MCQ_CORRUPTED = "Q: Is the sky blue? A) no B) yes. Answer: B. Q: Is fire hot? A) no B) yes. Answer:"
# Gemma-3-270M answers this one with the option's text rather than its letter
TEXT_MCQ = "Question: What is the capital of Japan?\nA. Tokyo\nB. Paris\nC. Rome\nD. Berlin\nAnswer:"

# (kind, task), in the yardstick's order: its JSON's prompts are these, one for one
YARDSTICK_PROMPTS = [
    ("IOI", EXAMPLE_TASKS["ioi"]),
    ("factual", EXAMPLE_TASKS["factual"]),
    ("arithmetic", EXAMPLE_TASKS["arithmetic"]),
    ("multiple choice", PromptTask(INLINE_MCQ, INLINE_MCQ_CORRUPTED, " A", (" B",))),
    ("IOI", PromptTask(
        "When Tom and Lisa arrived at the restaurant, Lisa handed a gift to",
        "When Alice and Bob arrived at the restaurant, Carl handed a gift to", " Tom", (" Lisa",))),
    ("factual", PromptTask(
        "The Eiffel Tower is located in the city of", "The Colosseum is located in the city of", " Paris", (" Rome",))),
    ("arithmetic", PromptTask(
        "one plus one is two. one plus two is", "one plus one is two. two plus two is", " three", (" four",))),
    ("multiple choice", PromptTask(TEXT_MCQ, TEXT_MCQ.replace("Japan", "Italy"), " Tokyo", (" Rome",))),
    ("gender bias", PromptTask("The nurse said that", "The person said that", " she", (" he",))),
]  # fmt: skip
