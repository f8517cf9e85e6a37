"""A circuit file's fields that ``evaluate`` reads besides its edges' scores, checked before the
model loads: each edge's ``in_graph``, the ``curve``'s budgets and the stored ``circuits``.

A circuit file is untrusted (a file from a colleague, a hand edit, another tool's JSON). Read as
they stood, an ``in_graph`` of ``"false"`` or ``0.5`` put the edge in the circuit (``bool`` of a
text or a number), a budget of ``1.5`` read 1, and a ``curve`` or ``circuits`` of the wrong kind
stopped ``evaluate`` with Python's ``TypeError``, ``AttributeError``, ``KeyError`` or "invalid
literal for int() with base 10" (quoting a 5,000-character value whole), after the model had
loaded (found 2026-12-07 by setting each field of a ``discover --out`` file to values of every
kind). Each is now one sentence naming the field, with the way out.
"""

from __future__ import annotations

import base64
import binascii

from .text import json_given, shown

_BUDGET_DIGITS = 18  # a budget key of more digits is no edge count (int() stops at 4,300 digits)


def circuit_fields_problem(data: dict, origin: str) -> str | None:
    """The first field of a circuit file's JSON object that ``evaluate`` cannot read as its
    format says, in one sentence; None when every one reads."""
    return (
        _edges_problem(data.get("edges"), origin)
        or _curve_problem(data, origin)
        or _circuits_problem(data, origin)
    )


def _edges_problem(edges, origin: str) -> str | None:
    if not isinstance(edges, dict):
        return None  # parse_circuit says it ('edges' must map edge names to ...)
    for name, info in edges.items():
        if isinstance(info, dict):
            flag = info.get("in_graph")
            if flag is not None and not isinstance(flag, bool):
                return (
                    f"{origin}: edge {shown(name)} has 'in_graph' {json_given(flag)}, not true or false; give "
                    "true or false (EAP-IG's format), or leave it out for an edge outside the circuit."
                )
        elif not isinstance(info, bool):
            return (
                f"{origin}: edge {shown(name)} is {json_given(info)}, not true, false or an object with "
                "'score' and 'in_graph'; give EAP-IG's format ({\"score\": 0.5, \"in_graph\": true})."
            )
    return None


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _curve_problem(data: dict, origin: str) -> str | None:
    curve = data.get("curve")
    if curve is None:
        return None
    way_out = "give the file as discover wrote it, or remove 'curve' to evaluate its in_graph circuit alone."
    if not isinstance(curve, list):
        return f"{origin}: 'curve' is {json_given(curve)}, not a list of points; {way_out}"
    for number, point in enumerate(curve, 1):
        budget = point.get("budget") if isinstance(point, dict) else None
        if not isinstance(point, dict):
            return f"{origin}: point {number} of 'curve' is {json_given(point)}, not an object with a 'budget'; {way_out}"
        if not _whole(budget):
            return (
                f"{origin}: point {number} of 'curve' has the budget {json_given(budget)}, not a whole number "
                f"of 1 or more; {way_out}"
            )
    return None


def _budget_key(key: str) -> bool:
    return key.isascii() and key.isdigit() and len(key) <= _BUDGET_DIGITS and int(key) >= 1


def _circuits_problem(data: dict, origin: str) -> str | None:
    circuits = data.get("circuits")
    if circuits is None or circuits == {}:
        return None
    way_out = (
        "give the file as discover wrote it, or remove 'circuits' (each budget of the curve is then "
        "the top-N of the file's scores)."
    )
    if not isinstance(circuits, dict):
        return (
            f"{origin}: 'circuits' is {json_given(circuits)}, not an object of circuits by budget; {way_out}"
        )
    bits = "encoding" in circuits
    if bits and circuits["encoding"] != "bits-base64":
        return (
            f"{origin}: 'circuits' has the encoding {json_given(circuits['encoding'])}, not \"bits-base64\"; "
            f"{way_out}"
        )
    stored = circuits.get("budgets", {}) if bits else circuits
    if not isinstance(stored, dict):
        return f"{origin}: 'circuits' holds 'budgets' {json_given(stored)}, not an object of circuits by budget; {way_out}"
    for key, circuit in stored.items():
        if not _budget_key(key):
            return f"{origin}: 'circuits' names the budget {shown(key, 40)}, not a whole number of 1 or more; {way_out}"
        if bits and not _base64(circuit):
            return (
                f"{origin}: the circuit at budget {key} in 'circuits' is {json_given(circuit)}, not base64 "
                f"text of one bit per edge; {way_out}"
            )
        if not bits and not (isinstance(circuit, list) and all(isinstance(name, str) for name in circuit)):
            return (
                f"{origin}: the circuit at budget {key} in 'circuits' is {json_given(circuit)}, not a list "
                f"of edge names; {way_out}"
            )
    return None


def _base64(text) -> bool:
    if not isinstance(text, str):
        return False
    try:
        base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True
