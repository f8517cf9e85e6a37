"""Every built-in family's details, and a stored result's details read back into their class.

Importing this module registers the built-in kinds (each family's details module registers its
class as it is defined); a family defined elsewhere registers its own with ``register_details``.
"""

from __future__ import annotations

from .acc import ACCDetails
from .base import DETAILS, NEUTRAL_PROMPT_WORDS, MethodDetails, ResultFormatError
from .decomposition import DecompositionDetails
from .edge_pruning import EdgePruningDetails
from .ensemble import EnsembleDetails
from .lasso import LassoDetails
from .neurons import NeuronDetails
from .own_circuit import OwnCircuitDetails
from .paraphrase_pruning import ParaphrasePruningDetails
from .query import QueryCircuitDetails

BUILT_IN: tuple[type[MethodDetails], ...] = (
    QueryCircuitDetails,
    ACCDetails,
    LassoDetails,
    EnsembleDetails,
    EdgePruningDetails,
    OwnCircuitDetails,
    ParaphrasePruningDetails,
    DecompositionDetails,
    NeuronDetails,
)


def details_from_state(state: dict | None) -> MethodDetails | None:
    """The details of a format-2+ stored result (``{"kind", "version", "data"}``), or None."""
    if not state:
        return None
    kind = state.get("kind")
    if kind not in DETAILS:
        raise ResultFormatError(
            f"This stored result carries details of kind {kind!r}, which this circuitviz does not know; "
            "run the method again."
        )
    return DETAILS[kind].from_dict(state.get("data") or {}, state.get("version"))


# format 1 wrote a family's kind only for ACC++; the two other families with details then are
# known by the key each always wrote (those files are fixed: nothing new is read this way)
FORMAT_1_KINDS = {"query_circuits_version": QueryCircuitDetails.kind, "lambda_path": LassoDetails.kind}


def legacy_details(extra: dict) -> MethodDetails | None:
    """Details from a format-1 result's ``extra`` dict (their keys are the typed fields); every
    later format stores its details' kind and version explicitly (``details_to_state``)."""
    if not extra:
        return None
    kind = extra.get("kind") or next((kind for key, kind in FORMAT_1_KINDS.items() if key in extra), None)
    if kind in DETAILS:
        return DETAILS[kind].from_dict(extra, extra.get("query_circuits_version"))
    raise ResultFormatError(
        "This stored result was made by an older circuitviz whose details this version cannot read; "
        "run the method again."
    )


def reference_words(method: str) -> str:
    """What NDF's 0 is, in words, for a task with no corrupted prompt under ``method`` (the batch
    summary's line): the method's own reference (ACC++: its found signals knocked out), else
    ``NEUTRAL_PROMPT_WORDS``. Families register under their method's name (ACC++: "acc++")."""
    found = DETAILS.get(method)
    return (found.no_corrupted_reference if found is not None else "") or NEUTRAL_PROMPT_WORDS
