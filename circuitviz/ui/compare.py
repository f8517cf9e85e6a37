"""Several methods' circuits of one prompt side by side: one layout, one budget, their overlap."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import streamlit as st

from .. import render
from ..core.text import counted, joined, markdown_sentence, markdown_text, score_text
from ..entry.api import parse_budgets
from ..entry.request import Request
from ..methods import available_methods
from ..methods.registry import default_comparison, method_traits
from ..render.routing import drawn_alike
from . import kept_results, link_choices, loaders, result_view, state
from .budget_box import budget_check, fit_budgets_box
from .caveats import caveats
from .compare_downloads import comparison_downloads
from .inputs import shared_settings, unknown_in_link_sentence
from .link_values import link_budget_sentence
from .result_figures import METRIC_HELP


@dataclass
class Comparison:
    """What the Compare page shows at one budget, computed once from the results."""

    budget: int
    edge_sets: dict[str, set[str]]  # method -> edge names of its circuit at the budget
    only: dict[str, set[str]]  # method -> edges no other method found
    layers: list[int]
    placed: list[str]  # every circuit's nodes: the layout's head columns make room for them all
    overlap: list[dict]  # render.overlap_rows
    shared: set[str]  # edges in every circuit


def compare_at(results: dict, budget: int) -> Comparison:
    """The circuits of every result at ``budget``, their unique edges, shared layout and overlap."""
    edge_sets = {name: set(r.graph.edge_names_of(r.circuit(budget))) for name, r in results.items()}
    drawn = {node for r in results.values() for node in render.circuit_edges_nodes(r, budget)}
    first = next(iter(results.values()))
    return Comparison(
        budget=budget,
        edge_sets=edge_sets,
        only=render.unique_edges(edge_sets),
        layers=render.drawn_layers(first.graph, drawn),
        placed=sorted(drawn),
        overlap=render.overlap_rows(edge_sets),
        shared=render.shared_by_all(edge_sets),
    )


# ----- the page's inputs ------------------------------------------------------------------------
MAX_METHODS = 4  # side by side, each graph still readable (``MIN_COLUMN_PX``)


def too_many_sentence(labels: list[str]) -> str:
    """A link naming more methods than the page compares: which are kept and which left out."""
    kept, dropped = labels[:MAX_METHODS], labels[MAX_METHODS:]
    return markdown_sentence(
        f"The link names {len(labels)} methods and the page compares at most {MAX_METHODS}: it keeps "
        f"the first {MAX_METHODS} ({', '.join(kept)}) and leaves out {', '.join(dropped)}; "
        "swap them in the box below."
    )


def method_choice(registered: dict) -> list[str]:
    """The methods to compare (2 to 4), kept across pages and in the URL."""
    names = sorted(registered)
    default = default_comparison(names)
    before = state.session.compare_chosen
    unknown = [name for name in before or () if name not in names]
    if unknown:  # a link's (or another version's) methods: said once, when they are dropped
        st.warning(
            unknown_in_link_sentence("method", unknown, "the comparison uses the others (the box below)")
        )
    known = list(dict.fromkeys(n for n in (default if before is None else before) if n in names))
    if len(known) > MAX_METHODS:  # a link's five or more: the box holds four (it raised, a traceback)
        st.warning(too_many_sentence([registered[n].label for n in known]))
        known = known[:MAX_METHODS]
    chosen = st.multiselect(
        "methods (2 to 4; each with the Explore page's settings where they apply, else its defaults)",
        names,
        default=known,
        max_selections=MAX_METHODS,
        key="compare.methods",
        format_func=lambda n: registered[n].label,
    )
    state.session.compare_chosen = chosen
    return chosen


def shared_budgets(n_edges: int) -> list[int] | None:
    """The budgets set on the Explore page (its defaults when none are), or None after saying
    what is wrong with them."""

    fit_budgets_box(state.Session.budgets.key, n_edges)
    problems, notes = budget_check(state.session.budgets, n_edges)
    for problem in problems:
        st.error(markdown_sentence(f"{problem.rstrip('.')} (the budgets are set on the Explore page)."))
    if not problems:  # said as Explore says it, in edges: a budget typed there as units reads as edges here
        for note in notes:
            st.caption(markdown_sentence(f"{note.rstrip('.')} (the budgets are set on the Explore page)."))
    return None if problems else parse_budgets(state.session.budgets)


def requests(model, model_id: str, task, chosen: list[str], budgets: list[int]) -> dict:
    """{method: its request} with the Explore page's settings where they apply (not priced yet:
    each is priced just before it runs, by the runs before it)."""

    registered = available_methods()
    found, over_edges = {}, []
    for name in chosen:
        settings = shared_settings(registered[name], state.method_settings("settings", name))
        if settings.get("positions"):  # the page draws, measures and overlaps edge circuits
            settings, over_edges = {**settings, "positions": False}, [*over_edges, registered[name].label]
        try:
            found[name] = Request.for_model(model, task, name, settings, budgets, model_id)
        except (TypeError, ValueError) as error:  # a link's settings out of bounds or of no type
            st.error(
                f"{registered[name].label}: {markdown_sentence(str(error))} Its settings are set on the "
                "Explore page; it is left out of this comparison until they are fixed there."
            )
    if over_edges:  # a position result was shown as '125 edges' (its units) beside edge circuits
        st.caption(
            markdown_sentence(
                f"{joined(over_edges)} {'runs' if len(over_edges) == 1 else 'run'} over edges here, not over "
                "token positions as set on Explore: Compare draws, measures and overlaps edge circuits."
            )
        )
    return found if len(found) >= 2 else {}


def not_run_sentence(chosen: list[str], results: dict) -> str:
    """The chosen methods with no result for this prompt yet, beside the others' comparison ('' when
    every one has one): with two stored and a third chosen, the page compared the two and said
    nothing of the third (an audit)."""
    missing = [method_title(name) for name in chosen if name not in results]
    if not missing:
        return ""
    names = joined(missing)
    verb = "has" if len(missing) == 1 else "have"
    return markdown_sentence(
        f"{names} {verb} no result for this prompt yet, so the comparison below leaves "
        f"{'it' if len(missing) == 1 else 'them'} out; run the comparison to add "
        f"{'it' if len(missing) == 1 else 'them'}."
    )


def common_budgets(results: dict) -> list[int]:
    return sorted(set.intersection(*(set(r.budgets) for r in results.values())))


def budget_choice(options: list[int], total: int) -> int:
    """The shared budget, shown at the nearest budget every method evaluated (the other pages'
    budget is left as it is until this slider moves); a link's budget not among them is said."""
    budget = state.budget_select(
        "edge budget (every method's circuit at this budget)", "budget", options, 200
    )
    asked = state.session.budget_link
    if isinstance(asked, int) and state.session.budget == asked and budget != asked:
        steps = "the budgets every method here evaluated"
        st.caption(link_budget_sentence(asked, budget, options, total, steps, "the comparison is shown at"))
    return budget


