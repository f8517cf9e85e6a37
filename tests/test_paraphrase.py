"""Paraphrase sources: file formats, template families, the LLM source against a local stub server
speaking the OpenAI chat API, and per-pair validation against the model."""

import itertools
import json
import random
import re
import threading
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import torch

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.core.tasks import PromptTask, TaskError
from circuitviz.models.adapter import adapter_of
from circuitviz.query.checks import _flag_weak_corruptions, ends_with_answer, model_answer, validate_pairs
from circuitviz.query.families import EXAMPLE_TASKS, FAMILIES, family, recognise
from circuitviz.query.llm_source import llm_paraphrases, parse_llm_reply
from circuitviz.query.pairs import (
    ParaphraseError,
    ParaphrasePair,
    load_paraphrases,
    parse_paraphrases,
    to_jsonl,
)
from circuitviz.query.sources import gather_paraphrases
from circuitviz.query.templates import propose_answer, propose_corruption, template_paraphrases
from circuitviz.services.assets import gallery_dir, paraphrases_dir


def token_count(model, text: str) -> int:
    return adapter_of(model).token_count(text)


TINY_PAIRS = [
    ("When John and Mary went to the store , John gave a drink to", "When Bob and Alice went to the store , Carl gave a drink to"),
    ("When Mary and John went to the park , John gave a ball to", "When Alice and Bob went to the park , Carl gave a ball to"),
]  # fmt: skip


@pytest.fixture(scope="module")
def tiny():
    return tiny_model("gpt2", seed=0)


# ----- user-given pairs -----------------------------------------------------------------------
def test_every_file_format_gives_the_same_pairs():
    jsonl = "\n".join(json.dumps({"clean": c, "corrupted": d}) for c, d in TINY_PAIRS)
    as_list = json.dumps([{"paraphrase": c, "corrupted": d} for c, d in TINY_PAIRS])
    csv_text = "clean,corrupted\n" + "\n".join(f'"{c}","{d}"' for c, d in TINY_PAIRS)
    typed = "# typed in the app\n" + "\n".join(f"{c}\t{d}" for c, d in TINY_PAIRS[:1])
    typed += "\n" + " || ".join(TINY_PAIRS[1])
    for text in (jsonl, as_list, csv_text, typed):
        pairs = parse_paraphrases(text, IOI_TASK)
        assert [(p.clean, p.corrupted) for p in pairs] == TINY_PAIRS
        assert all(
            p.answer == IOI_TASK.answer and p.foils == IOI_TASK.foils and not p.problems for p in pairs
        )
        assert all(p.source == "file" for p in pairs)


def test_typed_lines_may_begin_with_a_bracket_or_a_brace():
    # "[x](https://evil) When ... || ..." was read as a JSON list and refused as "not valid JSON
    # (Expecting value at line 1)", though every line was a typed pair (an audit of the page)
    lines = [(f"[x](https://evil) {c}", f"[x](https://evil) {d}") for c, d in TINY_PAIRS[:1]]
    lines += [("{Narrator} " + c, "{Narrator} " + d) for c, d in TINY_PAIRS[1:]]
    for first, second in (lines, lines[::-1]):
        for separator in (" || ", "\t"):
            text = f"{separator.join(first)}\n{separator.join(second)}"
            pairs = parse_paraphrases(text, IOI_TASK)
            assert [(p.clean, p.corrupted) for p in pairs] == [first, second]
    # JSON that does not decode, with no typed pair on its first line, is still said to be JSON
    with pytest.raises(ParaphraseError, match="not valid JSON"):
        parse_paraphrases('[{"clean": "a || b", "corrupted": "c"},\n{oops}]', IOI_TASK)
    # a typed first line and a bad later one: the bad line is named, as for any typed list
    with pytest.raises(ParaphraseError, match="Line 2 is not"):
        parse_paraphrases("[x] a || [x] b\n[x] c", IOI_TASK)


