"""Limits before work: an estimate of a run's time and memory, and refusal above the limits.

``estimate_run`` prices a discovery from the model's size, the prompt's length, the method's
steps and paraphrases and the device, before anything runs; ``check_run`` refuses a request
over the configured limits (prompt tokens, IG steps, paraphrases, memory) with one sentence that
names the limit and how to raise it. The app shows the estimate above the Run button; the CLI
prints it as one line before ``discover`` starts.

Limits come from, in order: the defaults below, a TOML or JSON file named by
``$CIRCUITVIZ_LIMITS_FILE`` (keys as in ``Limits``), then the environment variables
``CIRCUITVIZ_MAX_TOKENS``, ``CIRCUITVIZ_MAX_IG_STEPS``, ``CIRCUITVIZ_MAX_PARAPHRASES``,
``CIRCUITVIZ_MAX_MEMORY_GB``, ``CIRCUITVIZ_MAX_MINUTES`` (the estimate's minutes; none by default).

The estimate is a price, not a promise: forward passes are counted from the method's structure,
priced at 2 x parameters x tokens FLOPs (a backward pass twice that), and divided by the rate
measured on this machine (``calibration.py``: this method's recent runs, else other methods',
else a timed forward pass), falling back to a nominal device throughput before anything ran.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path

from ..core import pass_weights
from ..core.refusals import prompt_over_limit
from ..core.tasks import DEFAULT_MAX_TOKENS, PromptTask, TaskError, prepare_task
from ..core.text import counted, rough_duration, shown, shown_number
from ..engine.memory import evaluation_bytes_per_position, gradient_bytes_per_position
from ..measure.chunks import chunk_size, learnt_bytes
from ..measure.evaluate import kept_prompt_run
from ..methods import Method, get_method
from ..methods.settings import IG_STEPS_HIGH, PARAPHRASES_HIGH
from ..models.adapter import adapter_of
from ..models.devices import model_working_memory_bytes
from . import calibration
from .calibration import model_key, rate
from .cpu_share import load_average, others_wanting

ENV = {
    "max_tokens": "CIRCUITVIZ_MAX_TOKENS",
    "max_ig_steps": "CIRCUITVIZ_MAX_IG_STEPS",
    "max_paraphrases": "CIRCUITVIZ_MAX_PARAPHRASES",
    "max_memory_gb": "CIRCUITVIZ_MAX_MEMORY_GB",
    "max_minutes": "CIRCUITVIZ_MAX_MINUTES",
}
LIMITS_FILE_ENV = "CIRCUITVIZ_LIMITS_FILE"

# nominal sustained FLOP/s of the engine's float32 passes, used only before any run or probe was
# measured on this machine (a few cores of a CPU; conservative fractions of GPU peaks)
DEVICE_FLOPS = {"cpu": 2e10, "cuda": 2e13, "mps": 2e12}


class LimitError(ValueError):
    """A request over a configured limit; the message names the limit and how to raise it."""


@dataclass(frozen=True)
class Limits:
    """What a run may ask for. The IG steps and paraphrases start at the most any method's setting
    takes (declared once, on the settings: ``methods.settings.IG_STEPS_HIGH``,
    ``PARAPHRASES_HIGH``), so the form, the command line and the limits agree; an operator
    lowers them (``CIRCUITVIZ_MAX_IG_STEPS``, ...)."""

    max_tokens: int = DEFAULT_MAX_TOKENS
    max_ig_steps: int = IG_STEPS_HIGH
    max_paraphrases: int = PARAPHRASES_HIGH
    max_memory_gb: float = 16.0
    # a run's estimated minutes (none by default): a shared server's operator sets it, so that a
    # link cannot queue a run of a quarter of an hour (a budgets list of every edge count)
    max_minutes: float = float("inf")

    @classmethod
    def load(cls, environ: dict | None = None) -> Limits:
        """Defaults, then ``$CIRCUITVIZ_LIMITS_FILE``, then the environment variables."""
        environ = os.environ if environ is None else environ
        values: dict = {}
        path = environ.get(LIMITS_FILE_ENV)
        if path:
            values.update(_read_file(Path(path)))
        for name, variable in ENV.items():
            if environ.get(variable, "").strip():
                values[name] = environ[variable].strip()
        limits = cls()
        for field in dataclasses.fields(cls):
            if field.name not in values:
                continue
            kind = type(getattr(limits, field.name))
            try:
                value = kind(values[field.name])
            except (TypeError, ValueError):
                raise LimitError(
                    f"The limit {field.name} = {shown(str(values[field.name]), 30)} is not a number; set "
                    f"{ENV[field.name]} (or {field.name} in ${LIMITS_FILE_ENV}) to e.g. {getattr(limits, field.name)}."
                ) from None
            if value <= 0:
                raise LimitError(
                    f"The limit {field.name} must be above 0, not {shown_number(value)}; set {ENV[field.name]}."
                )
            limits = dataclasses.replace(limits, **{field.name: value})
        return limits


def _read_file(path: Path) -> dict:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise LimitError(
            f"Cannot read the limits file {path} ({error.strerror}); fix ${LIMITS_FILE_ENV}."
        ) from None
    try:
        if path.suffix.lower() == ".json":
            data = json.loads(text)
        else:
            import tomllib

            data = tomllib.loads(text)
    except (ValueError, RecursionError) as error:
        raise LimitError(
            f"The limits file {path} is not valid {path.suffix[1:] or 'TOML'} ({str(error)[:80]})."
        ) from None
    if not isinstance(data, dict):
        raise LimitError(f"The limits file {path} must hold keys such as max_tokens = 256.")
    unknown = sorted(set(data) - set(ENV))
    if unknown:
        named = ", ".join(key if len(key) <= 20 else shown(key, 20) for key in unknown[:2])
        more = f" (and {len(unknown) - 2} more)" if len(unknown) > 2 else ""
        raise LimitError(f"The limits file {path} has unknown keys {named}{more}; use {', '.join(ENV)}.")
    return data


@dataclass(frozen=True)
class Estimate:
    """What a run will roughly cost, before it starts."""

    seconds: float
    memory_bytes: float
    n_tokens: int
    ig_steps: int
    n_paraphrases: int
    sequences: float  # forward-equivalent sequence passes
    device: str
    flops: float = 0.0  # the work priced, so a finished run can calibrate the rate
    priced: str = ""  # how the rate was found (calibration.Rate.describe)
    model: str = ""  # the model's size and shape (calibration.model_key): its runs price its next ones
    seconds_range: tuple[float, float] | None = None  # a method whose work depends on what it finds
    range_reason: str = ""
    busy: str = ""  # the sentence saying the CPU is busy now (``busy_note``), or ""
    one_off: float = 0.0  # seconds of ``seconds`` the model's first such run only spends (``Method.one_off``)
    one_off_what: str = ""  # that work in words
    n_scored: int | None = None  # of the paraphrases, those the run will score (``Cost.n_scored``)
    # of ``sequences``: what was added to the method's count (gradient chunks, ``gradient_chunk_passes``)
    # less the prompt's runs left out as kept (``kept_passes`` of the cost's ``prompt_passes``)
    beside_count: float = 0.0
    prompt_passes: float = 0.0
    kept_passes: float = 0.0
    neuron_bytes: float = 0.0  # of ``memory_bytes``: the MLP neurons' scores (``neurons`` on), else 0

    @property
    def memory_gb(self) -> float:
        return self.memory_bytes / 1e9

    def summary(self) -> str:
        work = counted(self.n_tokens, "token")
        if self.ig_steps:
            work += f", {self.ig_steps} IG steps"
        if self.n_paraphrases:
            work += f", {counted(self.n_paraphrases, 'paraphrase')}"
            if self.n_scored is not None and self.n_scored < self.n_paraphrases:
                work += f" of which the checks keep {self.n_scored} to score"
        priced = f"; {self.priced}" if self.priced else ""
        if self.one_off:
            priced += f"; with {self.one_off_what}, about {rough_duration(self.one_off)}"
        took, why = f"about {rough_duration(self.seconds)}", ""
        if self.seconds_range is not None:
            low, high = (rough_duration(seconds) for seconds in self.seconds_range)
            # both ends read alike ("1 s to 1 s", ACDC's and ACC++'s on a short prompt): one figure
            took = f"about {low}" if low == high else f"{low} to {high}"
            why = f" {self.range_reason}." if self.range_reason else ""
        return (
            f"Estimate: {took} and {self.memory_gb:.1f} GB on {self.device} ({work}{priced}).{why}{self.busy}"
        )

    def flops_done(self, method, result) -> float:
        """The work a finished ``result`` of ``method`` really did, in this estimate's FLOPs: the
        estimate's own, unless the method counts the passes its run took (``passes_done``)."""
        done = _method(method).passes_done(result)
        if done is None or self.sequences <= 0:
            return self.flops
        # the count's terms as the run went, with the chunks and the kept runs as priced: an ACDC
        # run on a prompt's kept runs recorded the 7 passes of the runs it read back
        return self.flops * max(done + self.beside_count, 0.0) / self.sequences

    def as_run_finds(self, model, task) -> Estimate:
        """This estimate with the prompt's kept runs as the run finds them when it starts: priced
        before another run made them (Compare's plan prices every method at once; a page drawn
        before a run on the prompt), or after they were dropped, it counted other work than the
        run's, and its record would price the next runs off by their 7 passes."""
        kept = kept_prompt_passes(model, task, self.prompt_passes)
        if kept == self.kept_passes or self.sequences <= 0:
            return self
        sequences = max(self.sequences + self.kept_passes - kept, 1e-9)
        scale = sequences / self.sequences

        def scaled(seconds: float) -> float:
            return (seconds - self.one_off) * scale + self.one_off

        return dataclasses.replace(
            self,
            seconds=scaled(self.seconds),
            seconds_range=self.seconds_range and tuple(map(scaled, self.seconds_range)),
            sequences=sequences,
            flops=self.flops * scale,
            beside_count=self.beside_count + self.kept_passes - kept,
            kept_passes=kept,
        )


