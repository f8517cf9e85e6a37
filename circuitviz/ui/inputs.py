"""The inputs of a run: prompt, answer, foil, corrupted prompt, method, settings and budgets.

Every input is checked as it is typed, before Run: a problem is one sentence right below the
input it is about, and Run stays disabled while any remains. A new prompt proposes its own
answer, foil and corrupted prompt (``proposals``) instead of keeping the old prompt's values.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

import streamlit as st

from ..core.refusals import (
    EMPTY_PROMPT,
    NO_FOIL,
    foil_is_answer,
    prompt_over_context,
)
from ..core.text import (
    chance_text,
    first_piece_note,
    invisible_sentence,
    markdown_sentence,
    markdown_text,
    only_invisible,
    shown,
    shown_token,
    token_label,
    unseen_breaks_note,
)
from . import (  # no torch here: the prompt box paints before the engine loads
    kept_results,
    loaders,
    spelling,
    state,
)
from .budget_box import budget_reading, default_budgets, fit_budgets_box
from .budget_words import budgets_label, positions_on
from .corrupted_box import corrupted_input, follow_answer, follow_foil
from .mmlu_picker import REFUSED_HINT
from .state import session

EXAMPLE_PROMPT = "When Mary and John went to the store, John gave a drink to"
EXAMPLE_CORRUPTED = "When Alice and Bob went to the store, Carl gave a drink to"


def shared_settings(method, settings: dict) -> dict:
    """The settings that ``method``'s Config has (e.g. ig_steps carried from Explore to Compare)."""
    fields = {config_field.name for config_field in dataclasses.fields(method.Config)}
    return {name: value for name, value in settings.items() if name in fields}


def run_settings(method, settings: dict) -> dict:
    """The settings as the run's result records them (every field, as its Config reads them), so
    a kept result can be compared with the form's values."""
    # here, not at the top: keeps torch out of the first paint
    from ..methods import config_to_dict

    return config_to_dict(method.make_config(settings))


@dataclass
class TaskInputs:
    """What the inputs give: the task when it can run, and the problems that stop it."""

    task: object | None  # tasks.PromptTask
    problems: list[str] = field(default_factory=list)
    n_tokens: int = 0


# ----- the prompt ---------------------------------------------------------------------------------
def prompt_input() -> str:
    """The prompt box: drawn first, before the model has loaded (it needs no model)."""
    return state.bind(st.text_area, "Prompt", "prompt", default=EXAMPLE_PROMPT, height=80)


def prompt_problem(model, model_id: str, prompt: str) -> tuple[str | None, int]:
    """(the sentence why the prompt cannot run or None, its token count)."""
    # here, not at the top: keeps torch out of the first paint
    from ..entry.limits import LimitError, prompt_limit_problem  # torch is loaded once a model is

    if not prompt.strip():
        return EMPTY_PROMPT, 0
    if only_invisible(prompt):  # looks empty: 'The prompt is empty but for 3 invisible characters'
        return invisible_sentence(prompt), 0
    n_tokens = len(loaders.str_tokens(model, model_id, prompt))
    try:
        problem = prompt_limit_problem(n_tokens)
    except LimitError as error:
        return str(error), n_tokens
    if problem:
        return problem, n_tokens
    context = getattr(getattr(model, "cfg", None), "n_ctx", None)
    if context and n_tokens > context:
        return prompt_over_context(n_tokens, context), n_tokens
    return None, n_tokens


# ----- answer, foil and corrupted prompt ------------------------------------------------------------
def _pick(role: str) -> None:
    picked = state.widget_value(f"pick.{role}")
    if picked is not None:
        state.set_value(role, picked)


