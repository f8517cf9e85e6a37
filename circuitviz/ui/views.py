"""Reusable pieces of the pages: the run with its progress, the answer picker, the token check,
and the result view (metrics, graph, budget slider, curve, top edges, downloads)."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable

import streamlit as st

from .. import render
from . import loaders, state

MAX_DRAWN_EDGES = 1500
_NICE_BUDGETS = (10, 20, 30, 50, 75, 100, 150, 200, 300, 500, 750, 1000, 1500, 2000, 3000, 5000, 7500)
_NICE_BUDGETS += (10_000, 15_000, 20_000, 30_000, 50_000, 100_000, 200_000)


def default_budgets(n_edges: int) -> list[int]:
    """A log-spaced grid of budgets up to the whole graph, so the slider has steps everywhere."""
    return [b for b in _NICE_BUDGETS if b < n_edges] + [int(n_edges)]


def budgets_text(budgets) -> str:
    return ",".join(str(int(b)) for b in budgets)


# ----- running ----------------------------------------------------------------------------------
class ProgressReporter:
    """The engine's progress callback drawn as a bar: phase, percent and an estimate of time left."""

    PHASES = {"score": "scoring edges", "evaluate": "measuring faithfulness"}

    def __init__(self, bar, clock: Callable[[], float] = time.perf_counter):
        self.bar = bar
        self.clock = clock
        self.phase = None
        self.phase_start = clock()
        self.messages: list[str] = []

    def message(self, phase: str, fraction: float) -> str:
        now = self.clock()
        if phase != self.phase:
            self.phase, self.phase_start = phase, now
        elapsed = now - self.phase_start
        fraction = min(max(float(fraction), 0.0), 1.0)
        name = self.PHASES.get(phase, phase)
        if 0 < fraction < 1 and elapsed > 0.5:
            left = elapsed * (1 - fraction) / fraction
            return f"{name}: {100 * fraction:.0f}% — about {left:.0f} s left in this phase"
        return f"{name}: {100 * fraction:.0f}%"

    def __call__(self, phase: str, fraction: float) -> None:
        text = self.message(phase, fraction)
        self.messages.append(text)
        self.bar.progress(min(max(float(fraction), 0.0), 1.0), text=text)


def run_with_status(model, model_id: str, task, method: str, config: dict, budgets):
    """Run a discovery inside ``st.status`` with a progress bar; the result, or None after an
    error sentence is shown."""
    from ..graph import GraphError
    from ..tasks import TaskError

    with st.status(f"Running {method} on {model_id}…", expanded=True) as status:
        bar = st.progress(0.0, text="clean and corrupted runs")
        start = time.perf_counter()
        try:
            result, cached = loaders.discover(
                model, model_id, task, method, config, budgets, progress=ProgressReporter(bar)
            )
        except (TaskError, GraphError, ValueError) as error:
            status.update(label="The run could not start", state="error")
            st.error(str(error))
            return None
        seconds = time.perf_counter() - start
        bar.progress(1.0, text="done")
        source = "from the result store (computed before)" if cached else f"computed in {seconds:.1f} s"
        status.update(label=f"{method} on {model_id}: {source}", state="complete", expanded=False)
    return result


# ----- inputs -----------------------------------------------------------------------------------
def token_label(token: str) -> str:
    """A token as the user sees it: quotes keep leading spaces visible."""
    return repr(token)


def token_check(model, model_key: str, prompt: str, corrupted: str) -> bool:
    """Both tokenisations side by side; True when the lengths match."""
    clean_tokens = loaders.str_tokens(model, model_key, prompt) if prompt else []
    corrupted_tokens = loaders.str_tokens(model, model_key, corrupted) if corrupted else []
    st.markdown(
        "<div style='font-size:0.85rem;margin:2px 0'>prompt</div>"
        + render.token_strip_html(clean_tokens, render.differing_positions(clean_tokens, corrupted_tokens))
        + "<div style='font-size:0.85rem;margin:6px 0 2px'>corrupted</div>"
        + render.token_strip_html(
            corrupted_tokens, render.differing_positions(corrupted_tokens, clean_tokens)
        ),
        unsafe_allow_html=True,
    )
    if not corrupted:
        st.warning("Give a corrupted prompt: the prompt with its key fact or name replaced.")
        return False
    if len(clean_tokens) != len(corrupted_tokens):
        st.error(
            f"The prompt has {len(clean_tokens)} tokens and the corrupted prompt {len(corrupted_tokens)}; "
            "edit the corrupted prompt so each replaced word is one token too (marked chips differ)."
        )
        return False
    changed = sum(render.differing_positions(clean_tokens, corrupted_tokens))
    st.success(f"Both prompts are {len(clean_tokens)} tokens; {changed} position(s) differ.")
    return True


