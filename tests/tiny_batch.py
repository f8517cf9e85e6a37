"""``python tests/tiny_batch.py batch ...``: the ``circuitviz batch`` command on the tests' tiny
GPT-2 (the model source is the one thing replaced), for tests that start a batch as a subprocess
(``batch.jobs``). ``TINY_BATCH_SLOW``: seconds each method's group sleeps first, so a test can
cancel a batch while it runs. A batch on MMLU runs on a tiny GPT-2 whose words hold the four
letters and their markers (real MMLU words are unknown to it), as tests/test_mmlu.py's does."""

import os
import sys
import time

from circuitviz.batch import ModelSource
from circuitviz.bench.toy_models import tiny_model
from circuitviz.entry import cli


def _tiny():
    return tiny_model("gpt2", n_layers=2, n_heads=2)


MMLU_WORDS = ("A", "B", "C", "D", "A.", "B.", "C.", "D.", "E.", "F.", "G.", "H.", "Question:", "Answer:")


def _tiny_mmlu():
    return tiny_model("gpt2", n_layers=2, n_heads=2, words=MMLU_WORDS, n_ctx=512)


def main() -> int:
    slow = float(os.environ.get("TINY_BATCH_SLOW", "0") or 0)
    if slow:
        from circuitviz.batch import executors

        run = executors.LocalExecutor.run

        def slowed(self, groups, on_outcomes, on_progress):
            def each(outcomes):
                time.sleep(slow)
                on_outcomes(outcomes)

            return run(self, groups, each, on_progress)

        executors.LocalExecutor.run = slowed
    mmlu = "mmlu" in sys.argv[1:]
    factory = _tiny_mmlu if mmlu else _tiny
    cli._batch_source = lambda args: ModelSource("tiny-mmlu" if mmlu else "tiny-gpt2-0", factory=factory)
    return cli.main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
