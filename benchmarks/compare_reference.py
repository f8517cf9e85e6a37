"""Check our scores against the public EAP-IG library, and time both on the embedded model.

    .venv/bin/python benchmarks/compare_reference.py --eap-ig-src /path/to/EAP-IG/src [--skip-embedded]

Needs a local checkout of hannamw/EAP-IG (not part of this project; nothing of it is copied
here) whose ``device='cuda'`` literals were changed to ``'cpu'`` to run on this machine, and
matplotlib importable (the reference imports it). Prints, per tiny model shape, the largest
difference between the reference's and our edge scores for EAP, EAP-IG (inputs) and exact
patching, then the wall time of both EAP-IG implementations on the embedded Gemma-3-270M.

The reference sums the IG path at k = 0..m-1 and we at k = 1..m (so that m = 1 is plain EAP):
their EAP-IG scores differ from ours by O(1/m).
"""

from __future__ import annotations

import argparse
import sys

from circuitviz.bench.harness import ioi_task, load_timed, timed
from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.core.graph import GraphSpec
from circuitviz.core.tasks import prepare_task
from circuitviz.methods import get_method

EMBEDDED_TASK = ioi_task()


def reference_scores(model, task, method: str, steps: int | None):
    """The reference library's scores [n_forward, n_backward] for one prompt pair."""
    from eap.attribute import attribute
    from eap.graph import Graph

    prepared = prepare_task(model, task)
    answer, foil = prepared.answer_id, prepared.foil_ids[0]

    def metric(logits, clean_logits, input_lengths, label):
        return (logits[:, -1, answer] - logits[:, -1, foil]).sum()

    graph = Graph.from_model(model)
    model.set_use_attn_result(True)  # the reference reads hook_result
    model.requires_grad_(True)  # and backpropagates through the parameters
    try:
        attribute(
            model,
            graph,
            [([task.clean], [task.corrupted], [0])],
            metric,
            method=method,
            ig_steps=steps,
            quiet=True,
        )
    finally:
        model.set_use_attn_result(False)
        model.requires_grad_(False)
    return graph.scores.double()


def ours(model, task, method: str, steps: int | None):
    chosen = get_method(method)
    config = chosen.make_config({"ig_steps": steps} if steps else None)
    return chosen.run_on(model, task, config, budgets=[1]).scores.double()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--eap-ig-src", required=True, help="the reference checkout's src/ folder")
    parser.add_argument("--ig-steps", type=int, default=20)
    parser.add_argument("--skip-embedded", action="store_true")
    args = parser.parse_args()
    # the reference is a plain checkout, not an installed package: its src/ folder is importable
    # only by path (the one sys.path entry in this project, for code that is not ours)
    sys.path.insert(0, args.eap_ig_src)

    print("max |reference - ours| over all edges (tiny random models, float64):")
    for shape in ("gpt2", "llama"):
        model = tiny_model(shape, seed=1)
        mask = GraphSpec.from_model(model).edge_mask
        for reference_name, our_name, steps in (
            ("EAP", "eap", None),
            ("EAP-IG-inputs", "eap-ig", 300),
            ("exact", "exact", None),
        ):
            reference = reference_scores(model, IOI_TASK, reference_name, steps)[mask]
            mine = ours(model, IOI_TASK, our_name, steps)[mask]
            print(
                f"  {shape:<6} {reference_name:<14} {(reference - mine).abs().max().item():.2e}  (largest |score| {reference.abs().max().item():.3f})"
            )

    if args.skip_embedded:
        return
    model, _ = load_timed()
    _, reference_seconds = timed(reference_scores, model, EMBEDDED_TASK, "EAP-IG-inputs", args.ig_steps)
    _, our_seconds = timed(ours, model, EMBEDDED_TASK, "eap-ig", args.ig_steps)
    print(
        f"\nEAP-IG, {args.ig_steps} steps, embedded Gemma-3-270M, IOI prompt (15 tokens), incl. clean/corrupted runs:"
    )
    print(
        f"  reference {reference_seconds:.1f}s   circuitviz {our_seconds:.1f}s   ({reference_seconds / our_seconds:.1f}x)"
    )


if __name__ == "__main__":
    main()
