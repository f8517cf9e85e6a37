"""How a link's query parameters read, and the sentences for those that do not: the kinds of
value a view field's parameter holds (``state.Field``), a value not of its kind, and a parameter
the link gives more than once. Pure: no streamlit, so the sentences are tested alone."""

from __future__ import annotations

import json

from ..core.text import cut, markdown_text

TEXT, INTEGER, SETTINGS, NAMES = "text", "integer", "settings", "names"  # how a URL value reads
SWITCH = "switch"  # '1' on, '0' off (demo mode): any other value was read as off, unsaid
INDEX = "index"  # a number from 0: one of a result's items (the Signals page's decision)
FLAG = "flag"  # a toggle of a page's view: '1' on, '0' off, held as True / False
SHARE = "share"  # a number from 0 to 1 (the Dataset page's consensus share)
MAX_LINK_INTEGER = 10**9  # a link's budget: more edges than any model the app can load has

_UNREADABLE_AS = {
    INTEGER: f"not a whole number from 1 to {MAX_LINK_INTEGER:,}",
    SETTINGS: "not a JSON object of settings",
    SWITCH: "not 1 (on) or 0 (off)",
    FLAG: "not 1 (on) or 0 (off)",
    SHARE: "not a number from 0 to 1",
    INDEX: f"not a whole number from 0 to {MAX_LINK_INTEGER:,}",
}


def parsed_link_value(kind: str, text: str):
    """A URL parameter's value as the state holds it, or None when it does not read as ``kind``."""
    # a budget: a count of edges, 1 or more (nothing a model has more of); an index counts from 0
    if kind in (INTEGER, INDEX):
        try:
            number = int(text)
        except ValueError:
            return None
        lowest = 1 if kind == INTEGER else 0
        return number if lowest <= number <= MAX_LINK_INTEGER else None
    if kind == SETTINGS:
        try:
            parsed = json.loads(text)
        except (ValueError, RecursionError):  # also 5,000 digits of a number, or 100,000 '['
            return None
        return parsed if isinstance(parsed, dict) else None
    if kind == NAMES:
        return [part for part in text.split(",") if part]
    if kind == SWITCH:
        return text if text in ("0", "1") else None
    if kind == FLAG:
        return {"1": True, "0": False}.get(text)
    if kind == SHARE:
        try:
            share = float(text)
        except ValueError:
            return None
        return share if 0 <= share <= 1 else None  # nan and inf fail both
    return str(text)


def link_choice_sentence(parameter: str, text: str, options, used: str) -> str:
    """One sentence (markdown, the link's text escaped) for a link's value that is none of the
    choices the page offers (``options``), naming them and the one shown instead."""
    offered = ", ".join(repr(cut(str(option), 40)) for option in list(options)[:8])
    more = f" and {len(options) - 8:,} more" if len(options) > 8 else ""
    return markdown_text(
        f"The link's {parameter} {cut(text, 80)!r} is not one of this page's choices ({offered}{more}): "
        f"the page shows {cut(str(used), 40)!r}."
    )


def clusters_refused(count: int, ks: list[int], n_prompts: int, budget: int) -> str:
    """One sentence for a count of clusters the Dataset page does not offer at this budget (a link's
    ``clusters``, or a count chosen at another budget): the counts there are, and auto shown."""
    having = f"{n_prompts:,} prompt{'s have' if n_prompts != 1 else ' has'} a circuit"
    return (
        f"The clusters count {count:,} is not offered here: at budget {budget:,}, {having}, and the "
        f"counts run from 2 to {ks[-1]} (at most one less than the prompts, and 6); the page shows auto."
    )


def unreadable_link_value(parameter: str, kind: str, text: str) -> str:
    """One sentence (markdown, the link's text escaped) for a URL value not of its field's kind."""
    shown = cut(text, 80)
    what = _UNREADABLE_AS.get(kind, "not readable")
    return markdown_text(
        f"The link's {parameter} {shown!r} is {what}: it is left out, and the page uses its own."
    )


def repeated_link_value(parameter: str, values: list[str]) -> str | None:
    """One sentence (markdown, escaped) for a parameter the link gives more than once, naming each
    value and the one used (the last, as Streamlit reads it), or None when it is given once or
    every time alike. Before 2026-12-06 the others were dropped unsaid (``?prompt=a&prompt=b``
    opened 'b')."""
    if len(set(values)) < 2:
        return None
    shown = ", ".join(repr(cut(value, 40)) for value in values[:4])
    more = f" and {len(values) - 4:,} more" if len(values) > 4 else ""
    return markdown_text(
        f"The link gives {parameter} {len(values):,} times ({shown}{more}): the last, "
        f"{cut(values[-1], 40)!r}, is used, and the address now holds it alone."
    )


DEMO_PAGES = ("Explore", "Gallery")  # the pages whose result view has demo mode (ui/demo.py)


def demo_not_here_sentence(page_title: str, demo: str | None) -> str | None:
    """One sentence when the link asks for demo mode (``demo=1``) on a page that has none, else
    None: Compare, Signals, Paraphrases, Steer and Dataset drew every control and the sidebar under
    a presenter's demo link without a word (seen in Chromium, 2026-12-06)."""
    if demo != "1" or page_title in (*DEMO_PAGES, "About"):  # About: text, no control to hide
        return None
    return (
        "Demo mode (demo=1 in the link) hides the controls around one circuit on Explore and the "
        f"Gallery; {page_title} has no demo mode, so its controls are shown."
    )


# Explore under a demo link before any circuit is drawn: the form stood there with nothing said
DEMO_WAITING = (
    "Demo mode (demo=1 in the link) hides these controls once a circuit is drawn: press Run, "
    "or open an example in the Gallery."
)

# a link naming a budget (one copied from a drawn circuit) whose circuit this server has not stored:
# the form stood under it with nothing said, Run the only cue (a link reloaded after the code
# changed, or one from another server: the store's keys hold the engine's digest)
LINK_NOT_STORED = (
    "This link names a circuit this server has not stored for these inputs: results are kept per "
    "version of circuitviz's code, so one computed before the code changed, or on another server, "
    "is computed again. Run computes it."
)

# a circuit over token positions has its own view, without demo mode: a demo link on one showed
# every control and said nothing (seen in Chromium on the IOI prompt's EAP-IG over positions)
DEMO_NO_POSITIONS = (
    "Demo mode (demo=1 in the link) has no view of a circuit over token positions, so this page's "
    "controls are shown; untick positions in the method's settings for a circuit it can show."
)


def link_budget_sentence(asked: int, shown: int, options, total: int, steps: str, outcome: str) -> str:
    """One sentence when a link's budget is not among ``options``, the budgets a page can show
    (``steps`` names them: "the budgets this run evaluated", "the slider's steps", "the budgets
    every method here evaluated"): the budget asked, the one shown (``outcome``: "opened at", "the
    comparison is shown at") and why. Explore's and Compare's sentences were two copies of this
    shape, the smallest budget named on one page and not on the other."""
    largest, smallest = max(options), min(options)
    nearest = ""
    if asked > largest:
        whole = " (every edge of the graph)" if largest >= total else ""
        why = f"more than the largest of {steps}, {largest:,}{whole}"
    elif asked < smallest:
        why = f"less than the smallest of {steps}, {smallest:,}"
    else:
        why, nearest = f"which is not one of {steps}", ", the nearest on a log scale"
    return f"The link asks for budget {asked:,}, {why}: {outcome} {shown:,}{nearest}."