def test_jsonl_round_trip_and_other_answers_are_flagged():
    pairs = parse_paraphrases(to_jsonl(parse_paraphrases("\t".join(TINY_PAIRS[0]), IOI_TASK)), IOI_TASK)
    assert (pairs[0].clean, pairs[0].corrupted) == TINY_PAIRS[0]
    other = parse_paraphrases(json.dumps({"clean": "a", "corrupted": "b", "answer": " John"}), IOI_TASK)
    assert other[0].problems and "must keep them" in other[0].problems[0]


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "empty"),
        ('{"clean": "x", "corrupted": "y"}\n{"clean": oops}', "Line 2 .*not valid JSON"),
        ('{"corrupted": "y"}', "Line 1 has no paraphrase"),
        ('[{"clean": "x"}]', "Item 1 has no 'corrupted'"),
        ("only one column here", "Line 1 is not"),
        ('{"clean": "x", "corrupted": "y", "foils": 3}', "'foils' must be a list"),
        # a value of another kind is named as such, never read as missing or turned into text
        ('{"paraphrase": 1, "corrupted": "y"}', "'paraphrase' must be text in quotes, not 1"),
        ('{"clean": "x", "corrupted": ["y"]}', r"'corrupted' must be text in quotes, not \["),
        ('{"clean": "x", "corrupted": "y", "answer": 5}', "'answer' must be text in quotes, not 5"),
    ],
)
def test_bad_files_name_the_problem(text, message):
    with pytest.raises(ParaphraseError, match=message):
        parse_paraphrases(text, IOI_TASK)


def test_file_source_without_text_says_so(tiny):
    with pytest.raises(ParaphraseError, match="needs paraphrases"):
        gather_paraphrases(tiny, IOI_TASK, "file", text="  ")
    with pytest.raises(ParaphraseError, match="Unknown paraphrase source"):
        gather_paraphrases(tiny, IOI_TASK, "carrier-pigeon")


ASSETS = paraphrases_dir()
_TEXT_MCQ = "Question: What is the capital of Japan?\nA. Tokyo\nB. Paris\nC. Rome\nD. Berlin\nAnswer:"
ASSET_TASKS = {
    "ioi.jsonl": EXAMPLE_TASKS["ioi"],
    "factual.jsonl": EXAMPLE_TASKS["factual"],
    "arithmetic.jsonl": EXAMPLE_TASKS["arithmetic"],
    "multiple_choice.jsonl": PromptTask(_TEXT_MCQ, _TEXT_MCQ.replace("Japan", "Italy"), " Tokyo", (" Rome",)),
}


@pytest.mark.parametrize("path", sorted(ASSET_TASKS))
def test_the_example_files_hold_pairs_for_their_prompt(path):
    task = ASSET_TASKS[path]
    pairs = load_paraphrases(ASSETS / path, task)
    assert len(pairs) == 9 and not any(p.problems for p in pairs)
    assert all(p.clean != task.clean and p.corrupted != p.clean for p in pairs)
    assert json.dumps(task.clean) in (ASSETS / path).read_text(encoding="utf-8").splitlines()[0]


# ----- validation ----------------------------------------------------------------------------
def _top1(model, text):
    with torch.no_grad():
        return int(model(model.to_tokens(text))[0, -1].argmax())


def test_validation_flags_each_problem_and_reads_the_model(tiny):
    pairs = parse_paraphrases(
        "\n".join(
            [
                "\t".join(TINY_PAIRS[0]),
                "\t".join(TINY_PAIRS[1]),
                "The cat sat on the mat\tThe cat sat on",  # unequal lengths
                "\t".join(TINY_PAIRS[0]),  # a repeat
                IOI_TASK.clean + "\t" + IOI_TASK.corrupted,  # the prompt itself
            ]
        ),
        IOI_TASK,
    )
    checked = validate_pairs(tiny, IOI_TASK, pairs)
    assert [p.same_length for p in checked] == [True, True, False, True, True]
    assert "7 tokens and its corruption 5" in checked[2].problems[0]
    assert "repeats" in checked[3].problems[0] and "repeats" in checked[4].problems[0]
    original_top = _top1(tiny, IOI_TASK.clean)
    for pair in checked[:2]:
        top = _top1(tiny, pair.clean)
        assert pair.model_answer == tiny.tokenizer.decode([top])
        answer_id = tiny.to_single_token(" Mary")
        assert pair.answer_matches == (top in (original_top, answer_id))
        assert pair.usable() == pair.answer_matches
        assert pair.usable(include_mismatched=True)
        logits = tiny(tiny.to_tokens(pair.clean))[0, -1]
        answer, foil = tiny.to_single_token(" Mary"), tiny.to_single_token(" John")
        assert pair.metric_clean == pytest.approx(float(logits[answer] - logits[foil]), abs=1e-5)
    assert not checked[2].usable(include_mismatched=True)
    assert pairs[0].same_length is None  # the input pairs are left as they were


