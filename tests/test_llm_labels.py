"""LLM labels against a real HTTP server on 127.0.0.1 that speaks POST /v1/chat/completions.

The stub answers from a script of behaviours (a reply, a delay past the client's timeout, a
status code, a malformed body), records every request, and echoes the Authorization header in
its error bodies so the tests can prove the key never leaks into messages, logs or the cache.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from circuitviz.labels.llm import (
    OFF_MESSAGE,
    BackgroundLabels,
    LLMLabeler,
    fisher_exact_greater,
    llm_status,
)
from circuitviz.services.llm_client import LLMConfig, LLMError

SECRET = "sk-test-SECRET-0123456789"


class StubServer:
    """A chat-completions endpoint whose replies follow ``script`` (the last entry repeats)."""

    def __init__(self):
        self.script: list[tuple] = [("reply", "a description")]
        self.requests: list[dict] = []
        self.responder = None  # optional fn(request body) -> reply text
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                stub.requests.append(
                    {"path": self.path, "auth": self.headers.get("Authorization"), "body": body}
                )
                step = stub.script.pop(0) if len(stub.script) > 1 else stub.script[0]
                kind = step[0]
                if self.path != "/v1/chat/completions":
                    return self._send(404, {"error": {"message": "no such path"}})
                if kind == "sleep":
                    time.sleep(step[1])
                    kind, step = "reply", ("reply", step[2])
                if kind == "reply":
                    text = stub.responder(body) if stub.responder else step[1]
                    return self._send(200, _completion(text))
                if kind == "status":
                    headers = {"Retry-After": "0"} if step[1] == 429 else {}
                    # a careless server echoes the credentials back: they must not reach the user
                    error = {"error": {"message": f"failed for {self.headers.get('Authorization')}"}}
                    return self._send(step[1], error, headers)
                if kind == "malformed":
                    return self._send_raw(200, step[1].encode(), "application/json")
                raise AssertionError(f"unknown step {step}")

            def _send(self, status, payload, headers=None):
                self._send_raw(status, json.dumps(payload).encode(), "application/json", headers)

            def _send_raw(self, status, data, content_type, headers=None):
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(data)))
                    for key, value in (headers or {}).items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def _completion(text: str) -> dict:
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": 0,
        "model": "stub-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


@pytest.fixture
def stub():
    server = StubServer()
    yield server
    server.close()


@pytest.fixture
def labeler_for(stub, tmp_path):
    def make(**overrides):
        config = LLMConfig(
            base_url=stub.base_url,
            api_key=SECRET,
            model="stub-model",
            timeout_s=overrides.pop("timeout_s", 5.0),
            max_retries=overrides.pop("max_retries", 2),
            backoff_s=0.01,
            max_backoff_s=0.05,
            cache_dir=tmp_path / "llm-cache",
            **overrides,
        )
        return LLMLabeler(config)

    return make


CONTEXTS = [
    {"tokens": ["The", " nurse", " said", " that", " she"], "target": 4, "activation": 3.2},
    {"tokens": ["My", " mother", " and", " she"], "target": 3, "activation": 2.5},
]


def _user_message(request) -> str:
    return request["body"]["messages"][-1]["content"]


def test_describe_marks_target_and_caches_on_disk(stub, labeler_for, tmp_path):
    stub.script = [("reply", "The pronoun 'she' after a female subject\nextra line")]
    labeler = labeler_for()
    result = labeler.describe(CONTEXTS, promotes=[" her", " herself"])
    assert result["description"] == "The pronoun 'she' after a female subject"
    assert result["cached"] is False
    message = _user_message(stub.requests[0])
    assert "The nurse said that<< she>>" in message
    assert "' her'" in message
    assert stub.requests[0]["auth"] == f"Bearer {SECRET}"
    again = labeler_for().describe(CONTEXTS, promotes=[" her", " herself"])
    assert again["cached"] is True and again["description"] == result["description"]
    assert len(stub.requests) == 1
    for path in (tmp_path / "llm-cache").iterdir():
        assert SECRET not in path.read_text()


@pytest.mark.parametrize("kept", ["[]", '{"reply": 5}', '{"model": "m"}', "{"])
def test_a_damaged_cache_entry_is_asked_again(kept, stub, labeler_for, tmp_path):
    """A cached reply that is a list or a number raised (TypeError, then AttributeError where the
    description is read); it is asked again and kept whole."""
    stub.script = [("reply", "female pronouns"), ("reply", "female pronouns")]
    labeler_for().describe(CONTEXTS, promotes=[" her"])
    (entry,) = (tmp_path / "llm-cache").iterdir()
    entry.write_text(kept)
    again = labeler_for().describe(CONTEXTS, promotes=[" her"])
    assert again["cached"] is False and again["description"] == "female pronouns"
    assert len(stub.requests) == 2 and json.loads(entry.read_text())["reply"] == "female pronouns"


def test_signal_prompt_marks_source_and_target(stub, labeler_for):
    stub.script = [("reply", "name copied from earlier mention")]
    context = {
        "tokens": ["When", " Mary", " and", " John", ",", " John", " gave", " to"],
        "target": 7,
        "source": 1,
    }
    labeler_for().describe([context], kind="signal")
    message = _user_message(stub.requests[0])
    assert "When[[ Mary]] and John, John gave<< to>>" in message
    assert "[[like this]]" in stub.requests[0]["body"]["messages"][0]["content"]


@pytest.mark.parametrize("status", [429, 500, 503])
def test_retries_rate_limits_and_server_errors(stub, labeler_for, status):
    stub.script = [("status", status), ("status", status), ("reply", "ok after retries")]
    labeler = labeler_for(max_retries=2)
    assert labeler.describe(CONTEXTS)["description"] == "ok after retries"
    assert labeler.requests_sent == 3


def test_retries_timeouts(stub, labeler_for):
    stub.script = [("sleep", 1.0, "late"), ("reply", "on time")]
    labeler = labeler_for(timeout_s=0.2, max_retries=1)
    assert labeler.describe(CONTEXTS)["description"] == "on time"
    assert labeler.requests_sent == 2


def test_gives_up_after_bounded_retries_without_leaking_the_key(stub, labeler_for, caplog):
    caplog.set_level(logging.DEBUG)
    stub.script = [("status", 500)]
    labeler = labeler_for(max_retries=2)
    with pytest.raises(LLMError) as error:
        labeler.describe(CONTEXTS)
    assert labeler.requests_sent == 3
    message = str(error.value)
    assert "3 times" in message and message.count(".") == 1
    assert SECRET not in message and SECRET not in caplog.text


def test_client_errors_are_not_retried_and_do_not_leak(stub, labeler_for, caplog):
    caplog.set_level(logging.DEBUG)
    stub.script = [("status", 401)]
    labeler = labeler_for()
    with pytest.raises(LLMError) as error:
        labeler.describe(CONTEXTS)
    assert labeler.requests_sent == 1
    assert "401" in str(error.value)
    assert SECRET not in str(error.value) and SECRET not in repr(error.value) and SECRET not in caplog.text
    assert SECRET not in repr(labeler.config)


@pytest.mark.parametrize(
    "body",
    [
        "this is not json",
        json.dumps({"choices": []}),
        json.dumps({"unexpected": True}),
        json.dumps(_completion("")),
    ],
)
def test_malformed_replies_become_one_sentence(stub, labeler_for, body):
    stub.script = [("malformed", body)]
    labeler = labeler_for()
    with pytest.raises(LLMError) as error:
        labeler.describe(CONTEXTS)
    assert labeler.requests_sent == 1
    assert SECRET not in str(error.value)
    assert str(error.value).endswith(".")


def _judge_responder(body):
    """Pick exactly the excerpts that contain a real context's marker token."""
    user = body["messages"][-1]["content"]
    picked = [
        int(line.split(".")[0]) for line in user.splitlines() if line[:1].isdigit() and "<< she>>" in line
    ]
    return json.dumps(picked)


