"""The method interface and the registry every page, command and benchmark reaches methods by.

A method turns run contexts (model, graph, prepared task, evaluator, the one result store,
progress, limits) plus its config and budgets into ``CircuitResult`` values, one task or a batch of
them through the same ``run_batch`` (one task is a batch of one: ``run``). The registry knows
everything else about it: its label, its settings (a dataclass whose fields become the app's form
and the command line's flags), whether it needs a corrupted prompt, what a run costs
(``estimate``) and the typed details its results carry. Most methods only score edges;
``ScoringMethod`` does the rest for them in one shared way (top-N selection and pruning at every
budget, one batched faithfulness curve), so every method is measured the same way.

Adding a method is one module: a ``Config`` dataclass, a ``Method`` subclass with ``run_task`` (or
a ``ScoringMethod`` with ``score`` or ``score_batch``) and ``estimate``, decorated with
``@register`` (``methods/registry.py``), in ``circuitviz/methods/`` or behind a
``circuitviz.methods`` entry point: the registry finds it (docs/adding-a-method.md walks through it).
"""

from __future__ import annotations

import abc
import dataclasses
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from ..core import pass_weights
from ..core.curves import CurvePoint
from ..core.graph import GraphSpec
from ..core.phases import Report, Timing, timing_name
from ..core.results import CircuitResult
from ..core.tasks import DEFAULT_MAX_TOKENS, PreparedTask, PromptTask, prepare_task
from ..core.text import given, shown
from ..details.base import MethodDetails
from ..engine.score_checks import require_finite_scores
from ..measure.evaluate import Evaluator, circuits_at_budgets, curves_of_tasks, evaluators_of_tasks
from ..measure.task_validity import require_meaningful
from ..models.adapter import adapter_of, backend_of
from ..positions.run import run_positions
from .settings import check_settings, parse_settings

Progress = Callable[[str, float], None]


class UnknownMethodError(ValueError):
    """The method name is not registered; the message lists the ones that are."""


@dataclass(frozen=True)
class NoConfig:
    """A method without settings."""


OMIT_DEFAULT = "omit_default"  # field metadata: a setting left out of the config's dict at its default


def config_to_dict(config) -> dict:
    """A config as plain values. A setting marked ``omit_default`` is left out at its default, so
    adding one (``positions``) changes no stored key, atlas or JSON of the runs that do not use it."""
    if not dataclasses.is_dataclass(config):
        return dict(config or {})
    values = dataclasses.asdict(config)
    for config_field in dataclasses.fields(config):
        if config_field.metadata.get(OMIT_DEFAULT) and values[config_field.name] == config_field.default:
            del values[config_field.name]
    return values


@dataclass(frozen=True)
class Cost:
    """What a run asks of the model, counted before it starts (``limits.py`` prices it).

    passes: forward-pass equivalents over the prompt (a forward+backward counts 3), all phases;
    gradient_batch: sequences one gradient pass would carry at once without chunking (memory);
    ig_steps, n_paraphrases: what the limits refuse above their maxima;
    n_scored: of ``n_paraphrases``, those the run will score when the estimate knows it (Best-of-N's
        checks of the user's list, ``Method.estimate_for_task``), else None;
    passes_range, range_reason: for a method whose work depends on what it finds (ACDC tests an
        edge only while a path still reaches it), the least and most passes a run can take and
        why, in words; the estimate then says the range, not one figure.
    """

    passes: float
    gradient_batch: int = 0
    ig_steps: int = 0
    n_paraphrases: int = 0
    n_scored: int | None = None
    extra_bytes: float = 0.0  # working memory the method keeps beside the passes (neuron scores)
    # of ``passes``: the prompt's clean and corrupted runs (``PREPARE_PASSES``), which a run reads
    # back instead when this process ran the prompt before (``limits.estimate_run`` leaves them out)
    prompt_passes: float = 0.0
    # the rows of a batched gradient pass whose set-up ``passes`` counts once; each further chunk
    # the device's memory cuts it into pays the set-up again (``limits.estimate_run`` counts them);
    # a tuple where the run makes several such passes on the prompt (an ensemble's members)
    gradient_rows: int | tuple[int, ...] = 0
    passes_range: tuple[float, float] | None = None
    range_reason: str = ""


@dataclass(frozen=True)
class OneOff:
    """Work a run does once per model (``Method.one_off``): about how many seconds, and what it is
    in words ("the SVD of the model's 72 heads")."""

    seconds: float
    what: str


