"""A local stand-in for the Anthropic Messages API that answers every request from a script.

Claude Code (`claude -p` with ANTHROPIC_BASE_URL pointing here) streams `POST /v1/messages` requests;
each gets one answer, as the standard SSE events, chosen by `answer(request_body)`: a string is a text
answer, a `ToolCall` asks the client to run a tool (its result comes back in the next request). Every
request body is kept in `requests` for the test to inspect.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

# environment variables that configure Claude Code's model or point it elsewhere: never inherited by a test
MODEL_ENV = ("ANTHROPIC_", "CLAUDE_CODE_", "CLAUDE_CONFIG_DIR", "CLAUDE_BIN")


def client_env(home: Path, url: str | None = None, **extra: str) -> dict[str, str]:
    """The caller's environment without any model configuration, HOME in `home` (created), and with
    `url` the Claude Code client pointed at a canned model there."""
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(MODEL_ENV)}
    env.update(HOME=str(home), DISABLE_TELEMETRY="1", DISABLE_AUTOUPDATER="1", DISABLE_ERROR_REPORTING="1")
    if url is not None:
        env.update(ANTHROPIC_BASE_URL=url, ANTHROPIC_API_KEY="canned", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1")
    env.update(extra)
    return env


@dataclass(frozen=True)
class ToolCall:
    """A tool call the scripted model makes, e.g. ToolCall("Bash", {"command": "finetune gate b.yaml"})."""

    name: str
    input: dict[str, Any]


def tool_results(body: dict[str, Any]) -> list[str]:
    """The text of every tool result in the request's last user message."""
    users = [m for m in body.get("messages", []) if m.get("role") == "user"]
    content = users[-1]["content"] if users else ""
    out = []
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            inner = block.get("content")
            out.append(inner if isinstance(inner, str) else
                       "\n".join(b.get("text", "") for b in inner or [] if isinstance(b, dict)))
    return out


def user_text(body: dict[str, Any]) -> str:
    """All text of the last user message in a Messages API request."""
    users = [m for m in body.get("messages", []) if m.get("role") == "user"]
    if not users:
        return ""
    content = users[-1]["content"]
    if isinstance(content, str):
        return content
    return "\n".join(block.get("text", "") for block in content if isinstance(block, dict))


def sse_events(reply: str | ToolCall, model: str, n: int) -> Iterator[tuple[str, dict[str, Any]]]:
    """The event stream of one assistant message: text, or one tool call (id `toolu_canned_N`)."""
    yield "message_start", {"type": "message_start", "message": {
        "id": f"msg_canned_{n}", "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}}
    if isinstance(reply, ToolCall):
        block = {"type": "tool_use", "id": f"toolu_canned_{n}", "name": reply.name, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(reply.input)}
        stop = "tool_use"
    else:
        block, delta, stop = {"type": "text", "text": ""}, {"type": "text_delta", "text": reply}, "end_turn"
    yield "content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}
    yield "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}
    yield "content_block_stop", {"type": "content_block_stop", "index": 0}
    yield "message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                            "usage": {"output_tokens": 10}}
    yield "message_stop", {"type": "message_stop"}


class CannedModel:
    """A running server: `url` for ANTHROPIC_BASE_URL, `requests` as received."""

    def __init__(self, answer: Callable[[dict[str, Any]], str | ToolCall]) -> None:
        self.answer = answer
        self.requests: list[dict[str, Any]] = []
        model = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep pytest's output clean
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                model.requests.append(body)
                reply = model.answer(body)
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.end_headers()
                for event, data in sse_events(reply, str(body.get("model", "canned")), len(model.requests)):
                    self.wfile.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())

            def do_GET(self) -> None:
                self.send_response(404)
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


@contextmanager
def canned_model(answer: Callable[[dict[str, Any]], str | ToolCall]) -> Iterator[CannedModel]:
    """Serve `answer` on a free local port for the duration of the block."""
    model = CannedModel(answer)
    thread = threading.Thread(target=model.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield model
    finally:
        model.server.shutdown()
        model.server.server_close()
        thread.join()
