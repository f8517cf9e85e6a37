"""LLM labels: a short description of an SAE feature or an ACC++ signal from its top contexts.

Any OpenAI-compatible chat endpoint, through the ``openai`` client: ``OPENAI_BASE_URL``,
``OPENAI_API_KEY`` and ``CIRCUITVIZ_LLM_MODEL`` (or an ``LLMConfig``). The recipe follows
ACC++: the top-activating contexts are shown with the target token marked ``<< >>`` (and, for
an attention signal, the source token it attends to marked ``[[ ]]``); the model is asked for a
short description of the common pattern. The optional check is the paper's: a judge sees the
description and a shuffled mix of real top contexts and random corpus contexts, says which
match, and its accuracy (with a one-sided Fisher exact p-value) says whether the description
picks out the feature.

Requests go through the project's one chat client (``circuitviz.services.llm_client``): replies are
cached on disk (keyed by endpoint, model and messages; never by the key), so a label is paid for
once; timeouts, 429 and 5xx are retried a bounded number of times with exponential backoff;
other failures become one sentence; the API key never appears in a message, a log line, a cache
file or a result. Without an endpoint, ``llm_status`` says in one sentence that LLM labels are
off, and every other label still works. ``BackgroundLabels`` runs labelling in worker threads so
a page never waits for it.
"""

from __future__ import annotations

import json
import math
import random
import re
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from ..services.llm_client import ChatClient, LLMConfig, LLMError
from .sae_features import context_text

OFF_MESSAGE = (
    "LLM labels are off: set OPENAI_BASE_URL (and OPENAI_API_KEY if the endpoint needs one) to an "
    "OpenAI-compatible endpoint to describe features in words; the other labels work without it."
)

FEATURE_SYSTEM = (
    "You are an interpretability researcher explaining what a unit inside a language model responds "
    "to. You are shown text excerpts where the unit is most active; in each excerpt the token where "
    "it is active is marked <<like this>>. Describe the common pattern in one short phrase of at most "
    "15 words (which tokens, in which context). Reply with the description only."
)
SIGNAL_SYSTEM = (
    "You are an interpretability researcher explaining a signal an attention head uses to decide "
    "where to look. In each excerpt the token that attends (the destination) is marked <<like "
    "this>> and the token it attends to (the source) is marked [[like this]]. Describe the common "
    "pattern linking them in one short phrase of at most 15 words. Reply with the description only."
)
JUDGE_SYSTEM = (
    "You check descriptions of patterns in text. You get a description and numbered excerpts, each "
    "with one token marked <<like this>> (and possibly one marked [[like this]]). Some excerpts are "
    "examples of the pattern and some are random. Reply with a JSON list of the numbers of the "
    "excerpts that match the description, for example [1, 4], and nothing else."
)


def llm_status(config: LLMConfig | None = None) -> tuple[bool, str]:
    """(enabled, one sentence for the UI)."""
    config = config or LLMConfig.from_env()
    if not config.enabled:
        return False, OFF_MESSAGE
    where = config.base_url or "the OpenAI API"
    return True, f"LLM labels use {config.model} at {where}."