@dataclass(frozen=True)
class StoredWork:
    """What an earlier run kept in the result store that a run of this request would reuse, so
    its price drops (``Method.stored_work``; ``limits.priced_with_stored_work`` prices it).

    timings: {phase timing name: the share of that phase the stored work saves} ("scoring_s": 1.0),
        read against the last timed run of ``family`` on this device;
    passes: the passes of the method's ``Cost`` it saves (the price when no run was timed here);
    family: the methods whose last run's timings stand for this one's, its own first;
    what: what was stored, in words ("the paraphrases' scores").
    """

    timings: dict[str, float]
    passes: float
    family: tuple[str, ...]
    what: str


# ----- the run context -------------------------------------------------------------------------
@dataclass
class RunContext:
    """Everything one run reads, built once by ``api.discover`` (or ``Method.run_on``).

    The prepared task and the evaluator (the clean and corrupted runs) are made on first use, so
    a method that needs no corrupted prompt never pays for one. ``store`` is the one result store
    of the run: methods that keep intermediate results (Best-of-N's score matrices) use it and
    never open another; ``None`` keeps nothing.
    """

    model: Any
    task: PromptTask
    model_id: str = ""
    store: Any = None  # store.ResultStore | None
    progress: Progress | None = None
    max_tokens: int = DEFAULT_MAX_TOKENS
    timings: dict[str, float] = field(default_factory=dict)
    # refuse a task whose corruption does not clearly lower the metric (task_validity), checked
    # on the evaluator's own clean and corrupted run; the boundaries (api, batch) turn it on
    check_meaningful: bool = False
    # what one step of a method's run leaves for a later one (CircuitLasso's observations, made
    # in the pass that made the clean and corrupted runs, wait here for its scoring)
    kept: dict[str, Any] = field(default_factory=dict, repr=False)
    _prepared: dict[bool, PreparedTask] = field(default_factory=dict, repr=False)
    _evaluator: Evaluator | None = field(default=None, repr=False)

    def __post_init__(self):
        if not self.model_id:
            self.model_id = str(getattr(self.model.cfg, "model_name", "model"))

    @classmethod
    def of_prepared(cls, model, prepared: PreparedTask, progress: Progress | None = None) -> RunContext:
        """A context for a task already prepared (Best-of-N scoring each paraphrase pair)."""
        ctx = cls(model, prepared.task, progress=progress)
        ctx._prepared[True] = prepared
        return ctx

    @property
    def spec(self) -> GraphSpec:
        return adapter_of(self.model).spec

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def prepared(self, need_corrupted: bool = True) -> PreparedTask:
        """The task checked against the model's tokenizer (TaskError in one sentence)."""
        need = bool(need_corrupted or self.task.corrupted)
        if need not in self._prepared:
            self._prepared[need] = prepare_task(self.model, self.task, self.max_tokens, need_corrupted=need)
        return self._prepared[need]

    @property
    def evaluator(self) -> Evaluator:
        """The batched faithfulness evaluator; its clean and corrupted runs are timed once."""
        if self._evaluator is None:
            with self.timed(Timing.CLEAN_CORRUPTED):
                self._evaluator = Evaluator(
                    self.model, self.spec, self.prepared(True), check=self.preparing()
                )
        if self.check_meaningful:
            baseline = self._evaluator.baseline
            require_meaningful(self.task, baseline.clean, baseline.corrupted)
        return self._evaluator

    def report(self, phase: str, fraction: float) -> None:
        if self.progress is not None:
            self.progress(phase, fraction)

    def preparing(self) -> Callable[[], None] | None:
        """What the clean and corrupted runs call before each block (``layer_checks``): the run's
        report that they are under way, which raises once the run is cancelled (None: no callback)."""
        return (lambda: self.progress(Report.PREPARE, 0.0)) if self.progress is not None else None

    @contextmanager
    def timed(self, name: str) -> Iterator[None]:
        """Add the block's wall time to ``timings[name]`` (a ``phases.Timing``, kept as its plain name).

        On a GPU the block ends when its kernels have run, not when they were queued: unsynchronised,
        a phase carried the kernels the one before it had queued (Best-of-N's "overlap 0.90 s" on an
        H200, a step that takes 0.14 s on a CPU). One wait a phase, a handful a run."""
        key = timing_name(name)
        start = time.perf_counter()
        try:
            yield
            device = self.device
            if device.type == "cuda":  # not after an error: a failed kernel would raise again here
                torch.cuda.synchronize(device)
        finally:
            self.timings[key] = self.timings.get(key, 0.0) + time.perf_counter() - start

    def result(
        self,
        method: str,
        config,
        scores: torch.Tensor,
        curve: list[CurvePoint],
        circuits: dict[int, torch.Tensor] | None = None,
        details: MethodDetails | None = None,
        baseline=None,
        need_corrupted: bool = True,
    ) -> CircuitResult:
        """The run's result, its tensors moved to the CPU (results are stored and drawn there).

        ``circuits`` holds the circuit the run chose at every budget of ``curve``: a result is
        data, so nothing a view draws is recomputed from the scores."""
        missing = sorted({point.budget for point in curve} - {int(b) for b in (circuits or {})})
        if missing:
            raise ValueError(f"{method}'s result has no circuit at the budgets {missing} of its curve.")
        prepared = self.prepared(need_corrupted)
        return CircuitResult(
            model_id=self.model_id,
            graph=self.spec,
            task=self.task,
            method=method,
            config=config_to_dict(config),
            scores=scores.float().cpu(),
            baseline=baseline if baseline is not None else self.evaluator.baseline,
            curve=curve,
            timings=dict(self.timings),
            circuits={int(b): mask.bool().cpu() for b, mask in (circuits or {}).items()},
            tokens={"clean": prepared.clean_str_tokens, "corrupted": prepared.corrupted_str_tokens},
            device=str(self.device),
            backend=backend_of(self.model),
            details=details,
        )


