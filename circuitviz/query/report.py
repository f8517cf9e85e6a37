"""The command line's report of a Best-of-N family run.

``report_lines`` prints what a BoN-family result holds: the paraphrases and why any were left
out, every candidate's NDF on the original prompt at every budget with the winner marked, the
curves of all five variants side by side, and the shared-subcircuit summary per budget.
"""

from __future__ import annotations

from .overlap import summary_line
from .pairs import warned_note
from .variants import VARIANTS


def _ndf(value) -> str:
    return "   -  " if value is None else f"{value:6.3f}"


def report_lines(details) -> list[str]:
    """The text report of a Best-of-N family run (its ``QueryCircuitDetails``)."""
    pairs, candidates = details.pairs, details.candidates
    # named as the Paraphrases page names them (q, p1, p2, ...: the pair's own number, so a left-out
    # pair leaves a gap): numbered 0 to 9 here, candidate 5 was the page's p6 (an audit)
    names = ["q" if index == 0 else f"p{index}" for index in candidates]
    lines = [
        f"Best-of-N: {len(candidates)} candidates (the prompt and {len(candidates) - 1} paraphrases), "
        f"scored with {details.base_method} ({details.ig_steps} IG steps); iBoN/BoN-CSM anchors: "
        + ", ".join(map(str, details.anchor_budgets)),
        "paraphrases (pair, in brackets when it is no candidate; model's top-1, tokens, text):",
    ]
    for pair in pairs:
        index = pair["index"]
        name = "q" if index == 0 else f"p{index}"
        mark = f"{name:>5}" if index in candidates else f"{'(' + name + ')':>5}"
        text = pair["clean"].replace("\n", "\\n")
        lines.append(
            f"  {mark} {pair['source']:<22} {pair['model_answer']!r:<12} {pair['n_tokens'] or '?':>4}  {text}"
        )
        if index not in candidates and pair["reason"]:
            lines.append(f"        left out: {pair['reason']}")
    if warned_note(pairs, candidates):  # a candidate's check warned: said, not only kept in the JSON
        lines.append(f"note: {warned_note(pairs, candidates)}")
    if details.per_budget:
        budgets = [entry["budget"] for entry in details.per_budget]
        lines.append("each candidate's NDF on the original prompt (* the winner):")
        lines.append("  pair " + "".join(f"{b:>9}" for b in budgets))
        for k in range(len(candidates)):
            cells = []
            for entry in details.per_budget:
                value = entry["candidates"][k]["ndf"]
                cells.append(f"{_ndf(value)}{'*' if entry['winner'] == k else ' '}  ")
            lines.append(f"  {names[k]:>4} " + "".join(f"{c:>9}" for c in cells))
    curves = details.curves
    names = [name for name in VARIANTS if name in curves]
    by_budget = {name: {p["budget"]: p for p in curves[name]} for name in names}
    lines.append("NDF on the original prompt by variant:")
    lines.append(f"  {'budget':>7} " + "".join(f"{name:>9}" for name in names))
    for budget in details.budgets:
        cells = [_ndf(by_budget[name].get(budget, {}).get("ndf")) for name in names]
        anchor = " (anchor)" if budget in details.anchor_budgets else ""
        lines.append(f"  {budget:>7} " + "".join(f"{c:>9}" for c in cells) + anchor)
    if details.shared:
        lines.append("shared subcircuit of the candidates:")
        for data in details.shared:
            lines.append(f"  budget {data['budget']}: {summary_line(data)}")
    for note in details.notes:
        lines.append(f"note: {note}")
    return lines
