"""Command line: python -m circuitviz discover|evaluate|batch|planted-bench|methods|models
(the console command circuitviz is the same).

Errors a user can cause end in one sentence on stderr and exit status 2, never a traceback.
The flags and their help are built in ``parser``; the commands that run them are here.
"""

from __future__ import annotations

import json
import os
import sys
import time

from ..core.graph import GraphError
from ..core.refusals import EMPTY_PROMPT, prompt_over_limit
from ..core.results import circuit_data, parse_circuit, read_circuit_text
from ..core.tasks import PromptTask, TaskError, prepare_task
from ..core.text import (
    counted,
    invisible_sentence,
    method_settings,
    only_invisible,
    os_error_sentence,
)
from ..details.base import NEUTRAL_PROMPT, reference_name
from ..measure.task_validity import CHECK_ENV, WeakCorruptionError, identical_prompts_problem
from ..methods import UnknownMethodError, get_method, method_traits
from ..models import EMBEDDED_MODEL, ModelLoadError, check_model_name, load_model
from ..models.adapter import adapter_of
from ..positions.graph import n_units
from ..query.pairs import parse_paraphrases
from ..query.templates import with_flags
from ..services.store import ResultStore
from . import outputs
from .api import (
    evaluate_circuits,
    file_circuits,
    measure_completeness,
    proposed_task,
    run_request,
    transfer_report,
)
from .arguments import batch_checks, checked_paths, pairs_text
from .budgets import default_budgets, discover_note, graph_total, over_positions, read_budgets
from .calibration import one_off_seconds, record
from .cpu_share import threads_for_run
from .file_task import file_kind_notes, fill_from_file, made_on_problem
from .file_transfer import file_paraphrases_used, file_transfer
from .listing import cmd_methods, cmd_models, cmd_planted_bench, end_progress_line, progress_line
from .parser import build_parser
from .probe import probe_unmeasured
from .request import Request
from .settings_args import checked_settings, merged_settings
from .spaces import foil_space_notes, lookalike_spaces_note, trailing_space_sentence
from .tables import format_table


def _likely_next(model, text: str) -> list[tuple[str, float]]:
    """The model's eight likeliest next tokens after ``text``, with their chances."""
    from ..labels.logit_lens import next_token_probabilities  # imported where a run needs it

    return next_token_probabilities(model, text, 8)


def _task(args):
    if not args.prompt.strip():  # said before the model loads
        raise TaskError(EMPTY_PROMPT)
    if only_invisible(args.prompt):
        raise TaskError(invisible_sentence(args.prompt))
    for text, what in ((args.prompt, "The prompt"), (args.corrupted or "", "The corrupted prompt")):
        if invisible_sentence(text, what):  # said, not refused: the user may mean them
            print(invisible_sentence(text, what), file=sys.stderr)
    foils, metric = tuple(args.foil), args.metric or "logit_diff"
    # given, and empty: it read "No --corrupted given" and a proposal was run
    if args.corrupted is not None and not args.corrupted.strip():
        raise TaskError(
            "--corrupted is empty; give the prompt with its key fact or name replaced (same token count), "
            "or leave --corrupted out to have one proposed."
        )
    if args.answer is not None and not args.answer:  # given, and empty: not "no --answer given"
        raise TaskError(
            "--answer is empty; give the answer token (with its leading space, such as ' Paris'), or "
            "leave --answer out to use the model's own prediction."
        )
    if foils and metric in ("prob", "logprob"):  # accepted and unused before
        raise TaskError(
            f"The {metric} metric scores the answer alone; leave --foil out, or use --metric logit_diff."
        )
    task = PromptTask(
        clean=args.prompt,
        corrupted=args.corrupted or "",
        answer=args.answer or "",
        foils=foils,
        metric=metric,
    )
    identical = identical_prompts_problem(task)  # before the load and the estimate, not after the run's start
    if identical:
        raise TaskError(identical)
    return task


def _said(task, sentence: str | None):
    """``task``, after printing what was done to it (a proposed corrupted prompt) on stderr."""
    if sentence:
        print(sentence, file=sys.stderr)
    return task


