"""What the command line says of what it does: the budget ``discover``'s drawings (``--html``,
``--neuronpedia``) show and, when it chose that budget itself, why, once; and what ``--help`` says of
the commands and flags, against what they do."""

import functools
import json

import pytest

from circuitviz.entry import cli
from circuitviz.render import READABLE_EDGES, opening_view

TASK = [
    "--prompt",
    "When Mary and John went to the store , John gave a drink to",
    "--corrupted",
    "When Alice and Bob went to the store , Carl gave a drink to",
    "--answer",
    " Mary",
    "--foil",
    " John",
]


def _discover(tmp_path, capsys, *extra) -> str:
    argv = ["discover", *TASK, "--method", "eap", "--budgets", "5,20", "--transfer-paraphrases", "0"]
    assert cli.main([*argv, *extra]) == 0
    return capsys.readouterr().out


def test_the_readable_budget_of_both_position_drawings_is_said_once(tmp_path, capsys, cli_tiny):
    """--html and --neuronpedia draw one budget; its sentence was printed once for each file."""
    html, graph = tmp_path / "g.html", tmp_path / "g.json"
    printed = _discover(tmp_path, capsys, "--positions", "--html", str(html), "--neuronpedia", str(graph))
    reasons = [line for line in printed.splitlines() if line.startswith(("Opened at", "No circuit"))]
    assert len(reasons) == 1, printed
    assert html.exists() and graph.exists()
    # the sentence is discover's own ("in discover's table"): the files, read on their own, leave it out
    assert not any(start in html.read_text() for start in ("Opened at", "No circuit of at most"))
    assert "The metric: the logit difference of &#x27; Mary&#x27; over &#x27; John&#x27;" in html.read_text()
    assert f"wrote {html} (" in printed and f"wrote {graph} (" in printed


def test_the_budget_html_draws_by_itself_is_said_with_why(tmp_path, capsys, cli_tiny):
    """--html without --html-budget drew the app's opening budget (the smallest reaching NDF 0.8 with
    at most 200 edges, else the most faithful of at most 200) unsaid, while the help said 'NDF 0.8
    within 500 edges': on the IOI prompt the 462-edge circuit of NDF 0.889 was passed over for 90
    edges at NDF 0.793 with no word why."""
    html, out = tmp_path / "g.html", tmp_path / "c.json"
    printed = _discover(tmp_path, capsys, "--html", str(html), "--out", str(out))
    chosen = opening_view(json.loads(out.read_text())["curve"])
    assert chosen.reason in printed.splitlines()
    assert f"wrote {html} (budget {chosen.budget:,}:" in printed
    # the edge graph's file names the task its NDF was measured on, as the position graph's does
    assert "The metric: the logit difference of &#x27; Mary&#x27; over &#x27; John&#x27;" in html.read_text()