def _adopt_new_prompt(model, model_id: str, prompt: str, tokens: list[str]) -> None:
    """The prompt changed: propose its answer, foil and corrupted prompt (stored per model and
    prompt: a prompt seen before proposes without a forward pass); forget the old results."""
    proposal = loaders.proposal(model, model_id, prompt, tokens)
    state.adopt_prompt(
        prompt,
        {"answer": proposal.answer, "foil": proposal.foil, "corrupted": proposal.corrupted},
    )
    session.corrupted_note, session.corrupted_proposed = proposal.corrupted_note, proposal.corrupted or ""
    session.foil_note = proposal.foil_note
    session.foil_proposed = proposal.foil
    session.corrupted_answer, session.corrupted_foil = proposal.answer, proposal.foil
    del session.more_foils  # an opened task's other foils belonged to its own prompt
    for role in spelling.ROLES:
        spelling.remember(prompt, role, getattr(proposal, role))


def _complete_given_inputs(model, model_id: str, prompt: str, tokens: list[str]) -> None:
    """Inputs that left out the answer, the corrupted prompt or, for the logit difference, the
    foil (a URL with only ``prompt`` and ``answer``, or ``corrupted`` and no answer): propose
    those (the foil and corrupted prompt for the answer), keeping what was given. An empty box
    the user cleared is kept empty."""
    if state.value("answer") is None:
        state.set_value("answer", loaders.proposal(model, model_id, prompt, tokens).answer)
        spelling.remember(prompt, "answer", state.value("answer"))
    foil, corrupted = state.value("foil"), state.value("corrupted")
    wants_foil = foil is None and state.value("metric", "logit_diff") == "logit_diff"
    if corrupted is not None and not wants_foil:
        return
    found = loaders.completion(model, model_id, prompt, state.value("answer"), corrupted, tokens)
    if corrupted is None:
        state.set_value("corrupted", found.corrupted)
        session.corrupted_note, session.corrupted_proposed = found.corrupted_note, found.corrupted or ""
        session.corrupted_answer = state.value("answer")
        session.corrupted_foil = found.foil  # a foil the link gave: follow_foil measures against it
    if wants_foil:
        state.set_value("foil", found.foil)
        session.foil_note = found.foil_note
        session.foil_proposed = found.foil
        spelling.remember(prompt, "foil", found.foil)


def token_problem(model, text: str, role: str) -> str | None:
    """None when ``text`` is one token of the model's vocabulary, else the sentence why not."""
    # here, not at the top: keeps torch out of the first paint
    from ..core.tasks import TaskError, single_token_id

    try:
        single_token_id(model, text, role)
    except TaskError as error:
        return str(error)
    return None


