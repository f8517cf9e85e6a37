"""One result on screen: what was run, the metrics, the graph at a budget, the curve and the edges.

The budget is one value across pages (``state``), and a new result opens at the smallest budget
whose circuit reaches a stated NDF (``render.readable_budget``). Each node of the graph carries
what it does on the canvas (its top promoted token, or its strongest SAE feature); "Explain this
circuit" says the edges that matter most in words; a curve that falls as the budget grows, or a
method whose circuits cannot be faithful under patching, is explained where it shows.
"""

from __future__ import annotations

import json

import streamlit as st

from .. import render
from ..core.keys import process_key
from ..core.phases import timing_words
from ..core.text import after_colon, counted, markdown_text, method_settings, possessive, shown_token
from ..details.base import found_edges
from ..entry.api import evaluate_circuits, transfer_note
from ..methods.registry import method_traits
from ..query.pairs import LEFT_OUT_SHOWN, reason_as_now
from ..render.curve_notes import curve_notes
from ..render.feature_graph import feature_circuit_html
from . import link_choices, loaders, state
from .caveats import caveats
from .demo import demo_switch, demo_view
from .downloads import downloads
from .graph_view import show_graph as draw
from .instrument import instrument_view
from .link_values import DEMO_NO_POSITIONS, link_budget_sentence
from .measure_offers import measure_offers
from .position_view import position_result_view
from .result_figures import METRIC_HELP, held_out_caption, metric_values, opening_of, transfer_entry
from .steer import share_percent

MAX_DRAWN_EDGES = 1500
GOOD_NDF = 0.8  # a demo opens at the smallest budget reaching this NDF (within a readable size)
READABLE_EDGES = render.READABLE_EDGES  # the largest circuit a first view opens at
SAE_KEY = (  # a token longer than the canvas's 8 characters is cut there (``graph_html.CAPTION_TOKEN``)
    "under each name: its strongest SAE feature on this prompt (layer/feature) and the token that feature "
    "promotes (a long token cut short with …, whole on the node's hover)"
)


def result_id(result) -> str:
    """A cache key for a result's drawings: what produced it, and a fingerprint of its scores
    (one model id can name different weights: another device, or a test's tiny model)."""
    return process_key(
        model=result.model_id,
        task=result.task.to_dict(),
        method=result.method,
        config=result.config,
        budgets=result.budgets,
        scores=float(result.scores.double().abs().sum()),
    )


# ----- what was run, and its metrics -----------------------------------------------------------------
def phase_seconds(seconds: float) -> str:
    """A phase's time as the caption gives it: tenths, hundredths under 0.1 s, and 'under 0.01 s'
    below that ("clean and corrupted runs 0.0 s" read as a phase that did not run)."""
    if seconds >= 0.095:
        return f"{seconds:.1f}\u00a0s"
    if seconds >= 0.005:
        return f"{seconds:.2f}\u00a0s"
    return "under\u00a00.01\u00a0s"


def task_caption(result, timings: bool = True) -> None:
    """What was run, as plain text (prompts are user text: never rendered as markdown or HTML).

    ``timings``: how long its phases took (left out for stored examples, whose timings are of the
    machine that built them, not of this page)."""
    task = result.task
    foils = f" vs {', '.join(repr(f) for f in task.foils)}" if task.foils else f" ({task.metric})"
    spent = (
        ", ".join(f"{timing_words(k)} {phase_seconds(v)}" for k, v in result.timings.items())
        if timings
        else ""
    )
    st.text(
        f"prompt     {task.clean!r} -> answer {task.answer!r}{foils}\n"
        f"corrupted  {repr(task.corrupted) if task.corrupted else '(none given)'}\n"
        f"method     {method_settings(result.method, result.config)} on {result.model_id} ({result.device})"
        + (f"; {spent}" if spent else "")
    )


# a metric's value shrinks with the window rather than end in "...": at 1,000 px a column of three
# cut "180 (1.74%)" at 36 px; 2.5 % of the window's width is 25 px there, 36 px from 1,440 px up
_METRIC_CSS = (
    "<style>[data-testid='stMetricValue'] { font-size: clamp(1.3rem, 2.5vw, 2.25rem) !important; }</style>"
)


