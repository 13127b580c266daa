"""From a recipe run to a learning run on a hard task (docs/gate.md, "A hard task: from the recipe run to a
learning run"): a recipe run whose only findings are the task's (rare successes on a single-turn task, failing
calls and cut episodes on a tool task) is diagnosed healthy by `finetune diagnose`, and the gate accepts
`grpo.deviation` naming it, saying that those findings are what the learning run should reduce."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from llm_finetuning.cli import cli
from llm_finetuning.gate import run_gate

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from diagnose import synth  # noqa: E402


def rare_successes() -> list[dict]:
    """A single-turn task at base pass@1 3%: most groups tie at failure, every fifth step one group varies."""
    rows = synth.vary(synth.healthy(10), frac_reward_zero_std=lambda t, r: 0.75 if r["step"] % 5 == 0 else 1.0,
                      rewards__exact_match__mean=lambda t, r: 0.03 if r["step"] % 5 == 0 else 0.0)
    return synth.vary(rows, reward=lambda t, r: r["rewards/exact_match/mean"])


def failing_calls() -> list[dict]:
    """A tool task at the recipe's rate: half the calls fail all run long, correctness +0.003, lengths 19.7 -> 25.4."""
    return synth.vary(synth.healthy(10), tools__failure_frequency=lambda t, r: 0.5,
                      completions__mean_length=lambda t, r: 19.7 + 5.7 * t,
                      rewards__exact_match__mean=lambda t, r: 0.03 + 0.003 * t, reward=lambda t, r: 0.03 + 0.003 * t)


def diagnosed(brief: Path, rows: list[dict]) -> Path:
    run = synth.write_run(brief.parent / "runs" / "recipe", rows)
    with (run / "metrics.jsonl").open("a") as fh:
        fh.write(json.dumps({"event": "end", "step": rows[-1]["step"]}) + "\n")
    result = CliRunner().invoke(cli, ["diagnose", str(run), "--brief", str(brief)])
    assert result.exit_code == 0, result.output  # healthy: the task's findings do not stop the run
    assert f"this run can justify a learning run (`grpo.deviation: {run}`" in result.output
    return run


@pytest.mark.parametrize(("rows", "task"), [(rare_successes, "no_signal_all_fail"),
                                                   (failing_calls, "tool_failures")])
def test_a_recipe_run_with_only_the_tasks_findings_justifies_the_learning_run(make_brief, monkeypatch, rows, task) -> None:
    brief = make_brief("passing")
    diagnosed(brief, rows())
    record = json.loads((brief.parent / "runs/recipe/diagnosis.json").read_text())
    assert record["healthy"] is True and record["task"] == [task]
    brief.write_text(brief.read_text().replace("learning_rate: 5.0e-7", "learning_rate: 3.0e-5\n  deviation: runs/recipe"))
    monkeypatch.chdir(brief.parent)
    report = run_gate(brief)
    assert report.passed, report.render()
    [warn] = [c for c in report.checks if c.id == "recipe_values"]
    assert f"justified by the healthy run runs/recipe (its only findings were the task's, {task}" in warn.message


def test_a_run_with_a_pathology_beside_the_tasks_findings_does_not(make_brief, monkeypatch) -> None:
    brief = make_brief("passing")
    sick = synth.vary(rare_successes(), kl=lambda t, r: 0.8)  # KL blown up: the run's own failure
    run = synth.write_run(brief.parent / "runs" / "recipe", sick)
    with (run / "metrics.jsonl").open("a") as fh:
        fh.write(json.dumps({"event": "end", "step": 10}) + "\n")
    assert CliRunner().invoke(cli, ["diagnose", str(run), "--brief", str(brief)]).exit_code == 1
    brief.write_text(brief.read_text().replace("learning_rate: 5.0e-7", "learning_rate: 3.0e-5\n  deviation: runs/recipe"))
    monkeypatch.chdir(brief.parent)
    [fail] = [c for c in run_gate(brief).checks if c.id == "recipe_values"]
    assert fail.verdict == "fail"
    assert "(the run's findings: kl_blowup; the task's, which alone would not stop it: no_signal_all_fail)" in fail.message


def test_before_the_first_inspection_the_gate_says_to_settle_the_episode(tmp_path: Path) -> None:
    import shutil

    example = Path(__file__).resolve().parents[2] / "examples/inventory-tools"
    shutil.copytree(example, tmp_path / "b", ignore=shutil.ignore_patterns("records", "runs"))
    [fail] = [c for c in run_gate(tmp_path / "b/brief.yaml").checks if c.id == "reward_inspected"]
    assert fail.verdict == "fail" and fail.message.startswith("missing")
    assert "first settle the episode (episode.max_turns 2, the tools, the chat template)" in fail.fix
    assert "a change after them needs both again" in fail.fix


@pytest.mark.parametrize(("kept", "task"), [("addition-recipe", {"no_signal_all_fail"}),
                                            ("inventory-recipe", {"truncation", "tool_failures"})])
def test_the_recipe_runs_measured_on_an_h200_justify_their_learning_runs(make_brief, monkeypatch, kept, task) -> None:
    """The same path on the metrics the two recipe runs logged on one H200 (bench/inventory_tools_gpu.py, kept in
    bench/results): single-turn sums at base pass@1 0.2% and the inventory tool task at 9.2%."""
    brief = make_brief("passing")
    run = brief.parent / "runs" / "recipe"
    run.mkdir(parents=True)
    results = Path(__file__).resolve().parents[2] / "bench/results"
    (run / "metrics.jsonl").write_bytes((results / f"{kept}-metrics.jsonl").read_bytes())
    result = CliRunner().invoke(cli, ["diagnose", str(run), "--brief", str(brief)])
    assert result.exit_code == 0, result.output
    assert set(json.loads((run / "diagnosis.json").read_text())["task"]) == task
    brief.write_text(brief.read_text().replace("learning_rate: 5.0e-7", "learning_rate: 3.0e-5\n  deviation: runs/recipe"))
    monkeypatch.chdir(brief.parent)
    report = run_gate(brief)
    assert report.passed, report.render()