def faithful_line(results: dict, budget: int, good_ndf: float = 0.8) -> str:
    """Under the shared slider: which circuits reach ``good_ndf`` at ``budget``, and the smallest
    circuit of each method that does (Compare opened at 20 edges, every NDF near 0.2, and said
    nothing of where each method becomes faithful); a method whose first such circuit is every edge
    is said to reach it only as the whole model (it read 'relp: 10,342 edges', as if a circuit)."""
    reach = [
        name
        for name, result in results.items()
        if (point := result.point(budget)) is not None and point.ndf >= good_ndf
    ]
    if not reach:
        head = f"At budget {budget:,} no method's circuit reaches NDF {good_ndf}"
    elif len(reach) == len(results):
        head = f"At budget {budget:,} every method's circuit reaches NDF {good_ndf}"
    else:
        head = (
            f"At budget {budget:,} {joined(reach)} {'reaches' if len(reach) == 1 else 'reach'} NDF {good_ndf}"
        )
    each = []
    for name, result in results.items():
        points = sorted((p for p in result.curve if not math.isnan(p.ndf)), key=lambda p: p.budget)
        first = next((p for p in points if p.ndf >= good_ndf), None)
        if first is None:
            largest = max((p.n_edges for p in points), default=0)
            each.append(f"{name}: none of its budgets, up to {largest:,} edges")
        elif first.n_edges >= result.graph.n_edges:  # the model itself, faithful by construction
            each.append(f"{name}: only the whole model ({first.n_edges:,} edges)")
        else:
            budget_note = "" if first.n_edges == first.budget else f" (budget {first.budget:,})"
            each.append(f"{name}: {first.n_edges:,} edges{budget_note}")
    return f"{head}. The smallest circuit of each method that does: {'; '.join(each)}."


