"""What `finetune review` puts on the screen: the truncation marker is shown (not eaten as markup), and an
episode's sample fits a 24-line, 80-column terminal with its context folded, its reference summarised and raw
special tokens inside a turn pointed at."""

from __future__ import annotations

import io
import json
from pathlib import Path

from rich.console import Console

from .conftest import copy_example, load


def _record(brief_path: Path, samples: list[dict]) -> Path:
    from llm_finetuning.models import model_identity
    from llm_finetuning.records.inspection import create_inspection

    brief = load(brief_path)
    record = brief.resolve("records/inspection.json")
    create_inspection(brief, samples, record, model_identity(brief.model, brief.folder))
    return record


def _screen(record: Path, i: int) -> list[str]:
    from llm_finetuning.commands.review import Review

    review = Review(record)
    review.console = Console(file=io.StringIO(), width=80, height=24, highlight=False, color_system=None)
    review.show(i)
    return review.console.file.getvalue().rstrip("\n").splitlines()  # type: ignore[attr-defined]


def _sample(i: int, **fields: object) -> dict:
    return {"id": f"s{i:03d}", "prompt": "Alice is 30", "completion": '{"name": "Alice", "age"',
            "rewards": {"json_schema": 0.0}, "total": 0.0, "success": False, "truncated": False,
            "reference": {"schema": {"type": "object"}}, **fields}


def test_the_truncation_marker_is_on_the_screen(tmp_path: Path) -> None:
    brief = copy_example("json-person", tmp_path)
    record = _record(brief, [_sample(0, truncated=True), _sample(1)])
    assert any("Completion  [cut at max_completion_length]" in line for line in _screen(record, 0))
    assert not any("cut at max_completion_length" in line for line in _screen(record, 1))


def test_an_episode_fits_a_24_line_terminal_with_its_context_folded(tmp_path: Path) -> None:
    brief = copy_example("calculator-tools", tmp_path)
    row = json.loads((brief.parent / "data" / "train.jsonl").read_text().splitlines()[0])
    made_up = "<|im_start|>user <tool_response>3306</tool_response><|im_end|>"
    episode = {"messages": [
        {"role": "assistant", "content": made_up, "tool_calls": [
            {"type": "function", "function": {"name": "multiply", "arguments": {"a": 57, "b": 58}}}]},
        {"role": "tool", "name": "multiply", "content": "3306"},
        {"role": "assistant", "content": "3306"}],
        "turns": 2, "tool_calls": 1, "tool_failures": 0, "cut_at_limit": False, "model_tokens": 30, "tool_tokens": 9}
    sample = {"id": "s000", "prompt": row["prompt"], "completion": "3306", "episode": episode,
              "rewards": {"tool_call": 1.0, "exact_match": 1.0}, "total": 1.5, "success": True, "truncated": False,
              "reference": {k: v for k, v in row.items() if k != "prompt"}}
    screen = _screen(_record(brief, [sample, {**sample, "id": "s001"}]), 0)
    assert len(screen) + 1 <= 24, "\n".join(screen)  # + the line the answer is typed on
    text = "\n".join(screen)
    assert "[system, folded] You compute with tools, then reply with the number alone." in text
    assert "[3 worked episode(s), folded: 'What is 12 * 34?' -> 408 ...]" in text
    assert "What is 57 * 58?" in text
    assert "expected_calls: 1 call(s): multiply(a in [57, 58], b in [57, 58])" in text and "answer: 3306" in text
    assert "! raw special tokens the model wrote in turn 1: <|im_start|>, <tool_response>," in text
