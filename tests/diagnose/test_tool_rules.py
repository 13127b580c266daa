"""The tool-use findings: failing tool calls (TRL's tools/failure_frequency, or counted from the logged
episodes) and episodes cut while still calling tools, read from completions.jsonl as TRL logs them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from llm_finetuning.diagnose import RunContext, diagnose, load_trajectory
from llm_finetuning.diagnose.trajectory import read_completions

from . import synth

CALL = {"role": "assistant", "content": "",
        "tool_calls": [{"type": "function", "function": {"name": "multiply", "arguments": {"a": 3, "b": 4}}}]}


def episode(result: str, answer: str | None) -> list[dict[str, Any]]:
    tail = [{"role": "assistant", "content": answer}] if answer is not None else [CALL]
    return [CALL, {"role": "tool", "name": "multiply", "content": result}, *tail]


def write_completions(run_dir: Path, make: Any, steps: int = synth.N, per_step: int = 4) -> None:
    rows = [{"step": s, "prompt": "q", "completion": make(s, i), "rewards": {"exact_match": 0.0}}
            for s in range(1, steps + 1) for i in range(per_step)]
    (run_dir / "completions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def findings(run_dir: Path, ctx: RunContext) -> dict[str, Any]:
    ctx.completions = read_completions(run_dir / "completions.jsonl")
    return {f.id: f for f in diagnose(load_trajectory(run_dir), ctx)}


def test_episodes_are_read_from_completions_as_trl_logs_them(tmp_path: Path) -> None:
    run = synth.write_run(tmp_path / "run", synth.healthy())
    write_completions(run, lambda s, i: episode("{'error': 'boom'}", None), steps=1, per_step=1)
    [c] = read_completions(run / "completions.jsonl")
    assert c.episode is not None
    assert (c.episode.turns, c.episode.tool_calls, c.episode.tool_failures, c.episode.ended_on_call) == (2, 2, 1, True)


def test_failing_tool_calls_while_the_reward_rises_are_an_error(tmp_path: Path) -> None:
    rows = synth.vary(synth.healthy(), tools__failure_frequency=lambda t, r: 0.6, tools__call_frequency=lambda t, r: 1.0)
    run = synth.write_run(tmp_path / "run", rows)
    write_completions(run, lambda s, i: episode("{'error': 'bad arguments'}", "12"))
    found = findings(run, RunContext(max_turns=4))
    f = found["tool_failures"]
    assert f.severity == "error" and "failure rate over the last" in f.evidence["message"]
    assert "the reward rose" in f.evidence["message"] and "2.00 turns per episode" in f.evidence["message"]
    assert "episodes_cut" not in found


def test_failures_are_counted_from_the_episodes_when_trl_logged_none(tmp_path: Path) -> None:
    flat = synth.vary(synth.healthy(), reward=lambda t, r: 0.3)
    run = synth.write_run(tmp_path / "run", flat)
    write_completions(run, lambda s, i: episode("{'error': 'x'}" if i < 2 else "12", "12"))
    f = findings(run, RunContext())["tool_failures"]
    assert f.severity == "warning" and f.evidence["failure_rate_late"] == 0.5


def test_episodes_cut_on_a_tool_call_suggest_a_higher_turn_limit(tmp_path: Path) -> None:
    run = synth.write_run(tmp_path / "run", synth.healthy())
    write_completions(run, lambda s, i: episode("12", None if i < 3 else "12"))
    f = findings(run, RunContext(max_turns=2))["episodes_cut"]
    assert f.evidence["cut_share_late"] == 0.75 and f.brief_edit == "episode:\n  max_turns: 4\n"
    assert "(episode.max_turns 2)" in f.evidence["message"]


def test_healthy_tool_use_has_no_tool_finding(tmp_path: Path) -> None:
    run = synth.write_run(tmp_path / "run", synth.vary(synth.healthy(), tools__failure_frequency=lambda t, r: 0.05))
    write_completions(run, lambda s, i: episode("12", "12"))
    assert findings(run, RunContext(max_turns=4)) == {}
