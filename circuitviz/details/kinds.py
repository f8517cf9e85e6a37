"""Every built-in family's details, and a stored result's details read back into their class.

Importing this module registers the built-in kinds (each family's details module registers its
class as it is defined); a family defined elsewhere registers its own with ``register_details``.
"""

from __future__ import annotations

from ..acc.circuit import ACCDetails
from ..lasso.details import LassoDetails
from ..query.details import QueryCircuitDetails
from .base import DETAILS, MethodDetails, ResultFormatError
from .edge_pruning import EdgePruningDetails
from .ensemble import EnsembleDetails
from .own_circuit import OwnCircuitDetails

BUILT_IN: tuple[type[MethodDetails], ...] = (
    QueryCircuitDetails,
    ACCDetails,
    LassoDetails,
    EnsembleDetails,
    EdgePruningDetails,
    OwnCircuitDetails,
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


def legacy_details(extra: dict) -> MethodDetails | None:
    """Details from a format-1 result's ``extra`` dict (their keys are the typed fields)."""
    if not extra:
        return None
    if "query_circuits_version" in extra:
        return QueryCircuitDetails.from_dict(extra, extra["query_circuits_version"])
    if extra.get("kind") == ACCDetails.kind:
        return ACCDetails.from_dict(extra)
    if "lambda_path" in extra:
        return LassoDetails.from_dict(extra)
    raise ResultFormatError(
        "This stored result was made by an older circuitviz whose details this version cannot read; "
        "run the method again."
    )