# what the EAP family's edge scores estimate (exact patching measures it), in the edge table's words
EDGE_CHANGE = (
    "the metric's change when the edge alone takes the corrupted prompt's value (negative: the "
    "answer relies on it)"
)


# ----- methods ---------------------------------------------------------------------------------


def _methods_with_setting(name: str) -> list[str]:
    """The names of the method classes whose settings have ``name``, sorted (the registry's
    ``neurons_capable`` trait, read without importing the registry, which imports this module)."""
    found, pending = set(), list(Method.__subclasses__())
    while pending:
        cls = pending.pop()
        pending += cls.__subclasses__()
        config = getattr(cls, "Config", None)
        if isinstance(getattr(cls, "name", None), str) and dataclasses.is_dataclass(config):
            if name in {f.name for f in dataclasses.fields(config)}:
                found.add(cls.name)
    return sorted(found)


class Method(abc.ABC):
    """Base of every method: a name, a label, a config dataclass, ``estimate`` and ``run``."""

    name: ClassVar[str]
    label: ClassVar[str]
    summary: ClassVar[str] = ""
    Config: ClassVar[type] = NoConfig
    needs_corrupted: ClassVar[bool] = True
    # for a method that needs no corrupted prompt: one sentence saying what its NDF, necessity and
    # curve are measured against when none is given (the Explore form says it where the box hides)
    without_corrupted: ClassVar[str | None] = None
    # the typed details its results carry (results.MethodDetails), None for none
    Details: ClassVar[type | None] = None
    # extra command-line names of settings ({"lambda": "lasso_lambda"} gives --lambda)
    flag_aliases: ClassVar[dict[str, str]] = {}
    # whether its edge scores are a closed-form function of the model (equal on every device to
    # rounding); False for a method whose scores are where an optimisation ended (Edge Pruning):
    # its circuits and curve agree across devices, the scores of the trajectory need not
    scores_are_exact: ClassVar[bool] = True
    # ----- what the method is: pages, reports and transfer read these through
    # ``registry.method_traits``, never by comparing its name
    # why its circuit is fitted to the prompt itself, so its NDF on the prompt may flatter it
    # (a clause: "Edge Pruning learns its mask on this prompt"), None for a method that is not
    fitted_to_prompt: ClassVar[str | None] = None
    # whether its results carry traced signals a Signals page draws (ACC++)
    has_signals_view: ClassVar[bool] = False
    # whether its results carry paraphrase candidates a Paraphrases page draws (Best-of-N)
    has_paraphrases_view: ClassVar[bool] = False
    # why an NDF near zero at every budget is what this method can give (the reason after "NDF is 0
    # at every budget: ", which ``MethodTraits.flat_curve_sentence`` writes with the figures), or None
    flat_curve_note: ClassVar[str | None] = None
    # whether an edge's score estimates the change of the answer's metric when the edge is
    # corrupted (the EAP family); False for learned masks, normalised ensembles, regression shares
    scores_estimate_metric: ClassVar[bool] = True
    # what an edge's score is, as a phrase (the edge table's line says "score: <this>"): every
    # method says its own, since a 0.998 of a learned mask and a -1.2 of attribution patching
    # share one column
    score_meaning: ClassVar[str] = ""
    # what a budget over the graph's edges keeps when it is not the whole graph (a phrase after
    # 'keeps': ACC++ keeps no edge it did not trace), None for a method whose budget does
    over_graph_keeps: ClassVar[str | None] = None
    # the method names whose runs price this one's when it has none of its own (one pipeline)
    calibration_family: ClassVar[tuple[str, ...]] = ()

    def default_config(self):
        return self.Config()

    def make_config(self, values: dict | None = None):
        """A config from plain values (CLI flags, a form, JSON); unknown keys are refused."""
        values = dict(values or {})
        names = {f.name for f in dataclasses.fields(self.Config)}
        unknown = sorted(set(values) - names)
        offered = _methods_with_setting("neurons") if set(unknown) & {"neurons", "neuron_top_k"} else []
        if unknown and set(unknown) <= {"neurons", "neuron_top_k"} and len(offered) > 1:
            raise ValueError(
                f"{self.name} does not score MLP neurons as nodes; {', '.join(offered[:-1])} and "
                f"{offered[-1]} do, so choose one of them or leave neurons out."
            )
        if unknown:
            # a setting's name is quoted only when it is long (a pasted blob), at most two named
            quoted = [name if len(name) <= 30 else shown(name, 30) for name in map(str, unknown[:2])]
            more = f" (and {len(unknown) - 2} more)" if len(unknown) > 2 else ""
            raise ValueError(
                f"{self.name} has no setting {', '.join(quoted)}{more}; its settings are "
                f"{', '.join(sorted(names)) or 'none'}."
            )
        config = self.Config(**parse_settings(self.Config, values))
        check_settings(config)  # every Config, whether or not its own __post_init__ checks (AtP*'s did not)
        return config

    def known_settings(self, settings: dict) -> dict:
        """The part of ``settings`` this method has (a page's settings carried to another method)."""
        names = {f.name for f in dataclasses.fields(self.Config)}
        return {name: value for name, value in settings.items() if name in names}

    def added_budgets(self, result) -> set[int]:
        """Budgets a run adds to those it was asked for (ACC++: its whole traced circuit's)."""
        return set()

    def settings_from_cli(self, settings: dict, model=None) -> dict:
        """Turn values typed on the command line into settings (a family that takes a file's
        contents reads the file here). ``model`` is loaded by then."""
        return settings

    def as_config(self, config):
        """``config`` as this method's Config: None gives the defaults, a dict is checked."""
        if config is None or isinstance(config, Mapping):
            return self.make_config(dict(config or {}))
        if not isinstance(config, self.Config):  # 5, a list, another method's config
            raise ValueError(
                f"{self.name}'s settings are a dict of setting names and values, not "
                f"{given(config)}; see `circuitviz methods`."
            )
        return config

    @abc.abstractmethod
    def estimate(self, config, spec: GraphSpec, n_tokens: int, n_budgets: int) -> Cost:
        """What a run with ``config`` on a prompt of ``n_tokens`` tokens asks of the model."""

    def estimate_for_task(
        self, model, task: PromptTask, config, spec: GraphSpec, n_tokens: int, n_budgets: int
    ) -> Cost:
        """``estimate`` for ``task`` on ``model``, where a method's work depends on more of the task
        than its token count (Best-of-N's list of pairs, some of which its checks leave out);
        ``estimate`` by default."""
        return self.estimate(config, spec, n_tokens, n_budgets)

    def passes_done(self, result) -> float | None:
        """The passes a finished ``result`` (a ``CircuitResult``) really took, in ``estimate``'s
        units, where its work depends on what it found; None (the default) when the estimate's
        passes are the work. The finished run calibrates the rate with it, so a sparse walk does
        not make the next one look cheap."""
        return None

    def one_off(self, model) -> OneOff | None:
        """Work the run does only when the model's earlier runs have not done it (ACC++'s SVD of
        the heads, kept on disk for the next runs): priced on top of the passes; None by default."""
        return None

    def stored_work(
        self, model, model_id: str, task: PromptTask, config, n_tokens: int, n_budgets: int, store
    ) -> StoredWork | None:
        """The hook where stored results change the price: what of this run an earlier run kept in
        ``store`` (Best-of-N: a sibling variant's pair scores), or None (the default: nothing)."""
        return None

    def run(self, ctx: RunContext, config, budgets: Sequence[int]) -> CircuitResult:
        """Discover the circuit of ``ctx.task`` at every budget: the batch of one of ``run_batch``."""
        return self.run_batch([ctx], config, budgets)[0]

    def run_batch(
        self, contexts: Sequence[RunContext], config, budgets: Sequence[int], progress: Progress | None = None
    ) -> list[CircuitResult]:
        """Run on one task or several of one model (a dataset's prompts): each result is what its
        context gives alone. A method whose work is per task writes ``run_task`` and its tasks run
        one after another here; ``ScoringMethod`` shares batched passes between tasks instead."""
        config = self.as_config(config)
        budgets = sorted({int(b) for b in budgets})
        results = []
        for index, ctx in enumerate(contexts):
            results.append(self.run_task(ctx, config, budgets))
            if progress is not None:
                progress("run", (index + 1) / len(contexts))
        return results

    def run_task(self, ctx: RunContext, config, budgets: Sequence[int]) -> CircuitResult:
        """One task's run, for a method whose work is per task (Best-of-N, ACC++, Edge Pruning);
        build the result with ``ctx.result(...)``."""
        raise TypeError(f"{type(self).__name__} writes neither run_task nor run_batch.")

    def run_on(
        self,
        model,
        task: PromptTask,
        config=None,
        budgets: Sequence[int] = (),
        *,
        store=None,
        progress: Progress | None = None,
        model_id: str | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
    ) -> CircuitResult:
        """Run on a model and task directly (tests, benchmarks); ``api.discover`` adds the store
        lookup and the limits."""
        ctx = RunContext(model, task, model_id or "", store, progress, max_tokens)
        return self.run(ctx, self.as_config(config), sorted({int(b) for b in budgets}))