def propose_corruption(model, prompt: str) -> str | None:
    """A corrupted prompt from the paraphrase module's templates, when it exists and knows the task."""
    try:
        from ..query.templates import propose_corruption as propose
    except ImportError:
        return None
    try:
        return propose(model, prompt)
    except Exception:  # a template that fails on odd input proposes nothing
        return None


# ----- the result -------------------------------------------------------------------------------
def result_id(result) -> str:
    from ..store import content_key

    return content_key(
        model=result.model_id,
        task=result.task.to_dict(),
        method=result.method,
        config=result.config,
        budgets=result.budgets,
    )


def metrics_row(result, budget: int, point=None) -> None:
    point = point or result.point(budget)
    columns = st.columns(5)
    columns[0].metric("clean L(M(q))", f"{result.baseline.clean:+.3f}", help="metric of the clean prompt")
    columns[1].metric(
        "corrupted L(M(q'))", f"{result.baseline.corrupted:+.3f}", help="metric of the corrupted prompt"
    )
    if point is not None:
        share = 100 * point.n_edges / result.graph.n_edges
        columns[2].metric("NDF", f"{point.ndf:.3f}", help="1 = the circuit reproduces the model")
        columns[3].metric("NFS", f"{point.nfs:.3f}", help="the older normalised faithfulness score")
        columns[4].metric(
            "edges kept",
            f"{point.n_edges:,} ({share:.2f}%)",
            help=f"after pruning edges on no input-to-logits path; the graph has {result.graph.n_edges:,}",
        )


@st.cache_data(show_spinner=False, max_entries=64)
def _drawing(
    _result,
    result_key: str,
    budget: int,
    _labels,
    labels_key: str,
    faded: bool,
    highlight_key: str,
    _highlight,
    ndf,
):
    return render.result_graph_html(
        _result,
        budget,
        labels=_labels,
        max_edges=MAX_DRAWN_EDGES,
        show_faded=faded,
        highlight=_highlight,
        mask=_result.circuit(budget),
        ndf=ndf,
    )


def graph_drawing(
    result,
    budget: int,
    labels=None,
    faded: bool = False,
    highlight=None,
    layers=None,
    title=None,
    ndf=None,
    narrow=False,
):
    """The drawn graph (cached per result, budget and options, so slider moves are quick)."""
    if layers is not None or title is not None:
        options = {"layers": layers} if layers is not None else {}
        if title is not None:
            options["title"] = title
        if narrow:
            options["layout_width"] = 500
        return render.result_graph_html(
            result,
            budget,
            labels=labels,
            max_edges=MAX_DRAWN_EDGES,
            show_faded=faded,
            highlight=highlight,
            mask=result.circuit(budget),
            **options,
        )
    highlight_key = ",".join(sorted(highlight)) if highlight is not None else ""
    return _drawing(
        result,
        result_id(result),
        int(budget),
        labels,
        str(bool(labels)),
        faded,
        highlight_key,
        highlight,
        ndf,
    )


@st.cache_data(show_spinner=False, max_entries=256)
def _evaluated_point(_model, _result, result_key: str, budget: int):
    """Faithfulness of an iBoN/BoN-CSM circuit at a budget the run did not evaluate (one batched
    patched pass; no scoring)."""
    return _result.point(budget, _model)


def point_at(result, budget: int, model=None):
    """The curve point at ``budget``: stored, or evaluated once for an any-budget variant."""
    point = result.point(budget)
    if point is None and model is not None and result.any_budget:
        point = _evaluated_point(model, result, result_id(result), int(budget))
    return point


def show_graph(drawing) -> None:
    st.iframe(drawing.html, height=drawing.height)
    for note in drawing.notes:
        st.caption(note)


