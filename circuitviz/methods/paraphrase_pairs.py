"""Paraphrases of a prompt for the methods that check, resample or fit over them.

Edge Pruning measures its circuits on template paraphrases of the prompt (a mask fitted to one
sentence shows up as such) and the ensemble resamples its scores over them (``template_tasks``).
Best-of-N's family and paraphrase pruning gather them from any source (templates, an LLM, the
user's list) with one set of settings (``ParaphraseSource``, which their Configs inherit) and one
call (``query.sources.gather_configured``). All reach the paraphrase generators through this module only.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.tasks import PromptTask
from ..core.text import given
from ..query.pairs import ParaphraseError, ParaphraseRecord, paraphrase_records, read_pairs_text, records_text
from ..query.sources import SOURCES
from ..query.templates import template_paraphrases
from .settings import check_settings, paraphrases_setting, setting


def template_tasks(
    model, task: PromptTask, n: int, seed: int = 0, max_tokens: int = 256, refused: list | None = None
) -> tuple[list[PromptTask], str]:
    """Up to ``n`` checked template paraphrases of ``task`` (each with its corruption), and a
    sentence saying why there are fewer when there are ('' otherwise). ``refused``, when given,
    receives (clean prompt, reason) of every generated paraphrase the check refused."""
    if n <= 0:
        return [], ""
    try:
        pairs = template_paraphrases(model, task, n, seed, max_tokens=max_tokens)
    except ParaphraseError as error:
        return [], str(error)
    if refused is not None:
        refused += [(pair.clean, pair.reason) for pair in pairs if not pair.usable()]
    usable = [pair.task() for pair in pairs if pair.usable()][:n]
    note = ""
    if len(usable) < n:
        note = (
            f"{len(usable)} of the {n} template paraphrases asked for passed the check (same token "
            "length as their corruption, the same answer from the model)."
        )
    return usable, note


FILE_NEEDS_PAIRS = (
    "The file source needs paraphrases: give them in 'paraphrases', one 'paraphrase || corrupted' "
    "pair a line (--paraphrases FILE on the command line), or choose the template source."
)

# the settings that mean something only for some sources (the form hides them for the others)
GENERATED = ("paraphrase_source", ("template", "openai"))  # generated, not read from a file
FROM_FILE = ("paraphrase_source", ("file",))
FROM_LLM = ("paraphrase_source", ("openai",))


@dataclass(frozen=True)
class ParaphraseSource:
    """Where a method's paraphrases come from, one home for the settings every method that
    gathers them shares (Best-of-N's family, paraphrase pruning): the source, the user's pairs,
    how many to generate, the seed and the LLM. A method's Config inherits these fields (first in
    its form, in this order) and may give ``n_paraphrases`` its own default."""

    paraphrase_source: str = setting(
        "template",
        "template (built-in families), openai (an LLM) or file (``paraphrases``).",
        choices=SOURCES,
    )
    paraphrases: tuple[ParaphraseRecord, ...] = setting(
        (),
        "the pairs as text (JSONL, a JSON list, CSV or 'paraphrase<TAB>corrupted' lines; the command "
        "line's --paraphrases FILE reads them from that file).",
        widget="lines",
        parse=paraphrase_records,
        show=records_text,
        applies=FROM_FILE,
    )
    n_paraphrases: int = paraphrases_setting(
        9,
        "p, how many paraphrases to generate (template/openai; a file gives all it has).",
        applies=GENERATED,
    )
    seed: int = setting(0, "seeds the template choice and the LLM request.", applies=GENERATED)
    llm_model: str = setting(
        "",
        "the LLM's name ('' = $CIRCUITVIZ_LLM_MODEL or gpt-4o-mini).",
        applies=FROM_LLM,
    )

    def __post_init__(self):
        check_settings(self)  # typed tuples, and every bound its fields declare
        if self.paraphrase_source not in SOURCES:
            raise ValueError(
                f"paraphrase_source must be one of {', '.join(SOURCES)}, not {given(self.paraphrase_source)}."
            )
        if self.paraphrase_source == "file" and not self.paraphrases:
            # said by the form before Run (Run disabled), not by the run after it starts: the app
            # said "give a file (--paraphrases FILE) or type them in" only once Run was pressed
            raise ParaphraseError(FILE_NEEDS_PAIRS)


def paraphrases_from_cli(settings: dict) -> dict:
    """The command line's ``--paraphrases FILE``: the file's pairs as text, and the file source
    unless another was named."""
    settings = dict(settings)
    if settings.get("paraphrases"):
        settings["paraphrases"] = read_pairs_text(settings["paraphrases"])
        settings.setdefault("paraphrase_source", "file")
    return settings
