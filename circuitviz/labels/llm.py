"""LLM labels: a short description of an SAE feature or an ACC++ signal from its top contexts.

Any OpenAI-compatible chat endpoint, through the ``openai`` client: ``OPENAI_BASE_URL``,
``OPENAI_API_KEY`` and ``CIRCUITVIZ_LLM_MODEL`` (or an ``LLMConfig``). The recipe follows
ACC++: the top-activating contexts are shown with the target token marked ``<< >>`` (and, for
an attention signal, the source token it attends to marked ``[[ ]]``); the model is asked for a
short description of the common pattern. The optional check is the paper's: a judge sees the
description and a shuffled mix of real top contexts and random corpus contexts, says which
match, and its accuracy (with a one-sided Fisher exact p-value) says whether the description
picks out the feature.

Replies are cached on disk (keyed by endpoint, model and messages; never by the key), so a label
is paid for once. Timeouts, 429 and 5xx are retried a bounded number of times with exponential
backoff; other failures become one sentence. The API key never appears in a message, a log
line, a cache file or a result. Without an endpoint, ``llm_status`` says in one sentence that
LLM labels are off, and every other label still works. ``BackgroundLabels`` runs labelling in
worker threads so a page never waits for it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import random
import re
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from .sae import context_text

log = logging.getLogger(__name__)

DEFAULT_MODEL = "gpt-4o-mini"
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


class LLMError(RuntimeError):
    """An LLM request failed; the message is one sentence and never contains the API key."""


@dataclass(frozen=True)
class LLMConfig:
    """Where and how to ask. ``api_key`` is kept out of repr, cache keys and every message."""

    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    model: str = DEFAULT_MODEL
    timeout_s: float = 30.0
    max_retries: int = 3
    backoff_s: float = 1.0
    max_backoff_s: float = 20.0
    cache_dir: Path | None = None
    temperature: float = 0.0

    @classmethod
    def from_env(cls, **overrides) -> LLMConfig:
        values = {
            "base_url": os.environ.get("OPENAI_BASE_URL") or None,
            "api_key": os.environ.get("OPENAI_API_KEY") or None,
            "model": os.environ.get("CIRCUITVIZ_LLM_MODEL") or DEFAULT_MODEL,
        }
        values.update(overrides)
        return cls(**values)

    @property
    def enabled(self) -> bool:
        return bool(self.base_url or self.api_key)

    def resolved_cache_dir(self) -> Path:
        if self.cache_dir is not None:
            return Path(self.cache_dir)
        base = os.environ.get("CIRCUITVIZ_CACHE") or Path.home() / ".cache" / "circuitviz"
        return Path(base) / "llm"


def llm_status(config: LLMConfig | None = None) -> tuple[bool, str]:
    """(enabled, one sentence for the UI)."""
    config = config or LLMConfig.from_env()
    if not config.enabled:
        return False, OFF_MESSAGE
    where = config.base_url or "the OpenAI API"
    return True, f"LLM labels use {config.model} at {where}."


def _redact(text: str, secret: str | None) -> str:
    if secret:
        text = text.replace(secret, "***")
    return text


class LLMLabeler:
    """Descriptions and judge checks through one OpenAI-compatible endpoint, cached on disk."""

    def __init__(self, config: LLMConfig | None = None, sleep: Callable[[float], None] = time.sleep):
        self.config = config or LLMConfig.from_env()
        if not self.config.enabled:
            raise LLMError(OFF_MESSAGE)
        self._sleep = sleep
        self._client = None
        self._lock = threading.Lock()
        self.requests_sent = 0  # requests that reached the endpoint (retries included), for tests

    # ----- transport ---------------------------------------------------------------------------
    def _openai(self):
        if self._client is None:
            from openai import OpenAI

            self._client = OpenAI(
                base_url=self.config.base_url,
                # local endpoints often need no key; the client insists on one
                api_key=self.config.api_key or "no-key",
                timeout=self.config.timeout_s,
                max_retries=0,  # retries are ours: bounded, with backoff, and logged without secrets
            )
        return self._client

    def _cache_path(self, messages: list[dict], max_tokens: int) -> Path:
        key = json.dumps(
            {
                "base_url": self.config.base_url,
                "model": self.config.model,
                "temperature": self.config.temperature,
                "max_tokens": max_tokens,
                "messages": messages,
            },
            sort_keys=True,
        )
        return self.config.resolved_cache_dir() / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"

    def chat(self, messages: list[dict], max_tokens: int = 120) -> tuple[str, bool]:
        """(reply text, came from the cache). Retries timeouts, 429 and 5xx; LLMError otherwise."""
        path = self._cache_path(messages, max_tokens)
        if path.is_file():
            try:
                return json.loads(path.read_text())["reply"], True
            except (OSError, ValueError, KeyError):
                log.warning("unreadable LLM cache entry %s; asking again", path.name)
        reply = self._ask(messages, max_tokens)
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(f".tmp{os.getpid()}.{threading.get_ident()}")
        temporary.write_text(json.dumps({"model": self.config.model, "reply": reply}))
        temporary.replace(path)
        return reply, False

    def _ask(self, messages: list[dict], max_tokens: int) -> str:
        import openai

        attempts = self.config.max_retries + 1
        for attempt in range(attempts):
            retry_after = None
            try:
                with self._lock:
                    self.requests_sent += 1
                response = self._openai().chat.completions.create(
                    model=self.config.model,
                    messages=messages,
                    max_tokens=max_tokens,
                    temperature=self.config.temperature,
                )
                return self._reply_text(response)
            except (openai.APITimeoutError, openai.APIConnectionError) as error:
                reason = "timed out" if isinstance(error, openai.APITimeoutError) else "could not be reached"
            except (openai.RateLimitError, openai.InternalServerError) as error:
                reason = f"answered {error.status_code}"
                retry_after = _retry_after(error)
            except openai.APIStatusError as error:
                raise LLMError(
                    f"The LLM endpoint refused the request with status {error.status_code}; check the "
                    "model name, the API key and OPENAI_BASE_URL."
                ) from None
            except LLMError:
                raise
            except Exception as error:  # an unreadable body: not JSON, or not a chat completion
                raise LLMError(
                    "The LLM endpoint's reply was not a chat completion "
                    f"({_redact(type(error).__name__, self.config.api_key)}); check that OPENAI_BASE_URL "
                    "points at an OpenAI-compatible /v1 endpoint."
                ) from None
            if attempt + 1 == attempts:
                raise LLMError(
                    f"The LLM endpoint {reason} {attempts} times in a row; try again later or raise "
                    "the timeout."
                )
            delay = min(self.config.max_backoff_s, self.config.backoff_s * 2**attempt)
            if retry_after is not None:
                delay = min(self.config.max_backoff_s, max(delay, retry_after))
            log.info("LLM request %s; retry %d/%d in %.2fs", reason, attempt + 1, attempts - 1, delay)
            self._sleep(delay)
        raise LLMError("The LLM request was not sent.")  # unreachable: the loop returns or raises

    @staticmethod
    def _reply_text(response) -> str:
        try:
            text = response.choices[0].message.content
        except (AttributeError, IndexError, TypeError):
            text = None
        if not isinstance(text, str) or not text.strip():
            raise LLMError("The LLM endpoint sent an empty reply; try another model.")
        return text.strip()

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


def _retry_after(error) -> float | None:
    try:
        value = error.response.headers.get("retry-after")
        return float(value) if value is not None else None
    except (AttributeError, TypeError, ValueError):
        return None


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
    for value in values:
        try:
            number = int(value)
        except (TypeError, ValueError):
            continue
        if 1 <= number <= count:
            numbers.add(number)
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