def _load(args):
    model_id = args.model or EMBEDDED_MODEL
    check_model_name(model_id)  # a mistyped name is refused without a load line before it
    print(f"loading {model_id} ...", file=sys.stderr)  # as batch says it: ~10 s passed unsaid
    start = time.perf_counter()
    model = load_model(model_id, device=args.device, dtype=args.dtype, backend=args.backend)
    return model, model_id, time.perf_counter() - start


def _print_estimate(model, task, method: str, settings, budgets, model_id=None, max_tokens: int = 256):
    """The run's one request (settings parsed, key computed, priced and checked once), its
    estimated time and memory printed as one line before the run (limits.py)."""

    probe_unmeasured(model)  # a first run of this model priced as the app prices it, not nominally
    request = Request.for_model(model, task, method, settings, budgets, model_id, max_tokens).priced(model)
    print(request.estimate.summary(), file=sys.stderr)
    return request


def cmd_discover(args) -> int:
    settings = merged_settings(args)
    budgets, repeats = None, None  # None: the app's defaults, once the graph (or the prompt's units) is known
    if args.budgets is not None:
        budgets, repeats = read_budgets(args.budgets, units=over_positions(settings))
    pairs = checked_paths(args)  # the --transfer-file's pairs as text, or None
    method = get_method(args.method)
    if args.neuronpedia and not settings.get("positions"):
        raise ValueError(
            "--neuronpedia writes a circuit over token positions: add --positions "
            "(eap, eap-ig and eap-ig-activations have it)."
        )
    if args.metric is None and not args.foil and not method.needs_corrupted:
        args.metric = "logprob"  # nothing to contrast the answer with: score its log-probability
    checked_settings(method, settings)
    task = _task(args)
    if repeats:  # said once the other inputs are known good, before the model loads
        print(repeats, file=sys.stderr)
    if pairs is not None:  # the file's format, before the run (it failed after the table)
        parse_paraphrases(pairs, task)
    model, model_id, load_seconds = _load(args)
    _check_length(model, task, args.max_tokens)  # before proposing a corruption or a foil runs it
    task = _said(*proposed_task(model, task, method.needs_corrupted))
    prepared = prepare_task(
        model, task, args.max_tokens, method.needs_corrupted
    )  # errors before the estimate
    settings = method.settings_from_cli(settings, model)
    positions = bool(settings.get("positions"))
    total = graph_total(model, positions, prepared.n_positions)  # what the budgets count: edges or units
    if budgets is None:  # Explore's defaults: log-spaced, ending at the whole graph the budgets count
        budgets = default_budgets(total)
    keeps = method_traits(method.name).over_graph_keeps
    _said(task, discover_note(model, budgets, positions, prepared.n_positions, keeps))
    for note in foil_space_notes(model, task):  # 'John' for ' John': run, and said
        print(note, file=sys.stderr)
    for text, what in ((task.clean, "The prompt"), (task.corrupted, "The corrupted prompt")):
        if odd := lookalike_spaces_note(text, lambda text: adapter_of(model).to_tokens(text).tolist(), what):
            print(odd, file=sys.stderr)  # a page's no-break spaces: run as typed, and said
    if trailing := trailing_space_sentence(task.clean, lambda text: _likely_next(model, text)):
        print(trailing, file=sys.stderr)  # 'The capital of France is ': run as typed, and said
    store = None if args.no_cache else ResultStore()  # no store: nothing read or kept, at any depth
    request = _print_estimate(model, task, method.name, settings, budgets, model_id, args.max_tokens)
    started = time.perf_counter()
    with threads_for_run(request.estimate.device if request.estimate else "cpu") as share:
        result, cached = run_request(model, request, store=store, progress=progress_line)
        measuring = time.perf_counter()
        if args.completeness:
            measure_completeness(model, result, max_tokens=args.max_tokens)
        measured = {"completeness_s": time.perf_counter() - measuring} if args.completeness else {}
    if share.reduced:
        print(f"The CPU was busy: this run used {counted(share.threads, 'thread')}, on the cores left free.")
    if not cached and request.estimate is not None:  # prices the next runs of this model, as the app's do
        done, priced = (
            measuring - started - one_off_seconds(result),
            request.estimate,
        )  # not the SVD's first fill
        worked, more = priced.flops_done(method, result), {"model": priced.model, "others": share.others}
        busy = {"cores": share.cores, "load": share.load, "threads": (share.threads, share.default)}
        busy["during"], busy["cpu"] = share.during, share.cpu
        record(priced.device, method.name, worked, done, timings=result.timings, **more, **busy)
    timings = {"load_s": load_seconds, **result.timings, **measured}
    through = " through the TransformerBridge" if result.backend == "bridge" else ""
    print(
        f"model {model_id} on {result.device}{through}; method {method_settings(result.method, result.config)}"
    )
    print(f"graph: {result.graph.n_edges} edges; prompt {len(result.tokens.get('clean', []))} tokens")
    if result.positions:
        total = n_units(result.graph, len(result.tokens.get("clean", [])))
        print(f"position graph: {total} (edge, position) units; budgets count units")
        table = format_table(result.baseline, result.curve, total, kept="units", metric=result.task.metric)
    else:
        said = reference_name(result)  # without a corrupted prompt: what NDF's 0 was measured on
        table = format_table(result.baseline, result.curve, result.graph.n_edges, result.task.metric, said)
    print(table)
    if args.completeness and outputs.completeness_note(result):
        print(outputs.completeness_note(result))
    said = result.details.report_lines(result) if result.details is not None else []
    said = list(dict.fromkeys([*said, *(note for note in outputs.curve_notes(result) if note not in table)]))
    if said:
        print(with_flags("\n".join(said)))  # no template family: the way out names the flags
    source = "from the result store (use --no-cache to recompute)" if cached else "computed now"
    print("timings: " + ", ".join(f"{k} {v:.2f}s" for k, v in timings.items()) + f"  [{source}]")
    if pairs is None and settings.get("paraphrase_source") == "file":
        pairs = settings.get("paraphrases")  # the method's own file: what it left out is held out
    for line in transfer_report(
        model, result, args.transfer_paraphrases, 5 if args.out else 0, pairs, args.max_tokens
    ):
        if line not in said:  # a sentence the method's lines just said (no template family) is said once
            print(with_flags(line, transfer=True))
    if result.transfer and result.transfer.get("note"):  # the file's note names the flag the line names
        result.transfer["note"] = with_flags(result.transfer["note"], transfer=True)
    if args.out:
        part = args.out.with_name(f".{args.out.name}.part")  # Ctrl-C mid-write leaves no half a file
        marked = outputs.json_budget(result.budgets, total, keeps)  # not the whole graph, where others are
        data = result.to_eap_json(marked, score_meaning=method_traits(result.method).score_meaning)
        part.write_text(json.dumps(data), encoding="utf-8")
        os.replace(part, args.out)
        marked = f"the circuit at budget {data['budget']:,}"
        if result.positions:  # in_graph holds edges: those its units use at some position
            marked = f"the edges of {marked} units, at any position"
        elif (held := sum(bool(edge["in_graph"]) for edge in data["edges"].values())) != data["budget"]:
            # ACC++'s budget 10,342 keeps its 203-edge circuit: "the circuit at budget 10,342" alone
            # read as the whole graph marked
            marked += f", {counted(held, 'edge')}"
        print(f"wrote {args.out} (in_graph: {marked})")
    if result.positions and (args.html or args.neuronpedia):  # one readable budget, said once, for both
        outputs.write_position_outputs(model, result, args.html, args.neuronpedia, args.html_budget)
    elif args.html:
        outputs.write_graph_html(model, result, args.html, args.html_budget)
    return 0


