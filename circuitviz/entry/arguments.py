"""The command line's shared arguments: the model to load and the meaningful-task check."""

from __future__ import annotations

import argparse

from ..measure.task_validity import CHECK_ENV


class BriefParser(argparse.ArgumentParser):
    """An argument parser whose error is its sentence and where to read more, not the whole usage
    (``discover``'s usage runs to about a hundred lines of options, burying the one that matters)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n(`{self.prog} --help` lists every option.)\n")


def add_task_check_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-task-check",
        action="store_true",
        help="run even when the corruption does not lower the metric by the threshold (a random-weight "
        f"model's never does; the same as {CHECK_ENV}=off)",
    )


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model", default=None, help="model id or local folder (default: the embedded Gemma-3-270M)"
    )
    parser.add_argument("--device", default=None, help="cuda, mps or cpu (default: cuda when available)")
    parser.add_argument("--dtype", default=None, choices=["float32", "float16", "bfloat16"])
    parser.add_argument(
        "--backend",
        choices=["hooked", "bridge"],
        help="TransformerLens's HookedTransformer or its TransformerBridge (default: hooked where "
        "TransformerLens converts the model, else the bridge)",
    )
