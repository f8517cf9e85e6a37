"""Two models loading at once in one process: the app's start loads Gemma-3-270M in the background,
and a SmolLM2-135M link opened in its first second failed on Explore with "ImportError: cannot
import name 'AutoTokenizer' from 'transformers'" (transformers imports that module lazily, and the
second thread got it half built; Chromium, 2026-12-07). Each embedded model's saved tokenizer read
by four threads at once in a fresh interpreter (the import happens once a process): it failed in
4 of 4 processes before ``checkpoints._TOKENIZER_IMPORT``."""

from __future__ import annotations

import subprocess
import sys

import pytest

from circuitviz.models.cache import cache_root

SCRIPT = """
import sys, threading
from pathlib import Path
from circuitviz.models.checkpoints import saved_tokenizer_loader
folders = [Path(arg) for arg in sys.argv[1:]]
failed = []
def load(folder):
    try:
        saved_tokenizer_loader(folder)()
    except Exception as error:
        failed.append(repr(error))
threads = [threading.Thread(target=load, args=(folder,)) for folder in folders * 4]
[thread.start() for thread in threads]
[thread.join() for thread in threads]
print(failed)
"""


@pytest.mark.slow
def test_tokenizers_read_by_several_threads_at_once_all_load():
    folders = []
    for model in ("gemma-3-270m", "smollm2-135m"):
        found = sorted((cache_root() / model).glob("*/tokenizer_config.json"))
        if not found:
            pytest.skip(f"{model} is not converted in this cache")
        folders.append(str(found[0].parent))
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, *folders], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout[-2000:]
