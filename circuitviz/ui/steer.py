"""The Steer page's pieces: the shared prompt in its boxes, the circuit's nodes at the chosen
budget, their SAE features as one table, and the features offered for zeroing."""

from __future__ import annotations

import streamlit as st

from ..core.scripts import FONTLESS as FONTLESS  # the Steer page's names, kept where they were
from ..core.scripts import FONTLESS_HELP, readable
from ..core.scripts import script_of as script_of
from ..core.text import counted, cut, markdown_text, shown_token
from . import kept_results, state

MAX_NODES = 12  # nodes labelled at once: the circuit's strongest (one forward pass labels them all)
SHARE = "node's part of it"
SHARE_HELP = (
    "how much of the feature's activation on this prompt (summed over its positions) this node's own "
    "output accounts for: its linear share of the feature's pre-activation, clipped to the activation"
)


# Streamlit 1.67 keeps a multiselect's chosen items on one line 40 px high and scrolls it sideways:
# two features' labels at 1,500 px put the first one's start out of view. On this page the picker
# grows a line per row of chosen features instead (the button beside it is aligned to its top).
WRAP_CHOSEN = (
    "<style>[data-testid='stMultiSelect'] .react-aria-ComboBox > div { max-height: none; }"
    "[data-testid='stMultiSelect'] .react-aria-ComboBox > div > div:first-child "
    "{ flex-wrap: wrap; overflow-x: visible; }</style>"
)


def readable_context(context: dict) -> dict:
    """A stored context (``tokens``, ``target``, ...) with its tokens made ``readable``."""
    return {**context, "tokens": [readable(token) for token in context["tokens"]]}


def shared_text_input(label: str, role: str, key: str, default: str = "") -> str:
    """A text box of this page (its own ``key``) bound to the shared value ``role`` (prompt,
    answer, foil) the one way every page binds (``state.bind``)."""
    return state.bind(st.text_input, label, role, default, widget_key=key)


EXAMPLE = {"prompt": "The nurse said that", "answer": " she", "foil": " he"}


def example_defaults() -> dict[str, str]:
    """The boxes' defaults: the page's example where no prompt was chosen elsewhere, else none (a
    prompt from a link with no foil read the example's ' he' as its foil: 'Paris' against 'he')."""
    return EXAMPLE if state.value("prompt") is None else dict.fromkeys(EXAMPLE, "")


def metric_sentence(task) -> str:
    """What 'the metric' is for this task, in words."""
    if task.metric == "logit_diff" and task.foils:
        answer, foil = shown_token(task.answer, 60), shown_token(task.foils[0], 60)
        return f"logit difference logit({answer}) − logit({foil}) at the last position"
    if task.metric == "prob":
        return f"probability of {shown_token(task.answer, 60)} at the last position"
    return f"log-probability of {shown_token(task.answer, 60)} at the last position"


def metric_name(task) -> str:
    """The metric's name for a figure's label: 'logit difference', 'log-probability', 'probability'."""
    if task.metric == "logit_diff" and task.foils:
        return "logit difference"
    return "probability" if task.metric == "prob" else "log-probability"


def task_problem(model, task) -> str | None:
    """Why ``task`` cannot be steered, in one sentence, or None: an empty prompt, an answer or foil
    that is not one token, ... (``prepare_task``'s refusals). Said under the boxes before any press:
    a three-token answer read "The metric: logit difference logit(' Mxyzptlk') − logit(' him')"
    and was refused only once "Zero them" was pressed; an empty prompt was told nothing at all."""
    from ..core.tasks import TaskError, prepare_task

    try:
        prepare_task(model, task, need_corrupted=False)
    except TaskError as error:
        return str(error)
    return None