def answer_inputs(model, model_id: str, prompt: str) -> tuple[str, str, str, list[str]]:
    """The model's next tokens as choices, then answer, foil and metric boxes, each with its
    problem below it. Returns (answer, foil, metric, problems)."""
    # here, not at the top: keeps torch out of the first paint
    from ..core.tasks import METRICS
    from ..query.proposals import left_out_line, offered_tokens

    top = loaders.next_tokens(model, model_id, prompt)
    probability = dict(top)
    tokens, left_out = offered_tokens(model, [token for token, _ in top])
    asked = state.value("metric")
    unknown_metric = asked is not None and asked not in METRICS
    if unknown_metric:  # a link's typo, replaced before the foil is proposed (none was, for '<script>')
        state.set_value("metric", "logit_diff")
    if not state.inputs_belong_to(prompt):
        _adopt_new_prompt(model, model_id, prompt, tokens)
    else:
        _complete_given_inputs(model, model_id, prompt, tokens)
    spelling.follow_tokenizer(model, prompt)  # a proposal kept from another model, as this one reads it
    picked = state.coming_value("answer")
    if picked and token_problem(model, picked, "answer") is None:
        follow_answer(model, model_id, prompt, picked, tokens)  # another answer: its own corrupted prompt
        follow_foil(model, model_id, prompt, picked, tokens)  # another foil: the one measured against
    for role in ("answer", "foil"):
        current = state.coming_value(role)  # a token just typed below is highlighted in this run
        state.set_widget_value(f"pick.{role}", current if current in tokens else None)
    st.markdown("**The model's next token** — click to choose the answer and a foil (a wrong answer):")
    for role in ("answer", "foil"):
        st.pills(
            role,
            tokens,
            key=f"pick.{role}",
            format_func=lambda t: f"{token_label(t)} {chance_text(probability[t])}",
            on_change=_pick,
            args=(role,),
        )
    if left_out:
        st.caption(markdown_sentence(left_out_line(model, left_out, probability)))  # tokens' text
    problems = []
    if unknown_metric:  # said once, when it is replaced
        others = ", ".join(METRICS[1:])
        st.warning(
            unknown_in_link_sentence(
                "metric", [asked], f"logit_diff is used (the metric box below; also {others})"
            )
        )
    # the metric's column fits "logit_diff" beside its arrow at 1,000 px (a fifth of the row cut it to "logit_d")
    columns = st.columns([2, 2, 1.5])
    with columns[0]:
        answer = state.bind(st.text_input, answer_label(model), "answer")
        problem = token_problem(model, answer, "answer")
        if problem:
            st.error(markdown_sentence(problem))  # may quote the user's text
            problems.append(problem)
        else:
            token_line(model, "answer", answer, probability, (model_id, prompt))
            unlikely = unlikely_answer(model, model_id, prompt, answer, probability)
            if unlikely:
                st.warning(markdown_sentence(unlikely))  # may quote the user's text
    with columns[2]:
        metric = state.bind(st.selectbox, "metric", "metric", default="logit_diff", options=list(METRICS))
    with columns[1]:
        foil = state.bind(st.text_input, "foil token", "foil")
        problem = foil_problem(model, answer, foil, metric)
        if problem:
            st.error(markdown_sentence(problem))  # may quote the user's text
            problems.append(problem)
        elif foil:
            token_line(model, "foil", foil, probability, (model_id, prompt))
            if session.foil_note and foil == (session.foil_proposed or foil):
                st.caption(markdown_sentence(session.foil_note))  # an opened task's foils: its file's text
    return answer, foil, metric, problems


def answer_label(model) -> str:
    """The answer box's label, true of the model's tokenizer (``models.tokens.leading_spaces``):
    'with its leading space' where a word's token carries it (' Mary'), 'no leading space' where it
    does not (a word-level tokenizer's 'Mary': the label asked for a space its tokens never have),
    and no word of spaces where the tokenizer does not tell."""
    # here, not at the top: keeps torch out of the first paint
    from ..models.adapter import adapter_of
    from ..models.tokens import leading_spaces

    spaces = leading_spaces(adapter_of(model))
    if spaces is None:
        return "answer token"
    if spaces:
        return "answer token (with its leading space)"
    return "answer token (no leading space)"  # longer, it took a third line at 1,000 px, the box below the foil's


def task_foils(answer: str, foil: str) -> tuple[str, ...]:
    """The run's foils: the box's, and with it the other foils of an opened task (a batch's MMLU
    row compares the answer with three letters) while the box still holds that task's first."""
    if not foil:
        return ()
    if foil == session.foil_proposed and session.more_foils:
        return (foil, *(other for other in session.more_foils if other not in (answer, foil)))
    return (foil,)


def unlikely_answer(
    model, model_id: str, prompt: str, answer: str, probability: dict[str, float] | None = None
) -> str | None:
    """The sentence for an answer the model barely predicts after the prompt (its probability
    said), or None: a circuit explains what the model does, and it hardly does this.
    ``probability``: the model's likely next tokens already at hand ({token: probability})."""
    from ..models.adapter import adapter_of
    from ..models.tokens import own_text
    from ..query.proposals import unlikely_answer_sentence

    # the box's text read as the model's token: ' Mary' is a word-level tokenizer's 'Mary', which
    # read "gives ' Mary' only 3.0% (its most likely next token is 'Mary', 3.0%)" for its top
    # token, and quoted ' Mary' (a text it has no token for) for any other
    token = answer if probability and answer in probability else own_text(adapter_of(model), answer) or answer
    if probability and token in probability:
        top = max(probability, key=probability.get)
        chance, top_chance = probability[token], probability[top]
    else:
        chance, top, top_chance = loaders.token_probability(model, model_id, prompt, answer)
    way_out = "pick one of its likely tokens above, or a prompt whose answer it predicts"
    return unlikely_answer_sentence(token, chance, top, top_chance, way_out)


