"""The Paraphrases page with the user's own list (an audit in Chromium, 2026-12-06, Gemma-3-270M):

- one paraphrase of 731 characters made both text columns of the pairs table 720 px wide, so even on
  a 2,000 px page the columns right of them (candidate, answer matches, the model's answer, source,
  what the corruption replaces) were off its right edge for every row, and the long row showed its
  first lines with nothing saying there was more;
- the estimate above Run priced a list typed after a run of the same prompt as though all its pairs'
  scores were stored ("about 5 s ... without the paraphrases' scores and evaluations an earlier run
  stored"): only the prompt's pair was, and the run took 71 s."""

from __future__ import annotations

import pytest
from test_bon import TINY_PAIRS, run

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.methods import get_method
from circuitviz.methods.bon import stored_share
from circuitviz.query.pairs import paraphrase_records
from circuitviz.services.store import ResultStore
from circuitviz.ui import bon

LONG = (
    "When Mary and John went to the store, after a long morning of "
    + " ".join(["walking slowly past the old houses and the quiet gardens"] * 12)
    + ", John gave a drink to"
)
SHORT_COLUMNS = ("candidate", "answer matches", "model's answer", "source", "replaced")


def _row(pair: str, clean: str, source: str = "file") -> dict:
    return {
        "pair": pair,
        "paraphrase": clean,
        "corrupted": clean.replace("Mary", "Alice").replace("John went", "Bob went"),
        "candidate": True,
        "answer matches": True,
        "model's answer": "' Mary'",
        "source": source,
        "replaced": "Mary → Alice, John → Bob, John → Carl",
    }


def test_a_long_paraphrase_leaves_the_other_columns_on_the_page_and_is_said_cut():
    rows = [
        _row("q", IOI_TASK.clean, "original"),
        _row("p1", LONG),
        _row("p2", IOI_TASK.clean.replace("store", "park")),
    ]
    widths = {name: config["width"] for name, config in bon.table_widths(rows).items()}
    assert sum(widths.values()) <= bon.WIDE_FRAME_PX, widths  # every column on a 1,500 px page
    assert all(widths[name] > 0 for name in SHORT_COLUMNS)
    assert bon.cut_rows(rows) == ["p1"]
    said = bon.cut_rows_sentence(rows)
    assert said.startswith("A row shows the first 5 lines of its texts; longer: p1 (")
    assert f"({len(LONG):,} and " in said and "Double-click a text to read it whole" in said
    # texts that fit their rows: nothing cut, nothing said
    assert bon.cut_rows(rows[:1] + rows[2:]) == [] and bon.cut_rows_sentence(rows[:1] + rows[2:]) == ""


@pytest.fixture(scope="module")
def tiny():
    return tiny_model("gpt2", n_layers=1, n_heads=2)


def test_a_typed_list_is_priced_with_only_the_pairs_the_store_holds(tiny, tmp_path):
    store = ResultStore(tmp_path)
    first = TINY_PAIRS.splitlines()[0]
    model_id = run(
        tiny, "bon", store=store, budgets=[8], paraphrases=first
    ).model_id  # the prompt's pair and this
    method = get_method("bon")
    settings = {"paraphrase_source": "file", "include_mismatched": True, "ig_steps": 5, "cache_scores": True}
    listed = method.as_config({**settings, "paraphrases": paraphrase_records(TINY_PAIRS)})
    assert stored_share(tiny, model_id, IOI_TASK, listed, store) == (2, 4)  # the prompt and the first pair
    work = method.stored_work(tiny, model_id, IOI_TASK, listed, 16, 1, store)
    assert (
        work.timings["scoring_s"] == pytest.approx(0.5) and work.what == "the scores of the 2 of its 4 pairs"
    )
    # the same list again: every pair stored, priced off whole as before
    again = method.as_config({**settings, "paraphrases": paraphrase_records(first)})
    assert stored_share(tiny, model_id, IOI_TASK, again, store) == (2, 2)
    assert method.stored_work(tiny, model_id, IOI_TASK, again, 16, 1, store).timings["scoring_s"] == 1.0


