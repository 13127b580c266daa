"""Fixtures of the reward tests, and a real OpenAI-compatible chat completions server on 127.0.0.1, backed by a tiny local model.

The model (the session's `tiny_model_dir`, random weights) generates text with transformers. Like a
serving stack's guided decoding, the `ok` mode makes it end its reply with a `SCORE: <digit>` line: a
few freely generated tokens, then the forced text "\\nSCORE: ", then the digit token the model ranks
highest. Other modes misbehave the way real endpoints do. The mode is the first path segment:

- /ok/v1/chat/completions       reasoning tokens, then SCORE: d (greedy: deterministic per request)
- /garbage/v1/...               the model's free text only: no score line
- /badjson/v1/...               HTTP 200 with a body that is not JSON
- /slow/v1/...                  sleeps `SLOW_S` before answering (past a short client timeout)
- /trickle/v1/...               a valid answer sent one byte every 0.2 s (slower in total than the timeout)
- /flaky/v1/...                 HTTP 503 for the first request with a given body, then as /ok
- /unauthorized/v1/...          HTTP 401
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

SLOW_S = 2.0


class TinyJudgeModel:
    """Greedy generation with the tiny model, serialised by a lock (one model, many handler threads)."""

    def __init__(self, model_dir: Path) -> None:
        import torch
        from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

        self.torch = torch
        self.tok = PreTrainedTokenizerFast.from_pretrained(model_dir)
        self.model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
        self.digits = [self.tok.encode(str(d))[0] for d in range(10)]
        self.lock = threading.Lock()

    def reply(self, messages: list[dict[str, Any]], with_score: bool, free_tokens: int = 6) -> str:
        torch = self.torch
        text = self.tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        ids = torch.tensor([self.tok.encode(text)[-384:]])
        with self.lock, torch.no_grad():
            # One thread: on a small shared CPU, torch's thread pool makes this tiny model 5-10x slower.
            threads = torch.get_num_threads()
            torch.set_num_threads(1)
            try:
                return self._generate(ids, with_score, free_tokens)
            finally:
                torch.set_num_threads(threads)

    def _generate(self, ids: Any, with_score: bool, free_tokens: int) -> str:
        torch = self.torch
        out = self.model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=free_tokens,
                                  do_sample=False, pad_token_id=self.tok.pad_token_id)
        free = self.tok.decode(out[0, ids.shape[1]:], skip_special_tokens=True).replace("SCORE", "S")
        if not with_score:
            return free or "the answer looks fine"
        forced = torch.tensor([self.tok.encode("\nSCORE: ")])
        logits = self.model(torch.cat([out, forced], dim=1)).logits[0, -1]
        digit = max(range(10), key=lambda d: float(logits[self.digits[d]]))
        return f"{free}\nSCORE: {digit}"


class _Handler(BaseHTTPRequestHandler):
    server: JudgeServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet test output
        pass

    def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        length = int(self.headers.get("Content-Length", 0))
        raw = self.rfile.read(length)
        mode, _, rest = self.path.strip("/").partition("/")
        self.server.requests.append((mode, self.headers.get("Authorization")))
        if rest != "v1/chat/completions":
            self._send(404, b'{"error": "not found"}')
            return
        if mode == "unauthorized":
            self._send(401, b'{"error": "bad key"}')
            return
        if mode == "badjson":
            self._send(200, b"<html>upstream hiccup</html>", "text/html")
            return
        if mode == "slow":
            time.sleep(SLOW_S)
        if mode == "trickle":  # headers at once, then a byte every 0.2 s: never idle long enough to time out
            body = b'{"choices": [{"message": {"content": "SCORE: 5"}}]}' + b" " * 10
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                for byte in body:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(0.2)
            return
        if mode == "flaky":
            with self.server.lock:
                first = raw not in self.server.seen
                self.server.seen.add(raw)
            if first:
                self._send(503, b'{"error": "overloaded"}')
                return
        body = json.loads(raw)
        # Greedy decoding is deterministic, so answers are kept per request body, as a prompt cache would.
        key = (mode if mode == "garbage" else "ok", raw)
        content = self.server.answers.get(key)
        if content is None:
            content = self.server.model.reply(body["messages"], with_score=mode != "garbage")
            self.server.answers[key] = content
        answer = {"id": "chatcmpl-tiny", "object": "chat.completion", "model": body.get("model", "tiny"),
                  "choices": [{"index": 0, "finish_reason": "stop",
                               "message": {"role": "assistant", "content": content}}]}
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client gave up (timeouts)
            self._send(200, json.dumps(answer).encode())


class JudgeServer(ThreadingHTTPServer):
    daemon_threads = False  # server_close waits for handlers, so none runs torch at exit

    def __init__(self, model_dir: Path) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.model = TinyJudgeModel(model_dir)
        self.requests: list[tuple[str, str | None]] = []
        self.seen: set[bytes] = set()
        self.answers: dict[tuple[str, bytes], str] = {}
        self.lock = threading.Lock()
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    def url(self, mode: str) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/{mode}/v1"

    def __enter__(self) -> JudgeServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()


@pytest.fixture(scope="session")
def judge_server(tiny_model_dir: Path) -> Iterator[JudgeServer]:
    """An OpenAI-compatible chat server on 127.0.0.1 answering with the tiny model."""
    with JudgeServer(tiny_model_dir) as server:
        yield server
