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


# the signal table's columns, short enough that all of them fit a 1,000 px page (540 px of table):
# what each means is in its header's help (``SIGNAL_HELP``)
SIGNAL_HELP = {
    "side": "whether the signal reaches the head through its query or its keys",
    "component": "the upstream head or MLP whose output carries the signal",
    "position": "the token (and its position) where that component writes the signal",
    "read from": "for a head carrying it: the position its value reads from (empty otherwise)",
    "IG": "the signal's integrated-gradients attribution to the attention weight of the decision",
    "drop": "how much the decision's attention weight falls when the signal is removed",
    "directions": "the singular directions of the head's query-key form it is carried by; their "
    "count is the signal's rank (1: one direction)",
}


def signal_rows(details, index: int) -> list[dict]:
    """The signals of decision ``index``: one row per (side, upstream component at a position),
    in the columns of ``SIGNAL_HELP``."""
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
                "component": node,
                "position": f"{tokens[position]!r} ({position})" if position < len(tokens) else str(position),
                "read from": ""
                if via is None
                else f"{tokens[via]!r} ({via})"
                if via < len(tokens)
                else str(via),
                "IG": round(edge["attribution"], 4),
                "drop": round(edge["weight_drop"], 4),
                "directions": ", ".join(str(k) for k in edge["directions"]),
            }
        )
    rows.sort(key=lambda row: (row["side"] != "query", -row["IG"]))
    return rows


KNOCKOUT_RUNS = ("clean", "found removed", "random removed")


def knockout_rows(details) -> list[dict]:
    """The paper's knockout, one row per measure and one column per run (``KNOCKOUT_RUNS``: the
    clean run, the found signals removed, as many random signals removed): a row per run put five
    long headers side by side, cut at 1,000 px. ``knockout_caption`` says how many of each."""
    knockout = (details.faithfulness or {}).get("knockout") or {}
    if not knockout:
        return []
    runs = [knockout.get("clean", {}), knockout.get("found", {}), knockout.get("random", {})]

    def value(number, digits=3):
        return None if number is None else round(float(number), digits)

    measures = (
        ("metric", "metric", 3, None),
        ("mean traced attention", "mean_weight", 3, None),
        ("residual cosine", "cosine", 4, 1.0),  # the clean run's residual is the clean run's
        ("residual norm ratio", "norm_ratio", 4, 1.0),
    )
    return [
        {
            "measure": label,
            **{
                name: clean_value
                if name == "clean" and clean_value is not None
                else value(run.get(key), digits)
                for name, run in zip(KNOCKOUT_RUNS, runs)
            },
        }
        for label, key, digits, clean_value in measures
    ]


def knockout_caption(details) -> str:
    """What the knockout table's runs are, with their counts."""
    knockout = (details.faithfulness or {}).get("knockout") or {}
    found, draws = knockout.get("n_signals", 0), knockout.get("n_random_draws", 0)
    return (
        f"found removed: the {found:,} signals found; random removed: as many random signals, the mean "
        f"of {draws:,} draws. metric: the answer's metric after the removal; mean traced attention: the "
        "attention weight of the traced decisions; residual cosine and norm ratio: how close the final "
        "residual stays to the clean run's."
    )
