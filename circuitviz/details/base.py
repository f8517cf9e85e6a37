"""The base of every family's details and the registry stored results find their class by.

A leaf module: it imports nothing of circuitviz, so a family's details module (which imports
only this) never pulls in the methods, the store or the result type.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    import torch

    from ..core.results import CircuitResult


class ResultFormatError(ValueError):
    """A stored result this version cannot read; the message says what to do."""


class MethodDetails:
    """What a method family keeps beside the common fields: a typed, versioned dataclass.

    Subclasses are dataclasses of plain JSON values with a ``kind`` and a ``version``, registered
    with ``@register_details`` so stored results find their class. A family whose circuits exist
    at budgets its run never evaluated (Best-of-N's variants) says so by overriding ``circuit``
    and ``any_budget``. (Why a method's curve may be flat is a trait of the method,
    ``Method.flat_curve_note``, not of its results.)
    """

    kind: ClassVar[str] = ""
    version: ClassVar[int] = 1
    # what NDF's 0 (the 'corrupted' figure) is, in words, for a task with no corrupted prompt
    # (``reference_words``): every method that measures by patching uses the neutral prompt
    no_corrupted_reference: ClassVar[str] = ""

    def to_dict(self) -> dict:
        return json_safe_deep(dataclasses.asdict(self))

    @classmethod
    def from_dict(cls, data: dict, version: int | None = None):
        if version is not None and version != cls.version:
            raise ResultFormatError(
                f"This stored {cls.kind} result has details of version {version}, and this circuitviz "
                f"reads version {cls.version}; run the method again to recompute it."
            )
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in names})

    def circuit(self, result: CircuitResult, budget: int) -> torch.Tensor | None:
        """The family's circuit at a budget its run did not evaluate, when its rule differs from
        top-N of the scores (read from the result's data, never from the model)."""
        return None

    def any_budget(self, result: CircuitResult) -> bool:
        """Whether a circuit exists at any budget with no model pass beyond its evaluation."""
        return False

    def any_budget_rule(self, result: CircuitResult) -> str:
        """How the family builds a circuit at a budget its run did not evaluate, as the words
        after the method's name ("builds a circuit at any budget from ...")."""
        return "builds a circuit at any budget from the run's data"

    def dip_reason(self, result: CircuitResult, low: int, high: int, nested: bool | None) -> str | None:
        """Why the circuit at budget ``high`` can be less faithful than the one at ``low``, when
        the family's own rule says more than "edges are added by score" (``nested``: whether the
        circuit at ``low`` lies inside the one at ``high``, None when not known); None: the page's
        own sentence (top edges by score, then pruned) holds."""
        return None

    def report_lines(self, result: CircuitResult) -> list[str]:
        """Plain lines about the run for the command line."""
        return []

    def paraphrases_used(self) -> list[str]:
        """The clean prompts of the paraphrases the method fitted to or selected on (none by
        default): a measure of transfer holds them out."""
        return []

    def held_out_figures(self, budget: int) -> list[tuple[str, float]]:
        """(clean prompt, NDF of the circuit at ``budget``) of each paraphrase the method itself
        held out (never fitted to nor selected on); none by default."""
        return []

    def found_edges(self, result: CircuitResult) -> tuple[torch.Tensor, str] | None:
        """(the edges the method itself found, what the others of its circuits are) when its
        circuits also hold edges added only to be measured (ACC++'s completion); None: every edge
        of a circuit is the method's."""
        return None

    def reference_name(self) -> str | None:
        """What the run's 'corrupted' figure (NDF's 0) was measured on when the task has no corrupted
        prompt and that is not the neutral prompt (ACC++: its found signals knocked out); None: the
        neutral prompt, as every method that needs no corrupted prompt measures by patching."""
        return None

    def page_notes(self) -> list[str]:
        """Sentences a page writes beside the result's figures (what the run left out and why);
        none by default."""
        return []

    def one_off_seconds(self) -> float:
        """Seconds of the run spent filling a cache its next runs of the model read (ACC++'s first
        SVD of the model's heads): left out of what prices the next runs; none by default."""
        return 0.0


def budget_kept(row: dict) -> str:
    """A learned budget's row in a method's report, as the table under it counts: "103 edges"
    when the circuit holds its budget, else the budget and the edges it kept ("budget 103, 90
    edges"). Until 2026-12-07 Edge Pruning's and paraphrase pruning's lines read "103 edges" for
    circuits of 91 and 90 edges, beside a table whose "edges kept" said so."""
    budget, edges = int(row["budget"]), row.get("edges")
    if edges is None or int(edges) == budget:
        return f"{budget:,} edges"
    return f"budget {budget:,}, {int(edges):,} edges"


NEUTRAL_PROMPT = "neutral prompt"
NEUTRAL_PROMPT_WORDS = "the neutral prompt (every token after the first replaced by the padding token)"


def reference_name(result) -> str:
    """What a result's 'corrupted' figure is the metric of, in two or three words: "corrupted"
    (the corrupted prompt), else what the run measured NDF's 0 on (the neutral prompt, or the
    method's own: "signals knocked out"). Until 2026-12-06 the app and discover labelled it
    "corrupted L(M(q'))" under "corrupted: (none given)"."""
    if result.task.corrupted:
        return "corrupted"
    own = result.details.reference_name() if result.details is not None else None
    return own or NEUTRAL_PROMPT


def found_edges(result) -> torch.Tensor | None:
    """The edges a result's method itself found, when its circuits hold others too (ACC++'s
    completion); None when every edge of its circuits is the method's."""
    found = result.details.found_edges(result) if getattr(result, "details", None) is not None else None
    return found[0] if found is not None else None


DETAILS: dict[str, type[MethodDetails]] = {}


def register_details(cls: type[MethodDetails]) -> type[MethodDetails]:
    """Class decorator: stored results of this ``kind`` read back into ``cls``."""
    DETAILS[cls.kind] = cls
    return cls


def details_to_state(details: MethodDetails | None) -> dict | None:
    if details is None:
        return None
    return {"kind": details.kind, "version": details.version, "data": details.to_dict()}


def json_safe_deep(value):
    """NaN and infinities are not JSON: write them as null, recursively."""
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if isinstance(value, dict):
        return {key: json_safe_deep(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe_deep(item) for item in value]
    return value