def test_the_help_of_html_budget_names_the_rule_it_follows(capsys):
    with pytest.raises(SystemExit):
        cli.main(["discover", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    said = text[text.index("--html-budget HTML_BUDGET the budget drawn") :][:400]
    assert f"NDF 0.8 with at most {READABLE_EDGES} edges" in said and "500" not in said


def test_the_top_help_names_every_command(capsys):
    """`circuitviz --help` began 'Command line: ``python -m circuitviz discover|evaluate|methods|models``',
    leaving batch and planted-bench out and showing the docstring's markup."""
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    first = capsys.readouterr().out.split("positional arguments")[0]
    assert "``" not in first
    for command in cli.COMMANDS:
        assert command in first.split("Command line:")[1].split("\n")[0], command


def test_evaluates_help_does_not_send_the_corrupted_prompt_to_discover(capsys):
    """evaluate --help said of --corrupted 'discover proposes one when omitted', on the command
    that takes it from the circuit file (or proposes one itself for another prompt)."""
    with pytest.raises(SystemExit):
        cli.main(["evaluate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    said = text[text.index("--corrupted CORRUPTED q'") :][:200]
    assert "discover" not in said
    assert "when omitted, the circuit file's for its own prompt, else proposed as the app does" in said
    assert "default: the circuit file's own task, for every task flag not given" in text


def test_the_help_of_paraphrases_says_the_command_line_reads_a_file(capsys):
    """--paraphrases FILE reads the file (docs/cli.md), but its help, the form's sentence, said only
    'the pairs as text', so `--paraphrases "a<TAB>b"` looked right and was refused as a missing file."""
    with pytest.raises(SystemExit):
        cli.main(["discover", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    said = text[text.rindex("--paraphrases SETTING_PARAPHRASES") :][:300]
    assert "--paraphrases FILE reads them from that file" in said


def test_the_sentences_printed_send_no_one_to_the_apps_slider(tmp_path, capsys, cli_tiny, monkeypatch):
    """The opening sentences are the app's, and the app's end "Larger budgets are on the slider and
    the curve." or "(at 5,000 units, on the slider)": discover printed them as they were, for a page
    with neither; the larger budgets are in discover's own table."""
    import circuitviz.render as render

    small = functools.partial(render.opening_view, max_edges=10)  # the 20-edge circuit is too big to read
    monkeypatch.setattr(render, "opening_view", small)
    printed = _discover(tmp_path, capsys, "--html", str(tmp_path / "g.html"))
    assert "Larger budgets are in discover's table." in printed and "slider" not in printed
    positions = ["--positions", "--budgets", "5,20,300", "--html", str(tmp_path / "p.html")]
    printed = _discover(tmp_path, capsys, *positions)
    assert "units, in discover's table)" in printed and "slider" not in printed
    # the app's pages keep their own words
    assert render.opening_view([{"budget": 5, "n_edges": 3, "ndf": 0.2}]).reason.endswith(
        "Larger budgets are on the slider and the curve."
    )


def test_usage_lines_name_the_command_as_it_was_started():
    """Run as the installed ``circuitviz`` script, usage read 'python -m circuitviz ...'."""
    from circuitviz.entry.parser import program_name

    assert program_name("/usr/local/bin/circuitviz") == "circuitviz"
    assert program_name("/work/circuitviz/__main__.py") == "python -m circuitviz"
    assert program_name("-m") == "python -m circuitviz"


def test_a_prompt_no_template_family_knows_is_said_once(tmp_path, capsys, cli_tiny):
    """paraphrase-pruning on a prompt outside the template families printed the same sentence
    ('The prompt matches none of the built-in template families ...') twice: in the method's own
    lines and again under the held-out transfer."""
    argv = [
        "discover",
        "--prompt",
        "the cat sat on the",
        "--corrupted",
        "the ball sat on the",
        "--answer",
        " mat",
        "--foil",
        " park",
        "--method",
        "paraphrase-pruning",
        "--budgets",
        "5",
        "--out",
        str(tmp_path / "c.json"),
    ]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out.splitlines()
    family = [line for line in printed if "matches none of the built-in template families" in line]
    assert len(family) == 1, printed
    assert "  budget 5: none measured" in printed


@pytest.mark.parametrize("method", ["acc++", "flow-routes"])
def test_html_of_a_method_that_needs_no_corrupted_prompt_is_written(tmp_path, capsys, cli_tiny, method):
    """``discover --method acc++ --html`` on a prompt with no corrupted prompt printed its table,
    wrote its JSON, then ended 'error: The corrupted prompt is empty' with status 2 and no page: the
    page's logit-lens labels prepared the task as if it needed one."""
    html = tmp_path / "g.html"
    argv = ["discover", "--prompt", TASK[1], "--answer", " Mary", "--method", method, "--budgets", "5,20"]
    assert cli.main([*argv, "--transfer-paraphrases", "0", "--html", str(html)]) == 0
    printed = capsys.readouterr()
    assert html.exists() and f"wrote {html} (" in printed.out, printed.err


def test_discovers_budgets_help_says_they_count_units_with_positions(capsys):
    """--budgets said 'edge budgets' while discover --positions reads them as (edge, position)
    units, as its table's header and the app's 'unit budgets' box do."""
    with pytest.raises(SystemExit):
        cli.main(["discover", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "edge budgets, comma separated ((edge, position) units with --positions)" in text
