"""Rows for tables of an ACC++ result (its ``ACCDetails`` in, plain dicts out; the Signals page
shows them). Reads the details by attribute only, so the page imports this without torch."""

from __future__ import annotations

from collections.abc import Mapping

from ..core.scripts import script_names
from ..core.text import counted


def token_at(token: str, position: int) -> str:
    """A token and its position as the tables write them, "'日本' (1) [CJK ×2]": the token quoted,
    its position, then the names of the scripts many fonts lack among its characters
    (``core.scripts.script_names``; the Signals page drew `日本の首都は`'s tokens as empty boxes in
    Chromium). The names come last, so a narrow column cuts them, not the position."""
    names = script_names(token)
    return f"{token!r} ({position})" + (f" {names}" if names else "")


def decision_label(decision: Mapping) -> str:
    """One line naming a decision: head, destination token -> source token, weight."""
    return (
        f"#{decision['index']} a{decision['layer']}.h{decision['head']}: "
        f"{token_at(decision['destination_token'], decision['destination'])} attends "
        f"{token_at(decision['source_token'], decision['source'])}, weight {decision['weight']:.3f}"
    )


def decision_rows(details) -> list[dict]:
    """The attention decisions of the traced circuit, in tracing order."""
    rows = []
    for decision in details.decisions:
        rows.append(
            {
                "#": decision["index"],
                "head": f"a{decision['layer']}.h{decision['head']}",
                "destination": token_at(decision["destination_token"], decision["destination"]),
                "source": token_at(decision["source_token"], decision["source"]),
                "attention weight": round(decision["weight"], 4),
                "threshold": round(decision["threshold"], 4),
                "query signals": len(decision["query"]["removals"]),
                "key signals": len(decision["key"]["removals"]),
                "below threshold": bool(decision["query"]["reached"] and decision["key"]["reached"]),
                "depth": decision["depth"],
            }
        )
    return rows


# the signal-edge table's columns, short enough that all of them fit a 1,000 px page (540 px of
# table): what each means is in its header's help (``SIGNAL_HELP``). A row is a signal edge: the
# signals (one singular direction each, as the decision table, the chart and the knockout count
# them) that one upstream component at one position writes into the decision's query or keys;
# its rank is how many. The table was "Its signals", a row "a signal" of rank 13, beside a chart
# whose "signals removed" ran to 14 over two query rows.
SIGNAL_HELP = {
    "side": "whether its signals reach the head through its query or its keys",
    "component": "the upstream head or MLP whose output carries them",
    "position": "the token (and its position) where that component writes them",
    "read from": "for a head carrying them: the position its value reads from (empty otherwise)",
    "IG": "its signals' integrated-gradients attributions to the attention weight of the decision, "
    "summed over its directions",
    "drop": "how much the decision's attention weight fell as its signals were removed, each after "
    "every signal of larger IG before it (the chart below): a side's drops add up to its whole fall, "
    "not to what removing this edge alone would do",
    "rank": "how many signals it groups, one singular direction each (1: one direction); the next "
    "column lists them, whole on a page 1,500 px wide or more (narrower, the table scrolls sideways)",
    "directions": "the singular directions of the head's query-key form its signals lie along; their "
    "count is its rank (1: one direction)",
}


def rank1_shown(summary) -> str:
    """The rank-1 share as the page shows it: "62%", or "—" with no signal edge to share out (a
    run with no decision above its threshold showed "rank-1 edges 0%" of none)."""
    if not summary.get("n_signal_edges"):
        return "—"
    return f"{100 * summary.get('rank1_fraction', 0.0):.0f}%"


def summary_help(details) -> dict[str, str]:
    """The help of the page's four counts, with this result's own figures: "edges" counted the edges
    into the logits with the signal edges ("Edges: the signals, grouped by upstream node and side",
    44 beside a rank-1 share of the 34 signal edges), "nodes" the embeddings and the logits with
    the heads and MLPs it named."""
    summary = details.summary
    kinds: dict[str, int] = {}
    for node in details.nodes:
        kinds[node["kind"]] = kinds.get(node["kind"], 0) + 1
    parts = [
        counted(kinds[kind], noun, plural)
        for kind, noun, plural in (
            ("head", "head", None),
            ("mlp", "MLP", None),
            ("input", "embedding", None),
            ("bias", "bias", "biases"),
        )
        if kinds.get(kind)
    ]
    n_edges, n_signal = summary.get("n_edges", 0), summary.get("n_signal_edges", 0)
    return {
        "nodes": f"Nodes: a component at a token position: {', '.join(parts) or 'none'}"
        + (", and the answer's logits." if kinds.get("logits") else "."),
        "edges": f"Edges: {counted(n_signal, 'signal edge')} (the signals one upstream node writes into one "
        f"decision's query or keys, grouped) and {counted(n_edges - n_signal, 'edge')} into the logits (a "
        "seed's direct effect on the answer).",
        "rank-1 edges": f"The share of the {counted(n_signal, 'signal edge')} of rank 1: carried by one singular "
        "direction of the head's query-key form.",
        "attention decisions": "Attention decisions: a head at one token attending to that token or an earlier "
        "one with a weight that reaches tau = k / the positions it attends over, traced back from the answer; "
        "the table below has a row each.",
    }


