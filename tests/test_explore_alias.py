"""``/explore`` (the default page's own name, a hidden alias of ``/``) forwards a link to the
default page: every sentence about the link's values is said there as on ``/``. It forwarded the
values it had read instead, so a link's unknown model, a parameter given twice or ``demo=yes``
opened Explore on the default model, the last value or no demo mode without a word (seen in
Chromium, 2026-12-06)."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402
from streamlit.util import calc_hash  # noqa: E402

from circuitviz.ui.pagelist import DEFAULT  # noqa: E402

pytestmark = pytest.mark.usefixtures("tiny_app")

HOSTILE = '<img src=x onerror="top.__pwned=1">**bold**'


def _opened(alias: bool, query: list[tuple[str, str]]) -> AppTest:
    at = AppTest.from_file("../app.py", default_timeout=300)
    for name, value in query:  # a repeated parameter: every value, as a browser sends them
        at.query_params[name] = [*at.query_params.get(name, []), value]
    if alias:
        at._page_hash = calc_hash(DEFAULT)  # the hidden page at /explore (its callable's hash)
    return at.run()


def _said(at: AppTest) -> list[str]:
    return sorted(w.value.replace("\\", "") for w in at.warning)  # markdown-escaped


def test_the_alias_says_what_the_default_page_says_of_a_links_values():
    query = [
        ("model", HOSTILE),
        ("prompt", "When Mary and John went"),
        ("prompt", "The cat"),
        ("demo", "yes"),
    ]
    direct, alias = _opened(False, query), _opened(True, query)
    assert not direct.exception and not alias.exception, (direct.exception, alias.exception)
    said = _said(direct)
    assert any("names a model this app does not have" in w for w in said), said
    assert any("gives prompt 2 times" in w for w in said), said
    assert any("demo" in w and "not 1 (on) or 0 (off)" in w for w in said), said
    assert _said(alias) == said
