"""A failing LLM endpoint (local stub): timeouts, 429, 500, malformed bodies. Both LLM users (the
paraphrase source and the label describer) retry a bounded number of times, then end in one
sentence; the API key never shows in a message, a log line, a URL or a file they wrote."""

from __future__ import annotations

import json
import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from sentences import assert_one_sentence

from circuitviz.bench.toy_models import IOI_TASK, tiny_model
from circuitviz.labels.llm import LLMLabeler
from circuitviz.query.llm_source import llm_paraphrases
from circuitviz.query.pairs import ParaphraseError
from circuitviz.services.llm_client import LLMConfig, LLMError

SECRET = "sk-test-SECRET-never-shown-0123456789"


class Stub:
    """An OpenAI-compatible endpoint that misbehaves as told: ('sleep', s), ('status', code),
    ('html',) a 200 that is not JSON, ('empty',) a 200 JSON without choices."""

    def __init__(self, behaviour):
        self.behaviour = behaviour
        self.requests: list[dict] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                length = int(self.headers.get("content-length", 0))
                self.rfile.read(length)
                stub.requests.append({"path": self.path, "auth": self.headers.get("authorization", "")})
                kind = stub.behaviour[0]
                if kind == "sleep":
                    time.sleep(stub.behaviour[1])
                    body, status, ctype = b'{"choices": []}', 200, "application/json"
                elif kind == "status":
                    body = json.dumps({"error": {"message": "busy", "type": "error"}}).encode()
                    status, ctype = stub.behaviour[1], "application/json"
                elif kind == "html":
                    body, status, ctype = b"<html>gateway says hi</html>", 200, "text/html"
                else:
                    body, status, ctype = b'{"id": "x", "object": "chat.completion"}', 200, "application/json"
                try:
                    self.send_response(status)
                    self.send_header("content-type", ctype)
                    self.send_header("content-length", str(len(body)))
                    if status == 429:
                        self.send_header("retry-after", "0")
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:  # the client gave up (timeout)
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


BEHAVIOURS = [("sleep", 1.5), ("status", 429), ("status", 500), ("status", 503), ("html",), ("empty",)]


@pytest.fixture(scope="module")
def tiny():
    return tiny_model("gpt2", seed=5)


@pytest.mark.parametrize("behaviour", BEHAVIOURS, ids=lambda b: "-".join(map(str, b)))
def test_paraphrase_source_gives_up_in_one_sentence(tiny, behaviour, caplog, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    stub = Stub(behaviour)
    caplog.set_level(logging.DEBUG)
    try:
        start = time.monotonic()
        with pytest.raises(ParaphraseError) as refused:
            llm_paraphrases(
                tiny, IOI_TASK, n=3, llm_model="stub", base_url=stub.base_url, api_key=SECRET, timeout=0.5
            )
        elapsed = time.monotonic() - start
    finally:
        stub.close()
    message = str(refused.value)
    assert SECRET not in message and SECRET not in caplog.text
    assert_one_sentence(message)
    assert 1 <= len(stub.requests) <= 3, "retries must be bounded"
    assert all(SECRET not in r["path"] for r in stub.requests)  # never in a URL
    assert elapsed < 60


@pytest.mark.parametrize("behaviour", BEHAVIOURS, ids=lambda b: "-".join(map(str, b)))
def test_label_describer_gives_up_in_one_sentence(behaviour, tmp_path, caplog):
    stub = Stub(behaviour)
    caplog.set_level(logging.DEBUG)
    config = LLMConfig(
        base_url=stub.base_url,
        api_key=SECRET,
        model="stub",
        timeout_s=0.5,
        max_retries=2,
        backoff_s=0.01,
        max_backoff_s=0.05,
        cache_dir=tmp_path / "cache",
    )
    contexts = [{"tokens": ["The", " nurse", " said", " she"], "target": 3, "activation": 1.0}]
    try:
        with pytest.raises(LLMError) as refused:
            LLMLabeler(config).describe(contexts)
    finally:
        stub.close()
    message = str(refused.value)
    assert_one_sentence(message)
    assert SECRET not in message and SECRET not in caplog.text and SECRET not in repr(config)
    assert len(stub.requests) <= 3
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes()
