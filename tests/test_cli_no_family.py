"""A prompt no template family knows: the command line's sentence names its flags. Until
2026-12-06 `discover` said "give paraphrases in a file or use the openai source", the app's words,
naming no flag: a method's paraphrases come from --paraphrase-source file --paraphrases FILE (or
--paraphrase-source openai), a held-out transfer's from --transfer-file FILE."""

from __future__ import annotations

import json

from circuitviz.entry import cli
from circuitviz.query.templates import NO_FAMILY, with_flags

TASK = [
    "--prompt",
    "the cat sat on the",
    "--corrupted",
    "the ball sat on the",
    "--answer",
    " mat",
    "--foil",
    " park",
]
HEAD = "The prompt matches none of the built-in template families"
METHOD_WAY = "give paraphrase pairs in a file (--paraphrase-source file --paraphrases FILE) or use the openai source (--paraphrase-source openai)."
TRANSFER_WAY = "give paraphrase pairs of your own with --transfer-file FILE to measure the held-out transfer."


def test_a_method_that_needs_template_paraphrases_names_the_flags(cli_tiny, capsys):
    assert cli.main(["discover", *TASK, "--method", "average", "--budgets", "5"]) == 2
    (line,) = [line for line in capsys.readouterr().err.splitlines() if HEAD in line]
    assert line.startswith("error: ") and line.endswith(METHOD_WAY)
    assert "give paraphrases in a file or use" not in line


def test_the_held_out_transfer_names_transfer_file(cli_tiny, capsys, tmp_path):
    argv = ["discover", *TASK, "--method", "eap", "--budgets", "5", "--out", str(tmp_path / "c.json")]
    assert cli.main(argv) == 0
    (line,) = [line for line in capsys.readouterr().out.splitlines() if HEAD in line]
    assert line.endswith(TRANSFER_WAY)


def test_the_app_keeps_its_own_words():
    assert NO_FAMILY.endswith("give paraphrases in a file or use the openai source.")
    assert (
        with_flags(f"Transfer: {NO_FAMILY} More.")
        == f"Transfer: {NO_FAMILY[: NO_FAMILY.index('; give')]}; {METHOD_WAY} More."
    )
    assert with_flags("other text", transfer=True) == "other text"


def test_the_json_transfer_note_names_transfer_file_as_the_line_does(cli_tiny, capsys, tmp_path):
    """Until 2026-12-07 the file's `transfer.note` kept the app's "or use the openai source", a
    setting of the methods' own paraphrases that the held-out transfer never reads, while the
    printed line beside it named --transfer-file."""
    out = tmp_path / "c.json"
    assert cli.main(["discover", *TASK, "--method", "eap", "--budgets", "5", "--out", str(out)]) == 0
    note = json.loads(out.read_text(encoding="utf-8"))["transfer"]["note"]
    assert note.startswith(HEAD) and note.endswith(TRANSFER_WAY)
    assert "openai" not in note
