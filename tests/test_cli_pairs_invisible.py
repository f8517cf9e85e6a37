"""A paraphrase file (``--paraphrases``, ``--transfer-file``) whose pairs hold invisible characters
(a zero-width space, a direction override) ran unsaid on the command line, while ``discover`` names
them in a prompt and the Paraphrases page in its table: one line names the pairs now (2026-12-06)."""

from __future__ import annotations

from circuitviz.entry.arguments import pairs_text


def test_the_pairs_with_invisible_characters_are_named(tmp_path, capsys):
    path = tmp_path / "pairs.tsv"
    path.write_text(
        "When Tom\u200b and Anna went\tWhen Jim and Kate went\nA b\tC d\nX\u202eY\tZ W\n", encoding="utf-8"
    )
    pairs_text("--transfer-file", path)
    assert capsys.readouterr().err == (
        f"--transfer-file {path}: 2 pairs of 3 (p1 and p3) hold invisible characters (U+200B ZERO WIDTH "
        "SPACE, U+202E RIGHT-TO-LEFT OVERRIDE): the model reads them; they run as written.\n"
    )


def test_plain_pairs_say_nothing(tmp_path, capsys):
    path = tmp_path / "pairs.tsv"
    path.write_text("When Tom and Anna went\tWhen Jim and Kate went\n", encoding="utf-8")
    pairs_text("--paraphrases", path)
    assert capsys.readouterr().err == ""
