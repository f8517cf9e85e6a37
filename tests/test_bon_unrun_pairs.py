"""A pair the checks never ran on the model (its corruption of another token length) showed an
unticked "answer matches" in the Paraphrases table and False in "Candidates (CSV)", as though the
model answered it otherwise; the model was never asked (an audit in Chromium, 2026-12-06,
Gemma-3-270M: "When Bartholomew-Smithson and Bob ..." against its 15-token paraphrase). It is blank
now, and the caption under the table says what blank means."""

from __future__ import annotations

import pytest
from test_bon import TINY_PAIRS, run

from circuitviz.bench.toy_models import tiny_model
from circuitviz.ui import bon

LONGER = (
    "When Mary and John went to the shop , John gave a drink to\t"
    "When Bartholomew Smithson and Bob went to the shop , Carl gave a drink to"
)


@pytest.fixture(scope="module")
def tiny():
    return tiny_model("gpt2", n_layers=1, n_heads=2)


def test_a_pair_never_run_on_the_model_has_no_answer_verdict(tiny):
    result = run(tiny, "bon", budgets=[8], paraphrases=TINY_PAIRS + "\n" + LONGER, include_mismatched=False)
    pairs = result.details.pairs
    assert "tokens and its corruption" in " ".join(pairs[-1]["problems"])  # never run on the model
    rows = bon.table_rows(result)
    assert rows[-1]["answer matches"] is None and rows[-1]["model's answer"] == ""
    checked = [row["answer matches"] for row in rows[:-1]]
    assert all(isinstance(value, bool) for value in checked)  # the pairs the model read: ticked or not
    assert False in checked  # the tiny model answers one of them otherwise: still said so
    assert "blank where the checks never ran it" in bon.TABLE_SIDEWAYS


def test_a_line_without_a_pair_is_quoted_with_its_length_where_it_is_cut():
    """A typed line of 62 characters ending in '||' with nothing after it was quoted cut at 60 and
    unmarked, "'When Mary ... gave a drink to |'.", one of its two bars gone as though it were typed
    so (session 43); such a line is quoted whole now, and a longer one cut with its length said."""
    from circuitviz.query.pairs import ParaphraseError, paraphrase_records

    line = "When Mary and John went to the store, John gave a drink to ||"
    with pytest.raises(ParaphraseError) as refused:
        paraphrase_records(line)
    said = str(refused.value)
    assert said.startswith("Line 1 is not 'paraphrase<TAB>corrupted' or 'paraphrase || corrupted': ")
    assert said.endswith(f"{line!r}.")  # quoted whole: cut, it would be no shorter
    longer = line.replace("store", "store after a long walk through the town")
    with pytest.raises(ParaphraseError) as refused:
        paraphrase_records(longer)
    assert str(refused.value).endswith(f"… ({len(longer)} characters).")  # cut, and said to be