def outcome_rows(outcome: dict, task, n_chosen: int) -> list[dict]:
    """The zeroing's figures as a table's rows: the metric before, after zeroing the chosen
    features, and after zeroing as many random ones (the mean over the draws), with the change.
    The column names the metric (a logit difference is not a probability); each row says what was
    zeroed. They were three st.metric tiles labelled "metric before", "after zeroing" and "2 random
    features" (a mean over five draws, said nowhere); a label that says all that is cut at 1,000 px."""
    name = metric_name(task)
    runs = outcome["random"]["runs"]
    drawn = len(runs[0]["features"]) if runs else 0  # fewer than chosen where too few are active

    def row(zeroed: str, value: str, change: str) -> dict:
        return {"zeroed": zeroed, name: value, "change": change}

    rows = [
        row("nothing (the model as it is)", f"{outcome['before']['metric']:.3f}", ""),
        row(
            f"the {counted(n_chosen, 'chosen feature')}",
            f"{outcome['after']['metric']:.3f}",
            f"{outcome['change']:+.3f}",
        ),
    ]
    if drawn:
        rows.append(
            row(
                f"{counted(drawn, 'random feature')} active on this prompt (mean of {counted(len(runs), 'draw')})",
                f"{outcome['random']['mean_metric']:.3f}",
                f"{outcome['random']['mean_change']:+.3f}",
            )
        )
    else:
        rows.append(row("random features: no other feature is active at these layers", "—", ""))
    return rows


TOKENS_BEFORE = "top next tokens before (probability)"
TOKENS_AFTER = "after zeroing (probability)"


def top_token_rows(outcome: dict) -> list[dict]:
    """The model's top next tokens before and after the zeroing, each with its probability (the
    columns said only "before" and "after" over "' me' 0.430": a reader could take it for a metric)."""
    rows = zip(outcome["before"]["top_tokens"], outcome["after"]["top_tokens"])
    # st.table reads its cells as markdown: a token such as '__init__' would be drawn as a bold "init"
    return [
        {
            TOKENS_BEFORE: markdown_text(readable(f"{b[0]!r} {b[1]:.3f}")),
            TOKENS_AFTER: markdown_text(readable(f"{a[0]!r} {a[1]:.3f}")),
        }
        for b, a in rows
    ]


def other_task_note(task, answer: str, foil: str) -> str:
    """A sentence when the open circuit of this prompt was found for another answer or foil than
    the boxes hold, else "": the page took any circuit of the prompt and labelled its nodes as the
    circuit of the answer typed (' she' against ' he' kept for ' the' against ' a', unsaid)."""
    foils = tuple(task.foils)
    if task.answer == answer and foils == ((foil,) if foil else ()):
        return ""
    against = f" against {' or '.join(shown_token(f, 30) for f in foils)}" if foils else ""
    return (
        f" It was found for the answer {shown_token(task.answer, 30)}{against}, not for the answer and "
        "foil typed here: run this prompt on Explore with them for their own circuit."
    )


def budget_words(result, budget: int) -> str:
    """The budget as a page says it: 'budget 200', or for a circuit over positions 'a budget of 50
    (edge, position) units' (its components at every position, here)."""
    return f"a budget of {budget:,} (edge, position) units" if result.positions else f"budget {budget:,}"


def circuit_at_budget(result) -> tuple[list[str], int, int]:
    """(the strongest nodes of ``result``'s circuit at the shared budget, the budget, how many
    nodes the circuit has): the nodes are ranked by their summed |edge score|."""
    # here, not at the top: keeps torch out of the first paint
    from .. import render

    budgets = sorted(result.budgets)
    if result.positions:  # Explore's unit slider, not its edge budget: Steer labelled the circuit
        # at 'budget 200' (the edge view's default) while Explore showed 50 units
        from ..positions.present import readable_position_budget

        budget = state.session.units
        if not isinstance(budget, int) or budget not in budgets:
            budget = readable_position_budget(result).budget
    else:
        budget = state.session.budget
    if not isinstance(budget, int) or not (result.any_budget or budget in budgets):
        budget = render.readable_budget(result.curve)
    edges = render.circuit_edges(result.graph, result.scores, result.circuit(budget))
    strength: dict[str, float] = {}
    for edge in edges:
        for node in (edge.source, edge.target):
            if node not in ("input", "logits"):
                strength[node] = strength.get(node, 0.0) + abs(edge.score)
    ranked = sorted(strength, key=lambda node: -strength[node])
    return ranked[:MAX_NODES], int(budget), len(ranked)


# the logits node, typed: the labels leave it out (it reads the stream), and the table stood empty
LOGITS_ROW = "the logits read the residual stream and write nothing to it: no SAE feature is theirs"