def busy_note(
    waiting: float | None = None, cores: int | None = None, quiet: bool = False, threads: int | None = None
) -> str:
    """' The machine is busy now (...)' when other work wants enough of the CPU to slow a run down
    (``BUSY_TIMES``), else ''.

    The rate is priced from this machine's earlier runs, which may have had it to themselves: with
    two helpers' jobs beside the app on two cores, EAP-IG priced at about 3 s took 14 s.
    ``waiting`` is how many other tasks are running or ready to run (``cpu_share.others_wanting``),
    ``cores`` those this process may run on (both read when None); ``quiet``: the price is a quiet
    machine's (``calibration.Rate.assumes_quiet``), and the sentence says so and how many times as
    long a run with ``threads`` threads (every core when None) takes beside them
    (``calibration.slowdown``). The one-minute load average read here before lagged a minute and
    held the command line's own model load: at load 5.0 on two cores it said 3.0 times for runs
    that took 2.0-2.5 times their CPU seconds. Where the load average is the smaller it is taken:
    the count is of one moment, and the app's estimate is made as the browser draws the page
    (9.5-12.5 others counted, 5.2-6.8 times said, at load 6.4-6.8 for a run of 2.4 times).
    """
    if waiting is None:
        waiting = others_wanting()
        if waiting is None:  # not a Linux /proc: nothing to say
            return ""
        load = load_average()  # a moment's burst (a browser drawing the page: 9.5-12.5) is damped there
        waiting = waiting if load is None else min(waiting, load)
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    times = calibration.slowdown(min(waiting, cores), cores, waiting, threads, threads)
    if times < BUSY_TIMES:
        return ""
    busy = f" The machine is busy now ({waiting:.1f} other tasks running or waiting for its {counted(cores, 'core')})"
    if quiet:
        return f"{busy} and the estimate is for a quiet machine: at this load a run takes about {times:.1f} times as long."
    return f"{busy}: the run may take longer."


