"""The scripted Messages API server on its own (no client): the SSE events it streams, how it tells the main
loop, a subagent and side requests apart, and how scripts advance. Standard library HTTP only."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from messages_server import Repeat, Request, ScriptedModel, Text, ToolCall

TOOLS = [{"name": "Agent"}, {"name": "Bash"}]


def post(model: ScriptedModel, body: dict[str, Any], path: str = "/v1/messages?beta=true") -> tuple[str, str]:
    request = urllib.request.Request(model.base_url + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        return answer.headers["Content-Type"], answer.read().decode()


def events(stream: str) -> list[dict[str, Any]]:
    found = []
    for chunk in stream.strip().split("\n\n"):
        name, data = chunk.split("\n")
        event = json.loads(data.removeprefix("data: "))
        assert name == f"event: {event['type']}"
        found.append(event)
    return found


def body(first: str, *later: dict[str, Any], system: str = "main", tools: list[dict[str, str]] = TOOLS) -> dict:
    return {"model": "m", "stream": True, "system": [{"type": "text", "text": system}], "tools": tools,
            "messages": [{"role": "user", "content": [{"type": "text", "text": first}]}, *later]}


def test_a_tool_call_streams_as_the_standard_events() -> None:
    with ScriptedModel(main=[ToolCall("Bash", {"command": "finetune gate brief.yaml"}, text="Gating.")]) as model:
        content_type, stream = post(model, body("go"))
    assert content_type == "text/event-stream"
    found = events(stream)
    assert [e["type"] for e in found] == [
        "message_start", "content_block_start", "content_block_delta", "content_block_stop",
        "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
        "message_delta", "message_stop"]
    assert found[2]["delta"] == {"type": "text_delta", "text": "Gating."}
    assert found[4]["content_block"]["type"] == "tool_use" and found[4]["content_block"]["name"] == "Bash"
    arguments = "".join(e["delta"]["partial_json"] for e in found[5:7])
    assert json.loads(arguments) == {"command": "finetune gate brief.yaml"}
    assert found[8]["delta"]["stop_reason"] == "tool_use"
    assert model.requests[0].tool_id == found[4]["content_block"]["id"]


def test_main_agent_and_side_requests_use_their_own_scripts() -> None:
    model = ScriptedModel(main=[ToolCall("Bash", {"command": "ls"}), Text("main done")], side=[Text("a title")])
    model.agent_script("engineer", "You are the training engineer", [Text("agent done")])
    with model:
        post(model, body("typed"))
        _, title = post(model, body("write a title", system="Generate a title", tools=[]))
        _, agent = post(model, body("gate it", system="You are the training engineer.", tools=[{"name": "Bash"}]))
        tool_id = model.requests[0].tool_id
        _, main = post(model, body("typed", {"role": "assistant", "content": [
            {"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": "ls"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": "a\nb"}]}))
        post(model, {"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": "quota"}]})
        _, tokens = post(model, {"messages": []}, "/v1/messages/count_tokens")
    assert [r.role for r in model.requests] == ["main", "side", "agent:engineer", "main", "side"]
    assert "a title" in title and "agent done" in agent and "main done" in main
    assert model.requests[3].last_tool_result() == "a\nb"
    assert json.loads(tokens)["input_tokens"] >= 1
    assert model.other_calls == [("POST", "/v1/messages/count_tokens")]


def test_repeat_polls_until_what_came_back_says_so() -> None:
    def result(text: str) -> Request:
        return Request("/v1/messages", body("typed", {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t", "content": text}]}), role="main")

    poll = ToolCall("Bash", {"command": "finetune status runs/r1"})
    model = ScriptedModel(main=[Repeat(poll, until=lambda r: "finished" in r.last_tool_result(), times=5),
                                Text("trained")])
    answers = [model.answer(result(text)) for text in ("", "running", "running", "finished")]
    assert answers == [poll, poll, poll, Text("trained")]
    assert model.answer(result("")) == Text("done")  # past the end of its script, the model says so