def feature_rows(labels: dict, nodes=()) -> list[dict]:
    """One row per (node, feature) of the SAE labels, in the order of ``nodes`` (the labels'
    own where not given): plain text, shown as a table. A node the labels leave out (the
    logits) has a row that says why."""
    rows = []
    for node in dict.fromkeys([*nodes, *labels]):
        entry = labels.get(node)
        if entry is None:
            rows.append({"node": node, "feature": "—", "what it does": LOGITS_ROW, SHARE: None, "at": ""})
            continue
        if entry["sae"] is None:
            rows.append(
                {"node": node, "feature": "—", "what it does": entry["reason"], SHARE: None, "at": ""}
            )
            continue
        if not entry["features"]:  # the node was dropped from the table unsaid
            reason = f"drives no feature of the layer-{entry['sae_layer']} SAE on this prompt"
            rows.append({"node": node, "feature": "—", "what it does": reason, SHARE: None, "at": ""})
        for feature in entry["features"]:
            rows.append(
                {
                    "node": node,
                    "feature": f"L{entry['sae_layer']}/{feature['feature']}",
                    "what it does": readable(feature["label"].split(": ", 1)[-1]),
                    SHARE: share_percent(feature),
                    "at": readable(repr(feature["token"])),
                }
            )
    return rows


FEATURE_COLUMNS = ("node", "feature", SHARE, "at", "what it does")
FEATURE_TABLE_NOTE = f"{SHARE[0].upper()}{SHARE[1:]}: {SHARE_HELP}. In what it does, {FONTLESS_HELP}."
SCROLL_ROWS = 12  # a longer table is this many rows high (about), and scrolls down, never sideways


FEATURE_TABLE_KEY = "steer-features"  # its container: the class st-key-steer-features
# the short cells on one line and no wider than they need (a token such as ' said' was split after
# its quote at 1,000 px; at 2,000 px they took half the width and "what it does" wrapped in the rest)
FEATURE_TABLE_STYLE = (
    f"<style>.st-key-{FEATURE_TABLE_KEY} td:nth-child(-n+4) {{ width: 1%; }}"
    f".st-key-{FEATURE_TABLE_KEY} td:nth-child(-n+4) p {{ white-space: nowrap; }}"
    f".st-key-{FEATURE_TABLE_KEY} td:nth-child(5) p {{ overflow-wrap: anywhere; }}"
    # Streamlit caps a table cell's text at 400 px: at 2,000 px it wrapped beside 900 px of room
    f".st-key-{FEATURE_TABLE_KEY} td:nth-child(5) > div {{ max-width: none; }}</style>"
)


def feature_table(rows: list[dict]) -> list[dict]:
    """``feature_rows`` as the page's table shows them: the share in whole percent ("—" where there
    is none), every cell markdown-escaped (``st.table`` reads its cells as markdown; a context's
    '__init__' would be a bold "init"). A table of text that wraps: the grid it was (``st.dataframe``)
    kept each row one line high, so at a 1,000 px window its five columns ran 230 px past the
    table's 540 and "what it does" was cut at its first words, a scroll away."""
    shown = []
    for row in rows:
        share = row[SHARE]
        cells = {**row, SHARE: "—" if share is None else f"{share:.0f}%"}
        shown.append({column: markdown_text(str(cells[column])) for column in FEATURE_COLUMNS})
    return shown


def feature_table_height(rows: list[dict]) -> int | str:
    """The table's height: all of it up to ``SCROLL_ROWS`` rows, else about that many rows' worth."""
    return "content" if len(rows) <= SCROLL_ROWS else 38 * SCROLL_ROWS


def scroll_note(rows: list[dict]) -> str:
    """A sentence above a table that scrolls inside its frame ('' for one shown whole): the 12
    strongest nodes' features filled 34 rows (Gemma-3-270M, "The nurse said that", EAP-IG at budget
    200) in a frame of about 9 wrapped rows, the last cut mid-line and nothing saying that 25 more
    were a scroll away (Chromium, 1,000 px)."""
    if feature_table_height(rows) == "content":
        return ""
    nodes = len({row["node"] for row in rows})
    return f"The table holds {len(rows)} rows, the features of {nodes} nodes: scroll inside it for the rest."


def share_percent(feature: dict) -> float | None:
    """The node's share of a feature's activation, in percent: ``share`` (the activation the
    node's output accounts for, summed over positions, in the SAE's own units, e.g. 314.3) over
    ``activation`` (the feature's whole activation, summed the same way)."""
    activation = float(feature.get("activation") or 0.0)
    if activation <= 0:
        return None
    return round(100 * float(feature["share"]) / activation, 1)