def test_a_mismatched_answer_is_excluded_with_its_reason(tiny):
    # find a paraphrase the tiny model answers differently from the prompt, and not with ' Mary'
    original_top = _top1(tiny, IOI_TASK.clean)
    words = "When Mary and John went to the store , John gave a drink".split()
    for _ in range(200):
        random.Random(_).shuffle(words)
        text = " ".join(words)
        if _top1(tiny, text) not in (original_top, tiny.to_single_token(" Mary")):
            break
    pair = ParaphrasePair(text, " ".join(["Alice"] + words[1:]), " Mary", (" John",), "file")
    checked = validate_pairs(tiny, IOI_TASK, [pair])[0]
    assert checked.answer_matches is False and not checked.usable()
    assert "the model answers" in checked.reason and repr(checked.original_answer) in checked.reason
    # a rewrite whose top-1 is the stated answer keeps the answer, even if the prompt's top-1 is another
    other_answer = PromptTask(IOI_TASK.clean, IOI_TASK.corrupted, checked.model_answer, (" Mary",))
    if checked.model_answer != tiny.tokenizer.decode([original_top]):
        assert validate_pairs(
            tiny, other_answer, [replace(pair, answer=other_answer.answer, foils=(" Mary",))]
        )[0].answer_matches


@pytest.mark.parametrize(
    "text, answer, ends",
    [
        ("When Mary and John went out, John gave a drink to Mary.", " Mary", True),
        ("When Mary and John went out, John gave a drink to Mary", " Mary", True),
        ("... the drink went to \u201cMary\u201d ", " Mary", True),
        ("Options (A) or (B)? Answer: (A)", " A", True),
        ("When Mary and John went out, John gave a drink to", " Mary", False),
        ("A herb: Rosemary", " Mary", False),  # not a whole word
        ("Mary went home and then she", " Mary", False),  # the answer earlier, not at the end
        ("He said hello,", ",", False),  # an answer without a letter or digit
    ],
)
def test_a_text_ending_with_its_answer_is_recognised(text, answer, ends):
    assert ends_with_answer(text, answer) is ends


def test_a_paraphrase_running_past_the_answer_is_left_out(tiny):
    # Gemma answers ' Mary' after "... gave a drink to Mary." too: the top-1 check alone passed it
    past = ParaphrasePair(
        TINY_PAIRS[0][0] + " Mary .", TINY_PAIRS[0][1] + " Mary .", " Mary", (" John",), "file"
    )
    checked = validate_pairs(
        tiny, IOI_TASK, [past, ParaphrasePair(*TINY_PAIRS[0], " Mary", (" John",), "file")]
    )
    assert not checked[0].usable(include_mismatched=True)
    assert "already ends with the answer ' Mary'" in checked[0].reason
    assert not any("ends with the answer" in p for p in checked[1].problems)
    # a prompt that itself ends with its answer (a repetition) keeps such paraphrases
    repeat = PromptTask("Mary Mary Mary", "John John John", " Mary", (" John",))
    twice = ParaphrasePair("Mary Mary", "John John", " Mary", (" John",), "file")
    assert not any("ends with the answer" in p for p in validate_pairs(tiny, repeat, [twice])[0].problems)


def test_a_corruption_moving_the_metric_the_other_way_is_warned():
    def pair(clean, corrupted):
        return ParaphrasePair(
            "a",
            "b",
            " Mary",
            (" John",),
            "file",
            same_length=True,
            metric_clean=clean,
            metric_corrupted=corrupted,
        )

    # the prompt's corruption lowers the metric by 3.0
    raised, lowered, weak = pair(1.95, 2.54), pair(2.0, -1.0), pair(2.0, 1.99)
    _flag_weak_corruptions([raised, lowered, weak], 3.0)
    assert raised.warnings == [
        "its corruption raises the metric where the prompt's moves it the other way, so its scores point the other way"
    ]
    assert lowered.warnings == []
    assert weak.warnings == ["its corruption barely moves the metric, so its scores carry little signal"]
    assert raised.usable()  # warned, still scored


def test_an_invalid_prompt_is_refused_first(tiny):
    with pytest.raises(TaskError):
        validate_pairs(tiny, PromptTask("When Mary", "When", " Mary", (" John",)), [])


