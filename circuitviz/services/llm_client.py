"""The one client for OpenAI-compatible chat endpoints (the paraphrase source and the LLM labels).

Where to ask comes from an ``LLMConfig``: the arguments, else ``OPENAI_BASE_URL``,
``OPENAI_API_KEY`` and ``CIRCUITVIZ_LLM_MODEL``. ``ChatClient.chat`` sends one chat request
through the ``openai`` package (loaded on first use) and returns the reply's text:

- timeouts, unreachable endpoints, 429 and 5xx are retried ``max_retries`` times with
  exponential backoff (a Retry-After header lengthens the wait, up to ``max_backoff_s``); the
  ``openai`` package's own retries are off, so the number of requests is bounded here;
- every other failure (a refused key, an unknown model, a body that is not a chat completion,
  an empty reply) is an ``LLMError`` whose message is one sentence saying what to do;
- the API key never appears in a message, a log line, a URL or a cache file: it travels only in
  the Authorization header, and the config's repr leaves it out;
- with ``cache=True`` replies are kept on disk, keyed by endpoint, model, options and messages
  (never by the key), so a request is paid for once.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from . import assets

log = logging.getLogger(__name__)

DEFAULT_MODEL = "gpt-4o-mini"


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
        """The environment's endpoint, key and model; ``overrides`` win unless None or empty."""
        values = {
            "base_url": os.environ.get("OPENAI_BASE_URL") or None,
            "api_key": os.environ.get("OPENAI_API_KEY") or None,
            "model": os.environ.get("CIRCUITVIZ_LLM_MODEL") or DEFAULT_MODEL,
        }
        values.update({key: value for key, value in overrides.items() if value not in (None, "")})
        return cls(**values)

    @property
    def enabled(self) -> bool:
        return bool(self.base_url or self.api_key)

    @property
    def where(self) -> str:
        """The endpoint as messages name it."""
        return self.base_url or "api.openai.com"

    def resolved_cache_dir(self) -> Path:
        if self.cache_dir is not None:
            return Path(self.cache_dir)
        return assets.cache_dir("llm")


def redact(text: str, secret: str | None) -> str:
    """``text`` with ``secret`` replaced by ***."""
    return text.replace(secret, "***") if secret else text


class ChatClient:
    """Chat requests to one endpoint, retried within bounds, optionally cached on disk."""

    def __init__(self, config: LLMConfig, sleep: Callable[[float], None] = time.sleep):
        self.config = config
        self._sleep = sleep
        self._client = None
        self._lock = threading.Lock()
        self.requests_sent = 0  # requests that reached the transport (retries included)

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

    def chat(self, messages: list[dict], cache: bool = False, **options) -> tuple[str, bool]:
        """(reply text, came from the cache). ``options`` go to the request beside the config's
        model and temperature (``max_tokens``, ``seed``); LLMError in one sentence on failure."""
        options = {"temperature": self.config.temperature, **options}
        path = self._cache_path(messages, options) if cache else None
        if path is not None and path.is_file():
            try:
                kept = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                kept = None
            if isinstance(kept, dict) and isinstance(kept.get("reply"), str):
                return kept["reply"], True
            log.warning("unreadable LLM cache entry %s; asking again", path.name)  # a list, a number
        reply = self._ask(messages, options)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            temporary = path.with_suffix(f".tmp{os.getpid()}.{threading.get_ident()}")
            temporary.write_text(json.dumps({"model": self.config.model, "reply": reply}))
            temporary.replace(path)
        return reply, False

    def _cache_path(self, messages: list[dict], options: dict) -> Path:
        key = {"base_url": self.config.base_url, "model": self.config.model, "messages": messages, **options}
        digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:32]
        return self.config.resolved_cache_dir() / f"{digest}.json"

    def _ask(self, messages: list[dict], options: dict) -> str:
        """One request, retried on timeouts, unreachable endpoints, 429 and 5xx."""
        import openai

        attempts = self.config.max_retries + 1
        for attempt in range(attempts):
            retry_after = None
            try:
                with self._lock:
                    self.requests_sent += 1
                response = self._openai().chat.completions.create(
                    model=self.config.model, messages=messages, **options
                )
                return reply_text(response)
            except openai.APITimeoutError:
                failure = (
                    f"The LLM endpoint timed out {attempts} times in a row; try again later or raise the "
                    "timeout."
                )
            except openai.APIConnectionError:
                failure = (
                    f"Could not reach the LLM endpoint at {self.config.where} in {attempts} tries; check "
                    "OPENAI_BASE_URL or try again later."
                )
            except (openai.RateLimitError, openai.InternalServerError) as error:
                failure = (
                    f"The LLM endpoint answered {error.status_code} {attempts} times in a row; try again "
                    "later or raise the timeout."
                )
                retry_after = _retry_after(error)
            except openai.APIStatusError as error:
                raise LLMError(self._refusal(error.status_code)) from None
            except LLMError:
                raise
            except Exception as error:  # an unreadable body: not JSON, or not a chat completion
                raise LLMError(
                    "The LLM endpoint's reply was not a chat completion "
                    f"({redact(type(error).__name__, self.config.api_key)}); check that OPENAI_BASE_URL "
                    "points at an OpenAI-compatible /v1 endpoint."
                ) from None
            if attempt + 1 == attempts:
                raise LLMError(failure)
            self._wait(attempt, attempts, retry_after)
        raise LLMError("The LLM request was not sent.")  # unreachable: the loop returns or raises

    def _wait(self, attempt: int, attempts: int, retry_after: float | None) -> None:
        delay = min(self.config.max_backoff_s, self.config.backoff_s * 2**attempt)
        if retry_after is not None:
            delay = min(self.config.max_backoff_s, max(delay, retry_after))
        log.info("LLM request failed; retry %d/%d in %.2fs", attempt + 1, attempts - 1, delay)
        self._sleep(delay)

    def _refusal(self, status: int) -> str:
        """The sentence for a status that retrying cannot change."""
        where = self.config.where
        if status == 401:
            return f"The LLM endpoint at {where} refused the API key; check OPENAI_API_KEY (status 401)."
        if status == 404:
            return (
                f"The LLM endpoint at {where} has no model {self.config.model!r} (or no chat API there); "
                "choose a model it serves."
            )
        return (
            f"The LLM endpoint at {where} refused the request with status {status}; check the model name, "
            "the API key and OPENAI_BASE_URL."
        )


def reply_text(response) -> str:
    """The text of a chat completion's first choice; LLMError when there is none."""
    try:
        text = response.choices[0].message.content
    except (AttributeError, IndexError, TypeError):
        text = None
    if not isinstance(text, str) or not text.strip():
        raise LLMError("The LLM endpoint sent an empty reply; try another model.")
    return text.strip()


def _retry_after(error) -> float | None:
    try:
        value = error.response.headers.get("retry-after")
        return float(value) if value is not None else None
    except (AttributeError, TypeError, ValueError):
        return None
