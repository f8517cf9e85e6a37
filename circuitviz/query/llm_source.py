"""The LLM source: paraphrase pairs written by an LLM behind an OpenAI-compatible endpoint.

The request asks for n paraphrases that keep the prompt's answer, each with a corrupted version
that replaces the key fact; the reply must be one JSON object (``parse_llm_reply`` is strict).
Requests go through the project's one chat client (``circuitviz.services.llm_client``): bounded retries
with backoff, one-sentence errors, the API key never shown. The pairs are then checked against
the model like every other source's.
"""

from __future__ import annotations

import json
import os
import re

from ..core import json_text
from ..core.tasks import PromptTask
from ..services.llm_client import ChatClient, LLMConfig, LLMError
from .checks import validate_pairs
from .families import recognise
from .families.mmlu import corrupt_paraphrase
from .pairs import ParaphraseError, ParaphrasePair

_SYSTEM_PROMPT = (
    "You write paraphrases of prompts for interpretability experiments on a language model. "
    "Reply with JSON only, no prose and no code fence."
)
_FENCE = re.compile(r"^```(?:json)?\s*\n(?P<body>.*)\n```$", re.DOTALL)
# paraphrases are asked for once: one retry of a timeout, an unreachable endpoint, 429 or 5xx
_RETRIES = 1
_TEMPERATURE = 0.7


def _llm_request(task: PromptTask, n: int) -> str:
    return (
        f"Prompt: {json.dumps(task.clean)}\n"
        f"The model's next token should be {json.dumps(task.answer)}"
        + (f" rather than {json.dumps(list(task.foils))}" if task.foils else "")
        + ".\n"
        f"Write {n} paraphrases of the prompt. Each must keep the meaning, end where the prompt ends so "
        f"that the same next token {json.dumps(task.answer)} is still the right continuation, and use "
        "different wording from the prompt and from each other. For each paraphrase also write a "
        "corrupted version that replaces the key fact (a name, number, subject or the correct option) "
        "with a different one of the same length, so that the right next token changes; change "
        "nothing else. For a multiple choice question, keep every option with its letter and its text "
        "word for word.\n"
        'Reply exactly as: {"pairs": [{"paraphrase": "...", "corrupted": "..."}, ...]}'
    )


def parse_llm_reply(content: str | None, task: PromptTask, n: int, source: str) -> list[ParaphrasePair]:
    """The LLM's reply as pairs. Strict: the whole reply is one JSON object (at most wrapped in
    one ```json fence) with a list ``pairs`` of objects holding strings ``paraphrase`` and
    ``corrupted``; anything else is a ParaphraseError. Items past n are dropped."""
    text = (content or "").strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced["body"].strip()
    try:
        data = json_text.loads(text)  # a number of 5,000 digits: a JSONDecodeError, not Python's ValueError
    except json.JSONDecodeError as error:
        raise ParaphraseError(
            f"The LLM's reply is not the JSON asked for ({error.msg}); try again or choose another model."
        ) from None
    except RecursionError:  # 100,000 '[': Python's RecursionError reached the page (2026-12-07)
        raise ParaphraseError(
            "The LLM's reply is not the JSON asked for (it is nested too deeply); try again or choose another model."
        ) from None
    items = data.get("pairs") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise ParaphraseError("The LLM's reply has no list 'pairs'; try again or choose another model.")
    return [_item_pair(item, number, task, source) for number, item in enumerate(items[:n], start=1)]


def _item_pair(item, number: int, task: PromptTask, source: str) -> ParaphrasePair:
    """One item of the reply as a pair, flagged when it lacks either string."""
    clean = item.get("paraphrase") if isinstance(item, dict) else None
    corrupted = item.get("corrupted") if isinstance(item, dict) else None
    pair = ParaphrasePair(
        clean if isinstance(clean, str) else "",
        corrupted if isinstance(corrupted, str) else "",
        task.answer,
        task.foils,
        source,
        task.metric,
    )
    if not isinstance(clean, str) or not isinstance(corrupted, str):
        pair.problems.append(f"the LLM's item {number} lacks a 'paraphrase' or 'corrupted' string")
    elif not clean.strip() or not corrupted.strip():
        pair.problems.append(f"the LLM's item {number} has an empty paraphrase or corruption")
    return pair


def llm_settings(
    llm_model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    timeout: float = 120.0,
) -> LLMConfig:
    """The chat client's config from the arguments, else OPENAI_BASE_URL / OPENAI_API_KEY /
    CIRCUITVIZ_LLM_MODEL; ParaphraseError when no key is set."""
    if not (api_key or os.environ.get("OPENAI_API_KEY", "")):
        raise ParaphraseError(
            "No OpenAI API key is set; set OPENAI_API_KEY (and OPENAI_BASE_URL for another "
            "OpenAI-compatible endpoint), or use the template or file source."
        )
    return LLMConfig.from_env(
        base_url=base_url,
        api_key=api_key,
        model=llm_model,
        timeout_s=timeout,
        max_retries=_RETRIES,
        temperature=_TEMPERATURE,
    )


def llm_paraphrases(
    model,
    task: PromptTask,
    n: int = 9,
    seed: int = 0,
    llm_model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    timeout: float = 120.0,
    max_tokens: int = 256,
) -> list[ParaphrasePair]:
    """n paraphrase pairs written by an LLM behind an OpenAI-compatible chat endpoint, checked.

    The endpoint, key and model come from the arguments or OPENAI_BASE_URL, OPENAI_API_KEY and
    CIRCUITVIZ_LLM_MODEL (default gpt-4o-mini). Errors (no key, unreachable endpoint, refused
    key, unknown model, a reply that is not the JSON asked for) are one ParaphraseError sentence.
    """
    config = llm_settings(llm_model, base_url, api_key, timeout)
    messages = [
        {"role": "system", "content": _SYSTEM_PROMPT},
        {"role": "user", "content": _llm_request(task, n)},
    ]
    try:
        content, _ = ChatClient(config).chat(messages, seed=seed)
    except LLMError as error:
        raise ParaphraseError(str(error)) from None
    pairs = mmlu_corruptions(task, parse_llm_reply(content, task, n, f"openai:{config.model}"))
    return validate_pairs(model, task, pairs, max_tokens=max_tokens)


def mmlu_corruptions(task: PromptTask, pairs: list[ParaphrasePair]) -> list[ParaphrasePair]:
    """For an MMLU prompt, every paraphrase corrupted as the MMLU tasks are (its option markers
    renamed E-H) instead of as the LLM wrote it; a paraphrase that lost or moved an option is
    flagged. Other prompts' pairs are returned as they are."""

    original = recognise(task.clean)
    if original is None or original.family != "mmlu":
        return pairs
    for pair in pairs:
        corrupted, problem = corrupt_paraphrase(original, pair.clean)
        if corrupted is None:
            pair.problems.append(problem)
        else:
            pair.corrupted = corrupted
    return pairs