# ----- template families ----------------------------------------------------------------------
FAMILY_PROMPTS = {
    "ioi": ("When Mary and John went to the store, John gave a drink to", "Mary"),
    "arithmetic": ("14 + 23 = ", "37"),
    "factual": ("The official language of France is", "French"),
    "multiple-choice": ("Question: What is the capital of France?\nA. Rome\nB. Paris\nC. Berlin\nD. Madrid\nAnswer:", None),
}  # fmt: skip


def _key_fact(found):
    """What a rewrite must keep: names, operands, subject, or the correct option's text at B."""
    slots = found.slots
    if found.family == "ioi":
        return (slots["A"], slots["B"])
    if found.family == "arithmetic":
        return found.answer
    if found.family == "factual":
        return (slots["relation"], slots["X"])
    return slots["options"][1]


@pytest.mark.parametrize("name", list(FAMILY_PROMPTS))
def test_templates_recognise_rewrite_keeping_the_answer_and_corrupt_it(name):
    prompt, answer = FAMILY_PROMPTS[name]
    found = recognise(prompt)
    assert found is not None and found.family == name and found.answer == answer
    chosen = family(name)
    rng = random.Random(0)
    variants = (
        chosen.variants(found, rng, answer=" B") if name == "multiple-choice" else chosen.variants(found, rng)
    )
    assert len(variants) >= 9
    texts = [text for text, _ in variants]
    assert len(set(texts)) == len(texts) and prompt not in texts
    for text, _ in variants[:30]:
        again = recognise(text)
        assert again is not None and again.family == name, text
        assert _key_fact(again) == _key_fact(found), text
        corrupted = next(chosen.corruptions(again, random.Random(1), " B"))
        if name == "ioi":  # ABC: three other names, so no name is repeated and none is the answer
            assert not any(n in corrupted for n in _key_fact(found)) and recognise(corrupted) is None
            continue
        changed = recognise(corrupted)
        assert changed is not None and _key_fact(changed) != _key_fact(found), corrupted


def test_template_choice_is_deterministic_in_the_seed():
    found = recognise(FAMILY_PROMPTS["ioi"][0])
    first = [t for t, _ in family("ioi").variants(found, random.Random(3))[:9]]
    again = [t for t, _ in family("ioi").variants(found, random.Random(3))[:9]]
    other = [t for t, _ in family("ioi").variants(found, random.Random(4))[:9]]
    assert first == again and first != other
    assert len({t.split(" went")[0].split(" arrived")[0] for t in first}) > 1  # wording varies


def test_unrecognised_prompts_and_families():
    assert recognise("The cat sat on the mat") is None
    assert propose_answer("The cat sat on the mat") is None
    assert propose_answer("What is 7 times 8? The answer is") == "56"
    with pytest.raises(ParaphraseError, match="Unknown template family"):
        family("poetry")
    assert set(FAMILY_PROMPTS) <= {f.name for f in FAMILIES}


def test_loose_prompts_of_a_family_are_recognised():
    found = recognise("Mary and Tom were at the zoo. Tom threw a peanut to")
    assert found.family == "ioi" and found.answer == "Mary"
    corrupted = next(family("ioi").corruptions(found, None, None))
    assert corrupted == "Alice and Bob were at the zoo. Carl threw a peanut to"
    found = recognise("I have 3 apples and eat 1, so 3 - 1 =")
    assert found.family == "arithmetic" and found.answer == "2"
    rewrites = [text for text, _ in family("arithmetic").variants(found, random.Random(0))]
    assert rewrites and all(t.startswith("I have 3 apples and eat 1, so 3") for t in rewrites)


