"""The calls the CLI, the app and the benchmarks share: discover a circuit, evaluate one.

``discover`` (or ``run_request``, for a ``request.Request`` built at the boundary) goes through
the result store, so the same (model, task, method, config, budgets) is computed once; ``evaluate_circuits`` scores any circuits (from a file, another method, a
user's selection) on a task with the same batched evaluation every method uses;
``bon_candidates`` gives a Best-of-N result's candidates, evaluated, at any budget.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

import torch

from ..core.curves import Baseline, CurvePoint
from ..core.graph import prune
from ..core.results import CircuitResult, LoadedCircuit, circuits_from_json
from ..core.tasks import (
    DEFAULT_MAX_TOKENS,
    PromptTask,
    TaskError,
    prepare_task,
    unknown_words_note,
)
from ..core.text import chance_text
from ..details.base import reference_name
from ..measure.evaluate import Evaluator, circuits_at_budgets, curves_of_tasks
from ..measure.task_validity import identical_prompts_problem, require_meaningful
from ..measure.transfer import DEFAULT_PARAPHRASES, held_out_transfer, paraphrases_used, transfer_record
from ..methods.base import Progress, RunContext
from ..methods.bon import stored_scores_reader
from ..models.adapter import adapter_of
from ..models.tokens import own_text
from ..positions.graph import n_units
from ..query.candidates import candidate_masks, evaluated_candidates, ranked_candidates
from ..query.proposals import (
    answer_chance,
    proposal_for,
    propose,
    propose_corruption,
    propose_foil,
    unlikely_answer_sentence,
)
from ..services.store import ResultStore
from .budgets import API_BUDGETS, NO_BUDGETS, budget_findings, default_budgets, graph_total
from .request import Request


def with_proposed_answer(model, task: PromptTask) -> tuple[PromptTask, str | None]:
    """``task`` with the answer the app would propose when the command line gave none
    (``proposals.propose`` over the model's eight likely next tokens: the likeliest of the top
    five whose task passes the meaningful-task check, a content word before a function word),
    and the sentence saying which and how likely; TaskError naming ``--answer`` when none fits."""
    if task.answer or not task.clean.strip():
        return task, None
    from ..labels.logit_lens import next_token_probabilities

    likely = next_token_probabilities(model, task.clean, 8)
    answer = propose(model, task.clean, [token for token, _ in likely]).answer
    chance = dict(likely).get(answer)
    if not answer or chance is None:
        raise TaskError("No answer could be proposed for this prompt; give it with --answer.")
    rank = [token for token, _ in likely].index(answer) + 1
    which = "most likely" if rank == 1 else f"number {rank} of its likely"
    said = f"No --answer given; using {answer!r}, the model's {which} next token ({chance_text(chance)})."
    return dataclasses.replace(task, answer=answer), f"{said} (--answer sets your own.)"


def with_proposed_inputs(model, task: PromptTask) -> tuple[PromptTask, str | None]:
    """``task`` with what the command line left out proposed as the app proposes it
    (``query.proposals``), and the sentences saying what and how (None: nothing proposed).

    Without a corrupted prompt: the template family's that recognises the prompt, or a known word
    swapped, under the logit difference (with at most one foil given, measured against it) the
    first whose corruption passes the meaningful-task check, as the app's (``proposals.proposal_for``);
    TaskError with the reason, naming ``--corrupted``, when nothing fits or none passes. Without a foil
    under the logit-difference metric: the other name of an indirect-object prompt, else what the
    model predicts after the corrupted prompt (as before, a missing foil the method's task check
    refuses, naming ``--foil``, when neither gives one)."""
    sentences = []
    if not task.corrupted.strip() and task.clean.strip():
        if task.metric == "logit_diff" and len(task.foils) <= 1 and task.answer.strip():
            made = proposal_for(model, task.clean, task.answer, [], foil=next(iter(task.foils), None))
            corrupted, note = made.corrupted, made.corrupted_note
        else:
            corrupted, note = propose_corruption(model, task.clean, task.answer)
        if not corrupted:  # one sentence: "... keeping the token count. Give it with --corrupted." was two
            raise TaskError(f"{note.rstrip().rstrip('.')}, and give it with --corrupted.")
        said = note.replace("; edit it freely", "")  # the app's wording; here the flag edits it
        sentences.append(f"No --corrupted given; using {corrupted!r}. {said} (--corrupted sets your own.)")
        task = dataclasses.replace(task, corrupted=corrupted)
    if task.metric == "logit_diff" and not task.foils and task.clean.strip() and task.answer.strip():
        foil, note = propose_foil(model, task.clean, task.corrupted, task.answer)
        if foil:
            sentences.append(f"No --foil given; using {foil!r}. {note} (--foil sets your own.)")
            task = dataclasses.replace(task, foils=(foil,))
    return task, "\n".join(sentences) or None


def proposed_task(model, task: PromptTask, needs_corrupted: bool = True) -> tuple[PromptTask, str | None]:
    """What the command line left out proposed as the app proposes it (the answer; for a method
    that needs one, the corrupted prompt and the foil), and every sentence saying so, with the
    app's sentence for an answer the model barely predicts."""
    task, said = with_proposed_answer(model, task)
    sentences = [said]
    if needs_corrupted:
        task, said = with_proposed_inputs(model, task)
        sentences.append(said)
    sentences.append(answer_note(model, task))
    sentences.append(unknown_words_note(model, task))  # a word-level tokenizer's '<unk>', said
    return task, "\n".join(filter(None, sentences)) or None


