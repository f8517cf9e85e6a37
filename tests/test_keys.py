"""Content keys hold the engine's source: a result stored by other code is never served."""

from __future__ import annotations

from circuitviz.core import keys


def _digest_of(monkeypatch, folder) -> str:
    monkeypatch.setattr(keys, "PACKAGE", folder)
    keys.engine_digest.cache_clear()
    return keys.engine_digest()


def test_a_changed_source_file_changes_every_key(monkeypatch, tmp_path):
    (tmp_path / "methods").mkdir()
    (tmp_path / "methods" / "a.py").write_text("SCORE = 1\n")
    (tmp_path / "b.py").write_text("x = 2\n")
    (tmp_path / "notes.txt").write_text("not source")
    try:
        first = _digest_of(monkeypatch, tmp_path)
        key = keys.content_key(kind="discover", method="a")
        assert _digest_of(monkeypatch, tmp_path) == first  # stable for the same files
        (tmp_path / "notes.txt").write_text("changed, still not source")
        assert _digest_of(monkeypatch, tmp_path) == first
        (tmp_path / "methods" / "a.py").write_text("SCORE = 2\n")
        assert _digest_of(monkeypatch, tmp_path) != first
        assert keys.content_key(kind="discover", method="a") != key
        # a file moved keeps its bytes but not its path: another engine too
        (tmp_path / "methods" / "a.py").write_text("SCORE = 1\n")
        assert _digest_of(monkeypatch, tmp_path) == first
        (tmp_path / "methods" / "a.py").rename(tmp_path / "a.py")
        assert _digest_of(monkeypatch, tmp_path) != first
    finally:
        keys.engine_digest.cache_clear()


def test_the_real_package_digest_names_the_version():
    keys.engine_digest.cache_clear()
    assert keys.engine_digest().startswith(keys.__version__ + "+")


def test_the_pages_code_is_not_in_the_digest_and_keys_nothing(monkeypatch, tmp_path):
    """An edit to a page keeps every stored result: ``ui/`` is left out of the digest, and so it
    must make no content key of its own (what it stores is keyed and computed in ``entry.memos``;
    its drawings' in-process caches key with ``process_key``). The look at the real pages read the
    test's own folder until 2026-12-06 (PACKAGE was still patched), so two pages' content keys
    went unseen."""
    package = keys.PACKAGE
    (tmp_path / "ui").mkdir()
    (tmp_path / "ui" / "page.py").write_text("TITLE = 'a'\n")
    (tmp_path / "engine.py").write_text("x = 1\n")
    try:
        first = _digest_of(monkeypatch, tmp_path)
        (tmp_path / "ui" / "page.py").write_text("TITLE = 'b'\n")
        assert _digest_of(monkeypatch, tmp_path) == first
        (tmp_path / "engine.py").write_text("x = 2\n")
        assert _digest_of(monkeypatch, tmp_path) != first
    finally:
        keys.engine_digest.cache_clear()
    pages = [path for folder in keys.DISPLAY_ONLY for path in (package / folder).rglob("*.py")]
    assert len(pages) > 20  # the real package's pages, not the test's folder
    for path in pages:
        text = path.read_text(encoding="utf-8")
        assert "content_key" not in text and ".save_state(" not in text, path


def test_a_process_key_is_stable_and_holds_no_engine():
    assert keys.process_key(a=1, b=[2]) == keys.process_key(b=[2], a=1) != keys.process_key(a=2, b=[2])
    assert keys.process_key(a=1) != keys.content_key(a=1)  # the stored kind holds the engine too


def test_nothing_that_computes_what_is_stored_imports_the_display_only_folders():
    """``render/`` and ``export/`` are out of the digest, so a stored figure must never pass through
    them: only the pages, the drawings and exports themselves and the command line's file writer
    (``entry/outputs.py``, which writes ``--html`` and ``--neuronpedia`` files, never stored) may
    import them."""
    package = keys.PACKAGE
    import re

    pattern = re.compile(r"^\s*(from|import)\s+(circuitviz\.|\.+)(render|export)\b", re.MULTILINE)
    allowed = {"entry/outputs.py"}
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package).as_posix()
        if relative.split("/")[0] in keys.DISPLAY_ONLY or relative in allowed:
            continue
        assert not pattern.search(path.read_text(encoding="utf-8")), relative
