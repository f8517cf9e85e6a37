"""Reading a Best-of-N result's paraphrases and candidates out of ``result.extra`` for the app.

The BoN family (``circuitviz/methods/bon.py``) keeps its plain data in ``result.extra``; this
module is the one place that knows where, so the pages only see tidy rows and edge sets. Keys
are looked up tolerantly (a list of candidates per budget, or per candidate a dict of budgets),
and anything missing gives an empty answer, never an error.
"""

from __future__ import annotations

BON_METHODS = ("bon", "ibon", "bon-csm")


def registered_bon_methods(registered: dict) -> list[str]:
    return [name for name in BON_METHODS if name in registered]


def paraphrase_rows(result) -> list[dict]:
    """One row per paraphrase: text, corrupted text, source, the model's answer, whether used."""
    rows = []
    for index, item in enumerate(result.extra.get("paraphrases") or []):
        if isinstance(item, str):
            item = {"clean": item}
        if not isinstance(item, dict):
            continue
        rows.append(
            {
                "#": index + 1,
                "paraphrase": str(item.get("clean") or item.get("prompt") or item.get("text") or ""),
                "corrupted": str(item.get("corrupted") or ""),
                "source": str(item.get("source") or ""),
                "model's answer": str(item.get("model_answer") or item.get("answer") or ""),
                "used": bool(item.get("used", item.get("valid", True))),
            }
        )
    return rows


def _candidate_list(result, budget: int) -> list[dict]:
    candidates = result.extra.get("candidates")
    if isinstance(candidates, dict):
        candidates = candidates.get(str(budget)) or candidates.get(budget) or []
    found = []
    for index, item in enumerate(candidates or []):
        if not isinstance(item, dict):
            continue
        budgets = item.get("budgets")
        if isinstance(budgets, dict):  # one record per candidate, its budgets inside
            item = {**item, **(budgets.get(str(budget)) or budgets.get(budget) or {})}
        elif "budget" in item and int(item["budget"]) != int(budget):
            continue
        found.append({"name": str(item.get("name") or item.get("label") or f"candidate {index}"), **item})
    return found


def candidate_ndf(result, budget: int) -> list[dict]:
    """[{name, ndf, winner}] for the candidates at ``budget``."""
    winner = (
        result.extra.get("winners", {}).get(str(budget))
        if isinstance(result.extra.get("winners"), dict)
        else None
    )
    rows = []
    for item in _candidate_list(result, budget):
        if item.get("ndf") is None:
            continue
        rows.append({"name": item["name"], "ndf": float(item["ndf"]), "winner": bool(item.get("winner"))})
    if rows and winner is not None:
        for row in rows:
            row["winner"] = row["name"] == str(winner) or row["winner"]
    if rows and not any(row["winner"] for row in rows):
        max(rows, key=lambda row: row["ndf"])["winner"] = True
    return rows


def candidate_edge_sets(result, budget: int) -> dict[str, set[str]]:
    """{candidate name: its circuit's edge names} at ``budget`` (for the UpSet plot)."""
    sets = {}
    for item in _candidate_list(result, budget):
        edges = item.get("edges")
        if isinstance(edges, list):
            sets[item["name"]] = set(map(str, edges))
    return sets
