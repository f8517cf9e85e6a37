"""How tokens and answers are written, across tokenizers.

- The answer box's label asked for "(with its leading space)" on a word-level tokenizer, whose
  tokens carry none: the label now follows the tokenizer (``models.tokens.leading_spaces``).
- A SentencePiece token ('▁Mary') read alone came out '▁Mary' from a tokenizer saved with no
  decoder (the chips drew '▁Mary' where byte-level BPE's ' Mary' reads '·Mary') and 'Mary' from
  one whose decoder drops a text's first space (Llama's): both now read ' Mary', drawn '·Mary'.
- Titles and the demo's heading wrote the answer as its token's repr ("→ ' Mary'", "prefers
  ' Mary' to ' John'"): they now write the word as a reader reads it ("Mary"), and the chips and
  sentences keep the exact token.
- A byte-level BPE tokenizer saved with no decoder read its tokens in its byte alphabet: 'ĠMary'
  in the answer's label, its chip and the titles, where one with its decoder reads ' Mary'.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from circuitviz.bench.toy_models import IOI_TASK
from circuitviz.core.text import read_token
from circuitviz.models.adapter import adapter_of
from circuitviz.models.tokens import leading_spaces, token_text


def _sentencepiece(decoder: str):
    """A SentencePiece-style vocabulary ('▁' marks a word's space), decoded as ``decoder`` says:
    'none' (saved without a decoder), 'strip' (Llama's: '▁' as a space, the first one dropped) or
    'metaspace' (the first space kept)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["When", "Mary", "and", "John"]
    pieces = ["<bos>", "<unk>", *words, *("\u2581" + word for word in words), "\u2581\u2581"]
    backend = Tokenizer(models.WordLevel(vocab={p: i for i, p in enumerate(pieces)}, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="never")
    if decoder == "strip":
        backend.decoder = decoders.Sequence(
            [
                decoders.Replace("\u2581", " "),
                decoders.ByteFallback(),
                decoders.Fuse(),
                decoders.Strip(" ", 1, 0),
            ]
        )
    elif decoder == "metaspace":
        backend.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="never")
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", bos_token="<bos>")


@pytest.mark.parametrize("decoder", ["none", "strip", "metaspace"])
def test_a_sentencepiece_token_reads_with_its_space(decoder):
    from circuitviz.render import token_strip_html

    tokenizer = _sentencepiece(decoder)
    ids = tokenizer("When Mary and John", add_special_tokens=False).input_ids
    texts = [token_text(tokenizer, [token]) for token in ids]
    assert texts == ["When", " Mary", " and", " John"]
    chips = token_strip_html(texts)
    assert ">·Mary<" in chips and "\u2581" not in chips  # as byte-level BPE's ' Mary' is drawn
    two = tokenizer.convert_tokens_to_ids("\u2581\u2581")
    assert token_text(tokenizer, [two]) == "  "  # each marked space, the first one too


def _byte_level_without_decoder():
    """A byte-level BPE tokenizer trained in a moment, saved with no decoder."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=["<bos>"]
    )
    backend.train_from_iterator(
        ["When Mary and John went to the café, John gave a drink to Mary"] * 20, trainer
    )
    assert backend.decoder is None
    return PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<bos>")


def test_a_byte_level_token_reads_with_its_space_without_a_decoder():
    from circuitviz.render import token_strip_html

    tokenizer = _byte_level_without_decoder()
    (mary,) = tokenizer(" Mary", add_special_tokens=False).input_ids
    assert tokenizer.convert_ids_to_tokens(mary) == "\u0120Mary"  # 'ĠMary', the byte-level space mark
    assert token_text(tokenizer, [mary]) == " Mary"
    assert read_token(token_text(tokenizer, [mary])) == '"Mary"'
    ids = tokenizer("When Mary went to the café", add_special_tokens=False).input_ids
    assert token_text(tokenizer, ids) == "When Mary went to the café"  # each byte read back
    chips = token_strip_html([token_text(tokenizer, [token]) for token in ids])
    assert ">·Mary<" in chips and "\u0120" not in chips


def test_other_tokens_decode_as_before():
    """A word-level token and a text of several ids read as the tokenizer decodes them."""
    from circuitviz.bench.toy_models import word_tokenizer

    words = word_tokenizer()
    assert token_text(words, [words.convert_tokens_to_ids("Mary")]) == "Mary"
    tokenizer = _sentencepiece("metaspace")
    ids = tokenizer("When Mary", add_special_tokens=False).input_ids
    assert token_text(tokenizer, ids) == "When Mary"


def test_the_answer_label_follows_the_tokenizer(words, spaced):
    from circuitviz.ui.inputs import answer_label

    assert leading_spaces(adapter_of(words)) is False and leading_spaces(adapter_of(spaced)) is True
    assert answer_label(spaced) == "answer token (with its leading space)"
    assert "leading space" in answer_label(words) and "with its leading space" not in answer_label(words)


def test_an_answer_reads_as_a_word_in_titles():
    assert read_token(" Mary") == '"Mary"' and read_token("Mary") == '"Mary"'
    assert read_token(" New  York ") == '"New York"'
    # spaces alone: as the sentences quote them
    assert read_token(" ") == "' '" and read_token("\n") == "'\\n'"
    assert read_token(" \u202eevil") == "' \\u202eevil'"  # a direction override: its code, never applied


def test_a_prompt_in_a_title_is_double_quoted_with_its_codes_escaped():
    from circuitviz.core.text import title_quoted

    assert title_quoted("When Mary") == '"When Mary"'
    assert title_quoted('John\'s "x"') == '"John\'s \\"x\\""'
    assert title_quoted("a\nb\u202ec") == '"a\\nb\\u202ec"'  # a direction override as its code


def test_the_graph_title_and_the_headline_read_the_answer_as_a_word():
    from circuitviz.core.tasks import PromptTask
    from circuitviz.render import graph_title
    from circuitviz.render.demo import prompt_sentence

    result = SimpleNamespace(model_id="tiny", method="eap", task=IOI_TASK, point=lambda budget: None)
    title = graph_title(result, 10, None)
    assert title.endswith('→ "Mary"') and "' Mary'" not in title
    assert f'prompt: "{IOI_TASK.clean}" →' in title  # quoted as the answer is, not by its repr
    task = PromptTask("The capital is", "", " Paris", ("Paris",))  # two tokens that read as one word
    assert prompt_sentence(task, 1.0) == "The model reads \"The capital is\" and prefers ' Paris' to 'Paris'."


def test_the_line_under_a_box_keeps_the_pages_gap_below_it():
    """Streamlit pulls a markdown element up by a paragraph's margin, which the line's <div> lacks:
    "the token: ·the · the model gives it 4.8%" sat flush against "Corrupted prompt" (0 px in
    Chromium at 1,000, 1,500 and 2,000 px; 16 px, the page's gap, with the margin)."""
    from circuitviz.ui.inputs import token_line_html

    line = token_line_html("the token: x")
    assert line.startswith("<div style='") and "margin-bottom:1rem" in line and "the token: x" in line


def test_the_dataset_table_shows_each_answer_token_quoted():
    """The Dataset page's prompts table drew ' Mary' as 'Mary' (a cell hides a leading space), so the
    token and the word read the same; the display quotes it, the cell (sorting, the CSV) keeps it."""
    import pandas

    from circuitviz.ui import prompt_table

    table = pandas.DataFrame({"id": ["p0", "p1"], "prompt": ["a b", "c d"], "answer": [" Mary", "3"]})
    styled = prompt_table.prompt_display(table, {"prompt": {"width": 400}}, whole=False)
    drawn = styled.to_string()
    assert "' Mary'" in drawn and "'3'" in drawn
    assert list(styled.data["answer"]) == [" Mary", "3"]


def test_the_position_graphs_title_reads_the_answer_as_a_word(monkeypatch):
    from circuitviz.positions import present

    class Drawn(Exception):
        pass

    def drawn(*args, **options):
        raise Drawn(options["title"])

    monkeypatch.setattr(present, "from_position_circuit", drawn)
    result = SimpleNamespace(
        model_id="tiny",
        method="eap",
        task=IOI_TASK,
        point=lambda budget: None,
        position_circuit=lambda budget: SimpleNamespace(sum=lambda: 5),
        graph=None,
        position_scores=None,
        tokens={},
        attention=None,
    )
    with pytest.raises(Drawn) as title:
        present.result_attribution_graph(result, 5)
    assert str(title.value).endswith('→ "Mary"') and "' Mary'" not in str(title.value)