def test_judge_accuracy_and_p_value(stub, labeler_for):
    stub.responder = _judge_responder
    real = [{"tokens": ["x", f" w{i}", " she"], "target": 2} for i in range(5)]
    random_contexts = [{"tokens": ["the", f" r{i}", " cat"], "target": 2} for i in range(20)]
    result = labeler_for().judge("the word she", real, random_contexts, n_each=5)
    assert result["accuracy"] == 1.0
    assert result["true_positives"] == 5 and result["false_positives"] == 0
    assert result["p_value"] == pytest.approx(1 / 252)  # C(10, 5) = 252


def test_judge_reply_that_is_not_a_list(stub, labeler_for):
    stub.script = [("reply", "I cannot tell.")]
    with pytest.raises(LLMError):
        labeler_for().judge("x", CONTEXTS, CONTEXTS)


@pytest.mark.parametrize(
    "reply, numbers",
    [
        ("[1e999, 2]", [2]),  # an OverflowError before
        ("[true, 3]", [3]),  # true was read as excerpt 1
        ("[2.0, 3.5, NaN]", [2]),  # 3.5 was read as excerpt 3
        ('["4", {}, null]', [4]),
        ("excerpts 1, ² and 9", [1]),  # past the excerpts sent, or not a number int() reads
    ],
)
def test_the_judges_numbers_are_whole_excerpt_numbers_whatever_the_reply_holds(reply, numbers):
    from circuitviz.labels.llm import _parse_numbers

    assert _parse_numbers(reply, 5) == numbers


