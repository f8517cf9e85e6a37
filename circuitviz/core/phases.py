"""The phases of a run, the progress reports the engine sends and the timings a result records,
each named once (no torch: the app's progress bar imports it before the engine).

A run has three phases the app's progress bar shows: ``PREPARE`` (the clean and corrupted runs),
``WORK`` (the method's own: scoring edges, checking paraphrases, fitting, tracing) and
``EVALUATE`` (the faithfulness curve). The engine reports progress as ``(Report, fraction)``;
a result's ``timings`` are seconds under ``Timing`` names. Both are ``str`` enums, so a report or
a timing key compares equal to its plain name and results keep plain-string keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum


class _Named(str, Enum):
    """A ``str`` enum that hashes as its plain name, so a dict keyed by names finds its members."""

    def __hash__(self) -> int:
        return str.__hash__(self.value)


class Phase(_Named):
    PREPARE = "prepare"
    WORK = "work"
    EVALUATE = "evaluate"

    @property
    def step(self) -> int:
        """1, 2 or 3: where the phase comes in a run."""
        return list(Phase).index(self) + 1


class Report(_Named):
    """What the engine says it is doing, with the fraction done of it."""

    SCORE = "score"
    PARAPHRASES = "paraphrases"
    OBSERVE = "observe"
    REGRESS = "regress"
    KNOCKOUT = "knockout"
    TRACE = "trace"
    SVD = "svd"
    EVALUATE = "evaluate"
    # said before each block of the clean and corrupted runs: a Cancel is heard there too
    PREPARE = "prepare"

    @property
    def words(self) -> str:
        return _REPORT_WORDS[self]


_REPORT_WORDS = {
    Report.SCORE: "scoring edges",
    Report.PARAPHRASES: "checking paraphrases",
    Report.OBSERVE: "observing activations",
    Report.REGRESS: "fitting the regression",
    Report.KNOCKOUT: "knockout check",
    Report.TRACE: "tracing attention decisions",
    Report.SVD: "factoring the heads (once for this model)",
    Report.EVALUATE: "measuring faithfulness",
    Report.PREPARE: "clean and corrupted runs",
}


# work a model's first run does once for the runs after it (ACC++'s SVD of the heads): not a
# part of the method's work whose share the next run's progress bar should expect
ONE_OFF_REPORTS = frozenset({Report.SVD})


def phase_of_report(reported: str) -> Phase:
    """The phase an engine report belongs to: the clean and corrupted runs, faithfulness, or the
    method's own work."""
    if reported == Report.PREPARE:
        return Phase.PREPARE
    return Phase.EVALUATE if reported == Report.EVALUATE else Phase.WORK


def report_words(reported: str) -> str:
    """A report in words ('scoring edges'); a name no ``Report`` has, with its underscores as spaces."""
    try:
        return Report(reported).words
    except ValueError:
        return str(reported).replace("_", " ")


class Timing(_Named):
    """The names of a result's timings (seconds)."""

    CLEAN_CORRUPTED = "clean_corrupted_s"
    PARAPHRASES = "paraphrases_s"
    SCORING = "scoring_s"
    SELECTION = "selection_s"
    EVALUATION = "evaluation_s"
    OVERLAP = "overlap_s"


_TIMING_WORDS = {"clean_corrupted": "clean and corrupted runs", "ig": "IG", "sae": "SAE", "svd": "SVD"}


def timing_words(name: str) -> str:
    """A timing's key in words for a caption ('clean_corrupted_s' -> 'clean and corrupted runs',
    'scoring_s' -> 'scoring'); any name a method records reads with its underscores as spaces."""
    plain = timing_name(name).removesuffix("_s")
    return _TIMING_WORDS.get(plain, plain.replace("_", " "))


def timing_name(name: str) -> str:
    """A timing's plain-string key (a ``Timing`` or any other name a method records)."""
    return name.value if isinstance(name, Timing) else str(name)


def phase_seconds(timings: Mapping[str, float], seconds: float) -> dict[Phase, float]:
    """A result's timings as the three phases: the clean/corrupted runs, the evaluation, and the
    rest of ``seconds`` (the run's wall time) as the method's work."""
    prepare = float(timings.get(Timing.CLEAN_CORRUPTED.value, 0.0))
    evaluate = float(timings.get(Timing.EVALUATION.value, 0.0))
    return {
        Phase.PREPARE: prepare,
        Phase.WORK: max(seconds - prepare - evaluate, 0.0),
        Phase.EVALUATE: evaluate,
    }
