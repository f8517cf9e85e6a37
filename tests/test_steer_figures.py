"""The Steer page's figures say what they are: the metric by name (a logit difference is not a
probability), what was zeroed, the random baseline as a mean over draws, the top tokens'
numbers as probabilities; and a task it cannot steer is said before any press."""

from __future__ import annotations

from circuitviz.core.tasks import PromptTask
from circuitviz.ui.steer import TOKENS_AFTER, TOKENS_BEFORE, outcome_rows, top_token_rows


def _outcome(drawn: int = 2, runs: int = 5) -> dict:
    return {
        "before": {"metric": 5.2329, "top_tokens": [[" me", 0.42975], [" my", 0.19043]]},
        "after": {"metric": 4.9720, "top_tokens": [[" me", 0.47472], [" my", 0.1568]]},
        "change": -0.2609,
        "random": {
            "runs": [{"features": [(9, i) for i in range(drawn)], "metric": 5.1} for _ in range(runs)],
            "mean_metric": 5.1369,
            "mean_change": -0.0960,
        },
    }


def test_each_figure_names_its_metric_and_what_was_zeroed():
    """The figures read 'metric before', 'after zeroing' and '2 random features' (a mean over five
    draws, said nowhere) over logit differences."""
    task = PromptTask("My grandmother gave it to", "", " me", (" him",), "logit_diff")
    rows = outcome_rows(_outcome(), task, 2)
    assert rows == [
        {"zeroed": "nothing (the model as it is)", "logit difference": "5.233", "change": ""},
        {"zeroed": "the 2 chosen features", "logit difference": "4.972", "change": "-0.261"},
        {
            "zeroed": "2 random features active on this prompt (mean of 5 draws)",
            "logit difference": "5.137",
            "change": "-0.096",
        },
    ]
    alone = PromptTask("My grandmother gave it to", "", " me", (), "logprob")
    assert "log-probability" in outcome_rows(_outcome(), alone, 1)[0]


def test_no_random_feature_to_draw_is_said_not_shown_as_a_mean():
    task = PromptTask("Hello", "", " world", (" there",), "logit_diff")
    assert outcome_rows(_outcome(drawn=0), task, 1)[2] == {
        "zeroed": "random features: no other feature is active at these layers",
        "logit difference": "—",
        "change": "",
    }


def test_the_top_tokens_are_said_to_be_probabilities():
    rows = top_token_rows(_outcome())
    assert "probability" in TOKENS_BEFORE and "probability" in TOKENS_AFTER
    assert rows[0] == {TOKENS_BEFORE: r"' me' 0\.430", TOKENS_AFTER: r"' me' 0\.475"}  # markdown-escaped


def test_a_top_token_is_not_drawn_as_markdown():
    """st.table reads its cells as markdown: '__init__' would have been a bold 'init'."""
    outcome = _outcome()
    outcome["before"]["top_tokens"] = [["__init__", 0.5]]
    outcome["after"]["top_tokens"] = [["*", 0.5]]
    row = top_token_rows(outcome)[0]
    assert row == {TOKENS_BEFORE: r"'\_\_init\_\_' 0\.500", TOKENS_AFTER: r"'\*' 0\.500"}


def test_a_node_that_drives_no_feature_keeps_its_row():
    """A node whose output raises no feature of its SAE on the prompt had no row at all: it was
    asked for and vanished from the table unsaid."""
    from circuitviz.ui.steer import feature_rows

    rows = feature_rows({"m5": {"sae": "s", "sae_layer": 9, "features": []}})
    assert [(row["node"], row["feature"]) for row in rows] == [("m5", "—")]
    assert rows[0]["what it does"] == "drives no feature of the layer-9 SAE on this prompt"


def test_a_circuit_found_for_another_answer_is_said_to_be():
    """Steer took any open circuit of the prompt: ' she' against ' he' was labelled as the circuit of
    ' the' against ' a' typed in the boxes, unsaid."""
    from circuitviz.ui.steer import other_task_note

    task = PromptTask("The nurse said that", "The pilot said that", " she", (" he",), "logit_diff")
    assert other_task_note(task, " she", " he") == ""
    note = other_task_note(task, " the", " a")
    assert note.startswith(" It was found for the answer ' she' against ' he', not for the answer and foil")
    assert other_task_note(task, " she", "") != ""  # the foil left out: another metric


def test_the_feature_table_is_text_that_wraps_with_its_share_in_percent():
    """Steer's features were a grid (``st.dataframe``) whose rows stay one line high: at 1,000 px its
    five columns ran 230 px past the table's 540 and "what it does" was cut at its first words. They
    are a table of text now: the share in whole percent, "—" where there is none, every cell escaped
    (``st.table`` reads markdown), the short columns kept to one line and the description let wide."""
    from circuitviz.ui.steer import (
        FEATURE_COLUMNS,
        FEATURE_TABLE_KEY,
        FEATURE_TABLE_STYLE,
        SCROLL_ROWS,
        SHARE,
        feature_rows,
        feature_table,
        feature_table_height,
    )

    feature = {
        "feature": 7,
        "label": "L2/7: fires on '__init__'",
        "share": 3.0,
        "activation": 4.0,
        "token": " *x",
    }
    labels = {
        "a1.h0": {"sae": "s", "sae_layer": 2, "features": [feature]},
        "m5": {"sae": "s", "sae_layer": 9, "features": []},
    }
    rows = feature_table(feature_rows(labels))
    assert [list(row) for row in rows] == [list(FEATURE_COLUMNS)] * 2
    assert rows[0] == {
        "node": r"a1\.h0",
        "feature": "L2/7",
        SHARE: "75%",
        "at": r"' \*x'",
        "what it does": r"fires on '\_\_init\_\_'",
    }
    assert rows[1][SHARE] == "—" and rows[1]["feature"] == "—"
    assert feature_table_height(rows) == "content"
    assert isinstance(feature_table_height(rows * SCROLL_ROWS), int)  # a long one scrolls down
    assert (
        f".st-key-{FEATURE_TABLE_KEY} td:nth-child(-n+4) p {{ white-space: nowrap; }}" in FEATURE_TABLE_STYLE
    )
    assert "max-width: none" in FEATURE_TABLE_STYLE


def test_the_logits_typed_as_a_node_get_a_row_that_says_why_they_have_no_feature():
    """'logits' in the Nodes box passed the node check, the labels left it out, and the table
    stood empty (or without its row beside others) with nothing said (seen in Chromium)."""
    from circuitviz.ui.steer import LOGITS_ROW, feature_rows

    m5 = {"sae": "s", "sae_layer": 9, "features": []}
    rows = feature_rows({"m5": m5}, ["logits", "m5", "m5"])
    assert [row["node"] for row in rows] == ["logits", "m5"]  # the typed order, each once
    assert rows[0]["what it does"] == LOGITS_ROW and rows[0]["feature"] == "—"
    assert [row["node"] for row in feature_rows({}, ["logits"])] == ["logits"]