def answer_note(model, task: PromptTask) -> str | None:
    """The app's sentence for an answer the model barely predicts after the prompt, with the
    command line's way out; None when it predicts it, or when the answer is not one token (the
    task's own check refuses that, in its own sentence)."""
    found = answer_chance(model, task)
    if found is None:
        return None
    chance, top, top_chance = found
    token = own_text(adapter_of(model), task.answer) or task.answer  # ' Mary': a word-level 'Mary'
    way_out = "give one it predicts with --answer, or a prompt whose answer it predicts"
    return unlikely_answer_sentence(token, chance, top, top_chance, way_out)


def parse_budgets(text: str, least: int = 0) -> list[int]:
    """'50,100,200' -> budgets, sorted and distinct: edge counts of ``least`` (0 here; the app and
    the command line take 1) to ``MAX_BUDGET``. ValueError with the first sentence the command
    line's ``--budgets`` would give (``budgets.read_budgets``: an empty item, a part that is not a
    whole number, such as '10 20', and a negative budget are refused)."""
    values, problems, _ = budget_findings(text, API_BUDGETS, least=least, empty=NO_BUDGETS)
    if problems:
        raise ValueError(problems[0])
    return values


def request_key(model, model_id: str, task: PromptTask, method: str, config, budgets, max_tokens: int) -> str:
    """The store key of a discovery request (``Request.key``)."""
    return Request.for_model(model, task, method, config, budgets, model_id, max_tokens).key


class _AppDefaults(tuple):
    """``discover``'s budgets when none are given: the graph's default budgets, once it is known
    (None stays refused, as any budgets of the wrong kind are)."""


APP_DEFAULTS = _AppDefaults()


def discover(
    model,
    task: PromptTask,
    method: str = "eap-ig",
    config: dict | object | None = None,
    budgets: Sequence[int] = APP_DEFAULTS,
    model_id: str | None = None,
    store: ResultStore | None = None,
    progress: Progress | None = None,
    max_tokens: int = DEFAULT_MAX_TOKENS,
) -> tuple[CircuitResult, bool]:
    """Run (or fetch from ``store``) a method on a task. Returns (result, came from the store).

    The arguments become one ``Request`` (settings parsed, key computed once); ``run_request``
    does the rest. ``budgets`` left out: Explore's and ``discover``'s defaults, ending at the whole
    graph the budgets count (``default_budgets_for``; until 2026-12-06 50 to 5,000, which stopped
    short of it).
    """
    if budgets is APP_DEFAULTS:
        budgets = default_budgets_for(model, task, method, config)
    request = Request.for_model(model, task, method, config, budgets, model_id, max_tokens)
    return run_request(model, request, store, progress)


def default_budgets_for(model, task: PromptTask, method: str, config=None) -> list[int]:
    """``budgets.default_budgets`` of the graph a run's budgets count: the model's edges or, with
    the method's ``positions`` setting on, the (edge, position) units of the task's prompt."""
    from ..methods import get_method

    positions = bool(getattr(get_method(method).as_config(config), "positions", False))
    n_tokens = int(adapter_of(model).to_tokens(task.clean, truncate=False).shape[1])
    return default_budgets(graph_total(model, positions, n_tokens))


