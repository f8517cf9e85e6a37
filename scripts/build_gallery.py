"""Build the Gallery's ready examples: discover each circuit once and store it under assets/gallery/.

Each example is one small file (``<slug>.pt``: the result's ``to_state()`` plus its logit-lens
labels, loadable with ``torch.load(weights_only=True)``) and one line of ``index.json`` (title,
description, task, method, the headline figures), so the Gallery opens an example without any
model pass. Re-run after changing the engine or the examples:

    .venv/bin/python scripts/build_gallery.py [--only ioi,factual] [--ig-steps 20] [--method edge-pruning]
    .venv/bin/python scripts/build_gallery.py --check   # the stored circuits under today's evaluator
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time

from circuitviz.bench.harness import ioi_task, load_timed
from circuitviz.core.tasks import PromptTask
from circuitviz.services.assets import gallery_dir

GALLERY = gallery_dir()  # in the checkout: the examples are written into it

EXAMPLES = [
    {
        "slug": "ioi",
        "title": "Indirect object: who gets the drink?",
        "description": (
            "The classic indirect-object task: the model must name the person who did not give "
            "the drink. The corrupted prompt replaces every name, so the circuit is what moves "
            "the answer from the names in the sentence to the output."
        ),
        "task": ioi_task(),
    },
    {
        "slug": "factual",
        "title": "Factual recall: where is the Eiffel Tower?",
        "description": (
            "The model recalls a fact about a landmark. The corrupted prompt names another "
            "landmark, so the circuit carries the landmark's identity to the city."
        ),
        "task": PromptTask(
            clean="The Eiffel Tower is located in the city of",
            corrupted="The Colosseum is located in the city of",
            answer=" Paris",
            foils=(" Rome",),
        ),
    },
    {
        "slug": "arithmetic",
        "title": "Arithmetic: one plus two",
        "description": (
            "Small-number addition in words after one worked example. The corrupted prompt "
            "changes the question's first operand (one plus two becomes two plus two), so the "
            "circuit is what computes the sum."
        ),
        "task": PromptTask(
            clean="one plus one is two. one plus two is",
            corrupted="one plus one is two. two plus two is",
            answer=" three",
            foils=(" four",),
        ),
    },
    {
        "slug": "multiple-choice",
        "title": "Multiple choice: pick the letter",
        "description": (
            "A two-option question after one solved example. The corrupted prompt swaps the "
            "options' order, so the right letter changes: the circuit maps the content to A or B."
        ),
        "task": PromptTask(
            clean="Q: Is the sky blue? A) yes B) no. Answer: A. Q: Is fire hot? A) yes B) no. Answer:",
            corrupted="Q: Is the sky blue? A) no B) yes. Answer: B. Q: Is fire hot? A) no B) yes. Answer:",
            answer=" A",
            foils=(" B",),
        ),
    },
    {
        "slug": "gender-bias",
        "title": "Gender bias: the nurse and the pronoun",
        "description": (
            "A stereotyped profession makes the model prefer one pronoun. The corrupted prompt "
            "names another profession, so the circuit is where the stereotype enters the answer."
        ),
        "task": PromptTask(
            clean="The nurse said that",
            corrupted="The pilot said that",
            answer=" she",
            foils=(" he",),
        ),
    },
]


# a learned mask per budget costs a run per budget: the budgets a first view and its slider need
LEARNED_BUDGETS = [20, 30, 50, 100, 200]
SCORED_BUDGETS = [10, 20, 30, 50, 75, 100, 150, 200, 300, 500, 750, 1000, 1500, 2000, 3000, 5000]


def index_entry(example: dict, result, model_id: str) -> dict:
    """The example's line of index.json, read off its stored result: where it opens
    (``render.opening_view``) and that circuit's NDF on held-out paraphrases."""
    from circuitviz.render import opening_view

    view = opening_view(result.curve, good_ndf=0.8)
    best = result.point(view.budget)
    held_out = ((result.transfer or {}).get("budgets") or {}).get(str(view.budget), {})
    return {
        "slug": example["slug"],
        "title": example["title"],
        "description": example["description"],
        "task": example["task"].to_dict(),
        "model_id": model_id,
        "method": result.method,
        "config": result.config,
        "budgets": sorted(result.budgets),
        "clean_metric": result.baseline.clean,
        "corrupted_metric": result.baseline.corrupted,
        "headline": {"budget": best.budget, "n_edges": best.n_edges, "ndf": best.ndf},
        "opening": view.reason,
        "held_out": {"ndf": held_out.get("mean_ndf"), "paraphrases": len(held_out.get("ndf", []))},
    }