class LLMLabeler:
    """Descriptions and judge checks through one OpenAI-compatible endpoint, cached on disk."""

    def __init__(self, config: LLMConfig | None = None, sleep: Callable[[float], None] = time.sleep):
        self.config = config or LLMConfig.from_env()
        if not self.config.enabled:
            raise LLMError(OFF_MESSAGE)
        self._client = ChatClient(self.config, sleep)

    @property
    def requests_sent(self) -> int:
        """Requests that reached the endpoint (retries included), for tests."""
        return self._client.requests_sent

    def chat(self, messages: list[dict], max_tokens: int = 120) -> tuple[str, bool]:
        """(reply text, came from the cache). Retries timeouts, 429 and 5xx; LLMError otherwise."""
        return self._client.chat(messages, cache=True, max_tokens=max_tokens)

    # ----- descriptions --------------------------------------------------------------------------
    def describe(
        self,
        contexts: Sequence[dict],
        kind: str = "feature",
        promotes: Sequence[str] = (),
        max_contexts: int = 20,
    ) -> dict:
        """A short description of a feature (``kind="feature"``) or an ACC++ signal (``"signal"``).

        contexts: dicts with ``tokens``, ``target`` index and, for signals, ``source`` index.
        Returns {"description", "cached", "model", "n_contexts"}.
        """
        if kind not in ("feature", "signal"):
            raise ValueError(f"kind must be 'feature' or 'signal', not {kind!r}.")
        if not contexts:
            raise LLMError("There are no top contexts to describe; this feature never fired in the corpus.")
        shown = list(contexts)[:max_contexts]
        lines = [f"{number}. {_one_line(context_text(c))}" for number, c in enumerate(shown, 1)]
        user = "Excerpts:\n" + "\n".join(lines)
        if promotes:
            user += "\n\nWhen active, the unit makes these next tokens more likely: " + ", ".join(
                repr(token) for token in promotes
            )
        system = FEATURE_SYSTEM if kind == "feature" else SIGNAL_SYSTEM
        reply, cached = self.chat([{"role": "system", "content": system}, {"role": "user", "content": user}])
        description = reply.splitlines()[0].strip().strip('"').strip()
        return {
            "description": description,
            "cached": cached,
            "model": self.config.model,
            "n_contexts": len(shown),
        }

    def judge(
        self,
        description: str,
        real_contexts: Sequence[dict],
        random_contexts: Sequence[dict],
        n_each: int = 5,
        seed: int = 0,
    ) -> dict:
        """The paper's check: can a judge tell real top contexts from random ones by the description?

        Shows ``n_each`` of each, shuffled. Returns {"accuracy", "n", "true_positives",
        "false_positives", "p_value", "cached"}; p_value is the one-sided Fisher exact test that
        the judge picks real contexts more often than chance.
        """
        rng = random.Random(seed)
        real = list(real_contexts)[:n_each]
        controls = rng.sample(list(random_contexts), min(n_each, len(random_contexts)))
        if not real or not controls:
            raise LLMError("The judge check needs both real top contexts and random contexts.")
        items = [(c, True) for c in real] + [(c, False) for c in controls]
        rng.shuffle(items)
        lines = [f"{number}. {_one_line(context_text(c))}" for number, (c, _) in enumerate(items, 1)]
        user = f"Description: {description}\n\nExcerpts:\n" + "\n".join(lines)
        reply, cached = self.chat(
            [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]
        )
        picked = _parse_numbers(reply, len(items))
        true_positives = sum(1 for number in picked if items[number - 1][1])
        false_positives = len(picked) - true_positives
        n_real, n_random = len(real), len(controls)
        correct = true_positives + (n_random - false_positives)
        return {
            "accuracy": correct / len(items),
            "n": len(items),
            "true_positives": true_positives,
            "false_positives": false_positives,
            "p_value": fisher_exact_greater(
                true_positives, n_real - true_positives, false_positives, n_random - false_positives
            ),
            "cached": cached,
        }

    def label_feature(
        self, description: dict, random_contexts: Sequence[dict] = (), check: bool = False
    ) -> dict:
        """Describe one feature from ``sae.feature_description``'s dict; optionally run the judge check."""
        result = self.describe(
            description.get("contexts", []), "feature", description.get("promotes", [])[:5]
        )
        result.update({"layer": description.get("layer"), "feature": description.get("feature")})
        if check and random_contexts:
            result["judge"] = self.judge(
                result["description"], description.get("contexts", []), random_contexts
            )
        return result


def _one_line(text: str) -> str:
    return text.replace("\r", " ").replace("\n", "\\n")


def _parse_numbers(reply: str, count: int) -> list[int]:
    """The excerpt numbers in a judge's reply (a JSON list, or bare numbers); LLMError if none parse."""
    match = re.search(r"\[[^\]]*\]", reply)
    if match:
        try:
            values = json.loads(match.group(0))
        except ValueError:
            values = re.findall(r"\d+", match.group(0))
    elif reply.strip().lower() in ("none", "[]", "no"):
        values = []
    else:
        values = re.findall(r"\b\d+\b", reply)
        if not values:
            raise LLMError("The judge's reply was not a list of excerpt numbers; try another model.")
    numbers = set()
    for value in values:  # an excerpt's number: a whole number or its digits, never true or 1e999
        if isinstance(value, str) and value.strip().isdecimal():
            value = int(value)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= count:
            numbers.add(value)
    return sorted(numbers)


def fisher_exact_greater(a: int, b: int, c: int, d: int) -> float:
    """One-sided Fisher exact p-value for the table [[a, b], [c, d]] having a at least this large."""
    row1, col1, total = a + b, a + c, a + b + c + d
    denominator = math.comb(total, col1)
    upper = min(row1, col1)
    return (
        sum(math.comb(row1, x) * math.comb(total - row1, col1 - x) for x in range(a, upper + 1)) / denominator
    )


class BackgroundLabels:
    """LLM labelling in worker threads: submit, then poll ``progress`` and ``results`` from a page."""

    def __init__(self, labeler: LLMLabeler, workers: int = 2):
        self._labeler = labeler
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="llm-labels")
        self._futures: dict[str, Future] = {}

    def submit(
        self, key: str, description: dict, random_contexts: Sequence[dict] = (), check: bool = False
    ) -> None:
        """Start labelling ``description`` under ``key`` unless it is already running or done."""
        if key not in self._futures:
            self._futures[key] = self._pool.submit(
                self._labeler.label_feature, description, random_contexts, check
            )

    @property
    def progress(self) -> tuple[int, int]:
        """(finished, submitted)."""
        return sum(f.done() for f in self._futures.values()), len(self._futures)

    def results(self) -> dict[str, dict]:
        """{key: label dict, or {"error": sentence}} for every finished request."""
        out = {}
        for key, future in self._futures.items():
            if future.done():
                error = future.exception()
                out[key] = {"error": str(error)} if error is not None else future.result()
        return out

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