def corruption_line(results: dict) -> str:
    """What the circuits of methods that need no corrupted prompt (flow routes, CD-T) are measured
    against beside those of methods that use it ('' when every method uses it): the page drew
    their curves in one chart with the others' and said nothing of it (an audit)."""
    own = [method_traits(r.method) for r in results.values()]
    without = [traits.label for traits in own if not traits.needs_corrupted]
    if not without:
        return ""
    one = len(without) == 1
    names = joined(without)
    return (
        f"{names} {'needs' if one else 'need'} no corrupted prompt to find {'its circuit' if one else 'their circuits'}"
        f"; {'its' if one else 'their'} NDF, necessity and curve here are measured as every method's, against "
        "the corrupted prompt above (NDF patches the edges outside the circuit to their values on it, "
        "necessity the circuit's own), so the curves share one yardstick and the page needs that "
        "prompt for every method."
    )


def form_corruption_line(chosen: list[str]) -> str:
    """Under the methods box: why the corrupted prompt above is needed when some chosen method needs
    none ('' when every one uses it). Explore hides the box for those methods (issue 33), so a user
    coming from there met "The corrupted prompt is empty" here with nothing saying why."""
    without = [traits.label for traits in map(method_traits, chosen) if not traits.needs_corrupted]
    if not without:
        return ""
    one = len(without) == 1
    return (
        f"{joined(without)} {'needs' if one else 'need'} no corrupted prompt, but Compare measures every "
        "method against the one above, so the curves share one yardstick; Explore runs "
        f"{'it' if one else 'them'} without one."
    )


def method_title(name: str) -> str:
    """A method's heading on Compare: the label its picker shows (``eap-ig`` reads "EAP-IG
    (inputs)"), the short name where no method of that name is registered any more."""
    method = available_methods().get(name)
    return method.label if method is not None else name


def graph_caption(name: str, result, point, only: int) -> str:
    """The line under a method's name: its circuit at the budget in numbers, what colour means."""
    head = f"{result.method}: NDF {point.ndf:.3f} with {counted(point.n_edges, 'edge')}"
    if only == 0:
        return f"{head}; another method found each of them too, so all are drawn thin."
    if only == point.n_edges:
        return f"{head}; no other method found any of them, so all are drawn bold."
    verb = "is" if only == 1 else "are"
    return (
        f"{head}; the {counted(only, 'edge')} no other method found {verb} drawn bold, the shared ones thin."
    )


HELD_OUT_HELP = (
    "mean NDF of the same circuit on template paraphrases of the prompt that its method never used to "
    "fit or to select (Best-of-N's, the bootstrap ensemble's and paraphrase pruning's own are left out)"
)


@st.cache_data(show_spinner=False, max_entries=32)
def _measured(_model, _results: dict, key: str, budget: int, _request_keys: dict) -> dict:
    """{method: {"held_out": mean NDF, "n": paraphrases, "left_out": used ones skipped,
    "completeness": value}} at ``budget``, each result's transfer record and curve point updated on
    the way and stored again under its request's key (``_request_keys``), so a reload (and Explore)
    shows them measured."""
    import torch

    from ..core.tasks import prepare_task
    from ..entry.api import keep_completeness, measure_transfers
    from ..measure.completeness import completeness
    from ..measure.evaluate import Evaluator
    from ..query.templates import for_transfer

    records = measure_transfers(_model, _results, budgets=[budget])
    first = next(iter(_results.values()))
    evaluator = Evaluator(_model, first.graph, prepare_task(_model, first.task))
    circuits = torch.stack([r.circuit(budget) for r in _results.values()]).to(evaluator.device)
    values = completeness(evaluator, circuits)
    found = {}
    for (name, record), value in zip(records.items(), values):
        keep_completeness(_results[name], {budget: value})  # Explore and the JSON show it too
        problem = loaders.store_measured(_results[name], _request_keys.get(name))
        entry = record["budgets"][str(budget)]
        found[name] = {
            "held_out": entry["mean_ndf"],
            "n": len(entry["ndf"]),
            "left_out": entry["excluded_as_used"],
            "texts": list(entry["paraphrases"]),
            "completeness": value,
            "note": " ".join(filter(None, [for_transfer(record["note"] or ""), problem])),
        }
    return found