def metrics_row(result, budget: int, point=None) -> None:
    """The metrics at ``budget``, then the caveats of the method's figures (``caveats``)."""
    point = point or result.point(budget)
    values = list(metric_values(result, point).items())
    st.html(_METRIC_CSS)
    for start in range(0, len(values), 3):  # rows of three: six in one row cut the figures at 1,000 px
        for column, (label, value) in zip(st.columns(3), values[start : start + 3]):
            column.metric(label, value, help=METRIC_HELP[label])
    held = held_out_caption(result, point.budget) if point is not None else ""
    # the measured transfer's own sentence (the paraphrases its checks left out, and why) beside its figure
    # in today's words: a result a user's cache stored earlier may hold the older ones (query.pairs, entry.api)
    measured = transfer_note(result.transfer) if held and transfer_entry(result, point.budget) else ""
    # beside the method's own notes; "The held-out measurement: Fewer than 5 ..." read wrong
    measured = f"The held-out measurement: {after_colon(reason_as_now(measured))}" if measured else ""
    notes = result.details.page_notes() if result.details is not None else []
    for caption in [text for text in (held, measured) if text] + notes:
        st.caption(markdown_text(caption))  # paraphrases are the user's text: escaped
    left_out = left_out_rows(result)
    if len(left_out) > LEFT_OUT_SHOWN:  # the sentences above name the first few
        with st.expander(f"Every paraphrase left out, with its reason ({len(left_out)})"):
            for row in left_out:  # wrapped lines, not a table whose cells cut the reasons at 1,000 px
                st.caption(
                    markdown_text(
                        paraphrase_left_out_line(f"{row['paraphrase']!r} ({row['where']})", row["reason"])
                    )
                )
    for caveat in caveats(result, point):
        st.caption(caveat)


def paraphrase_left_out_line(paraphrase: str, reason: str) -> str:
    """One line of "Every paraphrase left out": the paraphrase, a colon and its reason, a sentence
    of its own written on after the colon ("...: The corruption lowers ..." read wrong)."""
    return f"{paraphrase}: {after_colon(str(reason))}"


def left_out_rows(result) -> list[dict]:
    """Every paraphrase the run (paraphrase pruning's split) or its measured transfer left out, as
    {"paraphrase", "reason", "where"} rows, in the order their sentences name them."""
    rows = [
        {**row, "where": "the method's own paraphrases"}
        for row in getattr(result.details, "left_out", None) or []
    ]
    rows += [{**row, "where": "held-out transfer"} for row in (result.transfer or {}).get("left_out", [])]
    return [
        {**row, "reason": reason_as_now(str(row.get("reason", "")))} for row in rows
    ]  # as stored: older words


def own_answer_note(result, model=None) -> str | None:
    """One sentence when the model's own top next token after the clean prompt is not the answer:
    from the next tokens the form proposed the answer from (stored, no new pass), else, for a
    stored result without its model, from its clean logit difference below 0 (the foil first)."""
    from ..models.adapter import adapter_of
    from ..models.tokens import own_text
    from ..query.proposals import own_answer_sentence

    task = result.task
    if model is not None:
        top = loaders.next_tokens(model, result.model_id, task.clean)
        if not top:
            return None
        probability = dict(top)
        token, token_chance = max(top, key=lambda pair: pair[1])
        # the tokens as the model reads them: ' Mary' is a word-level tokenizer's 'Mary' (its top
        # token, or quoted ' Mary' where the model has no such token)
        answer = own_text(adapter_of(model), task.answer) or task.answer
        foils = [own_text(adapter_of(model), foil) or foil for foil in task.foils]
        chance = probability.get(answer)
        if chance is None:  # the answer is not among the likely tokens: its own figure
            chance, token, token_chance = loaders.token_probability(
                model, result.model_id, task.clean, task.answer
            )
        return own_answer_sentence(answer, foils, chance, token, token_chance)
    clean = float(result.baseline.clean)
    if task.metric != "logit_diff" or len(task.foils) != 1 or clean >= 0:
        return None
    answer, foil = shown_token(task.answer), shown_token(task.foils[0])
    return (
        f"On the clean prompt the model itself puts the foil {foil} above the answer {answer} (logit "
        f"difference {clean:.3f}): the circuit explains what raises {answer} over {foil}, not the "
        "model's own answer."
    )


# ----- the budget ----------------------------------------------------------------------------------
def any_budget_options(low: int, high: int, evaluated) -> list[int]:
    """A log-spaced grid of budgets from ``low`` to ``high`` (1, 1.5, 2, 3, 5, 7 per decade) and
    the evaluated ones: a slider over it moves evenly through small and large circuits."""
    options = set(int(b) for b in evaluated if low <= b <= high) | {int(low), int(high)}
    decade = 1
    while decade <= high:
        for step in (1, 1.5, 2, 3, 5, 7):
            value = int(step * decade)
            if low <= value <= high:
                options.add(value)
        decade *= 10
    return sorted(options)


