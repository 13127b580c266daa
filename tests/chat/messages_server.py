"""A scripted stand-in for the Anthropic Messages API, for driving the real Claude Code client offline.

Standard library only. `ScriptedModel` listens on 127.0.0.1 (ephemeral port) in a thread and answers
`POST /v1/messages` with the standard SSE events (or one JSON message when the request does not stream).
Each request is classified:

- `main`: the main loop (the conversation started by `claude -p PROMPT`); answered from the main script;
- `agent:<name>`: a subagent started through the Agent tool, recognised by its own system prompt
  (registered with `agent_script`); answered from that agent's script;
- `side`: anything else the client asks on the side (titles, summaries, quota probes, other subagents);
  answered from the side handler (by default a short text), never consuming a script.

A script is a list of steps: `ToolCall(name, input)`, `Text(text)`, a function of the `Request` so far
that returns one of them (so a step can depend on the tool result that came back), or `Repeat(step, until)`
(polling). When a script runs
out, the model answers `Text("done")`. Every request body is recorded; `Transcript` reads them back.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

MODEL = "claude-sonnet-4-5"


@dataclass(frozen=True)
class ToolCall:
    """The model calls a tool; `text` (optional) is said before the call."""

    name: str
    input: dict[str, Any]
    text: str = ""


@dataclass(frozen=True)
class Text:
    """The model answers with text and ends its turn."""

    text: str


Reply = ToolCall | Text


@dataclass
class Request:
    """One request the client made: its path, body, and the role the server gave it."""

    path: str
    body: dict[str, Any]
    role: str = "side"
    reply: Reply | None = None  # what the scripted model answered
    tool_id: str = ""  # the id of the tool_use block in that answer, if it called a tool

    @property
    def system(self) -> str:
        """The system prompt as one string (the client sends a list of text blocks)."""
        system = self.body.get("system") or ""
        if isinstance(system, str):
            return system
        return "\n".join(block.get("text", "") for block in system if isinstance(block, dict))

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages") or [])

    @property
    def tool_names(self) -> list[str]:
        return [tool.get("name", "") for tool in self.body.get("tools") or []]

    def tool_results(self) -> list[dict[str, Any]]:
        """Every tool_result block in this request's messages, in order."""
        return [block for message in self.messages if message.get("role") == "user"
                for block in blocks(message) if block.get("type") == "tool_result"]

    def last_tool_result(self) -> str:
        """The text of the newest tool result (what came back from the last call), or ''."""
        results = self.tool_results()
        return result_text(results[-1]) if results else ""


@dataclass(frozen=True)
class Repeat:
    """A step taken again on each request until `until(request)` holds for what came back (checked from the
    second time on), at most `times` times; then the script moves on. For polling, e.g. `finetune status`."""

    step: Reply | Callable[[Request], Reply]
    until: Callable[[Request], bool]
    times: int = 20


Step = Reply | Repeat | Callable[[Request], Reply]
SideHandler = Callable[[Request], Reply]


def blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    """A message's content as a list of blocks (a plain string is one text block)."""
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [block for block in content or [] if isinstance(block, dict)]


def result_text(block: dict[str, Any]) -> str:
    """The text of a tool_result block (a string, or a list of text blocks)."""
    content = block.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(part.get("text", "") for part in content or [] if isinstance(part, dict))


def default_side(request: Request) -> Reply:
    """Side requests (titles, summaries, probes) get a short neutral answer."""
    return Text("Scripted session")


@dataclass
class _Script:
    steps: list[Step]
    position: int = 0
    repeated: int = 0

    def next(self, request: Request) -> Reply:
        if self.position >= len(self.steps):
            return Text("done")
        step = self.steps[self.position]
        if isinstance(step, Repeat):
            if self.repeated and (self.repeated >= step.times or step.until(request)):
                self.position, self.repeated = self.position + 1, 0
                return self.next(request)
            self.repeated += 1
            return step.step(request) if callable(step.step) else step.step
        self.position += 1
        return step(request) if callable(step) else step


@dataclass
class _AgentScript:
    name: str
    marker: str
    script: _Script