def run_request(
    model, request: Request, store: ResultStore | None = None, progress: Progress | None = None
) -> tuple[CircuitResult, bool]:
    """Run (or fetch from ``store``) a request. Returns (result, came from the store).

    A request not computed before is priced on the model and refused over the limits before any
    work (a request the page priced already is not priced again). ``store`` is the run's one
    result store: the method keeps what it caches there too (Best-of-N's score matrices); None
    computes everything and keeps nothing.
    """
    identical = identical_prompts_problem(request.task)
    if identical:  # refused before any pass (a task that differs is checked on its clean/corrupted run)
        raise TaskError(identical)

    def compute() -> CircuitResult:
        request.priced(model).check()
        chosen = request.method_object
        ctx = RunContext(
            model, request.task, request.model_id, store, progress, request.max_tokens, check_meaningful=True
        )
        if chosen.needs_corrupted or request.task.corrupted:
            ctx.evaluator  # noqa: B018  (the clean and corrupted run, and the task's check, before any work)
        return chosen.run(ctx, request.config, list(request.budgets))

    if store is None:
        return compute(), False
    return store.get_or_compute(request.key, compute)


def evaluate_circuits(
    model,
    task: PromptTask,
    circuits: Sequence[torch.Tensor],
    budgets: Sequence[int] | None = None,
    prune_dead: bool = False,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    completeness: bool = False,
    neutral: bool = False,
) -> tuple[Baseline, list[CurvePoint]]:
    """Faithfulness of given circuit masks [n_forward, n_backward] on a task, in one batch
    (``completeness``: each circuit's completeness too, ``measure.completeness``). ``neutral``: a
    task with no corrupted prompt is measured against the neutral prompt, as a method that needs
    none measured it (``flow_routes.neutral_task``; no check of a corruption nobody gave)."""
    spec = adapter_of(model).spec
    if neutral and not task.corrupted:
        from ..methods.flow_routes import neutral_task

        prepared = neutral_task(model, prepare_task(model, task, max_tokens=max_tokens, need_corrupted=False))
    else:
        prepared = prepare_task(model, task, max_tokens=max_tokens)
    evaluator = Evaluator(model, spec, prepared)
    if not (neutral and not task.corrupted):
        require_meaningful(task, evaluator.baseline.clean, evaluator.baseline.corrupted)
    masks = [prune(spec, c) if prune_dead else c & spec.edge_mask for c in circuits]
    if not masks:
        return evaluator.baseline, []
    stacked = torch.stack(masks)
    budgets = list(budgets) if budgets is not None else [int(m.sum()) for m in masks]
    curve = curves_of_tasks([evaluator], stacked[None], budgets)[0]
    if completeness:
        from ..measure.completeness import completeness as measured  # here: only when asked

        values = measured(evaluator, stacked.to(evaluator.device))
        curve = [dataclasses.replace(point, completeness=v) for point, v in zip(curve, values)]
    return evaluator.baseline, curve


def file_circuits(
    spec, loaded: LoadedCircuit, kinds: list[str] | None = None
) -> tuple[list[torch.Tensor], list[int], str]:
    """The circuits a circuit file stands for, to evaluate: (masks, budgets, what the rows are).

    First the file's ``in_graph`` circuit; then, at each budget of its curve, the circuit its
    method drew there (the file's ``circuits``: a learned mask or a chosen candidate is not the
    top-N of the scores it exports), or the top-N of its scores where it stored none (an EAP-IG
    JSON from elsewhere). ``kinds``, when given, receives what each mask is, in words."""
    kinds = kinds if kinds is not None else []
    circuits, budgets = [loaded.mask], [int(loaded.mask.sum())]
    kinds.append("the file's in_graph circuit")
    curve_budgets = [int(point["budget"]) for point in loaded.source.get("curve") or []]
    if not curve_budgets:
        return circuits, budgets, ""
    stored = circuits_from_json(spec, loaded.source) if loaded.source.get("circuits") else {}
    missing = [b for b in curve_budgets if b not in stored]
    ranked = {}
    if missing and loaded.scores is not None:
        ranked = dict(zip(missing, circuits_at_budgets(spec, loaded.scores, missing)))
    for budget in curve_budgets:
        if budget in stored or budget in ranked:
            circuits.append(stored[budget] if budget in stored else ranked[budget])
            budgets.append(budget)
            drawn = budget in stored
            kinds.append(
                f"the {'circuit its method drew' if drawn else 'top-N of its scores'} at budget {budget}"
            )
    parts = ["first row: the file's in_graph circuit"]
    if set(stored) & set(budgets[1:]):
        parts.append("then the circuit its method drew at each budget")
    if ranked:
        parts.append(f"top-N of the file's scores at {', '.join(map(str, ranked))} (no circuit stored there)")
    return circuits, budgets, "(" + "; ".join(parts) + ")"