def test_a_left_out_pair_names_the_answer_once_when_the_prompt_gives_it():
    """ "the model answers ' John' here, neither the answer ' Mary' nor its answer on the original
    prompt (' Mary')" named one token twice, as though the two were different."""
    from circuitviz.query.pairs import ParaphrasePair

    pair = ParaphrasePair(
        "When Mary and John went to the store, Mary gave a drink to", "x", " Mary", (" John",), "file"
    )
    pair.answer_matches, pair.model_answer, pair.original_answer = False, " John", " Mary"
    assert (
        pair.reason
        == "the model answers ' John' here, not the answer ' Mary' it gives on the original prompt"
    )
    pair.original_answer = " the"  # the model's answer on the prompt is another: both named
    assert pair.reason == (
        "the model answers ' John' here, neither the answer ' Mary' nor its answer on the original prompt (' the')"
    )


def test_what_a_corruption_replaces_keeps_typed_tags_whole():
    """'<b>John</b>' corrupted into '<b>Bob</b>' read "b>John</b → b>Bob</b" in the table's
    replaced column: the brackets both words carry were taken for a sentence's punctuation."""
    said = bon.replaced_words(
        "When Mary and <b>John</b> went to the store, John gave",
        "When Alice and <b>Bob</b> went to the store, Carl gave",
    )
    assert said == "Mary → Alice, <b>John</b> → <b>Bob</b>, John → Carl"
    assert bon.replaced_words("In (Japan), the", "In (France), the") == "Japan → France"  # punctuation still


def test_what_a_corruption_replaces_keeps_a_markdown_link_whole():
    """'[John](https://evil.example)' corrupted into '[Bob](https://evil.example)' read
    "John](https://evil.example → Bob](https://evil.example" (session 43): the bracket opening the
    link and the parenthesis closing it were taken off as a sentence's punctuation."""
    said = bon.replaced_words(
        "**Mary** and [John](https://evil.example) went, John gave",
        "**Alice** and [Bob](https://evil.example) went, Carl gave",
    )
    assert (
        said
        == "**Mary** → **Alice**, [John](https://evil.example) → [Bob](https://evil.example), John → Carl"
    )
    assert bon.replaced_words("a (John) b", "a (Bob) b") == "John → Bob"  # a whole bracket still goes
    assert bon.replaced_words("f(x) = 1", "g(x) = 1") == "f(x) → g(x)"


def test_what_a_corruption_replaces_when_the_words_differ_in_number():
    """ "The Eiffel Tower is located in the city of" corrupted into "The Colosseum is located in the
    city of" read "8 words (of 9)" in the replaced column (session 43, the factual template's every
    pair), as though eight of the nine words were replaced; one name was."""
    said = bon.replaced_words(
        "The Eiffel Tower is located in the city of", "The Colosseum is located in the city of"
    )
    assert said == "Eiffel Tower → Colosseum"
    assert (
        bon.replaced_words("If you visit the Eiffel Tower, you are", "If you visit the Colosseum, you are")
        == "Eiffel Tower → Colosseum"
    )  # the comma both carry taken off, as "Japan," and "France,"
    assert bon.replaced_words("one two three", "one three") == "two dropped"
    assert bon.replaced_words("one three", "one two three") == "two added"


def test_a_paraphrase_cleared_in_the_table_is_named_beside_the_button():
    """p1's paraphrase cleared in the table and "Use the edited paraphrases" pressed: the sentence read
    "The form above now holds 2 paraphrases (source: file); p2, p3 and p4 are not among them: this run
    left them out ...", so p1 read as handed over; clearing it had removed it."""
    said = bon.next_run_sentence(2, [("p2", "it repeats the prompt"), ("p3", "x")], ["p1"])
    assert said.startswith(
        "The form above now holds 2 paraphrases (source: file); p1 is not among them: its paraphrase "
        "was cleared in the table; p2 and p3 are not among them either: this run left them out"
    )
    said = bon.next_run_sentence(1, [], ["p1", "p5"])
    assert said == (
        "The form above now holds 1 paraphrase (source: file); p1 and p5 are not among them: their "
        "paraphrases were cleared in the table; press Run Best-of-N to score them."
    )
    assert "cleared" not in bon.next_run_sentence(3, [])