def test_worked_examples_are_rewritten_with_their_problem():
    """A problem after worked examples solved in its own template is also rewritten together with
    them (the same operands and results in another template), in the other case, and joined to
    them another way; its corruptions change the problem only."""
    from circuitviz.query.families.arithmetic import ARITHMETIC_TEMPLATES, TEMPLATES

    found = recognise("One plus one is two. Two plus two is four. One plus two is")
    texts = {text: variant for text, variant in family("arithmetic").variants(found, random.Random(0))}
    assert len(texts) == len(set(texts)) and found.answer == "Three"
    whole = "One plus one equals two. Two plus two equals four. One plus two equals"
    assert whole in texts
    assert "The sum of one and one is two. The sum of two and two is four. The sum of one and two is" in texts
    assert "one plus one is two. two plus two is four. one plus two is" in texts  # the other case
    assert "One plus one is two. Two plus two is four, and one plus two is" in texts
    assert "One plus one is two. Two plus two is four. So one plus two is" in texts
    assert "One plus one is two. Two plus two is four. One plus two equals" in texts  # the problem alone
    corrupted = next(family("arithmetic").corruptions(texts[whole], random.Random(1), None))
    assert corrupted.startswith("One plus one equals two. Two plus two equals four. ")
    assert recognise(corrupted).answer.lower() != "three"
    # examples in another template than the problem's, or digits without examples: no such rewrites
    mixed = recognise("one plus one equals two. one plus two is")
    assert all(
        v.slots["prefix"] == "one plus one equals two. "
        for _, v in family("arithmetic").variants(mixed, random.Random(0))
    )
    # the dataset generator's templates are the first of every operation's
    assert all(TEMPLATES[op][: len(ARITHMETIC_TEMPLATES[op])] == ARITHMETIC_TEMPLATES[op] for op in TEMPLATES)


# the app's gallery, read from its own index (a copy here would drift from what the app shows)
GALLERY_INDEX = gallery_dir() / "index.json"
GALLERY = json.loads(GALLERY_INDEX.read_text(encoding="utf-8"))
# the family that reads each example; the gallery's multiple-choice example puts its options
# on the question's line ('A) yes B) no'), which is the inline-choice family's form
GALLERY_FAMILY = {"multiple-choice": "inline-choice"}


def test_the_gallery_index_has_the_examples_this_file_tests():
    slugs = [entry["slug"] for entry in GALLERY]
    assert len(slugs) == len(set(slugs)) >= 5
    assert set(GALLERY_FAMILY) <= set(slugs)
    assert {GALLERY_FAMILY.get(slug, slug) for slug in slugs} <= {f.name for f in FAMILIES}


@pytest.mark.parametrize("entry", GALLERY, ids=lambda entry: entry["slug"])
def test_the_gallery_examples_are_recognised(tiny, entry):
    prompt, answer = entry["task"]["clean"], entry["task"]["answer"]
    name = GALLERY_FAMILY.get(entry["slug"], entry["slug"])
    found = recognise(prompt)
    assert found is not None and found.family == name
    chosen = family(name)
    rng = random.Random(0)
    by_letter = name in ("multiple-choice", "inline-choice")
    variants = chosen.variants(found, rng, answer=answer) if by_letter else chosen.variants(found, rng)
    assert len(variants) >= 5
    proposal = propose_corruption(tiny, prompt, answer)
    assert proposal is not None and proposal != prompt
    assert token_count(tiny, proposal) == token_count(tiny, prompt)
    if name == "arithmetic":  # the worked example stays or is rewritten as the problem is, the same sum
        prefixes = [variant.slots["prefix"] for _, variant in variants]
        assert all(re.search(r"\bone\b.*\bone\b.*\btwo\b", p, re.IGNORECASE) for p in prefixes)
        assert "one plus one is two. " in prefixes and "one plus one equals two. " in prefixes
        assert all((v.slots["a"], v.slots["b"], v.answer) == ("one", "two", "three") for _, v in variants)
        assert proposal.startswith("one plus one is two. ") and recognise(proposal).answer != "three"


def test_proposed_corruption_keeps_the_token_length(tiny):
    assert (
        propose_corruption(tiny, IOI_TASK.clean)
        == "When Alice and Bob went to the store , Carl gave a drink to"
    )
    assert propose_corruption(tiny, "The cat sat on the mat") is None
    proposal = propose_corruption(tiny, "1 + 2 = ")
    assert proposal is not None and token_count(tiny, proposal) == token_count(tiny, "1 + 2 = ")
    assert recognise(proposal).answer[0] != "3"


def test_template_paraphrases_are_checked_pairs_of_equal_length(tiny):
    pairs = template_paraphrases(tiny, IOI_TASK, n=4, seed=0)
    assert sum(p.usable() for p in pairs) == 4 or len(pairs) >= 16  # filled, or the draw limit reached
    for pair in pairs:
        assert pair.source == "template:ioi" and pair.checked and pair.same_length
        assert pair.answer == IOI_TASK.answer and pair.foils == IOI_TASK.foils
        assert " , " in pair.clean  # the prompt's spaced punctuation is kept for word tokenizers
    assert [p.clean for p in template_paraphrases(tiny, IOI_TASK, n=4, seed=0)] == [p.clean for p in pairs]
    with pytest.raises(ParaphraseError, match="none of the built-in template families"):
        template_paraphrases(
            tiny, PromptTask("The cat sat on the mat", "The cat sat on the", " Mary", (" John",))
        )