def budget_slider(result, key: str = "budget", any_budget: bool = False) -> int:
    """The budget, one value across pages: a slider over the budgets the result was evaluated at,
    or for iBoN/BoN-CSM with ``any_budget`` over a log-spaced grid of their whole range."""
    evaluated = sorted(result.budgets)
    if not evaluated:
        return 0
    free = any_budget and result.any_budget
    options = any_budget_options(evaluated[0], evaluated[-1], evaluated) if free else evaluated
    opening = opening_of(result, GOOD_NDF)
    mine = (result.model_id, result_mark(result))
    if opening is not None and key == "budget":  # a budget nobody chose for it: its own opening
        open_budget(mine, opening.budget)
    budget = state.budget_select(
        budget_label(result, free), key, options, opening.budget if opening else evaluated[0], mine
    )
    asked = state.session.budget_link if key == "budget" else None
    if isinstance(asked, int) and state.session.budget == asked and budget != asked:
        steps = "the slider's steps" if free else "the budgets this run evaluated"
        st.caption(link_budget_sentence(asked, budget, options, result.graph.n_edges, steps, "opened at"))
    if opening is not None and budget == opening.budget:
        st.caption(opening.reason)
    transferable_offer(result, key, budget)  # under the reason, where ``learn_offer`` says
    return budget


def budget_label(result, free: bool) -> str:
    """The slider's label: for a result that builds a circuit at any budget (``free``), from what
    its family builds it (``details.any_budget_rule``: the BoN circuits for iBoN and BoN-CSM, the
    variant's own scores for single and average)."""
    if not free:
        return "edge budget (moving it redraws the graph and the marker; no new run)"
    rule = result.details.any_budget_rule(result)
    return (
        f"edge budget ({method_traits(result.method).label} {rule}; a budget the run did not evaluate "
        "costs one patched pass)"
    )


def result_mark(result) -> str:
    """What tells one result's opening view from another's: its method and curve."""
    return repr((result.method, [(p.budget, p.n_edges, round(float(p.ndf), 9)) for p in result.curve]))


def open_budget(mine: tuple[str, str], opening: int) -> None:
    """Before the slider of the result ``mine`` (model id, ``result_mark``): the shared budget
    becomes ``opening`` unless the user chose it for this result (a slider moved on it, a Compare
    slider moved for this model, a link's budget on the first result shown). So a new result
    (another model, method or run) opens at its own opening, with the sentence that says why; a
    budget moved by hand stays while its result is on screen."""
    chosen = state.session.budget_chosen
    if chosen == state.LINK and isinstance(state.session.budget, int):
        state.session.budget_chosen = chosen = mine
    if isinstance(chosen, tuple) and chosen[0] == mine[0] and chosen[1] in (None, mine[1]):
        return
    state.session.budget_chosen = None
    state.session.budget = int(opening)


def learn_offer(result, budget: int) -> tuple[str, list[int]] | None:
    """(the method offered, the budgets its run takes) where the view of ``result`` at ``budget``
    offers to learn a small circuit that carries over: at the opening budget of a curve whose
    opening circuit is not faithful, when a method that holds paraphrases out (the registry's
    ``holds_out_paraphrases`` trait) other than the result's own is registered; else None. The
    button (``transferable_offer``) and the Paraphrases page's caption under it
    (``paraphrase_view.learn_offer_caption``) both ask this, so they cannot disagree."""
    from ..methods import method_traits, methods_with

    opening = opening_of(result, GOOD_NDF)
    if opening is None or opening.faithful or budget != opening.budget:
        return None
    # not for a task with no corrupted prompt: ACC++'s knockout NDF offered paraphrase pruning, which
    # opened under "The same corrupted prompt as the circuit you were reading" with none to read
    offered = [
        name
        for name in methods_with("holds_out_paraphrases")
        if name != result.method and (result.task.corrupted or not method_traits(name).needs_corrupted)
    ]
    if not offered:
        return None
    # a mask is learned per budget: the four largest readable budgets (or the smallest there is)
    readable = (
        sorted(b for b in result.budgets if b <= render.READABLE_EDGES)[-4:] or sorted(result.budgets)[:1]
    )
    return offered[0], readable