def budget_slider(result, key: str, any_budget: bool = False) -> int:
    """A slider over the budgets the result was evaluated at (their NDF is known exactly), or,
    for iBoN/BoN-CSM with ``any_budget``, over every budget in their range (no scoring pass)."""
    options = sorted(result.budgets)
    if not options:
        return 0
    current = st.session_state.get(key)
    if any_budget and result.any_budget:
        low, high = options[0], options[-1]
        if not isinstance(current, int) or not low <= current <= high:
            st.session_state[key] = min(options, key=lambda b: abs(b - 200))
        st.slider(
            f"edge budget (any value: {result.method} builds the circuit from the Best-of-N circuits, no scoring pass)",
            min_value=low,
            max_value=high,
            step=1,
            key=key,
        )
        return int(st.session_state[key])
    if current not in options:
        current = min(options, key=lambda b: abs(b - 200))
        st.session_state[key] = current
    st.select_slider(
        "edge budget (moving it redraws the graph and the marker; no new run)",
        options=options,
        key=key,
        format_func=lambda b: f"{b:,}",
    )
    return int(st.session_state[key])


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
            "toImageButtonOptions": {"format": "png", "filename": "ndf-curve", "scale": 2},
        },
    )


def edges_table(result, budget: int, limit: int = 50) -> None:
    circuit = result.circuit(budget)
    rows = render.edge_rows(result.graph, result.scores, circuit, limit=limit)
    total = int(circuit.sum())
    st.caption(
        f"The {min(limit, total)} strongest of the circuit's {total:,} edges (all of them in the CSV)."
    )
    st.dataframe(
        rows,
        hide_index=True,
        column_config={"score": st.column_config.NumberColumn(format="%.4g")},
        height=min(420, 38 + 35 * max(1, len(rows))),
    )


def _browser_for_images() -> bool:
    """Whether kaleido (plotly's image export) and a Chrome/Chromium to drive are both here."""
    try:
        import kaleido  # noqa: F401
    except ImportError:
        return False
    names = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
    return any(shutil.which(name) for name in names)


def downloads(result, budget: int, drawing, key: str, point=None) -> None:
    """Circuit JSON (EAP-IG format), graph HTML, curve PNG/SVG/HTML/CSV and edges CSV."""
    stem = f"circuit-{result.method}-{budget}"
    curves = {result.method: result.curve}
    point = point or result.point(budget)

    def figure():
        return render.curve_figure(
            curves, result.graph.n_edges, current_budget=budget, marker_value=point.ndf if point else None
        )

    columns = st.columns(4)
    columns[0].download_button(
        "Circuit JSON (EAP-IG)",
        data=lambda: json.dumps(circuit_json(result, budget)),
        file_name=f"{stem}.json",
        mime="application/json",
        key=f"{key}.json",
    )
    columns[1].download_button(
        "Graph (HTML)", data=drawing.html, file_name=f"{stem}.html", mime="text/html", key=f"{key}.html"
    )
    columns[2].download_button(
        "Edges (CSV)",
        data=lambda: render.edges_csv(result.graph, result.scores, result.circuit(budget)),
        file_name=f"{stem}-edges.csv",
        mime="text/csv",
        key=f"{key}.edges",
    )
    columns[3].download_button(
        "Curve (CSV)",
        data=render.curves_csv(curves, result.graph.n_edges),
        file_name=f"ndf-curve-{result.method}.csv",
        mime="text/csv",
        key=f"{key}.curvecsv",
    )
    columns = st.columns(4)
    columns[0].download_button(
        "Curve (interactive HTML)",
        data=lambda: render.figure_html(figure()),
        file_name=f"ndf-curve-{result.method}.html",
        mime="text/html",
        key=f"{key}.curvehtml",
    )
    if _browser_for_images():
        columns[1].download_button(
            "Curve (PNG)",
            data=lambda: render.figure_image(figure(), "png") or b"",
            file_name=f"ndf-curve-{result.method}.png",
            mime="image/png",
            key=f"{key}.png",
        )
        columns[2].download_button(
            "Curve (SVG)",
            data=lambda: render.figure_image(figure(), "svg") or b"",
            file_name=f"ndf-curve-{result.method}.svg",
            mime="image/svg+xml",
            key=f"{key}.svg",
        )
    else:
        columns[1].caption(
            "PNG/SVG export needs kaleido and Chrome or Chromium; use the chart's camera icon, "
            "or the HTML/CSV downloads."
        )