def token_line(model, role: str, token: str, probability: dict[str, float], after=None) -> None:
    """Under an answer or foil box: the token as a chip with its spaces shown (a leading space is
    invisible in the box), the model's probability of it, and, for a word typed without the
    space the model's token has (' Mary' typed 'Mary'), one sentence and a button that adds it.
    ``after``: (model id, prompt), to weigh a word and its spaced token that are not among the
    likely ones (a foil 'was' for ' was' after a prompt ending in a word)."""
    # here, not at the top: keeps torch out of the first paint
    from ..entry.spaces import takes_space

    spaced = " " + token
    if (
        after
        and token not in probability
        and spaced not in probability
        and takes_space(model, after[1], token)
    ):
        found = {each: loaders.token_probability(model, *after, each)[0] for each in (token, spaced)}
        if found[spaced] > found[token]:  # the spaced word is the likelier: said below, with its figure
            probability = {**probability, spaced: found[spaced]}

    line = own_token_line(model, token, with_own_chance(model, token, probability, after))
    if after and role == "answer":  # ' Zol' of 'Zoltan': a piece of a name, not a name
        line += first_piece_note(token, after[1])
    line += unseen_breaks_note(token)  # '\n\n' stood in a box that looked empty
    st.markdown(token_line_html(line), unsafe_allow_html=True)
    spaced = missing_space(model, token, probability)
    if spaced is None:
        return
    share = chance_text(probability[spaced])
    st.warning(
        markdown_sentence(  # quotes the user's text
            f"The model's token is {shown_token(spaced, 30)} with a leading space ({share}); "
            f"{shown_token(token, 30)} without it is another token, which the model does not rank among its "
            "likely next tokens."
        )
    )
    st.button(
        f"Use {spaced!r}",
        key=f"add_space.{role}",
        on_click=state.set_value,
        args=(role, spaced),
        type="secondary",
    )


def with_own_chance(model, token: str, probability: dict[str, float], after) -> dict[str, float]:
    """``probability`` with the chance of ``token``'s own token where the likely ones lack it (a
    foil outside them showed none), from the prompt's kept run; as given without ``after``."""
    from ..models.adapter import adapter_of
    from ..models.tokens import token_pieces

    own = "".join(token_pieces(adapter_of(model), token))
    if after is None or own in probability:
        return probability
    return {**probability, own: loaders.token_probability(model, *after, own)[0]}


def token_line_html(line: str) -> str:
    """The line under a box as its own block, with the page's gap below it: Streamlit pulls a
    markdown element up by a paragraph's margin (1rem), which a <div> does not have, so the line
    sat flush against the next label ("the token: ·the ..." touching "Corrupted prompt" in
    Chromium at 1,500 px) or caption; its own bottom margin gives the gap back."""
    return f"<div style='font-size:0.85rem;margin-bottom:1rem'>{line}</div>"


def own_token_line(model, token: str, probability: dict[str, float]) -> str:
    """'the token: ·Mary · the model gives it 3.0%' (HTML): the model's token as its tokenizer has it
    (as the prompt's chips show it), not the text typed. A tokenizer whose tokens carry no space
    (word-level, splitting on spaces) reads ' Mary' as 'Mary': the line showed '·Mary' and no
    chance (the model's likely tokens are 'Mary'); it shows 'Mary' now, with its chance, and says
    that the space in the box is not part of the token."""
    # here, not at the top: keeps torch out of the first paint
    from .. import render
    from ..models.adapter import adapter_of
    from ..models.tokens import token_pieces

    pieces = token_pieces(adapter_of(model), token)
    own = "".join(pieces)
    chance = f" · the model gives it {chance_text(probability[own])}" if own in probability else ""
    read = ""
    if own != token:
        space = "the space in the box is not part of it: " if own == token.strip() else ""
        these = "this token" if len(pieces) == 1 else "these tokens"
        read = f" ({space}the model's tokenizer reads {render.token_strip_html([token])} as {these})"
    return f"the token: {render.token_strip_html(pieces or [''])}{chance}{read}"