def measure_transfer(
    model,
    result: CircuitResult,
    count: int = DEFAULT_PARAPHRASES,
    seed: int = 0,
    budgets: Sequence[int] | None = None,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    paraphrases: Sequence[PromptTask] | None = None,
    left_out: Sequence[tuple[str, str]] = (),
    sought: str = "asked for",
) -> dict:
    """Each of ``result``'s circuits (at ``budgets``, default every budget but the whole graph)
    on up to ``count`` paraphrases its method never fitted to or selected on (template ones, or
    ``paraphrases``: the user's, see ``given_paraphrases``, whose refused pairs ``left_out`` the
    note names); kept in ``result.transfer`` (the circuit's JSON carries it) and returned."""
    found = measure_transfers(
        model, {result.method: result}, count, seed, budgets, max_tokens, paraphrases, left_out, sought
    )
    return found[result.method]  # keyed by the method: its notes name it


def measure_completeness(
    model, result: CircuitResult, budgets: Sequence[int] | None = None, max_tokens: int = DEFAULT_MAX_TOKENS
) -> dict[int, float]:
    """Each of ``result``'s circuits' completeness (``measure.completeness``) at ``budgets`` (default
    every budget of its curve), all in one batched evaluation; kept in its curve points (the
    circuit's JSON and a stored result carry it) and returned as {budget: value}. {} for a
    position-resolved result: its circuits are (edge, position) units, which the random halves
    of edges do not measure; {} for a task with no corrupted prompt, whose halves have nothing to be
    patched to (discover --completeness on ACC++ ended 'The corrupted prompt is empty' after its run)."""
    from ..measure.completeness import completeness  # here: the app imports it only when asked

    if result.positions or not result.task.corrupted:
        return {}
    asked = [int(b) for b in budgets] if budgets is not None else result.budgets
    asked = [b for b in asked if result.point(b) is not None]
    if not asked:
        return {}
    evaluator = Evaluator(model, result.graph, prepare_task(model, result.task, max_tokens=max_tokens))
    values = completeness(evaluator, torch.stack([result.circuit(b) for b in asked]).to(evaluator.device))
    found = dict(zip(asked, values))
    keep_completeness(result, found)
    return found


def keep_completeness(result: CircuitResult, found: dict[int, float]) -> None:
    """Completeness measured at some of ``result``'s budgets ({budget: value}), kept in its curve
    points (a budget its curve does not hold is not kept)."""
    result.curve = [
        dataclasses.replace(point, completeness=found[point.budget]) if point.budget in found else point
        for point in result.curve
    ]


def given_paraphrases(
    model, task: PromptTask, pairs, max_tokens: int = DEFAULT_MAX_TOKENS
) -> tuple[list[PromptTask], list[tuple[str, str]]]:
    """The user's paraphrase pairs (text in any format the file source reads, or its records) as
    tasks of ``task``'s answer and foils: those that pass the same check as the file source's
    (same token length as their corruption, the same answer from the model), and (text, reason)
    of each pair that does not."""
    # here, not at the top: the paraphrase sources import the LLM client's module
    from ..query.sources import gather_paraphrases

    # a task with no corrupted prompt (flow routes, CD-T): each pair brings its own
    pairs = gather_paraphrases(
        model, task, "file", 0, 0, pairs, None, max_tokens, need_corrupted=bool(task.corrupted)
    )
    refused = [(pair.clean, pair.reason) for pair in pairs if not pair.usable()]
    return [pair.task() for pair in pairs if pair.usable()], refused


OVER_POSITIONS = (
    "Over token positions a paraphrase has positions of its own, so each circuit is measured there as "
    "the edges its units use, at every position, not as its (edge, position) units: these figures are "
    "not comparable with the NDF of the table."
)