def test_label_feature_with_check(stub, labeler_for):
    answers = iter(["female pronouns", "[1, 2]"])
    stub.responder = lambda body: next(answers)
    description = {"layer": 9, "feature": 17, "contexts": CONTEXTS, "promotes": [" her"]}
    result = labeler_for().label_feature(
        description, random_contexts=[{"tokens": ["a"], "target": 0}] * 3, check=True
    )
    assert result["description"] == "female pronouns"
    assert result["layer"] == 9 and result["feature"] == 17
    # the judge saw 2 real contexts and 3 random ones, shuffled, and picked excerpts 1 and 2:
    # which of those two are real is read off the excerpts it was sent
    judged = _user_message(stub.requests[-1])
    assert judged.startswith("Description: female pronouns")
    excerpts = [line for line in judged.splitlines() if line[:1].isdigit()]
    assert len(excerpts) == 5 and sum("nurse" in e or "mother" in e for e in excerpts) == 2
    real = {int(e.split(".")[0]) for e in excerpts if "nurse" in e or "mother" in e}
    hits = len(real & {1, 2})  # true positives among the picks; the rest are false positives
    judge = result["judge"]
    assert (judge["true_positives"], judge["false_positives"], judge["n"]) == (hits, 2 - hits, 5)
    # right: the real ones picked plus the random ones left out
    assert judge["accuracy"] == pytest.approx((hits + 3 - (2 - hits)) / 5)
    # P(at least `hits` real among 2 picks drawn from 2 real and 3 random), hypergeometric
    tail = sum(math.comb(2, x) * math.comb(3, 2 - x) for x in range(hits, 3)) / math.comb(5, 2)
    assert judge["p_value"] == pytest.approx(tail)


def test_background_labels_do_not_block(stub, labeler_for):
    stub.script = [("sleep", 0.3, "slow description")]
    jobs = BackgroundLabels(labeler_for(), workers=2)
    for index in range(3):
        jobs.submit(
            f"f{index}", {"layer": 1, "feature": index, "contexts": [{"tokens": [f"t{index}"], "target": 0}]}
        )
    # each request takes 0.3 s at the server: submitting returned before the labels were done
    assert jobs.progress[1] == 3 and jobs.progress[0] < 3
    deadline = time.time() + 10
    while jobs.progress[0] < 3 and time.time() < deadline:
        time.sleep(0.05)
    results = jobs.results()
    assert {r["description"] for r in results.values()} == {"slow description"}
    jobs.close()


def test_off_without_an_endpoint(monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    enabled, message = llm_status()
    assert not enabled and message == OFF_MESSAGE and message.count(". ") == 0
    with pytest.raises(LLMError, match="LLM labels are off"):
        LLMLabeler()


def test_status_from_environment_never_shows_the_key(monkeypatch, stub):
    monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("CIRCUITVIZ_LLM_MODEL", "my-model")
    enabled, message = llm_status()
    assert enabled and "my-model" in message and SECRET not in message


def test_fisher_exact_matches_a_hand_computed_table():
    # [[3, 1], [1, 3]]: P(a >= 3) = (C(4,3)C(4,1) + C(4,4)C(4,0)) / C(8,4) = 17/70
    assert fisher_exact_greater(3, 1, 1, 3) == pytest.approx(17 / 70)