class ScoringMethod(Method):
    """A method that produces one edge-score matrix; circuits are its top-N edges, pruned.

    It writes ``score_batch`` (scores of several tasks in shared passes: EAP, EAP-IG) or, when its
    scoring is per task, ``score`` (or ``score_with_details``); one task is a batch of one.
    """

    def score(self, ctx: RunContext, config) -> torch.Tensor:
        """Edge scores of one task, the estimated change of the metric when the edge is corrupted.

        Returns [n_forward, n_backward] on the model's device, zero off the edge mask.
        """
        raise TypeError(f"{type(self).__name__} writes neither score nor score_batch.")

    def score_positions(self, ctx: RunContext, config) -> torch.Tensor:
        """Scores of every (edge, position) unit: [n_forward, n_backward, pos] on the model's
        device, whose sum over positions is ``score`` (the gradient methods have them)."""
        raise ValueError(
            f"{self.name} has no position-resolved scores; use eap, eap-ig or eap-ig-activations."
        )

    def score_with_details(self, ctx: RunContext, config) -> tuple[torch.Tensor, MethodDetails | None]:
        """One task's scores and the typed details of the run beside them (none by default)."""
        return self.score(ctx, config), None

    def make_evaluators(self, contexts: Sequence[RunContext], config, check=None) -> list[Evaluator]:
        """The clean and corrupted runs of ``contexts`` (none has its evaluator yet), in shared
        batched passes; a method whose own work runs the two prompts anyway makes them there.
        ``check``: called before each block of those passes (``RunContext.preparing``)."""
        model, spec = contexts[0].model, contexts[0].spec
        return evaluators_of_tasks(model, spec, [ctx.prepared(True) for ctx in contexts], check=check)

    def score_batch(
        self, contexts: Sequence[RunContext], config, progress: Progress | None = None
    ) -> list[tuple[torch.Tensor, MethodDetails | None]]:
        """(scores, details) of each task; each context's evaluator is ready. One by one through
        ``score_with_details`` unless the method shares passes between tasks (EAP, EAP-IG)."""
        found = []
        for index, ctx in enumerate(contexts):
            found.append(self.score_with_details(ctx, config))
            if progress is not None and len(contexts) > 1:
                progress("score", (index + 1) / len(contexts))
        return found

    def run_batch(
        self, contexts: Sequence[RunContext], config, budgets: Sequence[int], progress: Progress | None = None
    ) -> list[CircuitResult]:
        """One task or several in shared passes: one batched clean/corrupted run, ``score_batch``,
        and every (task, budget) circuit in shared patched passes. The tasks must share the model,
        prompt length, metric and foil count (``activations.batch_compatible``); each result
        equals the run of its context alone (tested). With several tasks each result's timings
        are its share of the batch's (the phase time divided by the number of tasks), with
        ``batch_tasks`` beside them; progress is each task's own for a batch of one.
        """
        contexts = list(contexts)
        config = self.as_config(config)
        if getattr(config, "positions", False):  # circuits over (edge, position) units, task by task
            return [run_positions(self, ctx, config, budgets) for ctx in contexts]
        first = contexts[0]
        if any(ctx.model is not first.model for ctx in contexts):
            raise ValueError("The tasks of one batch must run on one model instance.")
        spec, budgets = first.spec, sorted({int(b) for b in budgets})
        alone = len(contexts) == 1
        timings: dict[str, float] = {}

        def phase(name: str, fraction: float) -> Progress | None:
            if progress is None:
                return first.progress if alone else None
            start = {"score": 0.05, "evaluate": 0.85}[name]
            return lambda _, part: progress(name, start + fraction * part)

        begin = time.perf_counter()
        missing = [ctx for ctx in contexts if ctx._evaluator is None]
        if missing:
            # a run alone says before each block of them that they are under way (a Cancel is
            # heard there); a batch's runs report to the batch, which stops them otherwise
            check = first.preparing() if alone and progress is None else None
            for ctx, evaluator in zip(missing, self.make_evaluators(missing, config, check)):
                ctx._evaluator = evaluator
        timings[Timing.CLEAN_CORRUPTED.value] = time.perf_counter() - begin
        begin = time.perf_counter()
        scoring = phase("score", 0.8)
        if scoring is not None:  # the clean and corrupted runs are done: say the scoring has begun
            scoring(Report.SCORE, 0.0)
        scored = self.score_batch(contexts, config, scoring)
        for matrix, _ in scored:
            require_finite_scores(matrix, spec, self.name, first.model)
        scores = [(s.float() * spec.tensors(s.device).edge_mask).nan_to_num(0.0) for s, _ in scored]
        timings[Timing.SCORING.value] = time.perf_counter() - begin
        begin = time.perf_counter()
        circuits = circuits_at_budgets(spec, torch.stack(scores), budgets)  # [n, n_budgets, fwd, bwd]
        evaluating = phase("evaluate", 0.15)
        if evaluating is not None:
            evaluating(Report.EVALUATE, 0.0)
        curves = curves_of_tasks([ctx.evaluator for ctx in contexts], circuits, budgets, evaluating)
        timings[Timing.EVALUATION.value] = time.perf_counter() - begin
        results = []
        for ctx, matrix, (_, details), curve, chosen in zip(contexts, scores, scored, curves, circuits):
            for name, seconds in timings.items():
                ctx.timings[name] = ctx.timings.get(name, 0.0) + seconds / len(contexts)
            if not alone:
                ctx.timings["batch_tasks"] = float(len(contexts))
            kept = dict(zip(budgets, chosen))
            results.append(ctx.result(self.name, config, matrix, curve, circuits=kept, details=details))
        return results


