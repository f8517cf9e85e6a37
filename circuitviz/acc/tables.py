"""Rows for tables of an ACC++ result (its ``ACCDetails`` in, plain dicts out; the Signals page
shows them). Reads the details by attribute only, so the page imports this without torch."""

from __future__ import annotations

from collections.abc import Mapping


def decision_label(decision: Mapping) -> str:
    """One line naming a decision: head, destination token -> source token, weight."""
    return (
        f"#{decision['index']} a{decision['layer']}.h{decision['head']}: "
        f"{decision['destination_token']!r} ({decision['destination']}) attends "
        f"{decision['source_token']!r} ({decision['source']}), weight {decision['weight']:.3f}"
    )


def decision_rows(details) -> list[dict]:
    """The attention decisions of the traced circuit, in tracing order."""
    rows = []
    for decision in details.decisions:
        rows.append(
            {
                "#": decision["index"],
                "head": f"a{decision['layer']}.h{decision['head']}",
                "destination": f"{decision['destination_token']!r} ({decision['destination']})",
                "source": f"{decision['source_token']!r} ({decision['source']})",
                "attention weight": round(decision["weight"], 4),
                "threshold": round(decision["threshold"], 4),
                "query signals": len(decision["query"]["removals"]),
                "key signals": len(decision["key"]["removals"]),
                "below threshold": bool(decision["query"]["reached"] and decision["key"]["reached"]),
                "depth": decision["depth"],
            }
        )
    return rows


def signal_rows(details, index: int) -> list[dict]:
    """The signals of decision ``index``: one row per (side, upstream component at a position)."""
    rows = []
    tokens = details.tokens
    for edge in details.edges:
        if edge.get("decision") != index:
            continue
        node, _, position = edge["source"].rpartition("@")
        position = int(position)
        via = edge.get("via_source")
        rows.append(
            {
                "side": "query" if edge["side"] == "q" else "key",
                "upstream component": node,
                "position": f"{tokens[position]!r} ({position})" if position < len(tokens) else str(position),
                "read from": ""
                if via is None
                else f"{tokens[via]!r} ({via})"
                if via < len(tokens)
                else str(via),
                "singular directions": ", ".join(str(k) for k in edge["directions"]),
                "rank": edge["rank"],
                "IG attribution": round(edge["attribution"], 4),
                "weight drop": round(edge["weight_drop"], 4),
            }
        )
    rows.sort(key=lambda row: (row["side"] != "query", -row["IG attribution"]))
    return rows


def knockout_rows(details) -> list[dict]:
    """The paper's knockout: clean run, found signals removed, as many random signals removed."""
    knockout = (details.faithfulness or {}).get("knockout") or {}
    if not knockout:
        return []
    clean, found, rand = knockout.get("clean", {}), knockout.get("found", {}), knockout.get("random", {})

    def value(number, digits=3):
        return None if number is None else round(float(number), digits)

    return [
        {
            "run": "clean",
            "metric": value(clean.get("metric")),
            "mean traced attention": value(clean.get("mean_weight")),
            "residual cosine": 1.0,
            "residual norm ratio": 1.0,
        },
        {
            "run": f"{knockout.get('n_signals', 0)} found signals removed",
            "metric": value(found.get("metric")),
            "mean traced attention": value(found.get("mean_weight")),
            "residual cosine": value(found.get("cosine"), 4),
            "residual norm ratio": value(found.get("norm_ratio"), 4),
        },
        {
            "run": f"as many random signals removed (mean of {knockout.get('n_random_draws', 0)})",
            "metric": value(rand.get("metric")),
            "mean traced attention": value(rand.get("mean_weight")),
            "residual cosine": value(rand.get("cosine"), 4),
            "residual norm ratio": value(rand.get("norm_ratio"), 4),
        },
    ]
