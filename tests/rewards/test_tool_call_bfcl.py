"""`tool_call` held to the Berkeley Function Calling Leaderboard's own AST checker (bfcl-eval 2026.3.23,
installed by .ci/run without its dependencies): on a fixed sample of entries of every category BFCL checks
by AST and candidate replies of every family (bench/_bfcl.py), written the documented way
(`llm_finetuning.rewards.tool_call_bfcl`), the reward's verdict is BFCL's, as `<tool_call>` text and as chat
messages. bench/bfcl_agreement.py runs all 2,351 entries and times both.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("bfcl_eval", reason="bfcl-eval is not installed (pip install --no-deps bfcl-eval==2026.3.23)")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import _bfcl  # noqa: E402

from llm_finetuning.rewards.tool_call import ToolCall  # noqa: E402
from llm_finetuning.rewards.tool_call_bfcl import BFCL_ARGS, expected_calls, main  # noqa: E402

# BFCL pairs parallel calls greedily, in the order of its answer; the reward finds a maximum matching. On
# this entry BFCL's greedy pairing takes, for the first expected call, a reply call that the third one
# needed and so rejects a reordering that answers every expected call (docs/rewards.md, BFCL).
GREEDY_PAIRING = {("parallel_178", "reordered_calls")}


def sample() -> list[_bfcl.Entry]:
    """Every 12th entry of each category, the small live parallel ones whole, and parallel_178."""
    chosen = []
    for category in _bfcl.CATEGORIES:
        entries = _bfcl.entries((category,))
        step = 1 if len(entries) < 30 else 12
        chosen += [e for i, e in enumerate(entries) if i % step == 0 or e.id == "parallel_178"]
    return chosen


def test_verdicts_equal_bfcls_on_every_family_and_category() -> None:
    entries = sample()
    candidates = _bfcl.candidates(entries)
    valid = _bfcl.checker()
    reward = ToolCall(expected_field="expected_calls", **BFCL_ARGS)
    column = [expected_calls(c.entry.functions, c.entry.answer) for c in candidates]
    text = reward([""] * len(candidates), [_bfcl.as_text(c.calls) for c in candidates], expected_calls=column)
    chat = reward([""] * len(candidates), [_bfcl.as_messages(c.calls) for c in candidates], expected_calls=column)
    assert text == chat
    differ = [(c.entry.id, c.family, c.calls) for c, v in zip(candidates, text, strict=True)
              if (v == 1.0) != valid(c.entry, c.calls)]
    assert {(i, f) for i, f, _ in differ} == GREEDY_PAIRING, differ[:5]
    families = Counter(c.family for c in candidates)
    assert set(families) == set(_bfcl.FAMILIES)  # every family is exercised
    assert {c.entry.category for c in candidates} == set(_bfcl.CATEGORIES)
    theirs = Counter(valid(c.entry, c.calls) for c in candidates)
    assert theirs[True] > 1000 and theirs[False] > 5000  # both verdicts are well represented


def test_bfcls_greedy_pairing_is_the_difference_left() -> None:
    entry = next(e for e in _bfcl.entries(("parallel",)) if e.id == "parallel_178")
    [reordered] = list(_bfcl.family_calls(entry, "reordered_calls"))
    assert not _bfcl.checker()(entry, reordered)
    reward = ToolCall(expected=expected_calls(entry.functions, entry.answer), **BFCL_ARGS)
    assert reward([""], [_bfcl.as_text(reordered)]) == [1.0]
    assert reward([""], [_bfcl.as_text(_bfcl.canonical(entry))]) == [1.0]


def test_an_entry_written_as_expected_calls(tmp_path: Path) -> None:
    functions = [{"name": "weather.get", "parameters": {"type": "dict", "required": ["city"], "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}, "units": {"type": "array", "items": {"type": "string"}}}}}]
    answer = [{"weather.get": {"city": ["New York, NY", "NYC"], "days": ["", 5], "units": [["C"], ""]}}]
    assert expected_calls(functions, answer) == [{"name": "weather.get", "arguments": {
        "type": "object", "additionalProperties": False, "required": ["city"], "properties": {
            "city": {"type": "string", "enum": ["New York, NY", "NYC"]},
            "days": {"type": "integer", "enum": [5]},
            "units": {"type": "array", "items": {"type": "string"}, "enum": [["C"], []]}}}}]
    questions, answers = tmp_path / "q.json", tmp_path / "a.json"
    questions.write_text(json.dumps({"id": "x_0", "question": [[{"role": "user", "content": "NYC?"}]], "function": functions}) + "\n")
    answers.write_text(json.dumps({"id": "x_0", "ground_truth": answer}) + "\n")
    assert main([str(questions), str(answers), "-o", str(tmp_path / "rows.jsonl")]) == 0
    [row] = [json.loads(line) for line in (tmp_path / "rows.jsonl").read_text().splitlines()]
    assert row["prompt"] == [{"role": "user", "content": "NYC?"}]
    assert json.loads(row["expected_calls"]) == expected_calls(functions, answer)  # a JSON string, as datasets keep it