BUSY_TIMES = 1.2  # a run this many times as long as alone, or more: the machine is said to be busy


def _method(method) -> Method:
    """The registered method of a name, or the method itself (a request's, looked up once)."""
    return method if isinstance(method, Method) else get_method(method)


def _threads() -> int:
    """The threads torch runs a CPU pass with (what a run uses, or fewer on a busy machine)."""
    import torch  # here, not at the top: loaded already where a model is priced

    return torch.get_num_threads()


def _n_parameters(model) -> int:
    return int(sum(p.numel() for p in model.parameters()))


def estimate_run(
    model, method: str, config=None, n_tokens: int = 16, n_budgets: int = 7, device=None, task=None
) -> Estimate:
    """Price a discovery of ``method`` (a registered name, or the method a request looked up) with
    ``config`` on a prompt of ``n_tokens`` tokens; with ``task``, as the method prices that task
    (``Method.estimate_for_task``: Best-of-N counts the listed pairs its checks keep)."""
    chosen = _method(method)
    if config is None or isinstance(config, dict):
        config = chosen.make_config(config)
    spec = adapter_of(model).spec
    if task is None:
        cost = chosen.estimate(config, spec, n_tokens, n_budgets)
    else:
        cost = chosen.estimate_for_task(model, task, config, spec, n_tokens, n_budgets)
    rows = cost.gradient_rows if isinstance(cost.gradient_rows, tuple) else (cost.gradient_rows,)
    chunks = sum(gradient_chunk_passes(model, n_tokens, each) for each in rows)
    kept = kept_prompt_passes(model, task, cost.prompt_passes) if task is not None else 0.0
    sequences = cost.passes + chunks - kept
    steps_used, n_paraphrases = cost.ig_steps, cost.n_paraphrases
    n_parameters = _n_parameters(model)
    flops = 2.0 * n_parameters * n_tokens * sequences
    kind = str(device or next(model.parameters()).device).split(":")[0]
    which = model_key(n_parameters, spec.n_edges)
    nominal = DEVICE_FLOPS.get(kind, DEVICE_FLOPS["cpu"])
    measured = rate(kind, chosen.name, nominal, chosen.calibration_family, which)
    seconds = flops / measured.flops_per_second
    seconds_range = None
    if cost.passes_range is not None and sequences > 0:
        seconds_range = tuple(
            seconds * max(passes + chunks - kept, 0.0) / sequences for passes in cost.passes_range
        )

    once = chosen.one_off(model)
    if once is not None:  # not in the rate: the model's next runs do not do it
        seconds += once.seconds
        seconds_range = seconds_range and tuple(value + once.seconds for value in seconds_range)
    memory = cost.extra_bytes + estimate_memory(
        model, spec, n_tokens, max(cost.gradient_batch, 1), n_budgets, n_paraphrases, kind
    )
    return Estimate(
        seconds,
        memory,
        n_tokens,
        steps_used,
        n_paraphrases,
        sequences,
        kind,
        flops,
        measured.describe(chosen.name),
        which,
        seconds_range,
        cost.range_reason,
        busy_note(quiet=measured.assumes_quiet, threads=_threads()) if kind == "cpu" else "",
        once.seconds if once is not None else 0.0,
        once.what if once is not None else "",
        cost.n_scored,
        chunks - kept,
        cost.prompt_passes if task is not None else 0.0,
        kept,
        cost.extra_bytes if getattr(config, "neurons", False) else 0.0,
    )