def write_index(model_id: str) -> None:
    """index.json from the stored examples (each ``<slug>.pt``), in the examples' order."""
    import torch

    from circuitviz.core.results import CircuitResult

    entries = []
    for example in EXAMPLES:
        path = GALLERY / f"{example['slug']}.pt"
        if path.exists():
            state = torch.load(path, map_location="cpu", weights_only=True)
            entries.append(index_entry(example, CircuitResult.from_state(state["result"]), model_id))
    (GALLERY / "index.json").write_text(json.dumps(entries, indent=1) + "\n", encoding="utf-8")


def build(slugs: set[str] | None, ig_steps: int, model_id: str, method: str = "edge-pruning") -> None:
    import torch

    from circuitviz.core.graph import GraphSpec
    from circuitviz.core.tasks import TaskError, prepare_task
    from circuitviz.entry.api import discover, measure_transfer
    from circuitviz.labels.logit_lens import logit_lens_labels
    from circuitviz.methods import get_method
    from circuitviz.render import opening_view

    GALLERY.mkdir(parents=True, exist_ok=True)
    model, _ = load_timed(model_id, device="cpu")
    spec = GraphSpec.from_model(model)
    chosen = get_method(method)
    fields = {f.name for f in dataclasses.fields(chosen.Config)}
    config = {"ig_steps": ig_steps} if "ig_steps" in fields else {}
    learned = chosen.fitted_to_prompt is not None
    budgets = [*(LEARNED_BUDGETS if learned else SCORED_BUDGETS), spec.n_edges]
    for example in EXAMPLES:
        if slugs and example["slug"] not in slugs:
            continue
        start = time.perf_counter()
        task = example["task"]
        try:
            result, _ = discover(model, task, method, config, budgets=budgets, model_id=model_id)
        except TaskError as error:
            print(f"{example['slug']}: skipped, {error}", flush=True)
            continue
        view = opening_view(result.curve, good_ndf=0.8)
        measure_transfer(model, result, budgets=[view.budget])  # on paraphrases it never saw
        labels = logit_lens_labels(model, spec, prepare_task(model, task))
        state = {"result": result.to_state(), "labels": labels}
        torch.save(state, GALLERY / f"{example['slug']}.pt")
        write_index(model_id)  # after each example: a build cut short keeps what it finished
        entry = index_entry(example, result, model_id)
        print(
            f"{example['slug']}: clean {result.baseline.clean:+.2f} corrupted {result.baseline.corrupted:+.2f}; "
            + " ".join(f"{p.budget}:{p.ndf:.2f}" for p in result.curve)
            + f" ({time.perf_counter() - start:.0f} s); opens: {view.reason} Held out: {entry['held_out']}",
            flush=True,
        )


def check(model_id: str) -> None:
    """Re-evaluate every stored example's circuits with today's evaluator and print, per budget,
    the stored NDF against the NDF now, and where each opens (``render.opening_view``)."""
    import torch

    from circuitviz.core.results import CircuitResult
    from circuitviz.entry.api import evaluate_circuits
    from circuitviz.render import opening_view

    model, _ = load_timed(model_id, device="cpu")
    for entry in json.loads((GALLERY / "index.json").read_text()):
        state = torch.load(GALLERY / f"{entry['slug']}.pt", map_location="cpu", weights_only=True)
        result = CircuitResult.from_state(state["result"])
        budgets = list(result.budgets)
        _, points = evaluate_circuits(model, result.task, [result.circuit(b) for b in budgets], budgets)
        print(f"{entry['slug']} ({result.method}): budget edges stored-NDF now-NDF", flush=True)
        for budget, point in zip(budgets, points):
            stored = result.point(budget)
            print(f"  {budget} {point.n_edges} {stored.ndf:.3f} {point.ndf:.3f}", flush=True)
        print(f"  opens (stored curve): {opening_view(result.curve).reason}", flush=True)
        print(f"  opens (curve now): {opening_view(points).reason}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated slugs to rebuild (default: all)")
    parser.add_argument("--ig-steps", type=int, default=20)
    parser.add_argument(
        "--method",
        default="edge-pruning",
        help="the method every example is discovered with (default edge-pruning: EAP-IG's circuits of "
        "at most 200 edges reach NDF 0.8 on one example of five, docs/faithfulness.md)",
    )
    parser.add_argument("--model", default="gemma-3-270m")
    parser.add_argument("--reindex", action="store_true", help="rewrite index.json from the stored examples")
    parser.add_argument(
        "--check",
        action="store_true",
        help="re-evaluate the stored examples with today's evaluator; build nothing",
    )
    args = parser.parse_args()
    if args.check:
        check(args.model)
        return
    if args.reindex:
        write_index(args.model)
        return
    slugs = {s.strip() for s in args.only.split(",") if s.strip()} or None
    build(slugs, args.ig_steps, args.model, args.method)


if __name__ == "__main__":
    main()