def measure_transfers(
    model,
    results: dict[str, CircuitResult],
    count: int = DEFAULT_PARAPHRASES,
    seed: int = 0,
    budgets: Sequence[int] | None = None,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    paraphrases: Sequence[PromptTask] | None = None,
    left_out: Sequence[tuple[str, str]] = (),
    sought: str = "asked for",
) -> dict[str, dict]:
    """``measure_transfer`` for several results of one task at once (Compare): every paraphrase is
    checked and run once, each circuit measured on those its own method never used. A budget
    measured before stays in a result's record unless measured again (from the same source:
    template paraphrases, or the ones given)."""
    first = next(iter(results.values()))
    circuits, seen, owners = {}, {}, {}
    for key, result in results.items():
        chosen = [b for b in (budgets or result.budgets) if budgets or b < whole_graph(result)]
        used = paraphrases_used(result)
        for budget in chosen:
            name = f"{key}@{budget}"
            circuits[name], seen[name], owners[name] = result.circuit(budget), used, (key, budget)
    found = held_out_transfer(
        model,
        first.task,
        circuits,
        seen,
        count,
        seed,
        paraphrases=paraphrases,
        max_tokens=max_tokens,
        left_out=left_out,
        sought=sought,
    )
    records = {}
    for key, result in results.items():
        mine = {name: budget for name, (owner, budget) in owners.items() if owner == key}
        record = transfer_record(found, mine, source="template" if paraphrases is None else "given")
        if result.positions:  # another circuit than the table's: said, where 0.598 stood beside NDF 0.000
            record["note"] = " ".join(part for part in (OVER_POSITIONS, record["note"]) if part)
        if result.transfer and result.transfer.get("source") == record["source"]:
            record["budgets"] = {**result.transfer.get("budgets", {}), **record["budgets"]}
        result.transfer = records[key] = record
    return records


def whole_graph(result: CircuitResult) -> int:
    """The budget of ``result``'s whole graph: its edges, or over token positions its prompt's
    (edge, position) units (transfer skipped unit budgets from 10,342 up, on Gemma-3-270M, as if
    they were the whole graph: 20,000 and 100,000 of discover's default 153,856, unsaid)."""
    if not result.positions:
        return result.graph.n_edges
    return n_units(result.graph, len(result.tokens.get("clean", [])))


def transfer_report(
    model,
    result: CircuitResult,
    count: int | None,
    default: int,
    pairs=None,
    max_tokens: int = DEFAULT_MAX_TOKENS,
) -> list[str]:
    """The command line's transfer: measured on ``count`` paraphrases (None: every given pair, else
    ``default`` template ones), kept in ``result.transfer``; its lines ([] when not asked for).
    ``pairs``: the user's paraphrase pairs (``given_paraphrases``) instead of template ones."""
    given, refused = given_paraphrases(model, result.task, pairs, max_tokens) if pairs else (None, [])
    if count == 0:  # --transfer-paraphrases 0 is none, with pairs given too ('none measured' and a note)
        return []
    sought = "asked for"
    if count is None:
        # nobody asked for a number: it is every pair given. It was the pairs that passed the file's
        # check, "not the 3 given that passed the check", beside "1 failed a check" of the next one
        count = len(given) + len(refused) if given is not None else default
        if given is not None:
            sought = "given"
    if count <= 0 and given is None:
        return []
    if not result.task.corrupted and given is None:  # said in the JSON too, not on stdout only
        why = (
            "not measured: this task has no corrupted prompt, and template paraphrases are measured only "
            "for a task with one; give paraphrase pairs with their own corrupted prompts with --transfer-file FILE"
        )
        result.transfer = {"source": "template", "budgets": {}, "note": f"Transfer {why}."}
        return [f"transfer: {why}"]
    measured = measure_transfer(
        model, result, count, max_tokens=max_tokens, paraphrases=given, left_out=refused, sought=sought
    )
    if not result.task.corrupted:  # each pair brings its corruption; the prompt's NDF had none
        measured["note"] = own_corruption_note(measured["note"], reference_name(result))
    return transfer_lines(measured)