# ----- the LLM source, against a local HTTP server speaking the OpenAI chat API ---------------
class StubOpenAI:
    """A real HTTP server on 127.0.0.1 answering POST /v1/chat/completions with a set reply."""

    def __init__(self):
        self.requests: list[dict] = []
        self.reply: str = ""
        self.status = 200
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.requests.append(
                    {"path": self.path, "body": body, "auth": self.headers.get("Authorization")}
                )
                if self.path != "/v1/chat/completions":
                    payload, status = {"error": {"message": "no such route"}}, 404
                elif stub.status != 200:
                    payload, status = {"error": {"message": "refused", "type": "error"}}, stub.status
                else:
                    payload, status = _completion(body["model"], stub.reply), 200
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


def _completion(model, content):
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


@pytest.fixture()
def stub(monkeypatch):
    server = StubOpenAI()
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    yield server
    server.close()


def _reply(pairs, fenced=False):
    text = json.dumps({"pairs": [{"paraphrase": c, "corrupted": d} for c, d in pairs]})
    return f"```json\n{text}\n```" if fenced else text


def test_llm_pairs_are_requested_parsed_and_checked(tiny, stub):
    stub.reply = _reply(TINY_PAIRS + [("The cat sat on the mat", "The cat sat")])
    pairs = llm_paraphrases(tiny, IOI_TASK, n=3, seed=5, llm_model="stub-model")
    assert [(p.clean, p.corrupted) for p in pairs[:2]] == TINY_PAIRS
    assert all(p.source == "openai:stub-model" and p.checked for p in pairs)
    assert pairs[2].same_length is False and not pairs[2].usable()
    request = stub.requests[-1]
    assert request["path"] == "/v1/chat/completions" and request["auth"] == "Bearer sk-test"
    assert request["body"]["model"] == "stub-model" and request["body"]["seed"] == 5
    asked = request["body"]["messages"][-1]["content"]
    assert IOI_TASK.clean in asked and "Write 3 paraphrases" in asked and '"corrupted"' in asked


def test_llm_source_through_gather_and_a_fenced_reply(tiny, stub, monkeypatch):
    monkeypatch.setenv("CIRCUITVIZ_LLM_MODEL", "env-model")
    stub.reply = _reply(TINY_PAIRS, fenced=True)
    pairs = gather_paraphrases(tiny, IOI_TASK, "openai", n=1)
    assert len(pairs) == 1 and pairs[0].clean == TINY_PAIRS[0][0]
    assert stub.requests[-1]["body"]["model"] == "env-model"


@pytest.mark.parametrize(
    "reply, message",
    [
        ("Sure! Here are the paraphrases: ...", "not the JSON asked for"),
        ('{"rewrites": []}', "no list 'pairs'"),
        ('{"pairs": "none"}', "no list 'pairs'"),
    ],
)
def test_llm_replies_are_parsed_strictly(tiny, stub, reply, message):
    stub.reply = reply
    with pytest.raises(ParaphraseError, match=message):
        llm_paraphrases(tiny, IOI_TASK, n=2)


def test_llm_items_without_both_strings_are_flagged():
    pairs = parse_llm_reply(
        '{"pairs": [{"paraphrase": "x"}, "text", {"paraphrase": "", "corrupted": ""}]}',
        IOI_TASK,
        5,
        "openai:m",
    )
    assert ["lacks" in p.problems[0] for p in pairs] == [True, True, False]
    assert "empty" in pairs[2].problems[0]


@pytest.mark.parametrize(
    ("reply", "said"),
    [
        ('{"pairs": [' + "9" * 5000 + "]}", "(a number of 5,000 digits, over the 4,300 that can be read"),
        ('{"pairs": ' + "[" * 100_000 + "]" * 100_000 + "}", "(it is nested too deeply)"),
    ],
)
def test_an_llm_reply_python_cannot_read_is_one_sentence(reply, said):
    """A reply holding a number longer than Python reads raised its ValueError ("... use
    sys.set_int_max_str_digits() ..."), one nested 100,000 deep a RecursionError (2026-12-07)."""
    with pytest.raises(ParaphraseError) as error:
        parse_llm_reply(reply, IOI_TASK, 3, "openai:m")
    message = str(error.value)
    assert message.startswith("The LLM's reply is not the JSON asked for ") and said in message
    assert message.endswith("; try again or choose another model.")


