"""How long Explore's MMLU picker takes to check which of a subject's questions a model keeps.

    python benchmarks/bench_mmlu_kept.py --models smollm2-135m,gemma-3-270m --subjects astronomy

Checks each subject as the picker does (``mmlu_kept``: shortest prompt first, ``CHUNK`` questions
a step, ``question_verdicts`` with the picker's settings) on the CPU with one thread, without
storing; ``--sample N`` checks N of its questions, in chunks of neighbours in the length order
spread over it. Prints the CPU and wall seconds, the seconds per question (and so the whole
subject's) and the kept share, with the load average before and after. ``--compare N`` also checks the first N questions one at a
time (the picker's refusal) and prints the largest difference of a metric and whether every
verdict is the same.
"""

from __future__ import annotations

import argparse
import os
import resource
import time


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="smollm2-135m,gemma-3-270m")
    parser.add_argument("--subjects", default="astronomy")
    parser.add_argument(
        "--sample", type=int, default=0, help="check only N questions spread evenly over the lengths (0: all)"
    )
    parser.add_argument("--compare", type=int, default=0)
    args = parser.parse_args()

    import torch

    torch.set_num_threads(1)
    from circuitviz.batch.mmlu import load_mmlu, resolve_subjects
    from circuitviz.batch.mmlu_kept import CHUNK, PICKER_MAX_TOKENS, check_order
    from circuitviz.batch.mmlu_tasks import question_verdict, question_verdicts
    from circuitviz.models import load_model

    data = load_mmlu()
    for model_id in args.models.split(","):
        model = load_model(model_id, device="cpu")
        for subject in resolve_subjects(args.subjects, data.subjects):
            questions = check_order(model, data.of_subject(subject))
            total = len(questions)
            if args.sample and args.sample < total:
                # whole chunks of neighbours in the length order, their starts spread over it: a chunk
                # of every k-th question mixes short and long prompts, and pads as the check never does
                starts = [
                    i * (total - CHUNK) // max(1, args.sample // CHUNK - 1)
                    for i in range(args.sample // CHUNK)
                ]
                questions = [q for start in starts for q in questions[start : start + CHUNK]]
            load_before = os.getloadavg()
            cpu, wall = cpu_seconds(), time.time()
            verdicts = []
            for start in range(0, len(questions), CHUNK):
                verdicts += question_verdicts(
                    model, questions[start : start + CHUNK], max_tokens=PICKER_MAX_TOKENS
                )
            cpu, wall = cpu_seconds() - cpu, time.time() - wall
            kept = sum(v.kept for v in verdicts)
            print(
                f"{model_id} / {subject}: {len(questions)} of its {total} questions, {kept} kept ({kept / len(questions):.0%}); "
                f"CPU {cpu:.1f} s ({cpu / len(questions):.2f} s a question: {cpu / len(questions) * total:.0f} s for the "
                f"subject), wall {wall:.1f} s; load "
                f"{' '.join(f'{x:.2f}' for x in load_before)} -> {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
                flush=True,
            )
            if args.compare:
                alone = [
                    question_verdict(model, q, max_tokens=PICKER_MAX_TOKENS)
                    for q in questions[: args.compare]
                ]
                differences = [
                    abs(getattr(a, name) - getattr(b, name))
                    for a, b in zip(alone, verdicts)
                    for name in ("clean_metric", "corrupted_metric")
                    if getattr(a, name) == getattr(a, name)
                ]
                same = all(a.kept == b.kept for a, b in zip(alone, verdicts))
                print(
                    f"  one at a time, the first {len(alone)}: largest metric difference {max(differences):.2e} "
                    f"logit; every verdict the same: {same}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