def _check_length(model, task, max_tokens: int) -> None:
    """The prompt's length against ``--max-tokens``, first: a 1,460-token prompt ran the model twice
    (proposing a foil, warning on the answer) before this sentence, or got one about its corruption."""
    n_tokens = adapter_of(model).to_tokens(task.clean, truncate=False).shape[1]
    if n_tokens > max_tokens:
        raise TaskError(prompt_over_limit(n_tokens, max_tokens, "(--max-tokens)"))


def cmd_evaluate(args) -> int:
    text = read_circuit_text(args.circuit)  # a path that cannot be read is said before the model loads
    data = circuit_data(text, str(args.circuit))  # so is a file that is no circuit, before "keeps no task"
    refusal = made_on_problem(text, args.model or EMBEDDED_MODEL, args.other_model)
    if refusal:  # before the load: a circuit of another model's heads
        raise GraphError(refusal)
    neutral, taken = fill_from_file(args, text, str(args.circuit))  # what the flags leave out: the file's
    task = _task(args)
    pairs = (
        pairs_text("--transfer-file", args.transfer_file) if args.transfer_file else None
    )  # before the load
    if pairs is not None and isinstance(data, dict):  # the details naming what to hold out, too
        file_paraphrases_used(data, str(args.circuit))
    model, model_id, _ = _load(args)
    _check_length(model, task, args.max_tokens)
    spec = adapter_of(model).spec
    loaded = parse_circuit(text, spec, origin=str(args.circuit))
    kinds: list[str] = []  # what each row measured, for the JSON, where the first row's 'budget' read as one
    circuits, budgets, rows = file_circuits(spec, loaded, kinds)
    task = _said(*proposed_task(model, _said(task, taken), not neutral))
    with threads_for_run(next(model.parameters()).device.type):  # a busy CPU: the free cores
        baseline, curve = evaluate_circuits(
            model,
            task,
            circuits,
            budgets,
            max_tokens=args.max_tokens,
            completeness=args.completeness,
            neutral=neutral,
        )
    print(f"model {model_id}; circuit {args.circuit} ({counted(int(loaded.mask.sum()), 'edge')} in graph)")
    made_on = loaded.source.get("model_id")
    if isinstance(made_on, str) and made_on.strip() and made_on != model_id:  # same shape, other model
        loaded.notes.append(
            f"The file was made on {made_on!r}; it is evaluated on {model_id!r}, of the same shape."
        )
    for note in [*loaded.notes, *file_kind_notes(loaded.source)]:
        print(note)
    reference = NEUTRAL_PROMPT if neutral and not task.corrupted else "corrupted"
    labels = ["in_graph", *map(str, budgets[1:])]  # the first row's circuit has no budget of its own
    print(format_table(baseline, curve, spec.n_edges, metric=task.metric, reference=reference, labels=labels))
    if len(curve) > 1:
        print(rows)
    transfer = None
    if pairs is not None:  # the reviewer's own paraphrases, each circuit's NDF on them
        transfer, lines = file_transfer(model, task, circuits, budgets, loaded.source, pairs, args.max_tokens)
        print("\n".join(lines))
    notes = [*loaded.notes, rows] if len(curve) > 1 else loaded.notes
    outputs.write_evaluation_json(
        args, model_id, task, spec, baseline, curve, notes, kinds, transfer, neutral
    )
    return 0