def gradient_chunk_passes(model, n_tokens: int, rows: int) -> float:
    """The set-ups of a batched gradient pass of ``rows`` rows past its first chunk: the device's
    working memory cuts it into chunks (``measure.chunks``), each paying the set-up again. On a
    CPU's 2 GB the IOI prompt's pass holds 37 rows on Gemma-3-270M and 12 on SmolLM2-135M, and
    40 IG steps counted as one chunk came out 10-18 % short (``core.pass_weights``)."""
    if rows <= 1:
        return 0.0
    size = chunk_size(model, "gradient", n_tokens, gradient_bytes_per_position(model, n_tokens))
    chunks = -(-int(rows) // max(size, 1))
    return pass_weights.gradient_passes(rows, chunks) - pass_weights.gradient_passes(rows)


def kept_prompt_passes(model, task, prompt_passes: float) -> float:
    """Of a cost's ``prompt_passes`` (the clean and corrupted runs), those of the runs this process
    keeps from an earlier run on the same prompt (``measure.evaluate.kept_prompt_run``): the run
    reads them back instead of making them (a second method on the prompt; the next-token view
    already made the clean one). Half each; a task that cannot be prepared keeps none."""
    if prompt_passes <= 0 or not isinstance(task, PromptTask):
        return 0.0
    try:
        prepared = prepare_task(model, task, max_tokens=10**9, need_corrupted=False)
    except (TaskError, ValueError):
        return 0.0
    runs = [prepared.clean_tokens] + ([prepared.corrupted_tokens] if task.corrupted.strip() else [])
    kept = sum(kept_prompt_run(model, tokens) is not None for tokens in runs)
    return prompt_passes * kept / 2


def estimate_memory(
    model, spec, n_tokens: int, sequences: int, n_budgets: int, n_paraphrases: int, device_kind: str
) -> float:
    """Peak bytes of a run: weights, the gradient pass's and the evaluation's working memory, the
    writer buffers and the score matrices.

    The batched passes are cut to the device's working memory (chunks.py), so each is counted up
    to that; on CUDA the per-position costs measured by an earlier run on this model replace the
    estimates of ``activations``.
    """

    parameters = list(model.parameters())
    element = parameters[0].element_size()
    weights = sum(p.numel() for p in parameters) * element
    budget = model_working_memory_bytes(model) if device_kind != "meta" else 2e9
    gradient_per_position = learnt_bytes(model, "gradient") or gradient_bytes_per_position(model, n_tokens)
    evaluation_per_position = learnt_bytes(model, "evaluate") or evaluation_bytes_per_position(spec, element)
    gradient = min(budget, gradient_per_position * n_tokens * sequences)
    evaluation = min(budget, evaluation_per_position * n_tokens * max(n_budgets, 1))
    writers = 2 * n_tokens * spec.n_forward * spec.d_model * element * (1 + n_paraphrases)
    scores = spec.n_forward * spec.n_backward * 4 * (3 + n_budgets + n_paraphrases)
    return weights + max(gradient, evaluation) + writers + scores


def prompt_limit_problem(n_tokens: int, limits: Limits | None = None) -> str | None:
    """The sentence refusing a prompt of ``n_tokens`` over the token limit, or None (the app says
    it before Run, ``check_run`` at the run)."""
    limits = limits or Limits.load()
    if n_tokens <= limits.max_tokens:
        return None
    return prompt_over_limit(n_tokens, limits.max_tokens, f"with {ENV['max_tokens']}")


def check_run(estimate: Estimate, limits: Limits | None = None) -> None:
    """Refuse a run over the limits before it starts (LimitError naming the limit and its fix)."""
    limits = limits or Limits.load()
    if estimate.n_tokens > limits.max_tokens:
        raise LimitError(prompt_limit_problem(estimate.n_tokens, limits))
    if estimate.ig_steps > limits.max_ig_steps:
        raise LimitError(
            f"{estimate.ig_steps} IG steps is over the limit of {limits.max_ig_steps}; use fewer steps or "
            f"raise the limit with {ENV['max_ig_steps']}."
        )
    if estimate.n_paraphrases > limits.max_paraphrases:
        raise LimitError(
            f"{estimate.n_paraphrases} paraphrases is over the limit of {limits.max_paraphrases}; use fewer "
            f"or raise the limit with {ENV['max_paraphrases']}."
        )
    if estimate.memory_gb > limits.max_memory_gb and estimate.neuron_bytes > 0:
        raise LimitError(memory_with_neurons(estimate, limits))
    if estimate.memory_gb > limits.max_memory_gb:
        raise LimitError(
            f"This run needs about {estimate.memory_gb:.1f} GB, over the memory limit of "
            f"{limits.max_memory_gb:g} GB; shorten the prompt, use fewer steps or paraphrases, or raise "
            f"the limit with {ENV['max_memory_gb']}."
        )
    if estimate.seconds > 60 * limits.max_minutes:
        raise LimitError(
            f"This run is estimated at about {rough_duration(estimate.seconds)}, over this server's limit "
            f"of {limits.max_minutes:g} min; use fewer budgets, steps or paraphrases, or a "
            f"shorter prompt, or raise the limit with {ENV['max_minutes']}."
        )


def memory_with_neurons(estimate: Estimate, limits: Limits) -> str:
    """The memory refusal of a run with MLP neurons as nodes: how much of it the neurons take, and
    turning them off (or fewer IG steps, which their gradients grow with) first among the ways out."""
    steps = ", use fewer IG steps" if estimate.ig_steps > 1 else ""
    return (
        f"This run needs about {estimate.memory_gb:.1f} GB, {estimate.neuron_bytes / 1e9:.1f} GB of it for "
        f"the MLP neurons, over the memory limit of {limits.max_memory_gb:g} GB; turn neurons off{steps} "
        f"or shorten the prompt, or raise the limit with {ENV['max_memory_gb']}."
    )


def estimate_request(
    model, task, method: str, config=None, n_budgets: int = 7, device=None, *, store=None, model_id: str = ""
) -> Estimate:
    """``estimate_run`` for a task: the prompt's token count read off the model's tokenizer; with
    a ``store``, without the work an earlier run kept there (``priced_with_stored_work``)."""
    n_tokens = adapter_of(model).token_count(task.clean) if task.clean.strip() else 1
    estimate = estimate_run(
        model, method, config, n_tokens=n_tokens, n_budgets=n_budgets, device=device, task=task
    )
    if store is None:
        return estimate
    return priced_with_stored_work(estimate, model, model_id, task, method, config, n_budgets, store)


def priced_with_stored_work(
    estimate: Estimate, model, model_id: str, task, method: str, config, n_budgets: int, store
):
    """``estimate`` without what the method says an earlier run stored (``Method.stored_work``).

    What is stored is priced off by the share of time it took in the family's last run here (the
    phases it saves, ``StoredWork.timings``), else by its share of the passes. The FLOPs shrink
    with the seconds, so the finished run calibrates the rate with the work it really did."""

    if estimate is None or store is None:
        return estimate
    work = _method(method).stored_work(model, model_id, task, config, estimate.n_tokens, n_budgets, store)
    if work is None:
        return estimate
    last = calibration.last_run(estimate.device, work.family)
    if last is not None and last["seconds"] > 0:
        timings = last["timings"]
        stored = sum(share * timings.get(name, 0.0) for name, share in work.timings.items())
        share = max(1.0 - stored / last["seconds"], 0.02)
    else:
        share = max(1.0 - work.passes / max(estimate.sequences, 1.0), 0.02)
    once = estimate.one_off  # not stored work: the store does not hold it

    def shared(seconds: float) -> float:
        return (seconds - once) * share + once

    return dataclasses.replace(
        estimate,
        seconds=shared(estimate.seconds),
        seconds_range=estimate.seconds_range and tuple(map(shared, estimate.seconds_range)),
        flops=estimate.flops * share,
        sequences=estimate.sequences * share,
        priced=f"{estimate.priced}; without {work.what} an earlier run stored",
    )
