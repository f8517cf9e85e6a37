"""A method's figures as the pages write them: a score's text, and the caveats written beside the
figures on every page that shows them (Explore, Compare, Paraphrases, the Gallery, the position
view), from the method's traits in the registry."""

from __future__ import annotations

import re

from ..core.text import joined, possessive
from ..methods.registry import method_traits


def caveats(result, point=None) -> list[str]:
    """What the method's figures need said beside them, from its traits in the registry: a
    circuit fitted to the prompt (its NDF here may flatter it), and an NDF of 0 at this budget
    from scores that do not estimate the answer's metric (a curve flat at 0 is said under the
    curve, ``curve_notes``)."""
    traits = method_traits(result.method)
    found = [traits.fitted_note] if traits.fitted_note else []
    flat = bool(result.curve) and max(p.ndf for p in result.curve) < 0.05
    if point is not None and abs(point.ndf) < 5e-4 and not traits.scores_estimate_metric and not flat:
        found.append(
            f"NDF {abs(point.ndf):.3f} at this budget: {possessive(traits.label)} edge scores do not estimate the "
            "change of the answer's metric under patching, so its strongest edges at a given budget need "
            f"not carry the answer; {_where_they_do(result)}."
        )
    return found


def _where_they_do(result, good_ndf: float = 0.8) -> str:
    """Where on the curve the method's circuits do carry the answer: its budgets reaching
    ``good_ndf`` short of the whole model, else its best circuit short of it, said as such (the
    sentence once said "the curve below shows the budgets where they do" of a curve whose best
    circuit short of the whole model was at NDF 0.11)."""
    graph = getattr(result, "graph", None)
    total = graph.n_edges if graph is not None else None
    short = [p for p in result.curve if (total is None or p.n_edges < total) and p.ndf == p.ndf]  # NaN out
    if any(p.ndf >= good_ndf for p in short):
        return f"the curve below shows the budgets where they do (NDF {good_ndf:g} or more)"
    if not short:
        return "on this curve only the whole model does"
    best = max(short, key=lambda p: (p.ndf, -p.n_edges))
    return (
        f"on this curve none short of the whole model does: the best keeps {best.n_edges:,} edges at "
        f"NDF {best.ndf:.2f}"
    )


_COUNT_WORDS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")
_FITTED_MARK = re.compile(r"^\|\s*([\w.+-]+) \(fitted to the prompt\)", re.MULTILINE)


def fitted_methods_sentence(fitted: dict[str, tuple[str, str]], table: str | None = None) -> str:
    """Which methods are marked *fitted to the prompt*, and why, from the registry's
    ``fitted_to_prompt`` ({name: (label, why)}), with the rows of a benchmark ``table`` (markdown)
    marked so that the registry does not hold (a variant, named after the method it runs)."""
    count = len(fitted)
    word = _COUNT_WORDS[count] if count < len(_COUNT_WORDS) else f"{count:,}"
    verb = "fits its circuit" if count == 1 else "fit their circuits"
    whys = "; ".join(why.replace("this prompt", "the prompt") for _, why in fitted.values())
    sentence = (
        f"{word.capitalize()} method{'' if count == 1 else 's'} {verb} to the prompt itself and "
        f"{'is' if count == 1 else 'are'} marked *fitted to the prompt*: {whys}."
    )
    if table is None:
        return sentence
    marked = list(dict.fromkeys(_FITTED_MARK.findall(table)))
    variants = []
    for name in marked:
        if name in fitted:
            continue
        base = max((known for known in fitted if name.startswith(known + "-")), key=len, default=None)
        variants.append(f"{name}, a variant of {fitted[base][0]}" if base else name)
    absent = [fitted[name][0] for name in fitted if name not in marked]
    if variants:
        sentence += f" Table (a) also marks {joined(variants)}."
    if absent:
        sentence += f" Table (a) has no row for {joined(absent)}."
    return sentence


def subordinate_headings(markdown: str) -> str:
    """A stored table's markdown with its headings two levels lower ("### (a) ..." as "##### (a)
    ..."): shown under a page's own subheader, they rendered as large as it (28 px; one level lower
    is 24 px, hardly smaller; two, 20 px). The file itself is left as its benchmark writes it
    (tests read it)."""
    return re.sub(r"^(#{1,4}) ", r"##\1 ", markdown, flags=re.MULTILINE)


# the page's background in each theme (Streamlit's own), behind a first column that stays in place
PAGE_BACKGROUND = {"light": "#ffffff", "dark": "#0e1117"}


def wide_tables_css(theme: str | None) -> str:
    """The style of a page of stored markdown tables wider than its column (About at 1,000 px): each
    scrolls sideways in its own box, and its first column (the row's name) stays in place, on the
    page's background (``theme``: "light" or "dark"; None reads as light) so the cells scrolled
    under it do not show through (at ``left: -1px``: at 0 a glyph of a header scrolled under it
    showed in the collapsed border's pixel at the box's left edge)."""
    background = PAGE_BACKGROUND.get(theme or "light", PAGE_BACKGROUND["light"])
    table = "[data-testid='stMarkdownContainer'] table"
    return (
        f"<style>{table} {{ display: block; max-width: 100%; overflow-x: auto; }}"
        f" {table} :is(th, td):first-child {{ position: sticky; left: -1px; z-index: 1;"
        f" background: {background}; box-shadow: inset -1px 0 0 rgba(128, 128, 128, 0.35); }}</style>"
    )
