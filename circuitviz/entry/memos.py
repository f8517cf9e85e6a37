"""What the app reads about a prompt before any run, kept in the result store like results: the
model's next tokens, one token's probability, the proposed answer and corruption, the task's two
metrics, the nodes' logit-lens labels. A stored view of a prompt runs no forward pass for them.

Each is computed here, outside ``ui/``, with the form it is stored in, so the content keys'
engine digest (``core.keys``) covers everything that decides what is stored; the pages' code
only displays, and an edit to it leaves every stored result and memo valid.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from ..core.keys import content_key

LABEL_TOP_K = 5  # logit-lens tokens per node

# (store key) -> the stored state or None: how the app reads a memo (through its own cache)
Reader = Callable[[str], object]


def next_tokens(store, model, model_id: str, prompt: str, top_k: int) -> list[tuple[str, float]]:
    """The model's ``top_k`` most likely next tokens after ``prompt``, with their probabilities."""
    from ..labels.logit_lens import next_token_probabilities

    key = content_key(kind="next-tokens", model=model_id, prompt=prompt, top_k=top_k)
    state = store.load_state(key, kind="labels")
    if state is not None:
        return [(str(token), float(probability)) for token, probability in state["tokens"]]
    found = next_token_probabilities(model, prompt, top_k)
    store.save_state(key, {"tokens": [[token, probability] for token, probability in found]}, kind="labels")
    return found


def token_probability(store, model, model_id: str, prompt: str, token: str) -> tuple[float, str, float]:
    """(the probability of ``token`` (one token) after ``prompt``, the top token, its probability)."""
    from ..core.tasks import single_token_id
    from ..labels.logit_lens import token_probability as measured

    key = content_key(kind="token-probability", model=model_id, prompt=prompt, token=token)
    state = store.load_state(key, kind="labels")
    if state is None:
        found = measured(model, prompt, single_token_id(model, token, "answer"))
        state = {"probability": found[0], "top": found[1], "top_probability": found[2]}
        store.save_state(key, state, kind="labels")
    return float(state["probability"]), str(state["top"]), float(state["top_probability"])


def proposal(store, model, model_id: str, prompt: str, top_tokens: Sequence[str]):
    """The answer, foil and corrupted prompt proposed for ``prompt`` (``proposals.propose``)."""
    from ..query.proposals import Proposal, propose

    key = content_key(kind="proposal", model=model_id, prompt=prompt, tokens=list(top_tokens))
    state = store.load_state(key, kind="labels")
    if state is not None:
        try:
            return Proposal(**{name: str(value) for name, value in state.items()})
        except TypeError:  # written by a version whose proposal had other fields: proposed again
            pass
    found = propose(model, prompt, list(top_tokens))
    store.save_state(key, dataclasses.asdict(found), kind="labels")
    return found


def task_verdict(store, model, model_id: str, task: dict) -> str | None:
    """Why the task (``PromptTask.to_dict()``) is not meaningful for the model, or None: from its
    two prompts' metrics (``task_validity``), stored once measured."""
    from ..core.tasks import PromptTask, TaskError
    from ..measure.task_validity import gap_problem, identical_prompts_problem, task_metrics

    chosen = PromptTask.from_dict(task)
    if identical_prompts_problem(chosen):
        return identical_prompts_problem(chosen)
    key = content_key(kind="task-metrics", model=model_id, task=task)
    state = store.load_state(key, kind="labels")
    if state is None:
        try:
            clean, corrupted = task_metrics(model, chosen)
        except TaskError as error:
            return str(error)
        state = {"clean": clean, "corrupted": corrupted}
        store.save_state(key, state, kind="labels")
    return gap_problem(chosen, float(state["clean"]), float(state["corrupted"]))


def node_labels(store, model, model_id: str, task, read: Reader | None = None) -> dict:
    """Logit-lens labels of every node on the task's clean prompt (``read``: how the caller reads
    the stored state, e.g. through a cache shared by its sessions; the store's own by default)."""
    from ..core.tasks import prepare_task
    from ..labels.logit_lens import logit_lens_labels
    from ..models.adapter import adapter_of

    key = content_key(kind="logit_lens", model=model_id, prompt=task.clean, top_k=LABEL_TOP_K)
    state = (read or (lambda stored: store.load_state(stored, kind="labels")))(key)
    if state is not None:
        return state["labels"]
    prepared = prepare_task(model, task, need_corrupted=False)
    labels = logit_lens_labels(model, adapter_of(model).spec, prepared, LABEL_TOP_K)
    store.save_state(key, {"labels": labels}, kind="labels")
    return labels