def missing_space(model, token: str, probability: dict[str, float]) -> str | None:
    """' ' + ``token`` when the user typed a word without the leading space of the model's own
    likely token (and the word alone is not itself likely), else None."""
    if not token or token[0].isspace():
        return None
    spaced = " " + token
    if spaced not in probability or token in probability:
        return None
    return spaced if token_problem(model, spaced, "answer") is None else None


def foil_problem(model, answer: str, foil: str, metric: str) -> str | None:
    """The foil's problem: missing for the logit difference, not one token, the answer again."""
    if not foil:
        return NO_FOIL if metric == "logit_diff" else None
    problem = token_problem(model, foil, "foil")
    if problem:
        return problem
    if foil == answer:
        return foil_is_answer(answer)
    return None


def task_inputs(model, model_id: str, prompt: str, method=None) -> TaskInputs:
    """Everything below the prompt box: its length check, answer, foil, metric and corrupted
    prompt, each checked where it is typed. ``method``: the method chosen, when its corrupted box
    may hide (one that needs no corrupted prompt, ``corrupted_box.corrupted_input``); None: the
    box is shown and needed (Compare's, whose methods share one yardstick)."""
    # here, not at the top: keeps torch out of the first paint
    from ..core.tasks import PromptTask
    from ..entry.spaces import lookalike_spaces_note, trailing_space_sentence

    problem, n_tokens = prompt_problem(model, model_id, prompt)
    if problem:  # the prompt first: nothing else is checked against a prompt that cannot run
        st.error(markdown_sentence(problem))  # may quote the user's text
        return TaskInputs(None, [problem], n_tokens)
    if invisible_sentence(prompt):  # a zero-width space, a direction override: said, not refused
        st.warning(markdown_text(invisible_sentence(prompt)))
    if odd := lookalike_spaces_note(prompt, lambda text: loaders.str_tokens(model, model_id, text)):
        st.warning(markdown_text(odd))  # a page's no-break spaces: Gemma's byte tokens between the words
    if trailing := trailing_space_sentence(prompt, lambda text: loaders.next_tokens(model, model_id, text)):
        st.warning(markdown_text(trailing))  # 'The capital of France is ' proposed '<strong>'
    answer, foil, metric, problems = answer_inputs(model, model_id, prompt)
    corrupted, corrupted_problems = corrupted_input(model, model_id, prompt, method)
    problems += corrupted_problems
    if problems:
        return TaskInputs(None, problems, n_tokens)
    task = PromptTask(
        clean=prompt, corrupted=corrupted, answer=answer, foils=task_foils(answer, foil), metric=metric
    )
    verdict = loaders.task_verdict(model, model_id, task) if corrupted.strip() else None
    if verdict:  # a task whose corruption does not lower the metric: refused before Run
        if session.mmlu_prompt == prompt and corrupted != prompt:  # a picked MMLU question
            verdict += REFUSED_HINT
        st.error(markdown_sentence(verdict))  # may quote the user's text
        return TaskInputs(None, [verdict], n_tokens)
    return TaskInputs(task, [], n_tokens)


# ----- method, settings and budgets -----------------------------------------------------------------
def method_picker(key: str = "method", methods=None) -> str:
    """The method select box (the registered methods, or ``methods``); returns its name."""
    # here, not at the top: keeps torch out of the first paint
    from ..methods import available_methods, default_method

    registered = methods or available_methods()
    names = sorted(registered)
    asked = state.value(key)
    if asked not in names:
        state.set_value(key, default_method(names))
        if asked:  # a link's (or another version's) method: said once, when it is replaced
            instead = f"{registered[state.value(key)].label} is chosen instead (the box below)"
            elsewhere = available_methods().get(asked)
            if elsewhere is not None:  # the app's, not this page's (Paraphrases: Best-of-N's family)
                st.warning(f"The link names {elsewhere.label}, which this page does not run: {instead}.")
            else:
                st.warning(unknown_in_link_sentence("method", [asked], instead))
    name = state.bind(
        st.selectbox, "method", key, options=names, format_func=lambda n: f"{registered[n].label} ({n})"
    )
    st.caption(registered[name].summary)
    return name