def measured_view(results: dict, budget: int, model=None) -> dict | None:
    """On request (it runs the model on each paraphrase), every circuit's held-out transfer and
    completeness at this budget; None when not asked or no model."""
    if model is None or not link_choices.toggle(
        "NDF on held-out paraphrases and completeness (runs the model)", key="compare.transfer"
    ):
        return None
    key = " ".join(result_view.result_id(r) for r in results.values()) + " " + str(id(model))
    with st.spinner("Evaluating every circuit on paraphrases it never saw, and its completeness..."):
        keys = {name: kept_results.request_key_of(result) for name, result in results.items()}
        return _measured(model, results, key, int(budget), keys)


def _figure_column(label: str, help: str, integer: bool = False):
    """A figure's column as wide as its header or its widest value (6.6 px a character and the
    grid's padding): Streamlit's 'small' (75 px) cut 'prompt NDF' and pushed the last column out of
    view at 1,000 px."""
    return st.column_config.NumberColumn(
        label,
        help=help,
        format="%d" if integer else "%.3f",
        width=_header_px(label, "00" if integer else "0.000"),
    )


def _header_px(*texts: str) -> int:
    """The width in pixels that shows the longest of ``texts`` whole in a grid cell or header."""
    return round(6.6 * max(len(str(text)) for text in texts)) + 18  # measured in Chromium


# short headers with their meaning on hover, the methods by the names their graphs carry: with four
# methods (paraphrase pruning's name the longest) the longer headers pushed the last column out at
# 1,000 px, where its header read "completer" and every value "0" (an audit). The NDFs and the
# completeness come first, the two counts of paraphrases last.
MEASURED_COLUMNS = {
    "method": st.column_config.TextColumn("method"),  # as wide as its names (``measured_table``)
    "prompt NDF": _figure_column("prompt NDF", "the circuit's NDF on the prompt at this budget"),
    "held-out NDF": _figure_column("held-out NDF", HELD_OUT_HELP),
    "completeness": _figure_column("completeness", METRIC_HELP["completeness"]),
    "held out": _figure_column(
        "n", "how many held-out paraphrases the held-out NDF is the mean over", integer=True
    ),
    "used by it": _figure_column(
        "used",
        "paraphrases left out of the mean because the method used them to fit or to select",
        integer=True,
    ),
}  # necessity is in each method's figures above (0.95-1 for nearly every circuit)
# the main column beside the sidebar at a 1,000 px window (measured in Chromium)
PAGE_PX_AT_1000 = 540


def measured_widths(names) -> int:
    """The measured table's width in pixels with these method names: within ``PAGE_PX_AT_1000``."""
    figures = sum(config["width"] for key, config in MEASURED_COLUMNS.items() if key != "method")
    return _header_px("method", *names) + figures


def measured_table(results: dict, budget: int, measured: dict) -> None:
    """The figures of ``measured_view`` for every method in one table, with what they averaged."""
    # its own heading, naming the budget: under the overlap, nothing said at which budget the prompt
    # NDF, the held-out NDF and the completeness were measured (an audit)
    st.markdown(f"**NDF on the prompt and on held-out paraphrases, and completeness, at budget {budget:,}**")
    rows = []
    for name, result in results.items():
        point, found = result.point(budget), measured[name]
        rows.append(
            {
                "method": name,
                "prompt NDF": point.ndf,
                "held-out NDF": found["held_out"],
                "held out": found["n"],
                "used by it": found["left_out"],
                "completeness": found["completeness"],
            }
        )
    names = st.column_config.TextColumn("method", width=_header_px("method", *results))
    st.dataframe(  # the columns fit a 1,000 px page: about 540 px beside the sidebar
        rows,
        hide_index=True,
        column_config={**MEASURED_COLUMNS, "method": names},
        column_order=tuple(MEASURED_COLUMNS),
        placeholder="—",
    )  # "—": no paraphrase held out
    notes = {found["note"] for found in measured.values() if found["note"]}
    st.caption(
        "Held out: template paraphrases whose checks pass and whose corruption lowers the metric "
        "clearly, never used by the method to fit or to select; a method fitted to the prompt drops "
        "here if it fitted the sentence. "
        + " ".join(filter(None, [*sorted(notes), held_out_sets_sentence(measured)]))
    )


