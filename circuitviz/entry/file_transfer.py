"""``evaluate --transfer-file``: a circuit file's circuits measured on the user's own paraphrases.

``discover`` measures held-out transfer when it makes a circuit; a reviewer who holds only the
circuit file, and paraphrases of their own, could measure them with ``evaluate`` one paraphrase at
a time (``--prompt``, ``--corrupted``, ``--answer``, ``--foil``) and average by hand. This measures
every circuit of the file on every pair, checked as ``discover --transfer-file`` checks them, and
holds out the paraphrases the file's method fitted to or selected on, as far as the file says
(its ``details``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import torch

from ..core.tasks import PromptTask
from ..core.text import first_sentence, json_given
from ..details.base import DETAILS, NEUTRAL_PROMPT, ResultFormatError
from ..measure.transfer import held_out_transfer, transfer_record
from .api import OVER_POSITIONS, given_paraphrases, own_corruption_note, transfer_lines


def file_paraphrases_used(source: dict, origin: str = "the circuit file") -> frozenset[str]:
    """The clean prompts the file's method fitted to or selected on, read from its ``details``
    (none for a file that keeps no details or details of a kind this circuitviz does not know).

    Details of a kind it knows that do not read (another version, a list that is not one, a
    paraphrase that is not text) are refused in one sentence (ValueError): they were read as
    naming no paraphrase, so the ones the method fitted to were measured as held out, unsaid, or
    (a ``fit`` of 5) raised ``TypeError`` after every circuit was measured (2026-12-07)."""
    from ..details import kinds  # noqa: F401  (registers the built-in kinds)

    details = source.get("details")
    if (
        not isinstance(details, dict)
        or not isinstance(details.get("kind"), str)
        or details["kind"] not in DETAILS
    ):
        return frozenset()  # a kind of a list: unhashable, a TypeError from the lookup itself
    kind = DETAILS[details["kind"]]
    try:
        version = details.get("version")
        if version is not None and (isinstance(version, bool) or version != kind.version):  # in our words
            raise ValueError(
                f"its version is {json_given(version)}, and this circuitviz reads {kind.version}"
            )
        for field in dataclasses.fields(kind):  # a list or dict of the format given as another kind
            wanted = field.default_factory if field.default_factory in (list, dict) else None
            if wanted is not None and field.name in details and not isinstance(details[field.name], wanted):
                raise TypeError(
                    f"its {field.name} is {json_given(details[field.name])}, not a {wanted.__name__}"
                )
        used = kind.from_dict(details, details.get("version")).paraphrases_used()
        wrong = next((text for text in used if not isinstance(text, str)), None)
        if wrong is not None:
            raise TypeError(f"it names the paraphrase {json_given(wrong)}, not text")
    except (ResultFormatError, KeyError, TypeError, ValueError) as error:
        raise ValueError(
            f"{origin}'s details ({details['kind']}) do not read ({first_sentence(error)}), so the paraphrases "
            "its method fitted to cannot be held out of --transfer-file; give the file as discover wrote it."
        ) from None
    return frozenset(used)


def file_transfer(
    model,
    task: PromptTask,
    circuits: Sequence[torch.Tensor],
    budgets: Sequence[int],
    source: dict,
    pairs: str,
    max_tokens: int,
) -> tuple[dict, list[str]]:
    """(the transfer record, its lines) of a file's circuits on the pairs in ``pairs``: the rows
    at the file's budgets (the in_graph row alone when the file has no curve: an edge list)."""
    rows = list(zip(budgets, circuits))
    rows = rows[1:] if len(rows) > 1 else rows  # the in_graph row repeats a budget's circuit
    given, refused = given_paraphrases(model, task, pairs, max_tokens)
    method = source.get("method") if isinstance(source.get("method"), str) else "circuit"
    named = {f"{method}@{budget}": circuit for budget, circuit in rows}  # as discover names them
    used = file_paraphrases_used(source)
    found = held_out_transfer(
        model,
        task,
        named,
        {name: used for name in named},
        count=len(given) + len(refused),
        paraphrases=given,
        max_tokens=max_tokens,
        left_out=refused,
        sought="given",
    )
    record = transfer_record(found, {name: int(name.rsplit("@", 1)[1]) for name in named}, source="given")
    if source.get("positions"):  # the circuits are the edges their units use, as discover measured them
        record["note"] = " ".join(part for part in (OVER_POSITIONS, record["note"]) if part)
    if not task.corrupted:  # each pair brings its own corruption, as discover measures them
        record["note"] = own_corruption_note(record["note"], NEUTRAL_PROMPT)
    return record, transfer_lines(record)