# the weights of the passes a run makes, measured on both embedded models (``core.pass_weights``)
PREPARE_PASSES = pass_weights.PREPARE_PASSES
GRADIENT_SETUP_PASSES = pass_weights.GRADIENT_SETUP_PASSES
curve_passes = pass_weights.curve_passes


def gradient_cost(
    ig_steps: int,
    n_budgets: int,
    extra_passes: float = 0.0,
    extra_bytes: float = 0.0,
    integrated: bool = True,
    spec=None,
) -> Cost:
    """The cost of a gradient-scored method: clean and corrupted runs, a gradient pass of
    ``ig_steps`` rows, the faithfulness curve of ``n_budgets`` on ``spec``'s graph (each weighted
    as measured, ``core.pass_weights``). ``integrated=False``: the rows are not IG steps (EAP's one
    gradient, AtP*'s layers), so the estimate names none and the IG-steps limit does not apply."""
    steps = max(int(ig_steps), 1)
    passes = (
        PREPARE_PASSES + pass_weights.gradient_passes(steps) + curve_passes(n_budgets, spec) + extra_passes
    )
    return Cost(
        passes=passes,
        gradient_batch=steps,
        ig_steps=int(ig_steps) if integrated else 0,
        extra_bytes=float(extra_bytes),
        prompt_passes=PREPARE_PASSES,
        gradient_rows=steps,
    )
