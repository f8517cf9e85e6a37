"""The Signals page's decision table at 1,000 px: all ten columns in view (about 540 px of table),
under short headers whose help says what each holds."""

from __future__ import annotations

import json

from circuitviz.acc.tables import decision_rows
from circuitviz.ui.signals_view import DECISION_COLUMNS, decision_config

TABLE_PX = 540  # the main column at a 1,000 px window, less the borders


def test_every_column_of_the_decision_rows_has_a_short_header_and_help():
    decision = {
        "index": 0,
        "layer": 12,
        "head": 1,
        "destination_token": " to",
        "destination": 14,
        "source_token": " Mary",
        "source": 2,
        "weight": 0.41879,
        "threshold": 0.13333,
        "query": {"removals": [{}] * 8, "reached": True},
        "key": {"removals": [{}] * 19, "reached": True},
        "depth": 1,
    }
    row = decision_rows(type("Details", (), {"decisions": [decision]})())[0]
    assert list(DECISION_COLUMNS) == list(row)  # none left at its long name
    assert sum(width for _, width, _ in DECISION_COLUMNS.values()) <= TABLE_PX
    for name, (header, width, text) in DECISION_COLUMNS.items():
        # a header fits its width at about 7 px a character and the cell's padding (screenshots at
        # 1,000 px: 'weight' whole at 56 px, 'attention weight' cut at the page's edge)
        assert len(header) * 7 + 8 <= width, (name, header, width)
        assert text and not text[0].isupper() and not text.endswith(".")
    config = decision_config()
    assert config["attention weight"]["label"] == "weight" and config["threshold"]["width"] == 50


def test_the_signals_page_shows_the_decisions_under_the_short_headers(tmp_path, monkeypatch):
    from test_acc import PROMPT, signals_app

    at = signals_app(tmp_path, monkeypatch)
    at.text_area(key="w.prompt").set_value(PROMPT)
    at.number_input(key="signals.acc++.k").set_value(1.5)
    at.number_input(key="signals.acc++.n_random").set_value(1)
    next(button for button in at.button if button.label == "Run ACC++").click()
    at.run()
    assert not at.exception
    table = at.dataframe[0]
    shown = json.loads(table.proto.columns)  # the page's column_config, as the browser gets it
    assert len(table.value) >= 1
    for name in table.value.columns:
        header, width, text = DECISION_COLUMNS[name]
        assert shown[name] == {"label": header, "width": width, "help": text}
    assert sum(shown[name]["width"] for name in table.value.columns) <= TABLE_PX


def test_the_query_and_key_counts_say_they_count_directions_not_signal_rows():
    """Decision #0 of the IOI prompt on Gemma-3-270M read "query 8, key 19" over a signal table of
    3 query rows and 6 key rows: the counts are singular directions (the rows' ranks, 3 + 4 + 1),
    and their help said "signals" as the table's rows are called."""
    for name in ("query signals", "key signals"):
        text = DECISION_COLUMNS[name][2]
        assert "ranks in 'Its signal edges' added up" in text, name