def task_caption(result) -> None:
    """What was run, as plain text (prompts are user text: never rendered as markdown or HTML)."""
    task = result.task
    foils = ", ".join(repr(f) for f in task.foils)
    timings = ", ".join(f"{k} {v:.1f}s" for k, v in result.timings.items())
    st.text(
        f"prompt     {task.clean!r} -> answer {task.answer!r} vs {foils}\n"
        f"corrupted  {task.corrupted!r}\n"
        f"method     {result.method} {json.dumps(result.config)} on {result.model_id} ({result.device}); {timings}"
    )


def with_sae_labels(model, result, budget: int, labels):
    """``labels`` with each drawn node's top SAE features added (or one sentence why not)."""
    edges = render.circuit_edges(result.graph, result.scores, result.circuit(budget))
    nodes = sorted({node for edge in edges for node in (edge.source, edge.target)} - {"logits"})
    found, problem = loaders.sae_node_labels(model, result.model_id, result.task.clean, tuple(nodes))
    if problem:
        st.caption(problem)
        return labels
    merged = {name: dict(values) for name, values in (labels or {}).items()}
    for node, features in found.items():
        merged.setdefault(node, {})["SAE features"] = features
    return merged


def circuit_json(result, budget: int) -> dict:
    """EAP-IG JSON of the circuit shown (for iBoN/BoN-CSM at a new budget: that circuit)."""
    from ..results import eap_graph_json

    data = result.to_eap_json(budget if result.point(budget) is not None else None)
    if result.point(budget) is None:
        data.update(eap_graph_json(result.graph, result.scores, result.circuit(budget)))
        data["budget"] = int(budget)
    return data


def result_view(result, labels=None, key: str = "result", budget_key: str | None = None, model=None) -> int:
    """Everything about one result; returns the budget shown. With ``model``, iBoN/BoN-CSM results
    take any budget (their NDF then costs one batched evaluation, no scoring)."""
    task_caption(result)
    budget = budget_slider(result, budget_key or f"{key}.budget", any_budget=model is not None)
    point = point_at(result, budget, model)
    metrics_row(result, budget, point)
    columns = st.columns(2)
    faded = columns[0].toggle("show the nodes outside the circuit (grey)", key=f"{key}.faded")
    if model is not None and columns[1].toggle(
        "SAE feature labels in the hovers (slower)",
        key=f"{key}.sae",
        help="the embedded SAEs' features each node drives",
    ):
        labels = with_sae_labels(model, result, budget, labels)
    drawing = graph_drawing(result, budget, labels=labels, faded=faded, ndf=point.ndf if point else None)
    show_graph(drawing)
    curve_chart(result, budget, key=f"{key}.curve", point=point)
    edges_table(result, budget)
    downloads(result, budget, drawing, key=f"{key}.download", point=point)
    return budget


# ----- page building blocks ---------------------------------------------------------------------
EXAMPLE_PROMPT = "When Mary and John went to the store, John gave a drink to"
EXAMPLE_CORRUPTED = "When Alice and Bob went to the store, Carl gave a drink to"


def shared_settings(method, settings: dict) -> dict:
    """The settings that ``method``'s Config has (e.g. ig_steps carried from Explore to Compare)."""
    import dataclasses

    fields = {field.name for field in dataclasses.fields(method.Config)}
    return {name: value for name, value in settings.items() if name in fields}


def demo_budget(result) -> int:
    """The budget a demo opens at: a readable graph that is as faithful as possible."""
    return render.readable_budget(result.curve)


def graph_edge_total_from_cfg(entry: dict) -> str:
    """The edge count of a gallery entry's graph, formatted (its budgets end with the full graph)."""
    budgets = entry.get("budgets") or []
    return f"{max(budgets):,}" if budgets else "?"


def graph_edge_total(model) -> int:
    from ..graph import GraphSpec

    return GraphSpec.from_model(model).n_edges


def load_model_or_stop(model_id: str, device: str):
    """The shared model, loaded with a spinner; a load error is one sentence and stops the page."""
    from ..models import ModelLoadError

    try:
        with st.spinner(f"Loading {model_id} (the first load converts its weights and takes a while)…"):
            return loaders.get_model(model_id, device)
    except (ModelLoadError, ValueError, OSError) as error:
        st.error(str(error))
        st.stop()