def feature_options(labels: dict) -> dict[tuple[int, int], str]:
    """{(SAE layer, feature): its label} once per feature, named by the node that drives it most
    (the largest share of its activation, as the table above shows; ties in the circuit's node
    order), and the others that drive it too. It was the first node in that order: a feature
    listed under a11.h3 (20 %) that a13.h3 drives more (24 %)."""
    drivers: dict[tuple[int, int], list[tuple[str, float]]] = {}
    text: dict[tuple[int, int], str] = {}
    for node, entry in labels.items():
        for feature in entry["features"]:
            key = (entry["sae_layer"], feature["feature"])
            drivers.setdefault(key, []).append((node, share_percent(feature) or 0.0))
            text[key] = feature["label"]
    options = {}
    for key, found in drivers.items():
        nodes = [node for node, _ in sorted(found, key=lambda pair: -pair[1])]  # stable: ties in order
        also = f" (also {', '.join(nodes[1:])})" if len(nodes) > 1 else ""
        options[key] = f"{nodes[0]}: {readable(text[key])}{also}"
    return options


def feature_name(key: tuple[int, int]) -> str:
    """A feature as the link names it, as its label does: ``L6/123`` (SAE layer 6, feature 123)."""
    return f"L{key[0]}/{key[1]}"


PICKED_ONCE = "steer.features.drawn"  # the picker was drawn in this session: the link's were read


def chosen_features(options: dict[tuple[int, int], str]) -> tuple[list[tuple[int, int]], str | None]:
    """The features picker, bound to the shared ``steer_features`` (``zero`` in the link: the
    features chosen, by ``feature_name``). Until 2026-12-06 the link did not carry them and a
    shared Steer view opened with none chosen. Those this circuit's nodes do not offer are left
    out; the link's, on the picker's first draw, are named in one sentence. The multiselect sits
    in the page's column, so the page draws the sentence where it wants (returned second)."""
    by_name = {feature_name(key): key for key in options}
    field = state.Session.steer_features.key
    wanted = list(state.value(field) or [])
    missing = [name for name in wanted if name not in by_name]
    if missing:
        state.set_value(field, [name for name in wanted if name in by_name])
    said = missing_features_sentence(missing) if missing and not state.widget_value(PICKED_ONCE) else None
    state.set_widget_value(PICKED_ONCE, True)
    picked = state.bind(
        st.multiselect,
        "Features to zero",
        field,
        [],
        widget_key="steer.features",
        options=list(by_name),
        format_func=lambda name: options[by_name[name]],
        select_all=False,  # a first click on "Select all" would zero every feature at once
    )
    return [by_name[name] for name in picked], said


def missing_features_sentence(missing: list[str]) -> str:
    """One sentence (markdown, the link's text escaped): the link's features no node offers."""
    shown = ", ".join(repr(cut(name, 20)) for name in missing[:5])
    more = f" and {len(missing) - 5:,} more" if len(missing) > 5 else ""
    return markdown_text(
        f"The link's features to zero {shown}{more} {'are' if len(missing) > 1 else 'is'} not among "
        "those of this circuit's nodes on this prompt (the table above): left out."
    )


def link_method_sentence() -> str | None:
    """One sentence (markdown, the link's value escaped) when the link names a method this app does
    not have, after putting the default method in its place; else None. Steer looks up the circuit of
    the link's method: ``?method=nonsense`` found none and said only "No circuit of this prompt is
    open", and its "Compute it on Explore" carried the name on, so Steer guessed silently."""
    from ..methods import available_methods, default_method
    from .inputs import unknown_in_link_sentence

    asked, methods = state.session.method, available_methods()
    if not asked or asked in methods:
        return None
    state.session.method = default_method(list(methods))
    instead = (
        f"Steer looks for the circuit of {methods[state.session.method].label} instead; to label another "
        "method's circuit, pick it in Explore's method box (it lists every method) and come back"
    )
    return unknown_in_link_sentence("method", [asked], instead)


