"""``python tests/tiny_batch.py batch ...``: the ``circuitviz batch`` command on the tests' tiny
GPT-2 (the model source is the one thing replaced), for tests that start a batch as a subprocess
(``batch.jobs``). ``TINY_BATCH_SLOW``: seconds each method's group sleeps first, so a test can
cancel a batch while it runs."""

import os
import sys
import time

from circuitviz.batch import ModelSource
from circuitviz.bench.toy_models import tiny_model
from circuitviz.entry import cli


def _tiny():
    return tiny_model("gpt2", n_layers=2, n_heads=2)


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
    cli._batch_source = lambda args: ModelSource("tiny-gpt2-0", factory=_tiny)
    return cli.main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