def _pick(role: str) -> None:
    picked = st.session_state.get(f"pick.{role}")
    if picked is not None:
        state.set_value(role, picked)


def task_inputs(model, model_id: str, need_corrupted: bool = True):
    """Prompt, answer and foil picked from the model's top tokens, corrupted prompt with a live
    length check (optional when the method needs none). Returns a PromptTask, or None while the
    inputs cannot run."""
    from ..tasks import METRICS, PromptTask

    prompt = state.bound(st.text_area, "Prompt", "prompt", default=EXAMPLE_PROMPT, height=80)
    if not prompt.strip():
        st.info("Type a prompt: the text whose next token you want explained.")
        return None
    top = loaders.next_tokens(model, model_id, prompt)
    tokens = [token for token, _ in top]
    probability = dict(top)
    if not st.session_state.get("answer"):
        state.set_value("answer", tokens[0])
    if not st.session_state.get("foil"):
        state.set_value("foil", tokens[1] if len(tokens) > 1 else "")
    for role in ("answer", "foil"):
        current = st.session_state.get(role)
        st.session_state[f"pick.{role}"] = current if current in tokens else None
    st.markdown("**The model's next token** — click to choose the answer and a foil (a wrong answer):")
    for role in ("answer", "foil"):
        st.pills(
            role,
            tokens,
            key=f"pick.{role}",
            format_func=lambda t: f"{token_label(t)} {100 * probability[t]:.1f}%",
            on_change=_pick,
            args=(role,),
        )
    columns = st.columns([2, 2, 1])
    with columns[0]:
        answer = state.bound(st.text_input, "answer token (with its leading space)", "answer")
    with columns[1]:
        foil = state.bound(st.text_input, "foil token", "foil")
    with columns[2]:
        metric = state.bound(st.selectbox, "metric", "metric", default="logit_diff", options=list(METRICS))

    if st.session_state.get("corrupted_for") != prompt:
        proposal = (
            None
            if (st.session_state.get("corrupted") and "corrupted_for" not in st.session_state)
            else (propose_corruption(model, prompt))
        )
        if proposal:
            state.set_value("corrupted", proposal)
            st.session_state["corrupted_note"] = (
                "Proposed from a template that recognised the task; edit it freely."
            )
        else:
            st.session_state["corrupted_note"] = ""
        st.session_state["corrupted_for"] = prompt
    default_corrupted = EXAMPLE_CORRUPTED if prompt == EXAMPLE_PROMPT else ""
    corrupted = state.bound(
        st.text_area,
        "Corrupted prompt (the key fact or name replaced; same number of tokens)",
        "corrupted",
        default=default_corrupted,
        height=80,
    )
    if st.session_state.get("corrupted_note"):
        st.caption(st.session_state["corrupted_note"])
    if not corrupted.strip() and not need_corrupted:
        st.caption("This method needs no corrupted prompt.")
    elif not token_check(model, model_id, prompt, corrupted):
        return None
    return PromptTask(
        clean=prompt, corrupted=corrupted, answer=answer, foils=(foil,) if foil else (), metric=metric
    )


def method_inputs(n_edges: int, key: str = "method", methods=None):
    """Method picker, its settings form and the budgets. Returns (method name, settings, budgets)."""
    from ..api import parse_budgets
    from ..methods import available_methods
    from .forms import check_config, config_form

    registered = methods or available_methods()
    names = sorted(registered)
    if st.session_state.get(key) not in names:
        st.session_state[key] = "eap-ig" if "eap-ig" in names else names[0]
    name = state.bound(
        st.selectbox, "method", key, options=names, format_func=lambda n: f"{registered[n].label} ({n})"
    )
    method = registered[name]
    st.caption(method.summary)
    settings = config_form(method, key, st.session_state.get("settings") if key == "method" else None)
    problem = check_config(method, settings)
    if problem:
        st.error(problem)
    if not st.session_state.get("budgets"):
        st.session_state["budgets"] = budgets_text(default_budgets(n_edges))
    text = state.bound(st.text_input, "edge budgets (the slider's steps; each is evaluated once)", "budgets")
    try:
        budgets = parse_budgets(text)
    except ValueError as error:
        st.error(str(error))
        return name, settings, None
    return name, (None if problem else settings), budgets