def held_out_sets_sentence(measured: dict) -> str:
    """Which paraphrases each method's held-out mean rests on: the first ``n`` kept that its method
    never used, so a method that used some is measured partly on others than the rest (the caption
    said '8 kept' beside n = 5 for every method, and nothing of which five)."""
    sets = {name: tuple(found.get("texts") or ()) for name, found in measured.items()}
    sets = {name: texts for name, texts in sets.items() if texts}
    if len(sets) < 2:
        return ""
    # the set most methods share, on a tie the first method's: two methods, each its own set, named
    # the second's first or the first's by chance (a set's order), and "theirs" of one method
    common = max(sets.values(), key=lambda texts: sum(other == texts for other in sets.values()))
    alike = [name for name, texts in sets.items() if texts == common]
    if len(alike) == len(sets):
        return f"Every method's held-out NDF is the mean over the same {counted(len(common), 'paraphrase')}."
    theirs = "theirs" if len(alike) > 1 else f"{alike[0]}'s"
    differ = [
        f"{name}'s {len(texts)} share {len(set(texts) & set(common))} with {theirs}"
        for name, texts in sets.items()
        if texts != common
    ]
    return (
        "Each held-out NDF is the mean over the first n kept paraphrases its method never used, so "
        f"the means rest on different paraphrases: {joined(alike)} on {'the same ' if len(alike) > 1 else ''}"
        f"{len(common)}; "
        f"{'; '.join(differ)}."
    )


# the methods' columns wrap onto more rows below a readable width: a graph fitted to a narrower
# column would draw its labels too small to read (at 1,000 px, two columns drew them at 5 px). A
# grid, not a wrapping flex row: a method alone on the last row keeps its column's width (with
# flex it grew to the whole row, its graph drawn at another scale than the others')
MIN_COLUMN_PX = 480


def column_px(drawings: dict) -> int:
    """The narrowest a method's column may be: ``MIN_COLUMN_PX``, or the width that draws the
    widest drawing's labels at ``vis.HELD_LABEL_PX`` (``VisGraph.readable_width``). SmolLM2-135M's
    30-row circuits side by side in 512 px columns at 1,500 px were drawn at 8.8 px."""
    widths = [drawing.vis.readable_width() for drawing in drawings.values() if drawing.vis is not None]
    return max(MIN_COLUMN_PX, math.ceil(max(widths, default=0.0)))


def columns_css(width: int) -> str:
    """The grid of the methods' columns, each at least ``width`` px wide (fewer a row below it)."""
    return _COLUMNS_CSS.replace("{width}", str(int(width)))


_COLUMNS_CSS = """<style>
.st-key-compare-graphs [data-testid="stHorizontalBlock"] {
  display: grid !important;
  grid-template-columns: repeat(auto-fit, minmax(min(100%, {width}px), 1fr)); }
.st-key-compare-graphs [data-testid="stColumn"] {
  width: auto !important; min-width: 0 !important; flex: none !important; }
.st-key-compare-graphs [data-testid="stColumn"] [data-testid="stHorizontalBlock"] {
  display: flex !important; }
.st-key-compare-graphs [data-testid="stColumn"] [data-testid="stColumn"] {
  flex: 1 1 0 !important; }
</style>"""


def drawings_framed_alike(drawings: dict) -> dict:
    """{method: its drawing} with every drawing fitted to the same box and an edge of several bent
    alike in each (``render.routing.drawn_alike``): a node at one place in each column, at one
    zoom, an edge on one path. Copies: the cached drawings are not changed."""
    graphs = drawn_alike([drawing.vis for drawing in drawings.values()])
    return {
        name: dataclasses.replace(drawing, vis=graph)
        for (name, drawing), graph in zip(drawings.items(), graphs)
    }


def common_grid(drawings: dict) -> list[float]:
    """The (column width, row height) every drawing side by side is laid out on: the largest of
    theirs, so a node sits at one place in each. Information flow routes' names carry no caption
    under them, and its rows and columns were smaller: its graph was drawn at half the size of
    EAP-IG's beside it, in a corner of its frame (an audit, SmolLM2-135M, 2026-12-06)."""
    return [max(drawing.grid[i] for drawing in drawings.values()) for i in (0, 1)]


def _kept_at(result, budget: int) -> str:
    """'11 edges (budget 20)': a frame's title counts its circuit's edges, not the budget shared."""
    point = result.point(budget)
    return render.edges_at(point) if point is not None else f"budget {budget:,}"