@dataclass
class ScriptedModel:
    """The server. Use as a context manager; `base_url` goes into ANTHROPIC_BASE_URL."""

    main: list[Step] = field(default_factory=list)
    side: SideHandler | list[Step] = default_side  # a handler, or a script of its own
    requests: list[Request] = field(default_factory=list)
    other_calls: list[tuple[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._main = _Script(list(self.main))
        self._side = _Script(list(self.side)) if isinstance(self.side, list) else None
        self._agents: list[_AgentScript] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def agent_script(self, name: str, marker: str, steps: Iterable[Step]) -> None:
        """Answer requests whose system prompt contains `marker` (e.g. a line of the agent's body) from
        `steps`, recording them with the role `agent:<name>`."""
        self._agents.append(_AgentScript(name, marker, _Script(list(steps))))

    # classification -------------------------------------------------------------------------------
    def classify(self, request: Request) -> str:
        for agent in self._agents:
            if agent.marker in request.system:
                return f"agent:{agent.name}"
        if self._is_main(request):
            return "main"
        return "side"

    def _is_main(self, request: Request) -> bool:
        """The main loop: a request offering the Agent tool that continues the first such conversation
        (same first user message); subagents and side requests start conversations of their own."""
        if "Agent" not in request.tool_names:
            return False
        first = [r for r in self.requests if r.role == "main"]
        if not first:
            return True
        return _first_user_text(first[0]) == _first_user_text(request)

    def answer(self, request: Request) -> Reply:
        with self._lock:
            request.role = self.classify(request)
            self.requests.append(request)
            script: _Script | None
            if request.role == "main":
                script = self._main
            elif request.role.startswith("agent:"):
                script = next(a.script for a in self._agents if f"agent:{a.name}" == request.role)
            else:
                script = self._side
        try:
            if script is not None:
                reply = script.next(request)
            else:
                assert callable(self.side)
                reply = self.side(request)
        except Exception as exc:  # a broken step is reported to the client and in the transcript
            reply = Text(f"[scripted model error: {type(exc).__name__}: {exc}]")
        request.reply = reply
        request.tool_id = self.new_id("toolu") if isinstance(reply, ToolCall) else ""
        return reply

    # server ---------------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        assert self._server is not None, "the server is not started"
        port = self._server.server_address[1]
        return f"http://127.0.0.1:{port}"

    def __enter__(self) -> ScriptedModel:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="scripted-model", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def new_id(self, prefix: str) -> str:
        return f"{prefix}_{next(self._ids):06d}"


def _first_user_text(request: Request) -> str:
    for message in request.messages:
        if message.get("role") == "user":
            return "\n".join(b.get("text", "") for b in blocks(message) if b.get("type") == "text")
    return ""


# wire format ----------------------------------------------------------------------------------------
def message_events(reply: Reply, message_id: str, tool_id: str, model: str) -> list[dict[str, Any]]:
    """The SSE events (as dicts) of one assistant message."""
    usage = {"input_tokens": 10, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": {
        "id": message_id, "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": usage}}]
    text = reply.text
    index = 0
    if text:
        events += [{"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}},
                   {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": text}},
                   {"type": "content_block_stop", "index": index}]
        index += 1
    if isinstance(reply, ToolCall):
        arguments = json.dumps(reply.input)
        half = len(arguments) // 2  # two deltas, as the real API splits the input JSON
        events.append({"type": "content_block_start", "index": index,
                       "content_block": {"type": "tool_use", "id": tool_id, "name": reply.name, "input": {}}})
        events += [{"type": "content_block_delta", "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": part}}
                   for part in (arguments[:half], arguments[half:]) if part]
        events.append({"type": "content_block_stop", "index": index})
    stop = "tool_use" if isinstance(reply, ToolCall) else "end_turn"
    events += [{"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 5}},
               {"type": "message_stop"}]
    return events


def message_json(reply: Reply, message_id: str, tool_id: str, model: str) -> dict[str, Any]:
    """The same message as one JSON object, for a request that does not stream."""
    content: list[dict[str, Any]] = [{"type": "text", "text": reply.text}] if reply.text else []
    if isinstance(reply, ToolCall):
        content.append({"type": "tool_use", "id": tool_id, "name": reply.name, "input": reply.input})
    return {"id": message_id, "type": "message", "role": "assistant", "model": model, "content": content,
            "stop_reason": "tool_use" if isinstance(reply, ToolCall) else "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5}}


def _handler(model: ScriptedModel) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet: the calls are recorded instead
            pass

        def _send(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("request-id", model.new_id("req"))
            self.end_headers()
            self.wfile.write(body)

        def _json(self, status: int, obj: dict[str, Any]) -> None:
            self._send(status, json.dumps(obj).encode(), "application/json")

        def _read_body(self) -> dict[str, Any]:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                parsed = json.loads(raw or b"{}")
            except ValueError:
                return {"_raw": raw.decode(errors="replace")}
            return parsed if isinstance(parsed, dict) else {"_raw": parsed}

        def do_POST(self) -> None:
            path = urlsplit(self.path).path
            body = self._read_body()
            if path == "/v1/messages":
                request = Request(self.path, body)
                reply = model.answer(request)
                message_id, tool_id = model.new_id("msg"), request.tool_id
                name = str(body.get("model") or MODEL)
                if body.get("stream"):
                    events = message_events(reply, message_id, tool_id, name)
                    stream = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
                    self._send(200, stream.encode(), "text/event-stream")
                else:
                    self._json(200, message_json(reply, message_id, tool_id, name))
            elif path == "/v1/messages/count_tokens":
                model.other_calls.append(("POST", self.path))
                self._json(200, {"input_tokens": max(1, len(json.dumps(body)) // 4)})
            else:
                model.other_calls.append(("POST", self.path))
                self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": path}})

        def do_GET(self) -> None:
            model.other_calls.append(("GET", self.path))
            if urlsplit(self.path).path == "/v1/models":
                self._json(200, {"data": [{"type": "model", "id": MODEL, "display_name": "Scripted"}],
                                 "has_more": False, "first_id": MODEL, "last_id": MODEL})
            else:
                self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": self.path}})

        def do_HEAD(self) -> None:
            model.other_calls.append(("HEAD", self.path))
            self._send(200, b"", "text/plain")

    return Handler
