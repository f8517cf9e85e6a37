"""One discovery request, settled once where it enters: the page, the command line, a batch plan.

A ``Request`` holds what names a discovery (model id and dtype, task, method, its typed config,
budgets, the token limit) and, once ``priced`` on the model, its estimate and the limits' verdict.
Everything downstream reads it instead of re-deriving it: the settings are turned into the
method's ``Config`` once (``Request.of``), the store key is computed once (``key``), the prompt is
tokenised for the estimate and the limits are checked once (``priced``). ``api.run_request`` runs
it; the app's run, ``circuitviz discover`` and ``circuitviz batch`` all build one.
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ..core.keys import content_key
from ..core.tasks import DEFAULT_MAX_TOKENS, PromptTask
from ..core.text import given
from ..methods import Method, config_to_dict, get_method
from ..models.adapter import backend_of, model_dtype
from .limits import Estimate, LimitError, Limits, check_run, estimate_request


def model_name(model) -> str:
    """The name a model goes by when the caller gives no id (its TransformerLens ``model_name``)."""
    return str(getattr(model.cfg, "model_name", "model"))


def _whole(value) -> bool:
    """A whole number (an int, numpy's too, or a float without a fraction), never true/false."""
    if isinstance(value, bool):
        return False
    return isinstance(value, numbers.Integral) or (isinstance(value, float) and value.is_integer())


def budget_tuple(budgets) -> tuple[int, ...]:
    """The budgets as sorted distinct edge counts; ValueError in one sentence for anything that
    is not a list of whole numbers from 0 (int('x') said "invalid literal for int() with base
    10", 1.5 became 1 silently, a text became its characters)."""
    if isinstance(budgets, (str, bytes)) or not isinstance(budgets, Iterable):
        raise ValueError(f"The budgets are a list of edge counts, not {given(budgets)}.")
    values = list(budgets)
    wrong = next((value for value in values if not _whole(value) or value < 0), None)
    if wrong is not None:
        raise ValueError(f"A budget is a whole number of edges from 0, not {given(wrong)}.")
    return tuple(sorted({int(value) for value in values}))


def _token_limit(max_tokens) -> int:
    if not _whole(max_tokens) or max_tokens < 1:
        raise ValueError(f"The token limit is a whole number from 1, not {given(max_tokens)}.")
    return int(max_tokens)


@dataclass(frozen=True)
class Request:
    """What one discovery is, with its price once known.

    model_id, dtype, backend: the model the result belongs to (its key; a batch's driver has no
    model; "hooked" or "bridge", the latter added to the key so its results are kept apart);
    task, method (the registered name), config (the method's ``Config``, typed), budgets (sorted,
    each once), max_tokens: what runs. estimate, refusal: set by ``priced`` (the estimate on the
    model and the limit's sentence when the run is over a limit, else None).
    """

    model_id: str
    dtype: str
    task: PromptTask
    method: str
    config: Any
    budgets: tuple[int, ...]
    max_tokens: int = DEFAULT_MAX_TOKENS
    backend: str = "hooked"
    estimate: Estimate | None = field(default=None, compare=False)
    refusal: str | None = field(default=None, compare=False)
    # the registered method, looked up once where the request is made (``of``)
    chosen: Method | None = field(default=None, compare=False, repr=False)

    @classmethod
    def of(
        cls,
        method: str,
        settings=None,
        *,
        model_id: str,
        dtype: str,
        task: PromptTask,
        budgets: Sequence[int],
        max_tokens: int = DEFAULT_MAX_TOKENS,
        known_only: bool = False,
        backend: str = "hooked",
    ) -> Request:
        """A request from plain settings (a dict, None for the defaults) or a config already built.

        ``known_only``: settings this method does not have are left out rather than refused (one
        page's settings carried to another method: Explore's ``ig_steps`` on Compare)."""
        chosen = get_method(method)
        if known_only and isinstance(settings, dict):
            settings = chosen.known_settings(settings)
        return cls(
            model_id=model_id,
            dtype=dtype,
            task=task,
            method=chosen.name,
            config=chosen.as_config(settings),
            budgets=budget_tuple(budgets),
            max_tokens=_token_limit(max_tokens),
            backend=backend,
            chosen=chosen,
        )

    @classmethod
    def for_model(
        cls,
        model,
        task: PromptTask,
        method: str,
        settings,
        budgets: Sequence[int],
        model_id: str | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        known_only: bool = False,
    ) -> Request:
        """``of`` with the model's id (unless given) and dtype; not priced yet."""
        return cls.of(
            method,
            settings,
            model_id=model_id or model_name(model),
            dtype=str(model_dtype(model)),
            task=task,
            budgets=budgets,
            max_tokens=max_tokens,
            known_only=known_only,
            backend=backend_of(model),
        )

    @property
    def method_object(self) -> Method:
        """The registered method (the one ``of`` looked up; looked up here for a request built
        field by field)."""
        return self.chosen if self.chosen is not None else get_method(self.method)

    def with_changes(self, *, settings=None, budgets: Sequence[int] | None = None, task=None) -> Request:
        """This request with other settings (merged into its config's), budgets or task, not priced:
        a page changes a value without taking the config apart into a dict and back."""
        config = self.config
        if settings:
            config = self.method_object.make_config({**self.settings, **dict(settings)})
        return dataclasses.replace(
            self,
            config=config,
            budgets=self.budgets if budgets is None else budget_tuple(budgets),
            task=self.task if task is None else task,
            estimate=None,
            refusal=None,
        )

    def is_for(self, result) -> bool:
        """Whether ``result`` is this request's: its model, task, method, settings and budgets (a
        result a page holds is shown as current only when it is)."""
        return (
            result is not None
            and result.model_id == self.model_id
            and result.task == self.task
            and result.method == self.method
            and result.config == self.settings
            and self._same_budgets(result)
        )

    def _same_budgets(self, result) -> bool:
        """The result evaluated every budget asked and no other, bar those its method adds itself
        (ACC++: its whole traced circuit's, ``Method.added_budgets``)."""
        asked, got = set(self.budgets), {int(b) for b in result.budgets}
        return asked <= got and got - asked <= self.method_object.added_budgets(result)

    @cached_property
    def key(self) -> str:
        """The result store's key of this request (computed once; the backend named only when it
        is the bridge, so the keys of HookedTransformer's results are as they were)."""
        return content_key(**self.key_parts)

    @property
    def key_parts(self) -> dict:
        """What ``key`` is a hash of, but the engine (``core.keys.lineage_key`` hashes the same)."""
        bridge = {"backend": self.backend} if self.backend != "hooked" else {}
        return dict(
            kind="discover",
            model=self.model_id,
            dtype=self.dtype,
            task=self.task.to_dict(),
            method=self.method,
            config=self.settings,
            budgets=list(self.budgets),
            max_tokens=self.max_tokens,
            **bridge,
        )

    @property
    def settings(self) -> dict:
        """The config as plain values (what results, URLs and keys hold)."""
        return config_to_dict(self.config)

    @property
    def is_priced(self) -> bool:
        return self.estimate is not None or self.refusal is not None

    def priced(self, model, store=None) -> Request:
        """This request with its estimate on ``model`` and the limits' verdict; itself when priced.

        The prompt is tokenised once here for the estimate; with ``store``, the work an earlier run
        kept there is priced off (``Method.stored_work``). Limits come from ``Limits.load`` with
        this request's ``max_tokens``. A limits file or variable that cannot be read is a refusal
        too (its sentence says which).
        """
        if self.is_priced:
            return self
        estimate = estimate_request(
            model,
            self.task,
            self.method_object,
            self.config,
            n_budgets=len(self.budgets),
            store=store,
            model_id=self.model_id,
        )
        try:
            check_run(estimate, dataclasses.replace(Limits.load(), max_tokens=self.max_tokens))
            refusal = None
        except LimitError as error:
            refusal = str(error)
        return dataclasses.replace(self, estimate=estimate, refusal=refusal)

    def check(self) -> None:
        """Raise the LimitError of a refused request (the request must be priced)."""
        if not self.is_priced:
            raise ValueError("A request is checked against the limits after it is priced on the model.")
        if self.refusal is not None:
            raise LimitError(self.refusal)
