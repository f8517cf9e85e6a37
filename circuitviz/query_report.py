"""The command line's side of the Best-of-N family: its flags as method settings, and its report.

``settings_from_args`` turns ``discover``'s paraphrase flags into the family's config values;
``report_lines`` prints what a BoN-family result holds: the paraphrases and why any were left
out, every candidate's NDF on the original prompt at every budget with the winner marked, the
curves of all five variants side by side, and the shared-subcircuit summary per budget.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .overlap import summary_line

VARIANT_ORDER = ("single", "average", "bon", "ibon", "bon-csm")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """discover's flags for the BoN family (method single, average, bon, ibon, bon-csm)."""
    group = parser.add_argument_group("query circuits (methods single, average, bon, ibon, bon-csm)")
    group.add_argument(
        "--paraphrases",
        type=Path,
        default=None,
        help="paraphrase/corrupted pairs: JSONL, JSON, CSV or TAB lines",
    )
    group.add_argument(
        "--paraphrase-source",
        default=None,
        choices=["template", "openai", "file"],
        help="where paraphrases come from (default: file with --paraphrases, else template)",
    )
    group.add_argument(
        "--n-paraphrases", type=int, default=None, help="p, paraphrases to generate (default 9)"
    )
    group.add_argument(
        "--seed", type=int, default=None, help="seed of the template choice and the LLM request"
    )
    group.add_argument(
        "--reference",
        type=Path,
        default=None,
        help="a reference circuit (EAP-IG JSON or edge names) to overlap with",
    )
    group.add_argument(
        "--llm-model",
        default=None,
        help="LLM for --paraphrase-source openai (default $CIRCUITVIZ_LLM_MODEL or gpt-4o-mini)",
    )


def settings_from_args(args, model=None) -> dict:
    """Config values from the flags that were given (none given: no values, so other methods
    are not offered settings they lack). ``model``'s graph resolves --reference into edge names."""
    settings: dict = {}
    if getattr(args, "paraphrases", None) is not None:
        try:
            settings["paraphrases"] = Path(args.paraphrases).read_text(encoding="utf-8")
        except OSError as error:
            raise ValueError(
                f"Cannot read the paraphrase file {args.paraphrases} ({error.strerror})."
            ) from None
        settings["paraphrase_source"] = "file"
    if getattr(args, "paraphrase_source", None):
        settings["paraphrase_source"] = args.paraphrase_source
    for flag, name in (("n_paraphrases", "n_paraphrases"), ("seed", "seed"), ("llm_model", "llm_model")):
        if getattr(args, flag, None) is not None:
            settings[name] = getattr(args, flag)
    if getattr(args, "reference", None) is not None:
        from .graph import GraphSpec
        from .results import load_circuit

        if model is None:
            raise ValueError("--reference needs the model's graph; load the model first.")
        spec = GraphSpec.from_model(model)
        settings["reference"] = "\n".join(spec.edge_names_of(load_circuit(args.reference, spec).mask))
    return settings


def _ndf(value) -> str:
    return "   -  " if value is None else f"{value:6.3f}"


def report_lines(result) -> list[str]:
    """The text report of a BoN-family result (empty for other results)."""
    extra = result.extra
    if not extra.get("query_circuits_version"):
        return []
    pairs, candidates = extra["pairs"], extra["candidates"]
    lines = [
        f"Best-of-N: {len(candidates)} candidates (the prompt and {len(candidates) - 1} paraphrases), "
        f"scored with {extra['base_method']} ({extra['ig_steps']} IG steps); iBoN/BoN-CSM anchors: "
        + ", ".join(map(str, extra["anchor_budgets"])),
        "paraphrases (candidate #, model's top-1, tokens, text):",
    ]
    for pair in pairs:
        index = pair["index"]
        mark = f"{candidates.index(index):>3}" if index in candidates else "  -"
        text = pair["clean"].replace("\n", "\\n")
        lines.append(
            f"  {mark} {pair['source']:<22} {pair['model_answer']!r:<12} {pair['n_tokens'] or '?':>4}  {text}"
        )
        if index not in candidates and pair["reason"]:
            lines.append(f"        left out: {pair['reason']}")
    if extra["per_budget"]:
        budgets = [entry["budget"] for entry in extra["per_budget"]]
        lines.append("each candidate's NDF on the original prompt (* the winner):")
        lines.append("  cand " + "".join(f"{b:>9}" for b in budgets))
        for k in range(len(candidates)):
            cells = []
            for entry in extra["per_budget"]:
                value = entry["candidates"][k]["ndf"]
                cells.append(f"{_ndf(value)}{'*' if entry['winner'] == k else ' '}  ")
            lines.append(f"  {k:>4} " + "".join(f"{c:>9}" for c in cells))
    curves = extra["curves"]
    names = [name for name in VARIANT_ORDER if name in curves]
    by_budget = {name: {p["budget"]: p for p in curves[name]} for name in names}
    lines.append("NDF on the original prompt by variant:")
    lines.append(f"  {'budget':>7} " + "".join(f"{name:>9}" for name in names))
    for budget in extra["budgets"]:
        cells = [_ndf(by_budget[name].get(budget, {}).get("ndf")) for name in names]
        anchor = " (anchor)" if budget in extra["anchor_budgets"] else ""
        lines.append(f"  {budget:>7} " + "".join(f"{c:>9}" for c in cells) + anchor)
    if extra["shared"]:
        lines.append("shared subcircuit of the candidates:")
        for data in extra["shared"]:
            lines.append(f"  budget {data['budget']}: {summary_line(data)}")
    for note in extra.get("notes", []):
        lines.append(f"note: {note}")
    return lines
