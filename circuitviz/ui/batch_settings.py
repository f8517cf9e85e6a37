"""The Dataset page's run form, its further settings: what the table keeps (``--keep-edges``,
``--top-edges``), the consensus share measured on every prompt (``--consensus``), the prompts'
token limit (``--max-tokens``, at most the server's ``CIRCUITVIZ_MAX_TOKENS``), how many prompts
share a pass (``--batch-tasks``), the validity check (``--no-task-check``) and each chosen method's
own settings (``--set NAME=VALUE``), each checked to one sentence before the batch starts and
passed to the very command the page starts (``batch_arguments``). What stays the command's alone
(Ray, the device, another result store) is said in one sentence with the command."""

from __future__ import annotations

import dataclasses
import json
import re

import streamlit as st

from ..core.text import counted, markdown_sentence, possessive
from .forms import build_config, config_form

KEY = "dataset.run.more."  # the widgets' keys
MAX_EDGES = 2**31 - 1  # the command's largest edge count (--keep-edges, --top-edges)
CONSENSUS = 0.5  # the command's default share
MAX_TOKENS = 256  # the command's --max-tokens (core.tasks.DEFAULT_MAX_TOKENS)
BATCH_TASKS = 16  # the command's --batch-tasks (batch.runner.DEFAULT_BATCH_TASKS)
# the command's flags a failed run's error may name, and the boxes under "more settings" that set them
FLAG_BOXES = {
    "--max-tokens": "longest prompt",
    "--keep-edges": "keep circuits up to",
    "--top-edges": "strongest edges kept per prompt",
    "--batch-tasks": "prompts sharing a pass",
    "--consensus": "consensus share measured",
}
COMMAND_ONLY = (
    "The command alone runs on Ray workers, in another dtype or backend, or into another result store: "
    "`python -m circuitviz batch --executor ray --workers 4 --dtype bfloat16 --backend bridge --store DIR ...` "
    "(docs/datasets.md)."
)


@dataclasses.dataclass
class BatchSettings:
    """What the form's settings hold: None keeps the command's default."""

    keep_edges: int | None = None
    top_edges: int = 100
    consensus: float = CONSENSUS
    max_tokens: int = MAX_TOKENS
    batch_tasks: int = BATCH_TASKS
    task_check: bool = True
    methods: dict = dataclasses.field(default_factory=dict)  # {method name: {setting: value}}


def model_edges(model_id: str) -> int | None:
    """The edge count of a model the catalog knows (without loading it), else None."""
    from ..models.catalog import SUPPORTED_MODELS

    info = SUPPORTED_MODELS.get(model_id)
    return info.n_edges if info is not None else None


def budget_list(budgets: str, n_edges: int | None) -> list[int]:
    """The budgets box's edge counts ("mib": MIB's ten of the model's edges, where they are known;
    [] when the box does not read)."""
    from ..batch.atlas import mib_budgets
    from ..entry.budgets import read_budgets

    try:
        values, _ = read_budgets(budgets, "The budgets box", mib=True)
    except ValueError:
        return []
    if values == "mib":
        return mib_budgets(n_edges) if n_edges else []
    return list(values)