def test_llm_endpoint_errors_are_one_sentence(tiny, stub, monkeypatch):
    stub.status = 401
    with pytest.raises(ParaphraseError, match="refused the API key; check OPENAI_API_KEY"):
        llm_paraphrases(tiny, IOI_TASK, n=2)
    stub.status = 404
    with pytest.raises(ParaphraseError, match="has no model 'gpt-4o-mini'"):
        llm_paraphrases(tiny, IOI_TASK, n=2)
    closed = StubOpenAI()
    closed.close()
    monkeypatch.setenv("OPENAI_BASE_URL", closed.url)
    with pytest.raises(ParaphraseError, match="Could not reach the LLM endpoint"):
        llm_paraphrases(tiny, IOI_TASK, n=2, timeout=5)


def test_without_a_key_the_llm_source_says_so_in_one_sentence(tiny, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ParaphraseError) as error:
        gather_paraphrases(tiny, IOI_TASK, "openai", n=2)
    message = str(error.value)
    assert message.startswith("No OpenAI API key is set") and message.count(".") == 1
    assert template_paraphrases(tiny, IOI_TASK, n=1)  # the other sources remain


# ----- the embedded model ---------------------------------------------------------------------
@pytest.mark.slow
def test_examples_and_templates_on_the_embedded_model(embedded_model):
    model = embedded_model
    assert propose_corruption(model, EXAMPLE_TASKS["ioi"].clean) == EXAMPLE_TASKS["ioi"].corrupted
    for name, task in EXAMPLE_TASKS.items():
        assert validate_pairs(model, task, []) == []  # the example itself is a valid task
        assert model_answer(model, task.clean) == task.answer  # and the model answers it
        found = recognise(task.clean)
        assert found is not None and found.family == name
        proposal = propose_corruption(model, task.clean, task.answer)
        assert proposal is not None and token_count(model, proposal) == token_count(model, task.clean)
    for entry in GALLERY:  # on Gemma's tokenizer, the model the gallery was built on
        task = PromptTask.from_dict(entry["task"])
        proposal = propose_corruption(model, task.clean, task.answer)
        assert proposal is not None and proposal != task.clean, entry["slug"]
        assert token_count(model, proposal) == token_count(model, task.clean), entry["slug"]
        # the gallery states its own corruptions (scripts/build_gallery.py); each one must keep
        # the prompt's length too, or its stored circuit could not have been computed
        assert token_count(model, task.corrupted) == token_count(model, task.clean), entry["slug"]
    for path, task in ASSET_TASKS.items():  # the example files are valid pairs on this model
        checked = validate_pairs(model, task, load_paraphrases(ASSETS / path, task))
        assert len(checked) == 9 and all(p.same_length and not p.problems for p in checked), path
    pairs = template_paraphrases(model, EXAMPLE_TASKS["ioi"], n=3, seed=0)
    assert sum(p.usable() for p in pairs) >= 3
    assert all(p.n_tokens == p.corrupted_n_tokens for p in pairs)
    assert all(p.model_answer == " Mary" for p in pairs if p.usable())


def test_the_prompts_own_corruption_carries_over_to_rewrites():
    from circuitviz.query.templates import transfer_corruption

    clean, corrupted = "The capital of France is", "The capital of Italy is"
    assert (
        transfer_corruption(clean, corrupted, "In France, the capital city is")
        == "In Italy, the capital city is"
    )
    assert transfer_corruption(clean, corrupted, "Frances capital is") is None  # whole words only
    assert (
        transfer_corruption(clean, "The old capital of France is", "France's capital") is None
    )  # an insertion
    two = transfer_corruption(
        "When Mary and John met, John", "When Anna and Tom met, Bob", "John and Mary: John"
    )
    # a word the corruption replaces differently in two places takes its first replacement (IOI's
    # ABC corruption is therefore made by the IOI family itself, never carried over)
    assert two == "Tom and Anna: Tom"