def comparison_view(results: dict, labels=None, model=None) -> None:
    """The graphs side by side (unique edges bold, shared ones thin in their colour, node captions
    from ``labels``; as many a row as are readable at ``column_px``, each as wide as the others
    and fitted to one box), the curves in one chart, the overlap, NDF on paraphrases on request
    (with ``model``); each method's caveats (fitted to the prompt, a flat curve) under its figures."""
    first = next(iter(results.values()))
    budgets = common_budgets(results)
    budget = budget_choice(budgets, first.graph.n_edges)
    st.caption(faithful_line(results, budget))
    if corruption_line(results):
        st.caption(corruption_line(results))
    shown = compare_at(results, budget)
    measured = measured_view(results, budget, model)

    def drawn(name: str, grid=None):
        return result_view.graph_drawing(
            results[name],
            budget,
            labels=labels,
            highlight=shown.only[name],
            layers=shown.layers,
            placed=shown.placed,
            title=f"{name}, {_kept_at(results[name], budget)}: bold = found by no other method",
            others="colour",
            grid=grid,
        )

    own = {name: drawn(name) for name in results}
    grid = common_grid(own)  # redrawn only where its own grid is smaller (each drawing is cached)
    drawings = drawings_framed_alike(
        {name: d if list(d.grid) == grid else drawn(name, grid) for name, d in own.items()}
    )
    st.html(columns_css(column_px(drawings)))
    columns = st.container(key="compare-graphs").columns(len(results))
    for column, (name, result) in zip(columns, results.items()):
        with column:
            point = result.point(budget)
            st.subheader(
                method_title(result.method)
            )  # the picker's name; the caption below gives the short one
            ndf_column, necessity_column = st.columns(2)
            ndf_column.metric("NDF", score_text(point.ndf), help=METRIC_HELP["NDF"])
            necessity = "-" if math.isnan(point.necessity) else score_text(point.necessity)
            necessity_column.metric("necessity", necessity, help=METRIC_HELP["necessity"])
            if measured is not None:
                found = measured[name]
                held_column, complete_column = st.columns(2)
                held = found["held_out"]
                held_column.metric(
                    "NDF held out",
                    "-" if held is None else score_text(held),
                    help=f"{HELD_OUT_HELP} ({found['n']} paraphrases)",
                )
                value = found["completeness"]
                complete_column.metric(
                    "completeness",
                    "-" if math.isnan(value) else score_text(value),
                    help=METRIC_HELP["completeness"],
                )
            for note in caveats(result, point):
                st.caption(note)
            st.caption(graph_caption(name, result, point, len(shown.only[name])))
            result_view.show_graph(drawings[name])
            for note in result_view.curve_notes(result):
                st.caption(markdown_text(note))  # a paraphrase it names is text the page did not write
    st.plotly_chart(
        render.curve_figure(
            {n: r.curve for n, r in results.items()}, first.graph.n_edges, current_budget=budget, grid=budgets
        ),
        key="compare.curve",
        config={"scrollZoom": False, "displaylogo": False},
    )
    # the budget named: the slider that sets it is a screen or more above the tables (an audit)
    st.markdown(f"**Overlap at budget {budget:,}**")
    st.dataframe(
        shown.overlap,
        hide_index=True,
        placeholder="—",
        # the Jaccard index first after the names, and each circuit's size left to "shared" + "only":
        # with all eight columns the index was cut to "Jacca 0.6" at 1,000 px (an audit)
        column_order=("circuit A", "circuit B", "Jaccard", "shared", "only A", "only B"),
        column_config={  # each as wide as its header or names: the six fit a 1,000 px page
            "Jaccard": st.column_config.NumberColumn(format="%.3f", width=_header_px("Jaccard")),
            **{
                column: st.column_config.NumberColumn(width=_header_px(column))
                for column in ("shared", "only A", "only B")
            },
            **{
                column: st.column_config.TextColumn(width=_header_px(column, *results))
                for column in ("circuit A", "circuit B")
            },
        },
    )
    st.caption(
        f"{counted(len(shown.shared), 'edge')} {'is' if len(shown.shared) == 1 else 'are'} in every circuit."
    )
    if measured is not None:
        measured_table(results, budget, measured)
    comparison_downloads(results, shown, measured)
    state.write_to_url(["budget", state.Session.compare_held_out.key])
