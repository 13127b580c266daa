"""The tool-use findings: failing tool calls (TRL's tools/failure_frequency, or counted from the logged
episodes) and episodes cut while still calling tools, read from completions.jsonl as TRL logs them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from llm_finetuning.diagnose import (
    RunContext,
    diagnose,
    diagnosis_json,
    failure_modes,
    load_trajectory,
    task_findings,
)
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


def test_episodes_cut_at_a_steady_share_are_the_tasks_and_cost_the_records_to_change(tmp_path: Path) -> None:
    run = synth.write_run(tmp_path / "run", synth.healthy())
    write_completions(run, lambda s, i: episode("12", None if i < 3 else "12"))
    found = findings(run, RunContext(max_turns=2))
    f = found["episodes_cut"]
    assert (f.kind, f.severity, f.evidence["cut_share_late"]) == ("task", "warning", 0.75)
    assert "(episode.max_turns 2)" in f.evidence["message"]
    # the fix that keeps the records first; the episode change named with its cost, and not offered as the edit
    assert f.brief_edit is None and "grpo.deviation" in f.fix
    assert "raising episode.max_turns (now 2) is an episode change" in f.fix and "new baseline, inspection" in f.fix
    assert failure_modes(list(found.values())) == [] and task_findings(list(found.values())) == [f]


def test_episodes_cut_more_and_more_are_the_runs(tmp_path: Path) -> None:
    run = synth.write_run(tmp_path / "run", synth.healthy())
    write_completions(run, lambda s, i: episode("12", None if s > 20 else "12"))
    f = findings(run, RunContext(max_turns=2))["episodes_cut"]
    assert (f.kind, f.evidence["cut_share_early"], f.evidence["cut_share_late"]) == ("training", 0.0, 1.0)
    assert "learning to end on a call" in f.fix


def test_failing_calls_that_do_not_climb_are_the_tasks(tmp_path: Path) -> None:
    flat = synth.vary(synth.healthy(), reward=lambda t, r: 0.3, tools__failure_frequency=lambda t, r: 0.5 - 0.1 * t)
    f = findings(synth.write_run(tmp_path / "run", flat), RunContext())["tool_failures"]
    assert (f.kind, f.severity) == ("task", "warning") and "grpo.deviation" in f.fix
    climbing = synth.vary(flat, tools__failure_frequency=lambda t, r: 0.3 + 0.4 * t)
    f = findings(synth.write_run(tmp_path / "run2", climbing), RunContext())["tool_failures"]
    assert (f.kind, f.severity) == ("training", "warning") and "climbed" in f.evidence["message"]


def test_the_issue_recipe_run_is_healthy_with_the_tasks_findings(tmp_path: Path) -> None:
    """The recipe run on a hard tool task (5e-7, 10 steps): half the calls fail, 40% of the episodes end on a
    call, correctness moves +0.003 and completions grow from 19.7 to 25.4 tokens. All of it is what the base
    model cannot do yet, none a pathology of the run: healthy, and its findings are the task's."""
    import random

    rng = random.Random(7)
    rows = synth.vary(synth.healthy(10), completions__mean_length=lambda t, r: 19.7 + 5.7 * t + rng.uniform(-0.3, 0.3),
                      rewards__exact_match__mean=lambda t, r: 0.03 + 0.003 * t,
                      rewards__tool_call__mean=lambda t, r: 0.2 + 0.06 * t + rng.uniform(-0.01, 0.01),
                      tools__failure_frequency=lambda t, r: 0.5 + rng.uniform(-0.03, 0.03),
                      frac_reward_zero_std=lambda t, r: 0.6)
    rows = synth.vary(rows, reward=lambda t, r: r["rewards/exact_match/mean"] + 0.25 * r["rewards/tool_call/mean"])
    run = synth.write_run(tmp_path / "run", rows)
    write_completions(run, lambda s, i: episode("{'error': 'unknown item'}", None if i < 2 else "7"), steps=10, per_step=5)
    ctx = RunContext(max_turns=4, correctness=["exact_match"], reward_weights={"exact_match": 1.0, "tool_call": 0.25})
    found = findings(run, ctx)
    assert "length_reward_correlation" not in found
    assert {f.id for f in task_findings(list(found.values()))} == {"tool_failures", "episodes_cut"}
    assert diagnosis_json(list(found.values()))["healthy"] is True


def test_healthy_tool_use_has_no_tool_finding(tmp_path: Path) -> None:
    run = synth.write_run(tmp_path / "run", synth.vary(synth.healthy(), tools__failure_frequency=lambda t, r: 0.05))
    write_completions(run, lambda s, i: episode("12", "12"))
    assert findings(run, RunContext(max_turns=4)) == {}
