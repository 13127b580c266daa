"""Episodes in the records: the samples file keeps each trajectory, the report and `finetune review` show
each turn, call, result and the final answer, and the record binds the tool code (editing a tool makes
it stale, naming the file)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from llm_finetuning.records.episodes import episode_transcript

from .conftest import copy_example, load


def episode(a: int, b: int, answer: str) -> dict[str, Any]:
    return {"messages": [
        {"role": "assistant", "content": "",
         "tool_calls": [{"type": "function", "function": {"name": "multiply", "arguments": {"a": a, "b": b}}}]},
        {"role": "tool", "name": "multiply", "content": str(a * b)},
        {"role": "assistant", "content": answer}],
        "turns": 2, "tool_calls": 1, "tool_failures": 0, "cut_at_limit": False, "model_tokens": 30, "tool_tokens": 9}


def make_record(brief_path: Path, n: int = 50) -> Path:
    from llm_finetuning.models import model_identity
    from llm_finetuning.records.inspection import create_inspection
    from llm_finetuning.rewards import score_rows

    brief = load(brief_path)
    rows = [json.loads(line) for line in (brief.folder / "data/train.jsonl").read_text().splitlines()[:n]]
    episodes = []
    for i, row in enumerate(rows):
        a, b = row["expected_calls"][0]["arguments"]["properties"]["a"]["enum"]
        episodes.append(episode(a, b, row["answer"] if i % 2 == 0 else "7"))
    scores = score_rows(brief, [{**r, "completion": e["messages"]} for r, e in zip(rows, episodes, strict=True)],
                        explain=True)
    samples = [{"id": f"s{i:03d}", "prompt": r["prompt"], "completion": e["messages"][-1]["content"], "episode": e,
                "rewards": s["rewards"], "total": s["total"], "success": s["total"] == 1.5, "truncated": False,
                "explanations": s["explanations"], "reference": {"answer": r["answer"]}}
               for i, (r, e, s) in enumerate(zip(rows, episodes, scores, strict=True))]
    record = brief.resolve("records/inspection.json")
    create_inspection(brief, samples, record, model_identity(brief.model, brief.folder))
    return record


def test_the_transcript_shows_each_turn_call_result_and_the_final_answer() -> None:
    text = episode_transcript(episode(3, 4, "12"))
    assert text.splitlines() == ["[turn 1] model", '  -> calls multiply({"a": 3, "b": 4})',
                                 "  <- multiply returned: 12", "[turn 2] model: 12", "[final answer] 12"]
    cut = {**episode(3, 4, "12"), "messages": episode(3, 4, "12")["messages"][:1], "cut_at_limit": True}
    assert episode_transcript(cut).endswith("[final answer] (none: the episode ended on a tool call)")


def test_report_and_review_show_the_episode_and_each_reward_with_why(tmp_path: Path) -> None:
    from rich.console import Console

    from llm_finetuning.commands.review import Review
    from llm_finetuning.sampling.report import render_html, render_markdown

    record = make_record(copy_example("calculator-tools", tmp_path))
    samples = [json.loads(line) for line in record.with_name("inspection.samples.jsonl").read_text().splitlines()]
    assert samples[0]["episode"]["messages"][0]["tool_calls"][0]["function"]["name"] == "multiply"
    meta = {"brief": "calculator-tools", "model": "m", "rewards": ["tool_call", "exact_match"], "record": str(record),
            "success_definition": "..."}
    md, html = render_markdown(samples[:2], meta), render_html(samples[:2], meta)
    for page in (md, html):
        assert "Episode (2 turn(s), 1 tool call(s), 0 failed)" in page and "multiply returned: " in page
        assert "1/1 expected call(s) made with valid arguments; made: multiply" in page
    review = Review(record)
    review.console = Console(file=io.StringIO(), width=200, highlight=False)
    review.show(1)
    screen = review.console.file.getvalue()  # type: ignore[attr-defined]
    assert "[turn 1] model" in screen and "-> calls multiply(" in screen and "[final answer] 7" in screen
    assert "extracted '7' by the last number" in screen


def test_editing_a_tool_makes_the_record_stale_naming_the_file(tmp_path: Path) -> None:
    from llm_finetuning.models import model_identity
    from llm_finetuning.records.inspection import verify_inspection

    brief_path = copy_example("calculator-tools", tmp_path)
    record = make_record(brief_path)
    brief = load(brief_path)
    stored = json.loads(record.read_text())["bindings"]["episode"]
    assert set(stored["code"]) == {"tools.py", "chat_template.jinja"}
    tools = brief.folder / "tools.py"
    tools.write_text(tools.read_text() + "\n# edited\n")
    problems = [p for p in verify_inspection(brief, record, model_identity(brief.model, brief.folder))[1]
                if p.path == "episode"]
    assert [p.message for p in problems] == ["the episode's tools changed since the record: tools.py changed"]