def widgets(model_id: str, methods: list[str], budgets: str) -> BatchSettings:
    """The settings' widgets, in an expander under the budgets (the command's defaults until changed)."""
    from ..methods import available_methods

    n_edges = model_edges(model_id)
    # short enough for the box at 1,000 px ('10 % of the e' was cut there)
    tenth = f"{max(1, n_edges // 10):,} (10 %)" if n_edges else "10 % of the edges"
    found = BatchSettings()
    most_tokens = token_limit()
    with st.expander("more settings: what the table keeps, the consensus, prompt length, method settings"):
        left, middle, right = st.columns([4, 3, 3], vertical_alignment="bottom")
        found.keep_edges = left.number_input(
            "keep circuits up to budget", 1, MAX_EDGES, None, key=KEY + "keep",
            placeholder=tenth,
            help="the command's --keep-edges: the table keeps each prompt's circuit at every budget up "
            "to this, and only those budgets open in the atlas (its budget slider, consensus circuit, "
            "clusters and prompts); larger circuits stay in the result store. Empty: 10 % of the model's edges "
            "(for a method over token positions, that many units: the run's log names the budgets it leaves out)",
        )  # fmt: skip
        found.top_edges = middle.number_input(
            "strongest edges kept per prompt", 0, MAX_EDGES, 100, key=KEY + "top",
            help="the command's --top-edges: each row of results.parquet keeps this many of the prompt's "
            "strongest edges with their scores",
        )  # fmt: skip
        found.consensus = right.number_input(
            "consensus share measured", 0.0, 1.0, CONSENSUS, 0.05, key=KEY + "consensus", format="%.2f",
            help="the command's --consensus: after the prompts, the circuit of the edges in at least this "
            "share of the prompts' circuits is measured on every prompt (its NDF, drawn dashed on the "
            "Curves tab at this share); 0: not measured, which saves that step",
        )  # fmt: skip
        left, middle, right = st.columns([4, 3, 3], vertical_alignment="bottom")
        found.max_tokens = left.number_input(
            "longest prompt (tokens)", 1, max(most_tokens, 1), min(MAX_TOKENS, most_tokens), key=KEY + "tokens",
            help="the command's --max-tokens: a prompt longer than this is refused (its row failed, "
            f"with the reason); the app allows at most {most_tokens:,} (its CIRCUITVIZ_MAX_TOKENS, as for "
            "Explore's prompts), the command any",
        )  # fmt: skip
        found.batch_tasks = middle.number_input(
            "prompts sharing a pass", 1, 100_000, BATCH_TASKS, key=KEY + "share",
            help="the command's --batch-tasks: prompts of one token length go through the model together, "
            "this many at most; fewer needs less memory, more shares more of each pass",
        )  # fmt: skip
        found.task_check = not right.checkbox(
            "skip the validity check", key=KEY + "nocheck",
            help="the command's --no-task-check: run prompts whose corruption does not lower the answer's "
            "metric by the threshold (a random-weight model's never does); their circuits explain little",
        )  # fmt: skip
        st.caption(markdown_sentence(COMMAND_ONLY))
        registered = available_methods()
        runs = [int(b) for b in budget_list(budgets, n_edges)]
        for name in methods:
            method = registered[name]
            st.markdown(f"**{method.label}** ({name})")
            found.methods[name] = config_form(method, KEY + "method", budgets=runs, references={})
    return found


def boxes_named(sentence: str) -> str:
    """``sentence`` (a failed batch's error line) with each flag of ``FLAG_BOXES`` it names followed
    by its box: 'raise --max-tokens' read as the command's advice on a page whose box says 'longest
    prompt'."""
    for flag, box in FLAG_BOXES.items():
        sentence = re.sub(
            rf"{flag}(?![\w-])", f"{flag} (the '{box}' box under more settings)", sentence, count=1
        )
    return sentence


def token_limit() -> int:
    """The most tokens a prompt may have on this server (``CIRCUITVIZ_MAX_TOKENS``, the app's own
    limit); the command's default when the limits cannot be read (the page says why elsewhere)."""
    from ..entry.limits import LimitError, Limits

    try:
        return int(Limits.load().max_tokens)
    except LimitError:
        return MAX_TOKENS


def _defaults(method) -> dict:
    config = method.make_config({})
    return {field.name: getattr(config, field.name) for field in dataclasses.fields(config)}


def _plain(value):
    """A setting's value as JSON writes it (tuples as lists), for comparing and for ``--set``."""
    return json.loads(json.dumps(list(value) if isinstance(value, tuple) else value))