def _batch_source(args):
    """Where the batch's executor gets its model (tests replace this)."""
    from ..batch import ModelSource  # pyarrow and scipy load only for the batch command

    return ModelSource(args.model or EMBEDDED_MODEL, args.device, args.dtype, backend=args.backend)


def cmd_batch(args) -> int:
    from ..batch import BatchRequest, ProgressBar, make_executor, run_batch  # pyarrow, scipy: batch only
    from ..batch.atlas import BatchTable
    from ..batch.command import (
        DEFAULT_N,
        counts_line,
        failure_lines,
        interrupted_line,
        method_runs,
        read_file_tasks,
        summary_lines,
        take_ctrl_c,
    )
    from ..batch.mmlu import mmlu_generation
    from ..batch.progress import PROGRESS, Progresses, ProgressFile
    from ..batch.reuse import asked, reuse_problem
    from ..batch.runner import checked_budgets

    def say(text: str) -> None:
        print(text, file=sys.stderr)

    take_ctrl_c()
    typed = args.budgets is not None  # not given: mib, which no batch over token positions can use
    units = over_positions(merged_settings(args))  # what a budget too large is said to count
    budgets, repeats = read_budgets(args.budgets if typed else "mib", mib=True, units=units)
    if args.n is not None and args.n < 1:
        raise ValueError(f"--n must be 1 or more, not {args.n}.")
    if args.batch_tasks < 1:
        raise ValueError(f"--batch-tasks must be 1 or more, not {args.batch_tasks}.")
    if args.consensus and not 0 < args.consensus <= 1:
        raise ValueError(f"--consensus must be above 0 and at most 1 (or 0 for none), not {args.consensus}.")
    started = False
    try:  # Ctrl-C before the run's own loop (reading, loading, measuring) ends in one sentence too
        generate, subjects = mmlu_generation(args.dataset, args.subjects, args.n or DEFAULT_N, args.seed)
        batch_checks(args)  # the family and the folder, before anything loads
        if generate is None and args.generate:
            generate = (args.generate, args.n or DEFAULT_N, args.seed)
        tasks, problems, origin = None, [], ""
        if args.dataset is not None and generate is None:
            tasks, problems, origin = read_file_tasks(args.dataset, args.strict, args.n, say)
        settings = merged_settings(args)  # a flag and --set disagreeing: refused, as discover does
        store = ResultStore(args.store) if args.store else ResultStore()
        ray_options = {}
        if args.executor == "ray":
            ray_options = dict(
                workers=args.workers,
                cpus_per_worker=args.cpus_per_worker,
                gpus_per_worker=args.gpus_per_worker,
                address=args.ray_address,
                local_cpus=args.ray_cpus,
            )
        request = BatchRequest(
            out=args.out,
            methods=method_runs(args.methods, settings),
            budgets=budgets,
            tasks=tasks,
            generate=generate,
            subjects=subjects,
            source=origin,
            problems=problems,
            max_tokens=args.max_tokens,
            batch_tasks=args.batch_tasks,
            keep_edges=args.keep_edges,
            top_edges=args.top_edges,
            consensus=args.consensus or None,
            command="circuitviz " + " ".join(sys.argv[1:]),
        )
        # mib over positions: refused before anything is named
        checked_budgets(request.budgets, request.methods, typed)
        if repeats:
            say(repeats)
        source = _batch_source(args)
        problem = reuse_problem(args.out, asked(request, source), tasks)  # before the model loads
        if problem:
            raise ValueError(problem)
        executor = make_executor(args.executor, source, store=store, **ray_options)
        started = True
        try:
            # the bar on stderr, and where the run stands in the folder (the Dataset page reads it)
            progress = Progresses(ProgressBar(), ProgressFile(args.out / PROGRESS))
            report = run_batch(request, executor, store, progress, log=say)
        finally:
            executor.close()
    except KeyboardInterrupt:
        again = "resume; it keeps what finished" if started else "start"
        print(f"interrupted: rerun the same command to {again}.")
        return 130
    if report.stage == "load":
        print(interrupted_line(report, args.out))
        return 130
    print(counts_line(report))
    batch = BatchTable.load(args.out)
    for line in failure_lines(batch):  # each failed task's reason, on stderr like the skipped rows
        say(line)
    if report.interrupted:
        print(interrupted_line(report, args.out))
        return 130
    for note in batch.notes:  # rows of an earlier run's table that cannot be read: left out, named
        print(note)
    for line in summary_lines(batch):
        print(line)
    print(f"wrote {args.out / 'results.parquet'}; open it on the app's Dataset page")
    return 0