def transferable_offer(result, key: str, budget: int) -> None:
    """One click to the method that learns a small circuit on the prompt and paraphrases, holding
    some out: the same task on Explore, run; drawn where ``learn_offer`` says."""
    from ..methods import method_traits
    from .budget_box import budgets_text

    offer = learn_offer(result, budget)
    if offer is None:
        return
    name, readable = offer
    if st.button(
        f"Learn a small circuit that carries over: {method_traits(name).label}",
        key=f"{key}.transferable",
        help=(
            "learns one mask per budget on the prompt and some of its paraphrases, and measures it on "
            "paraphrases it never saw (runs on the Explore page)"
        ),
    ):
        state.open_task(
            result.task.to_dict(),
            model=result.model_id,
            method=name,
            settings=state.own_settings(name),  # its own (measured) defaults, not this method's fields
            budgets=budgets_text(readable),
            corrupted_note="The same corrupted prompt as the circuit you were reading.",
        )


def demo_budget(result) -> int:
    """The budget a demo opens at: a readable graph that is as faithful as possible."""
    return render.readable_budget(result.curve, good_ndf=GOOD_NDF)


@st.cache_data(show_spinner=False, max_entries=256)
def _evaluated_point(_model, _result, result_key: str, budget: int):
    """Faithfulness of an iBoN/BoN-CSM circuit at a budget the run did not evaluate: the circuit
    comes from the result's data, the engine measures it (one batched patched pass; no scoring)."""
    _, (point,) = evaluate_circuits(_model, _result.task, [_result.circuit(budget)], [int(budget)])
    return point


def point_at(result, budget: int, model=None):
    """The curve point at ``budget``: stored, or evaluated once for an any-budget variant."""
    point = result.point(budget)
    if point is None and model is not None and result.any_budget:
        point = _evaluated_point(
            model, result, f"{result_id(result)} {loaders.model_key(model)}", int(budget)
        )
    return point


# ----- the graph -----------------------------------------------------------------------------------
@st.cache_data(show_spinner=False, max_entries=64)
def _drawing(
    _result,
    result_key: str,
    budget: int,
    _labels,
    labels_key: str,
    options_key: str,
    _options: dict,
    _mask=None,
    mask_key: str = "",
):
    mask = _result.circuit(budget) if _mask is None else _mask
    return render.result_graph_html(
        _result, budget, labels=_labels, max_edges=MAX_DRAWN_EDGES, mask=mask, **_options
    )


def graph_drawing(result, budget: int, labels=None, mask=None, **options):
    """The drawn graph, cached per result, budget, labels, options and edited ``mask`` (a slider
    move is quick).

    ``options``: those of ``render.circuit_graph_html`` (highlight, show_faded, layers, title,
    frame_width, captions, caption_key, words, groups), ``ndf`` for the title and ``edited``
    (``mask`` is the user's edit: ``render.graph_title``).
    """
    options = {name: value for name, value in options.items() if value is not None}
    # what the legend and the captions may say of the scores is the method's trait
    options["estimates_metric"] = method_traits(result.method).scores_estimate_metric
    options_key = json.dumps(
        {k: sorted(v) if isinstance(v, (set, frozenset)) else v for k, v in options.items()},
        sort_keys=True,
        default=str,
    )
    labels_key = json.dumps(labels, sort_keys=True, default=str) if labels else ""
    mask_key = "" if mask is None else ",".join(result.graph.edge_names_of(mask))
    return _drawing(
        result, result_id(result), int(budget), labels, labels_key, options_key, options, mask, mask_key
    )


def show_graph(drawing, key: str | None = None, selected=None):
    """The drawing in the page (``graph_view``: fitted, clickable); the click of this run or None."""
    return draw(drawing, key=key, selected=selected)


def sae_labels(model, result, budget: int, labels):
    """(labels with each drawn node's strongest SAE features added, captions, caption key), or
    the labels as they were when there are none (with one sentence why)."""
    edges = render.circuit_edges(result.graph, result.scores, result.circuit(budget))
    nodes = sorted({node for edge in edges for node in (edge.source, edge.target)} - {"logits"})
    found, problem = loaders.sae_node_features(model, result.model_id, result.task.clean, tuple(nodes))
    if problem:
        st.caption(problem)
        return labels, None, None
    merged = {name: dict(values) for name, values in (labels or {}).items()}
    captions = {}
    for node, features in found.items():
        merged.setdefault(node, {})["SAE features"] = [
            f"{item['label']} (at {item['token']!r}; this node writes {share_percent(item):.0f}% of it)"
            if share_percent(item) is not None
            else f"{item['label']} (at {item['token']!r})"
            for item in features
        ] or ["no feature driven on this prompt"]
        if features:
            top = features[0]
            promoted = (top.get("promotes") or [""])[0]
            captions[node] = f"L{top['layer']}/{top['feature']}\n{promoted!r}"  # drawn as two lines
    return merged, captions, SAE_KEY


