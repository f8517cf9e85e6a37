"""Where the project's shipped files live: the one module that knows the ``assets`` folder.

Everything the app, the commands, the scripts and the benchmarks read from or write to the
repository's ``assets/`` folder is located here, so moving that folder is a change to this file:

- ``gallery_dir()``: the Gallery's ready examples (``index.json`` and one ``<slug>.pt`` each);
- ``saes_dir(model_id)``: the embedded SAEs (``assets/saes/<model id>/`` with an ``index.json``),
  and ``corpus_sample_path(model_id)``, the corpus sample shipped beside them;
- ``paraphrases_dir()``: example paraphrase files (JSONL) for the built-in example prompts;
- ``prompt_set(name)``: prompt collections such as ``gender_bias.json``;
- ``planted_bench_files()``: the planted-circuit benchmark's table (JSON and Markdown);
- ``favicon_path()``: the browser tab's icon.

It also knows the one folder circuitviz writes to outside the checkout, ``cache_dir(part)``:
``$CIRCUITVIZ_CACHE/<part>``, else ``~/.cache/circuitviz/<part>`` (converted models, stored
results, ACC++ SVDs, LLM answers, the speed calibration, the MMLU picker's index).
"""

from __future__ import annotations

import os
from pathlib import Path

ASSETS_ROOT = Path(__file__).resolve().parents[2] / "assets"
CORPUS_SAMPLE = "corpus_sample.json.gz"


def cache_dir(part: str = "") -> Path:
    """``$CIRCUITVIZ_CACHE/<part>``, else ``~/.cache/circuitviz/<part>`` (read at every call, so a
    test or a benchmark that points the variable elsewhere is followed)."""
    base = os.environ.get("CIRCUITVIZ_CACHE")
    root_folder = Path(base).expanduser() if base else Path.home() / ".cache" / "circuitviz"
    return root_folder / part if part else root_folder


def root() -> Path:
    """The assets folder itself."""
    return ASSETS_ROOT


def favicon_path() -> Path:
    """The browser tab's icon, served by the app itself (a Material icon name made the browser
    fetch it from fonts.gstatic.com, a failed request on every offline page)."""
    return ASSETS_ROOT / "favicon.png"


def gallery_dir() -> Path:
    """The Gallery's stored examples."""
    return ASSETS_ROOT / "gallery"


def saes_dir(model_id: str = "") -> Path:
    """The embedded SAEs of ``model_id`` (its short name, e.g. gemma-3-270m), or their parent."""
    folder = ASSETS_ROOT / "saes"
    return folder / model_id if model_id else folder


def corpus_sample_path(model_id: str) -> Path:
    """The sample of the embedded SAEs' training corpus shipped with them (gzipped JSON)."""
    return saes_dir(model_id) / CORPUS_SAMPLE


def paraphrases_dir() -> Path:
    """Example paraphrase files for the built-in example prompts."""
    return ASSETS_ROOT / "paraphrases"


def prompt_set(name: str) -> Path:
    """A shipped prompt collection by file name (``gender_bias.json``)."""
    return ASSETS_ROOT / "prompts" / name


def planted_bench_files() -> tuple[Path, Path]:
    """(JSON, Markdown) of the planted-circuit benchmark's stored table."""
    return ASSETS_ROOT / "planted_bench.json", ASSETS_ROOT / "planted_bench.md"


def shown_path(path: Path | str) -> str:
    """A path for messages and labels: relative to the repository when it lies inside it."""
    resolved = Path(path).resolve()
    try:
        return str(resolved.relative_to(ASSETS_ROOT.parent))
    except ValueError:
        return str(path)
