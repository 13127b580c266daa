"""A local stand-in for the Anthropic Messages API that answers every request with canned text.

Claude Code (`claude -p` with ANTHROPIC_BASE_URL pointing here) streams `POST /v1/messages` requests;
each gets one text answer, as the standard SSE events, chosen by `answer(request_text)` from the text of
the request's last user message. Every request body is kept in `requests` for the test to inspect.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def user_text(body: dict[str, Any]) -> str:
    """All text of the last user message in a Messages API request."""
    users = [m for m in body.get("messages", []) if m.get("role") == "user"]
    if not users:
        return ""
    content = users[-1]["content"]
    if isinstance(content, str):
        return content
    return "\n".join(block.get("text", "") for block in content if isinstance(block, dict))


def sse_events(text: str, model: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """The event stream of one assistant message holding `text`."""
    yield "message_start", {"type": "message_start", "message": {
        "id": "msg_canned", "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}}
    yield "content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
    yield "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}
    yield "content_block_stop", {"type": "content_block_stop", "index": 0}
    yield "message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                            "usage": {"output_tokens": max(1, len(text) // 4)}}
    yield "message_stop", {"type": "message_stop"}


class CannedModel:
    """A running server: `url` for ANTHROPIC_BASE_URL, `requests` as received."""

    def __init__(self, answer: Callable[[str], str]) -> None:
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
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.end_headers()
                for event, data in sse_events(model.answer(user_text(body)), str(body.get("model", "canned"))):
                    self.wfile.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())

            def do_GET(self) -> None:
                self.send_response(404)
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


@contextmanager
def canned_model(answer: Callable[[str], str]) -> Iterator[CannedModel]:
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