def own_corruption_note(note: str, reference: str) -> str:
    """``note`` opened by what a task with no corrupted prompt has its given pairs measured
    against: each pair's own corrupted prompt, while the prompt's NDF was against ``reference``
    (the neutral prompt, ACC++'s signals knocked out). ``discover --transfer-file`` on flow routes
    with no corrupted prompt read the pairs, then said "not measured: this task has no corrupted
    prompt" though each pair carries one (2026-12-07)."""
    against = (
        "by knocking its signals out" if reference == "signals knocked out" else "against the neutral prompt"
    )
    said = (
        f"The task has no corrupted prompt (the prompt's NDF was measured {against}); each pair's NDF is "
        "measured against that pair's own corrupted prompt, as for any method."
    )
    return " ".join(part for part in (said, note) if part)


def transfer_lines(transfer: dict) -> list[str]:
    """A result's held-out transfer as lines: per budget, mean NDF on its held-out paraphrases."""
    given = "" if transfer.get("source", "template") == "template" else " from the given pairs"
    lines = [f"NDF on held-out paraphrases{given} (never fitted to or selected on by the method):"]
    for budget, entry in transfer["budgets"].items():
        values = entry["ndf"]
        shown = f"mean {entry['mean_ndf']:.3f} on {len(values)}" if values else "none measured"
        lines.append(f"  budget {int(budget):,}: {shown}")
    note = transfer_note(transfer)
    return lines + ([note] if note else [])


# a stored result's note before the shortfall said which circuits were short ("4 for some circuits"
# stood under the Gallery's one circuit measured on 4, an audit)
_OLD_SHORTFALL = re.compile(
    r"Fewer than (\d+) held-out paraphrases passed both checks \((\d+) for some circuits\)\."
)


def transfer_note(transfer: dict) -> str:
    """A result's held-out note, with an older stored shortfall sentence said again from the
    record's own counts: how many paraphrases each measured circuit (by budget) was measured on."""
    note = str(transfer.get("note") or "")
    match = _OLD_SHORTFALL.search(note)
    if not match:
        return note
    by_count: dict[int, list[int]] = {}
    for budget, entry in sorted(transfer.get("budgets", {}).items(), key=lambda item: int(item[0])):
        if entry.get("ndf"):
            by_count.setdefault(len(entry["ndf"]), []).append(int(budget))
    if not by_count:
        return note.replace(match.group(0), "").strip()
    parts = []
    for count, budgets in sorted(by_count.items(), reverse=True):
        listed = ", ".join(f"{b:,}" for b in budgets)
        which = (
            f"the circuit at budget {listed} was"
            if len(budgets) == 1
            else f"the circuits at budgets {listed} were"
        )
        parts.append(f"{which} measured on {count}")
    said = ", ".join(parts[:-1]) + (" and " if len(parts) > 1 else "") + parts[-1]
    sentence = f"Fewer than {match.group(1)} held-out paraphrases passed both checks, so {said}."
    return note.replace(match.group(0), sentence)


# ----- Best-of-N's candidates at any budget -------------------------------------------------------
def bon_candidate_masks(
    model, result: CircuitResult, budget: int, store: ResultStore | None, model_id: str | None = None
) -> dict[str, torch.Tensor] | None:
    """{candidate: its circuit at ``budget``} of a Best-of-N family result, rebuilt from the score
    matrices its run kept in ``store`` (``query.candidates.candidate_masks``); None when it kept
    none."""
    read = stored_scores_reader(model, model_id or result.model_id, result.graph, result.config, store)
    return candidate_masks(result, int(budget), read)


def bon_candidates(
    model, result: CircuitResult, budget: int, store: ResultStore | None = None, model_id: str | None = None
) -> list[dict]:
    """[{name, ndf, n_edges, winner}] of every candidate of a Best-of-N family result at
    ``budget``: the run's own figures where it evaluated the candidates there, else their
    circuits rebuilt from the stored scores and evaluated now in one batched pass (iBoN evaluates
    candidates at its anchors only). The winner is the most faithful, as Best-of-N picks it."""
    evaluated = evaluated_candidates(result, budget)
    if evaluated or model is None:
        return evaluated
    masks = bon_candidate_masks(model, result, budget, store, model_id)
    if not masks:
        return []
    baseline, points = evaluate_circuits(model, result.task, list(masks.values()), [int(budget)] * len(masks))
    return ranked_candidates(list(masks), baseline, points)