def feature_circuit_view(result, model, key: str) -> None:
    """CircuitLasso's circuit over SAE features (``details.feature_circuit``), drawn like every
    circuit, its features named by their SAE descriptions on request."""
    circuit = getattr(result.details, "feature_circuit", None) if result.details is not None else None
    if not circuit:
        return

    with st.expander(
        f"The circuit over SAE features ({len(circuit.get('nodes') or [])} features)", expanded=True
    ):
        names = None
        if model is not None and link_choices.toggle(
            "name the features (SAE descriptions)", key=f"{key}.feature_names"
        ):
            names, problem = loaders.sae_feature_labels(model, result.model_id, tuple(
                (int(n["layer"]), int(n["feature"]), str(n["id"])) for n in circuit.get("nodes") or []))  # fmt: skip
            if problem:
                st.caption(problem)
        title = f"{method_traits(result.method).label}: SAE features with a selected path into the metric"
        draw(feature_circuit_html(circuit, labels=names, title=title), key=f"{key}.features")


def explain(result, budget: int, labels, expanded: bool = False, mask=None) -> None:
    """'Explain this circuit': its five strongest edges in words, from the labels at hand
    (``mask``: the circuit as the user edited it, said to be edited)."""
    circuit = result.circuit(budget) if mask is None else mask
    edges = render.circuit_edges(result.graph, result.scores, circuit)
    total, found = len(edges), result.details.found_edges(result) if result.details is not None else None
    if found is not None:  # ACC++: its completion's scores rank it; the sentences are of its own edges
        named = set(result.graph.edge_names_of(circuit & found[0]))
        edges = [edge for edge in edges if edge.name in named]
    traits = method_traits(result.method)
    # "that matter most" only where the scores estimate an edge's effect: a learned mask's scores sit
    # at 0.99-0.997 for every kept edge, and ranking them says nothing of what matters
    ranked = (
        "that matter most"
        if traits.scores_estimate_metric
        else "of highest score (the method's own, not an effect)"
    )
    with st.expander(render.explain_title(len(edges), ranked), expanded=expanded):
        sentences = render.explain_circuit(
            edges, labels, n=5, task=result.task, estimates_metric=traits.scores_estimate_metric
        )
        if not sentences:  # no caption on what orders nothing ("Of the circuit's 0 edges, by |score|")
            st.write("The circuit has no edges at this budget.")
            return
        for sentence in sentences:
            st.markdown("- " + markdown_text(sentence))
        meaning = (
            "the estimated change of the answer's metric when the edge is corrupted"
            if traits.scores_estimate_metric
            else f"{possessive(traits.label)} own score, not an estimate of the change of the answer's metric"
        )
        which = f"the {len(edges):,} it found, " if found is not None else ""
        others = f" The other {total - len(edges):,} are {found[1]}." if found and total > len(edges) else ""
        st.caption(
            f"Of the {'edited ' if mask is not None else ''}circuit's {total:,} edges, {which}by |score| "
            f"({meaning}); a node's logit-lens token is named only when it is the answer or the foil.{others}"
        )


# ----- the curve and what it says ----------------------------------------------------------------------
def curve_chart(result, budget: int, key: str, extra_curves=None, point=None) -> None:
    point = point or result.point(budget)
    curves = {result.method: result.curve, **(extra_curves or {})}
    figure = render.curve_figure(
        curves, result.graph.n_edges, current_budget=budget, marker_value=point.ndf if point else None
    )
    st.plotly_chart(
        figure,
        key=key,
        config={
            "displaylogo": False,
            "scrollZoom": False,
            "toImageButtonOptions": {"format": "png", "filename": "ndf-curve", "scale": 2},
        },
    )
    for note in curve_notes(result):
        st.caption(markdown_text(note))  # a paraphrase it names is text the page did not write