def stored_circuit(model, model_id: str, prompt: str, answer: str, foil: str):
    """The stored result of the request the page's link names (its prompt, corrupted prompt, answer,
    foil, metric, method, settings and budgets, as Explore would make it), or None: a link opened
    in a new browser said no circuit had been computed while the store held one. Never computes."""
    from ..core.tasks import PromptTask
    from ..entry.api import parse_budgets
    from ..methods import available_methods, default_method
    from .budget_box import budgets_text, default_budgets, graph_edge_total
    from .forms import build_config
    from .inputs import task_foils
    from .loaders import request_for

    session = state.session
    methods = available_methods()
    # a link without a method or budgets is looked up as Explore opened on it runs it: the default
    # method and the model's default budgets (a link with the prompt, corrupted prompt, answer and
    # foil said nothing was stored while Explore's default run of them was)
    method = methods.get(session.method or default_method(list(methods)))
    if method is None or not session.corrupted:
        return None
    try:
        budgets = parse_budgets(
            session.budgets or budgets_text(default_budgets(graph_edge_total(model))), least=1
        )
    except ValueError:
        return None
    config, problem = build_config(method, state.method_settings(state.Session.settings.key, method.name))
    if problem is not None:
        return None
    metric = session.metric or "logit_diff"
    task = PromptTask(prompt, session.corrupted, answer, task_foils(answer, foil), metric)
    try:
        request = request_for(model, model_id, task, method.name, config, budgets)
    except ValueError:  # settings or limits that refuse it: nothing stored under it either
        return None
    return kept_results.stored_result(request)


COMPUTE_IT = (
    "Compute it on Explore runs it there with this prompt, answer, foil, method, settings and "
    "budgets (and, where no corrupted prompt is given, the one Explore would propose, named there; "
    "where none can be proposed, Explore asks you to write it), and Steer labels it when you come back; "
    "or type the nodes to label: heads as a3.h0 (layer 3, head 0), MLPs as m5 (layer 5)."
)
NO_CIRCUIT = (
    "No circuit of this prompt is open in this session, nor stored by this version of circuitviz "
    "(results are kept per version of its code, so one computed before the code changed is computed "
    f"again): {COMPUTE_IT}"
)


def no_circuit_sentence() -> str:
    """``NO_CIRCUIT``, or where the link names no corrupted prompt (``stored_circuit`` finds a stored
    circuit by it; a missing method or budgets are Explore's defaults) a sentence that says so: a
    link with the prompt, answer and foil alone read "nor stored by this version" of a circuit the
    store held, which Steer had not looked for (Explore's default run of that prompt)."""
    if state.session.corrupted:
        return NO_CIRCUIT
    return (
        "No circuit of this prompt is open in this session, and the link names no corrupted prompt, by "
        "which a stored one is found (Explore reads one computed before when it runs the same inputs): "
        f"{COMPUTE_IT}"
    )


def compute_on_explore(model, prompt: str, answer: str, foil: str) -> None:
    """Open this prompt on Explore and run it there (the button under ``NO_CIRCUIT``): a Steer link
    opened after a code change found nothing stored under this code's key, and its button only
    opened Explore, whose Run was then to be found and pressed. Without a corrupted prompt (Steer's
    own example, a link without one) it is the one Explore proposes, with its note, measured
    against this foil; until 2026-12-06 Explore then opened unrun, under a sentence saying the
    button runs it. Where none can be proposed or none passes, Explore opens to ask for one, unrun."""
    from ..query.proposals import proposal_for
    from .inputs import task_foils

    session = state.session
    corrupted, note = session.corrupted, None
    if not corrupted:  # one that passes the check Explore runs first, against this foil
        made = proposal_for(model, prompt, answer, [], foil=foil or None)
        corrupted, note = made.corrupted, made.corrupted_note
    if not corrupted:
        state.switch_to("explore", state.url_params(page="explore"))
        return
    method = session.method or None
    state.open_task(
        {
            "clean": prompt,
            "corrupted": corrupted,
            "answer": answer,
            "foils": list(task_foils(answer, foil)),
            "metric": session.metric or "logit_diff",
        },
        method=method,
        settings=state.method_settings(state.Session.settings.key, method) if method else None,
        budgets=session.budgets or None,
        budget=session.budget,
        corrupted_note=note,
        run=True,
        corrupted_came_with=None,  # the session's or a proposal: hidden for a method that needs none
    )