COMMANDS = {
    "discover": cmd_discover,
    "evaluate": cmd_evaluate,
    "methods": cmd_methods,
    "models": cmd_models,
    "planted-bench": cmd_planted_bench,
    "batch": cmd_batch,
}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "no_task_check", False):
        os.environ[CHECK_ENV] = "off"  # read where each check runs (task_validity.gap_check_enabled)
    try:
        try:
            if getattr(args, "max_tokens", 1) < 1:
                raise ValueError(f"--max-tokens must be 1 or more, not {args.max_tokens}.")
            return COMMANDS[args.command](args)
        finally:
            end_progress_line()  # an error or Ctrl-C starts its own line
    except KeyboardInterrupt:  # Ctrl-C anywhere: one line, not a traceback (batch's loop says its own)
        again = "; rerun the same command to resume" if args.command == "batch" else ""
        print(f"interrupted (Ctrl-C): {args.command} stopped{again}.", file=sys.stderr)
        return 130
    except WeakCorruptionError as error:
        fix = "use an answer the prompt's key word decides, or --no-task-check to run anyway"
        print(f"error: {error.what}; {fix}.", file=sys.stderr)
        return 2
    except (TaskError, GraphError, ModelLoadError, UnknownMethodError, ValueError, OSError) as error:
        said = os_error_sentence(error) if isinstance(error, OSError) else with_flags(str(error))
        print(f"error: {said}", file=sys.stderr)
        return 2