def test_a_rerun_of_a_list_is_priced_without_the_pairs_the_checks_left_out(tiny, tmp_path):
    """A pair the checks leave out (the model answers it otherwise) is never scored or stored, and
    a rerun of the same list priced it as work to do ("without the scores of the 2 of its 4 pairs"
    where nothing was left to score); the run keeps its checks, and the estimate reads them."""
    store = ResultStore(tmp_path)
    result = run(tiny, "bon", store=store, budgets=[8], include_mismatched=False)
    left_out = len(result.details.pairs) - len(result.details.candidates)
    assert left_out > 0  # the tiny model answers some of the pairs otherwise
    method = get_method("bon")
    settings = {"paraphrase_source": "file", "include_mismatched": False, "ig_steps": 5, "cache_scores": True}
    again = method.as_config({**settings, "paraphrases": paraphrase_records(TINY_PAIRS)})
    stored, listed = stored_share(tiny, result.model_id, IOI_TASK, again, store)
    assert stored == listed == len(result.details.candidates)
    assert (
        method.stored_work(tiny, result.model_id, IOI_TASK, again, 16, 1, store).timings["scoring_s"] == 1.0
    )
    # with mismatched answers let in, the same pairs are work to do (the checks kept both verdicts)
    mismatched = method.as_config({**settings, "include_mismatched": True, "paraphrases": again.paraphrases})
    assert stored_share(tiny, result.model_id, IOI_TASK, mismatched, store)[1] > listed


def test_the_form_caption_counts_the_users_list():
    """The caption under the form said "9 paraphrases" (the generated sources' default) beside a
    list of 2 typed pairs, which the run and the estimate count."""
    config = get_method("bon").as_config(
        {
            "paraphrase_source": "file",
            "paraphrases": paraphrase_records(TINY_PAIRS.splitlines()[0] + "\n" + TINY_PAIRS.splitlines()[1]),
        }
    )
    note = bon.page_defaults_note(10_342, config)
    assert "6 budgets, the 2 paraphrases of your list and" in note and "9 paraphrases" not in note
    assert "9 paraphrases" in bon.page_defaults_note(10_342, get_method("bon").as_config({}))


def test_a_list_is_priced_without_the_pairs_its_text_leaves_out():
    """A pair listed twice, or whose corruption is the paraphrase itself, is checked and left out,
    never scored: the estimate priced scoring each of them."""
    from circuitviz.core.graph import GraphSpec
    from circuitviz.methods.bon import PARAPHRASE_CHECK_PASSES

    method = get_method("bon")
    first, second = TINY_PAIRS.splitlines()[:2]
    clean = first.split("\t")[0]
    settings = {"paraphrase_source": "file", "ig_steps": 5}
    alone = method.as_config({**settings, "paraphrases": paraphrase_records(first)})
    listed = method.as_config(
        {**settings, "paraphrases": paraphrase_records(f"{first}\n{first}\n{clean}\t{clean}")}
    )
    spec = GraphSpec(n_layers=2, n_heads=2)
    cost_alone, cost_listed = method.estimate(alone, spec, 16, 3), method.estimate(listed, spec, 16, 3)
    assert cost_listed.passes - cost_alone.passes == pytest.approx(2 * PARAPHRASE_CHECK_PASSES)
    assert cost_listed.n_paraphrases == 3  # what the run checks, as the estimate's line says
    both = method.as_config({**settings, "paraphrases": paraphrase_records(f"{first}\n{second}")})
    assert method.estimate(both, spec, 16, 3).passes > cost_listed.passes  # two distinct pairs scored
