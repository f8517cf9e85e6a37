"""The circuit drawings an AppTest run put on the page: each ``ui.graph_view`` component's data
(its vis-network nodes and edges at their fixed places), read back from the element's proto."""

from __future__ import annotations

import json


def graph_data(at) -> list[dict]:
    """The data of every circuit drawing on the page, in page order."""
    found = []
    for element in at.get("bidi_component"):
        text = element.proto.json
        data = json.loads(text) if text else {}
        if isinstance(data, dict) and "nodes" in data and "edges" in data:
            found.append(data)
    return found


def nodes_and_edges(data: dict) -> tuple[list[dict], list[dict]]:
    return data["nodes"], data["edges"]