def edges_table_caption(total: int, limit: int, edited: bool = False, meaning: str = "") -> str:
    """The line over the edge table: all the circuit's edges, or the strongest of them (``edited``:
    the circuit as the user edited it, whose edges the CSV then holds too), and what the score
    column is (``meaning``, the method's ``score_meaning``: a learned mask's 0.998 and attribution
    patching's -1.2 stood under one word, "score", unexplained)."""
    circuit = "edited circuit" if edited else "circuit"
    if total == 0:  # it read "The circuit's 0 edges, strongest first" over an empty table
        return "The edited circuit has no edges." if edited else "The circuit has no edges at this budget."
    if total <= limit:
        line = f"The {circuit}'s {counted(total, 'edge')}, strongest first (also in the CSV)."
    else:
        line = f"The {limit} strongest of the {circuit}'s {total:,} edges (all of them in the CSV)."
    return f"{line} Score: {meaning}." if meaning else line


def edges_table(result, budget: int, limit: int = 50, mask=None) -> None:
    """The circuit's strongest edges (``mask``: the circuit as the user edited it)."""
    circuit = result.circuit(budget) if mask is None else mask
    rows = render.edge_rows(result.graph, result.scores, circuit, limit=limit, found=found_edges(result))
    total = int((circuit.bool() & result.graph.tensors(circuit.device).edge_mask).sum())
    meaning = method_traits(result.method).score_meaning
    st.caption(markdown_text(edges_table_caption(total, limit, edited=mask is not None, meaning=meaning)))
    if total == 0:
        return
    st.dataframe(
        rows,
        hide_index=True,
        placeholder="—",
        column_config={"score": st.column_config.NumberColumn(format="%.4g")},
        height=min(420, 38 + 35 * max(1, len(rows))),
    )


def graph_edge_total_from_cfg(entry: dict) -> str:
    """The edge count of a gallery entry's graph, formatted (its budgets end with the full graph)."""
    budgets = entry.get("budgets") or []
    return f"{max(budgets):,}" if budgets else "?"


# ----- all of it ------------------------------------------------------------------------------------
def result_view(
    result, labels=None, key: str = "result", budget_key: str = "budget", model=None, timings: bool = True
) -> int:
    """Everything about one result; returns the budget shown. With ``model``, iBoN/BoN-CSM results
    take any budget (their NDF then costs one batched evaluation, no scoring). A circuit over
    token positions has its own view (``position_view``)."""
    if result.positions:
        if state.session.demo == "1":  # a demo link on a circuit over positions: said, not ignored
            st.info(DEMO_NO_POSITIONS)
        return position_result_view(result, labels=labels, key=key, budget_key=budget_key, model=model)

    if demo_switch(key):
        budget = int(state.widget_value(budget_key) or demo_budget(result))
        budget = budget if budget in result.budgets else demo_budget(result)
        demo_view(result, budget, labels, key, graph_drawing, explain)  # its groups: the view's
        return budget
    task_caption(result, timings=timings)
    budget = budget_slider(result, budget_key, any_budget=model is not None)
    point = point_at(result, budget, model)
    metrics_row(result, budget, point)
    own = own_answer_note(result, model)
    if own:
        st.caption(markdown_text(own))  # tokens are the user's text: escaped
    measure_offers(result, budget, model, key)
    # one toggle a row: two side by side cut their labels at 1,000 px ("show the nodes outside the ...")
    faded = link_choices.toggle("show the nodes outside the circuit (grey)", key=f"{key}.faded")
    captions = caption_key = None
    if model is not None and link_choices.toggle(
        "SAE feature labels on the nodes (slower)",
        key=f"{key}.sae",
        help="each node's strongest feature of the embedded SAEs on this prompt",
    ):
        labels, captions, caption_key = sae_labels(model, result, budget, labels)

    def draw(mask, groups, words, edited=None):
        return graph_drawing(
            result,
            budget,
            labels=labels,
            mask=mask,
            show_faded=faded,
            ndf=point.ndf if point else None,
            captions=captions,
            caption_key=caption_key,
            groups=groups or None,
            words=words or None,
            edited=edited,
        )

    drawing, edited, view, edited_point = instrument_view(
        result, budget, draw, labels=labels, model=model, key=key, point=point, result_key=result_id(result)
    )
    feature_circuit_view(result, model, key)
    explain(result, budget, labels, mask=edited)
    curve_chart(result, budget, key=f"{key}.curve", point=point)
    edges_table(result, budget, mask=edited)
    downloads(
        result,
        budget,
        drawing,
        key=f"{key}.download",
        point=point,
        mask=edited,
        view=view,
        edited_point=edited_point,
    )
    return budget