def no_hub_saes_sentence(model_id: str, others: list[str], left_out: dict[str, str] | None = None) -> str:
    """That sae-lens's directory of hub SAEs lists none for ``model_id`` (two empty boxes and a Load
    button stood there, and Load fetched 'None/None'), or none on the residual stream (``left_out``:
    {release: what its SAEs read}), and the page's other sources that can give this model an SAE
    (``others``: 'embedded' only where SAEs ship for it; it was offered for smollm2-135m, which has
    none)."""
    ways = f"choose {' or '.join(repr(other) for other in others)} above, or " if others else ""
    none = f"none for {model_id}"
    if left_out:
        reads = sorted(set(left_out.values()), key=str.lower)
        none = (
            f"none on the residual stream for {model_id} (its {_releases(len(left_out))} "
            f"{'read' if len(left_out) > 1 else 'reads'} {_joined(reads)}, which label no node)"
        )
    return f"sae-lens's directory of hub SAEs lists {none}; {ways}train one with scripts/train_saes.py."


def left_out_releases_sentence(left_out: dict[str, str]) -> str:
    """The hub releases the Steer page leaves out of its box, and why: {release: what its SAEs
    read}. A node is labelled by the features it writes into the residual stream, so an SAE on
    attention or MLP outputs labels nothing (Load downloaded one, then refused it)."""
    groups = {
        what: [r for r, reads in left_out.items() if reads == what]
        for what in sorted(set(left_out.values()), key=str.lower)
    }
    listed = "; ".join(f"{what}: {', '.join(names)}" for what, names in groups.items())
    return (
        f"Not offered: {_releases(len(left_out))} whose SAEs read {listed}. Steer labels a node with "
        "the features it writes into the residual stream, so it loads SAEs on the residual stream "
        "between blocks (hook_resid_post or hook_resid_pre) only."
    )


def _releases(count: int) -> str:
    return f"{count} release{'s' if count != 1 else ''}"


def _joined(words: list[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def hub_off_sentence(model_id: str, others: list[str]) -> str:
    """That the hub is off on a machine working offline and its cache holds no hub SAE of the model,
    with the ways to an SAE the page offers (``others``): it said to load a copy as a local folder,
    which a shared server does not offer. (Until 2026-12-07 the hub was off offline even for an SAE
    an earlier download had left in the cache.)"""
    ways = []
    if "embedded" in others:
        ways.append(f"choose 'embedded' above for the SAEs that ship for {model_id}")
    if "local folder" in others:
        ways.append("copy a hub SAE's folder to this machine and choose 'local folder' above")
    ways.append("start the app with HF_HUB_OFFLINE=0 where it reaches huggingface.co")
    return (
        "Downloading SAEs from the Hugging Face hub is off because this app works offline "
        "(HF_HUB_OFFLINE is set, as circuitviz sets it unless told otherwise), and the Hugging Face "
        f"cache holds none of {model_id}'s on the residual stream; {', or '.join(ways)}."
    )


def cached_hub_caption(cached: dict[str, list[str]], releases: dict[str, list[str]], model_id: str) -> str:
    """Offline, that the boxes offer only the hub SAEs in the Hugging Face cache (``cached``), of
    the residual-stream ones the directory lists for the model (``releases``)."""
    n, total = sum(map(len, cached.values())), sum(map(len, releases.values()))
    return (
        "This app works offline (HF_HUB_OFFLINE is set), so the boxes offer the hub SAEs already in "
        f"the Hugging Face cache: {n:,} of the {total:,} on {model_id}'s residual stream; start the "
        "app with HF_HUB_OFFLINE=0 where it reaches huggingface.co to download the others."
    )


def hub_loading_words(release: str, sae_id: str, offline: bool = False) -> str:
    """The spinner's words while a hub SAE loads (a download the first time; the hub's own cache
    after, and offline)."""
    if offline:
        return f"Loading {release}/{sae_id} from the Hugging Face cache…"
    return f"Loading {release}/{sae_id} from the Hugging Face hub (a download the first time)…"


def hub_way_out(sentence: str, others: list[str]) -> str:
    """A failed Load's sentence, with the page's other sources (``others``) as a way out."""
    if not others:
        return sentence
    return f"{sentence.removesuffix('.')}; or choose {' or '.join(repr(other) for other in others)} above."