def signal_rows(details, index: int) -> list[dict]:
    """The signal edges of decision ``index``: one row per (side, upstream component at a
    position), its signals grouped, in the columns of ``SIGNAL_HELP``."""
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
                "position": token_at(tokens[position], position) if position < len(tokens) else str(position),
                "read from": ""
                if via is None
                else token_at(tokens[via], via)
                if via < len(tokens)
                else str(via),
                "IG": round(edge["attribution"], 4),
                "drop": round(edge["weight_drop"], 4),
                "rank": len(edge["directions"]),
                "directions": ", ".join(str(k) for k in edge["directions"]),
            }
        )
    rows.sort(key=lambda row: (row["side"] != "query", -row["IG"]))
    return rows


KNOCKOUT_RUNS = ("clean", "found removed", "random removed")


METRIC_NAMES = {"logit_diff": "logit difference", "logprob": "log-probability", "prob": "probability"}


def metric_words(task) -> str:
    """The task's metric by name ('logit difference'), for the knockout's row and sentence: the row
    read "metric" alone, whose 5.708 -> 8.414 could not be read without knowing which way is up."""
    return METRIC_NAMES.get(getattr(task, "metric", None), "metric")


def knockout_rows(details, metric: str = "metric") -> list[dict]:
    """The paper's knockout, one row per measure and one column per run (``KNOCKOUT_RUNS``: the
    clean run, the found signals removed, as many random signals removed): a row per run put five
    long headers side by side, cut at 1,000 px. ``knockout_caption`` says how many of each;
    ``metric``: the first row's name (``metric_words``)."""
    knockout = (details.faithfulness or {}).get("knockout") or {}
    if not knockout:
        return []
    runs = [knockout.get("clean", {}), knockout.get("found", {}), knockout.get("random", {})]

    def value(number, digits=3):
        return None if number is None else round(float(number), digits)

    measures = (
        (metric, "metric", 3, None),
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


def knockout_caption(details, metric: str = "metric") -> str:
    """What the knockout table's runs are, with their counts; ``metric``: the first row's name."""
    knockout = (details.faithfulness or {}).get("knockout") or {}
    found, draws = knockout.get("n_signals", 0), knockout.get("n_random_draws", 0)
    randoms = f"as many random signals, the mean of {draws:,} draws" if draws else "not run (n random is 0)"
    return (
        f"found removed: the {found:,} signals found; random removed: {randoms}. "
        f"{metric}: the task's {metric} after the removal; mean traced attention: the "
        "attention weight of the traced decisions; residual cosine and norm ratio: how close the final "
        "residual stays to the clean run's."
    )


def knockout_verdict(details, metric: str = "metric") -> str:
    """What the knockout's figures show, in two sentences: how far removing the signals found moves
    the traced attention and the metric, against as many random signals, and which way. The page
    said only that this is "the paper's check that the signals found carry the attention and the
    answer", above an IOI prompt's figures on Gemma-3-270M where removing them raised the logit
    difference from 5.708 to 8.414 (random: 5.714). The metric's move is given as it is, never
    graded: a fall of 0.083 from 2.874 is no evidence that they carry the answer. Empty when there
    is no knockout."""
    knockout = (details.faithfulness or {}).get("knockout") or {}
    clean, found, rand = (
        knockout.get("clean") or {},
        knockout.get("found") or {},
        knockout.get("random") or {},
    )
    values = (clean.get("metric"), found.get("metric"), clean.get("mean_weight"), found.get("mean_weight"))
    if any(value is None for value in values):
        return ""
    metric_clean, metric_found, weight_clean, weight_found = (float(value) for value in values)
    has_random = (
        knockout.get("n_random_draws", 0) > 0
        and rand.get("metric") is not None
        and rand.get("mean_weight") is not None
    )
    random_weight = float(rand["mean_weight"]) if has_random else None
    random_metric = float(rand["metric"]) if has_random else None
    if weight_found >= weight_clean:
        attention = "they do not lower the attention"
    elif has_random and weight_clean - weight_found <= weight_clean - random_weight:
        attention = "they carry no more of the attention than random signals do"
    else:
        attention = "they carry the attention"
    said = (
        f"Removing the {knockout.get('n_signals', 0):,} signals found takes the traced decisions' mean "
        f"attention from {weight_clean:.3f} to {weight_found:.3f}"
        + (f" (as many random signals: {random_weight:.3f})" if has_random else "")
        + f": {attention}. "
    )
    move = metric_found - metric_clean
    said += f"It moves the {metric} by {move:+.3f}, from {metric_clean:.3f} to {metric_found:.3f}" + (
        f" (random signals: {random_metric - metric_clean:+.3f})" if has_random else ""
    )
    if move > 0:
        return said + ": taken together they work against the answer on this metric, not for it."
    if move == 0:
        return said + "."
    if has_random and move >= random_metric - metric_clean:
        return said + ": no more than random signals move it."
    return said + ": taken together they support the answer on this metric, by that much."