def unknown_in_link_sentence(what: str, unknown: list, instead: str) -> str:
    """One sentence (markdown, the link's values escaped) for values of a kind ``what`` (method,
    metric, model, device) that a link named and this app does not have, and what it does instead."""
    names = ", ".join(markdown_text(shown(str(name))) for name in unknown[:8])  # a pasted page stays short
    if len(unknown) > 8:
        names += f" and {len(unknown) - 8:,} more"
    kind = f"a {what}" if len(unknown) == 1 else f"{len(unknown)} {what}s"
    return f"The link names {kind} this app does not have ({names}): {instead}."


def method_inputs(
    n_edges: int,
    key: str = "method",
    methods=None,
    initial: dict | None = None,
    budgets_key: str = "budgets",
    budgets_default: Callable[[int], list[int]] = default_budgets,
    settings_key: str = "settings",
    unit_total: int | None = None,
):
    """Method picker, its settings form and the budgets, each checked where it is typed.

    ``initial``: the settings a page starts the form with (a page's own defaults);
    ``budgets_key``/``budgets_default``: where a page keeps its budgets and its default budgets of
    a graph size (what they start as, and become when another model's defaults are left untouched);
    ``settings_key``: where the form's values live on (per method, across pages and in the URL);
    ``unit_total``: the prompt's (edge, position) units (``budget_box.unit_total``), the graph the
    budgets count while the method's ``positions`` box is ticked: its defaults then end there, and
    follow the prompt's length, as the edge defaults follow the model.
    Returns (method name, its Config or None while invalid, budgets or None while invalid).
    """
    # here, not at the top: keeps torch out of the first paint
    from ..methods import available_methods, method_traits
    from .forms import build_config, config_form

    registered = methods or available_methods()
    name = method_picker(key, registered)
    method = registered[name]
    units = positions_on(key, name, settings_key)  # budgets of (edge, position) units: no edge total
    total = unit_total if units else n_edges  # unknown while a prompt has no tokens: the box is left
    if total:
        fit_budgets_box(budgets_key, total, budgets_default)
    form_box, budgets_box = st.container(), st.container()  # drawn in this order, filled budgets first
    with budgets_box:
        text = state.bind(st.text_input, budgets_label(units), budgets_key)
        keeps = method_traits(name).over_graph_keeps
        values, problems, notes = budget_reading(text, n_edges, keeps, units, unit_total)
        for problem in problems:
            st.error(markdown_sentence(problem))  # may quote the user's text
        for note in notes:
            st.warning(markdown_sentence(note))  # may quote the user's text
        budgets = None if problems else values
    start = dict(initial or {})
    start.update(state.method_settings(settings_key, name))
    with form_box:
        link = state.link_settings_once(settings_key, name)
        settings = config_form(
            method, key, start, budgets=budgets or [], references=reference_circuits(), link=link
        )
        state.remember_settings(settings_key, name, settings)
        config, problem = build_config(method, settings)
        if problem:
            st.error(markdown_sentence(problem))  # may quote the user's text
    return name, config, budgets


def reference_circuits() -> dict[str, str]:
    """{label: edge names, one a line} of the circuits computed for this prompt at the chosen
    budget: what a form may offer as a reference circuit."""
    budget = session.budget
    found = {}
    for method, result in kept_results.results().items():
        at = (
            budget if isinstance(budget, int) and budget in result.budgets else max(result.budgets, default=0)
        )
        if not at:
            continue
        names = result.graph.edge_names_of(result.circuit(at))
        found[f"the {method} circuit at {at:,} edges ({len(names):,} kept)"] = "\n".join(names)
    return found
