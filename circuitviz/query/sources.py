"""Where paraphrase pairs come from, behind one call: templates, an LLM, or the user's text.

Best-of-N (Query Circuits) scores the prompt q and p paraphrases q_1..q_p, each with its own
corrupted version q_i', and keeps the candidate circuit most faithful on q. Every pair must keep
q's answer and foils. ``gather_paraphrases`` gives checked pairs from one source:

- ``template``: built-in families recognise the prompt, rewrite and corrupt it offline and
  deterministically from a seed (``templates``);
- ``openai``: an LLM behind any OpenAI-compatible endpoint (``llm_source``);
- ``file``: pairs the user gives as JSONL, a JSON list, CSV or typed lines (``pairs``).
"""

from __future__ import annotations

from collections.abc import Callable

from ..core.tasks import PromptTask
from .checks import validate_pairs
from .llm_source import llm_paraphrases, llm_settings
from .pairs import ParaphraseError, ParaphrasePair, ParaphraseRecord, paraphrase_records
from .templates import template_paraphrases, template_rewrites

SOURCES = ("template", "openai", "file")


def gather_paraphrases(
    model,
    task: PromptTask,
    source: str = "template",
    n: int = 9,
    seed: int = 0,
    text: str | tuple[ParaphraseRecord, ...] = (),
    llm_model: str | None = None,
    max_tokens: int = 256,
    progress: Callable[[str, float], None] | None = None,
    need_corrupted: bool = True,
) -> list[ParaphrasePair]:
    """Checked pairs from one source: 'template', 'openai' or 'file' (``text`` holds the pairs:
    the typed records of a Config, or text in any format ``paraphrase_records`` reads).
    ``need_corrupted`` False: a file's pairs of a prompt given no corrupted prompt are checked too."""
    if source not in SOURCES:
        raise ParaphraseError(f"Unknown paraphrase source {source!r}; choose one of {', '.join(SOURCES)}.")
    if progress:
        progress("paraphrases", 0.0)
    if source == "template":
        pairs = template_paraphrases(model, task, n, seed, max_tokens=max_tokens, progress=progress)
    elif source == "openai":
        pairs = llm_paraphrases(model, task, n, seed, llm_model=llm_model or None, max_tokens=max_tokens)
    else:
        records = paraphrase_records(text)
        if not records:
            raise ParaphraseError(
                "The file source needs paraphrases; give a file (--paraphrases FILE) or type them in."
            )
        pairs = validate_pairs(
            model,
            task,
            [record.pair(task) for record in records],
            max_tokens=max_tokens,
            progress=progress,
            need_corrupted=need_corrupted,
        )
    if progress:
        progress("paraphrases", 1.0)
    return pairs


def gather_configured(
    ctx, config, progress: Callable[[str, float], None] | None = None
) -> list[ParaphrasePair]:
    """The checked pairs of the run's prompt from a Config with the paraphrase settings
    (``methods.paraphrase_pairs.ParaphraseSource``: source, pairs, count, seed, LLM); none when
    it asks for 0 and is not a file. Raises ParaphraseError with the source's one sentence."""
    if config.paraphrase_source != "file" and int(config.n_paraphrases) <= 0:
        return []
    return gather_paraphrases(
        ctx.model,
        ctx.task,
        config.paraphrase_source,
        int(config.n_paraphrases),
        int(config.seed),
        config.paraphrases,
        config.llm_model or None,
        ctx.max_tokens,
        progress,
    )


def source_problem(task: PromptTask, config) -> str:
    """The sentence a run of ``config``'s paraphrase source ends with before its first pass, to say
    before Run ('' when there is none): no template family recognises the prompt (or can keep its
    answer), or the LLM source has no API key. The Paraphrases page said them only once Run was
    pressed, under an estimate of a run that could not start. Needs no model."""
    source = getattr(config, "paraphrase_source", None)
    if source == "file" or int(getattr(config, "n_paraphrases", 0) or 0) <= 0:
        return ""
    try:
        if source == "template":
            template_rewrites(task, int(config.seed))
        elif source == "openai":
            llm_settings(config.llm_model or None)
    except ParaphraseError as error:
        return str(error)
    return ""