def test_arithmetic_and_factual_rewrites_are_corrupted_as_the_prompt_is():
    """Their first corruption is the prompt's own: the same other operands (worked examples
    untouched) or the same other subject, so the corrupted rewrite leads to the prompt's foil.
    IOI keeps its own ABC corruption first (carried over word for word it would be ABB)."""
    from circuitviz.query.templates import template_rewrites, transfer_corruption

    words = PromptTask(
        "one plus one is two. one plus two is", "one plus one is two. two plus two is", " three", (" four",)
    )
    eiffel = PromptTask(
        "The Eiffel Tower is located in the city of",
        "The Colosseum is located in the city of",
        " Paris",
        (" Rome",),
    )
    for task in (words, EXAMPLE_TASKS["arithmetic"], eiffel):
        _, rewrites = template_rewrites(task)
        for text, corruptions in itertools.islice(rewrites, 12):
            first = next(corruptions)
            if task is eiffel:
                assert first == text.replace("Eiffel Tower", "Colosseum"), (text, first)
            elif task is words:  # the problem's first operand one -> two, the example as it was
                assert first.count("two") == text.count("two") + 1 and first[:12] == text[:12], (text, first)
            else:
                assert first == text.replace("14", "54"), (text, first)
    ioi = EXAMPLE_TASKS["ioi"]
    _, rewrites = template_rewrites(ioi)
    for text, corruptions in itertools.islice(rewrites, 5):
        first = next(corruptions)
        assert not {"Mary", "John"} & set(re.findall(r"\w+", first))
        assert first != transfer_corruption(ioi.clean, ioi.corrupted, text)


def test_multiple_choice_answered_by_the_options_text(tiny):
    prompt = "Question: What is the capital of Japan?\nA. Tokyo\nB. Paris\nC. Rome\nD. Berlin\nAnswer:"
    task = PromptTask(prompt, prompt.replace("Japan", "Italy"), " Mary", (" John",))
    found = recognise(prompt)
    variants = family("multiple-choice").variants(found, random.Random(0), answer=" Tokyo")
    assert len(variants) > 100
    positions = {v.slots["options"].index("Tokyo") for _, v in variants}
    assert positions == {0, 1, 2, 3}  # the answer's text moves; it is always there
    assert list(family("multiple-choice").corruptions(found, None, " Tokyo")) == []
    content = PromptTask(prompt, task.corrupted, " Paris", (" Rome",))  # answers the tiny model knows
    with pytest.raises(ParaphraseError, match="neither an option's letter nor an option's text"):
        template_paraphrases(tiny, task, n=2)
    # the tiny model's vocabulary lacks these words, but lengths and the carried corruption still work
    pairs = template_paraphrases(tiny, content, n=3, seed=1, fill=False)
    assert len(pairs) == 3
    for pair in pairs:
        assert "Japan" in pair.clean and pair.corrupted == pair.clean.replace("Japan", "Italy")


def test_comment_lines_are_allowed_in_every_format_and_line_numbers_stay_right():
    jsonl = "# for the IOI example\n" + json.dumps({"clean": TINY_PAIRS[0][0], "corrupted": TINY_PAIRS[0][1]})
    assert len(parse_paraphrases(jsonl, IOI_TASK)) == 1
    csv_text = "# a comment\nclean,corrupted\n" + f'"{TINY_PAIRS[0][0]}","{TINY_PAIRS[0][1]}"'
    assert len(parse_paraphrases(csv_text, IOI_TASK)) == 1
    with pytest.raises(ParaphraseError, match="Line 3 of the paraphrase file"):
        parse_paraphrases('# note\n{"clean": "x", "corrupted": "y"}\n{oops', IOI_TASK)


def test_a_subject_the_table_lacks_is_not_corrupted_into_one_with_its_answer():
    """'The Louvre museum is located in the city of' (answer ' Paris', a subject the landmark table
    lacks) was corrupted into 'The Eiffel Tower ...': another subject whose answer is Paris too."""
    from circuitviz.query.templates import template_rewrites

    prompt = "The Louvre museum is located in the city of"
    found = recognise(prompt)
    proposed = list(family(found.family).corruptions(found, None, "Paris"))
    assert proposed and not any("Eiffel Tower" in text for text in proposed)
    assert any("Colosseum" in text for text in proposed)
    # the paraphrases' own corruptions too (the task's answer with its leading space)
    task = PromptTask(prompt, "", " Paris", (" Rome",))
    _, rewrites = template_rewrites(task)
    for text, corruptions in itertools.islice(rewrites, 8):
        assert not any("Eiffel Tower" in c for c in itertools.islice(corruptions, 20)), text
