"""The hard tool task's figures (bench/inventory_tools_gpu.py on one H200, bench/results/inventory-tools-h200.json)
and the single-turn one (addition-h200.json): what docs/results.md and the README quote is what the files hold,
and the kept runs' metrics diagnose as docs/diagnose.md says (the recipe runs healthy with only the task's
findings; the learning runs healthy)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from skill_bundle import REPO

RESULTS = REPO / "bench/results"


def _result(name: str) -> dict:  # type: ignore[type-arg]
    return json.loads((RESULTS / name).read_text(encoding="utf-8"))


def readme_figure(r: dict) -> str:  # type: ignore[type-arg]
    """The README's Results line for the hard tool task, generated from the file."""
    p, s = r["pipeline"]["held_out"], r["script"]["held_out"]
    return (f"held-out pass@1 {100 * p['pass_at_1_base']:.1f}% -> {100 * p['pass_at_1_trained']:.1f}% "
            f"(+{100 * p['delta_pass_at_1']:.1f} points, 95% interval +{100 * p['ci95'][0]:.1f} to "
            f"+{100 * p['ci95'][1]:.1f}) through the gate's path in {r['settings']['steps']} steps at 3e-5; a "
            f"hand-written TRL script on the same task, steps and seed: {100 * s['pass_at_1_trained']:.1f}% "
            f"(+{100 * s['delta_pass_at_1']:.1f})")


def test_the_tool_task_is_hard_and_both_ran_the_same_steps_on_an_h200() -> None:
    r = _result("inventory-tools-h200.json")
    assert r["machine"]["gpu"] == "NVIDIA H200" and r["settings"]["model"] == "embedded:smollm2-135m-instruct"
    assert r["baseline"]["pass_at_1"] < 0.10 < r["baseline"]["pass_at_k"]
    assert r["demo_designs"]["chosen"] == "shelf2-stock"  # the design examples/make_data.py writes
    assert r["recipe"]["healthy"] is True and set(r["recipe"]["task"]) == {"truncation", "tool_failures"}
    [line] = r["pipeline"]["gate_recipe_values"]
    assert line.startswith("WARN") and "its only findings were the task's, truncation, tool_failures" in line
    assert r["pipeline"]["steps"] == r["settings"]["steps"] == len(r["script"]["reward_curve"])
    assert r["pipeline"]["held_out"]["pass_at_1_base"] == r["script"]["held_out"]["pass_at_1_base"]


def test_the_readme_and_results_page_quote_the_files() -> None:
    r = _result("inventory-tools-h200.json")
    assert readme_figure(r) in (REPO / "README.md").read_text(encoding="utf-8")
    page = (REPO / "docs/results.md").read_text(encoding="utf-8")
    for who in ("pipeline", "script"):
        h = r[who]["held_out"]
        assert (f"| {100 * h['pass_at_1_base']:.1f}% | {100 * h['pass_at_1_trained']:.1f}% | "
                f"+{100 * h['delta_pass_at_1']:.1f} points (+{100 * h['ci95'][0]:.1f} to +{100 * h['ci95'][1]:.1f}) |") in page
    a = _result("addition-h200.json")
    h = a["pipeline"]["held_out"]
    assert a["baseline"]["pass_at_1"] < 0.10 and a["recipe"]["healthy"] is True
    assert (f"{100 * h['pass_at_1_base']:.1f}% -> {100 * h['pass_at_1_trained']:.1f}% (+{100 * h['delta_pass_at_1']:.1f} "
            f"points, 95% interval +{100 * h['ci95'][0]:.1f} to +{100 * h['ci95'][1]:.1f})") in page


@pytest.mark.parametrize(("task", "run", "task_findings"), [
    ("inventory", "recipe", {"truncation", "tool_failures"}), ("inventory", "learning", {"tool_failures"}),
    ("addition", "recipe", {"no_signal_all_fail"}), ("addition", "learning", set()),
])
def test_the_kept_runs_diagnose_healthy_with_only_the_tasks_findings(tmp_path: Path, task: str, run: str,
                                                                      task_findings: set[str]) -> None:
    """The learning runs' grad-norm jumps from steps where every group tied (a norm near 0) to steps with a success
    are no blow-up: diagnose measures spikes over the steps with signal alone (both runs were first called
    kl_blowup from them)."""
    from llm_finetuning.diagnose import diagnose_run

    target = tmp_path / run
    target.mkdir()
    for name in ("metrics.jsonl", "eval.json"):
        if (RESULTS / f"{task}-{run}-{name}").is_file():
            shutil.copy(RESULTS / f"{task}-{run}-{name}", target / name)
    diagnosis = diagnose_run(target)
    assert diagnosis["healthy"] is True, [f["id"] for f in diagnosis["findings"]]
    assert set(diagnosis["task"]) == task_findings