def _keeps_none(found: BatchSettings, methods: list[str], model_id: str, smallest: int) -> str:
    """Why a keep-circuits count under the smallest budget is refused, in what the budgets count:
    over token positions the box's count is (edge, position) units, and its empty default that
    many units (it said 'Keeping circuits up to 40 edges ... 10 % of the edges' there)."""
    from ..methods import available_methods

    registered = available_methods()
    ticked = [build_config(registered[name], found.methods.get(name) or {}) for name in methods]
    over = [getattr(config, "positions", False) for config, problem in ticked if problem is None]
    n_edges = model_edges(model_id)
    tenth = f"{max(1, n_edges // 10):,}, " if n_edges else ""
    what, default = "edges", "10 % of the edges"
    if over and all(over):
        what, default = "(edge, position) units", f"{tenth}10 % of the model's edges counted as units"
    elif any(over):
        what, default = "edges (units over token positions)", f"{tenth}10 % of the model's edges"
    return (
        f"Keeping circuits up to {found.keep_edges:,} {what} keeps none of the budgets (the smallest is "
        f"{smallest:,}), so the atlas would have no circuit to show; give at least {smallest:,}, or leave "
        f"the box empty for {default}."
    )


def arguments(found: BatchSettings, methods: list[str], budgets: str, model_id: str) -> list[str]:
    """The command's arguments for ``found`` (only what differs from its defaults); ValueError in one
    sentence for what the batch cannot run as shown."""
    from ..methods import available_methods

    argv: list[str] = []
    budget_values = budget_list(budgets, model_edges(model_id))
    if found.keep_edges is not None:
        smallest = min(budget_values, default=None)
        if smallest is not None and found.keep_edges < smallest:
            raise ValueError(_keeps_none(found, methods, model_id, smallest))
        argv += ["--keep-edges", str(int(found.keep_edges))]
    if int(found.top_edges) != 100:
        argv += ["--top-edges", str(int(found.top_edges))]
    most_tokens = token_limit()
    if not 1 <= int(found.max_tokens) <= most_tokens:
        raise ValueError(
            f"The longest prompt must be 1 to {most_tokens:,} tokens on this server, not "
            f"{int(found.max_tokens):,}; its operator sets the limit with CIRCUITVIZ_MAX_TOKENS."
        )
    if int(found.max_tokens) != MAX_TOKENS:
        argv += ["--max-tokens", str(int(found.max_tokens))]
    if int(found.batch_tasks) < 1:
        raise ValueError(f"Prompts sharing a pass must be 1 or more, not {int(found.batch_tasks)}.")
    if int(found.batch_tasks) != BATCH_TASKS:
        argv += ["--batch-tasks", str(int(found.batch_tasks))]
    if not found.task_check:
        argv += ["--no-task-check"]
    share = round(float(found.consensus), 6)
    if share != CONSENSUS:
        argv += ["--consensus", f"{share:g}"]
    registered = available_methods()
    changed: dict[str, dict] = {}  # {setting: {method: value}} of every value off its default
    for name in methods:
        method = registered[name]
        values = found.methods.get(name) or {}
        config, problem = build_config(method, values)
        if problem is not None:
            raise ValueError(f"{possessive(method.label)} settings: {problem}")
        shown = {field.name: getattr(config, field.name) for field in dataclasses.fields(config)}
        for setting, value in shown.items():
            if _plain(value) != _plain(_defaults(method)[setting]):
                changed.setdefault(setting, {})[name] = _plain(value)
    for setting, by_method in sorted(changed.items()):
        # --set gives a setting to every method of the batch that has it: they must all show one value
        having = [name for name in methods if setting in registered[name].Config.__dataclass_fields__]
        values = {name: by_method.get(name, _plain(_defaults(registered[name])[setting])) for name in having}
        if len({json.dumps(value) for value in values.values()}) > 1:
            said = ", ".join(f"{json.dumps(value)} for {name}" for name, value in values.items())
            raise ValueError(
                f"The batch gives a setting to every method that has it (its --set), so "
                f"{setting.replace('_', ' ')} cannot be {said}; give {counted(len(having), 'method')} one "
                "value, or run them as separate batches."
            )
        argv += ["--set", f"{setting}={json.dumps(next(iter(values.values())))}"]
    over = [name for name, value in changed.get("positions", {}).items() if value]
    if over and budgets.strip().lower() == "mib":  # the command's own refusal, said before it starts
        from ..entry.budgets import mib_over_units

        raise ValueError(mib_over_units(over, "The budgets box's", "untick positions in their settings"))
    return argv
