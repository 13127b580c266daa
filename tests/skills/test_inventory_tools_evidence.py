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


def pct(x: float) -> str:
    return f"{100 * x:.1f}"


def mean_trained(r: dict, who: str) -> float:  # type: ignore[type-arg]
    """Held-out pass@1 after training, averaged over the seeds."""
    scored = [run["held_out"]["pass_at_1_trained"] for run in r[who].values()]
    return sum(scored) / len(scored)


def readme_figure(r: dict) -> str:  # type: ignore[type-arg]
    """The README's Results line for the hard tool task, generated from the file."""
    g, seeds = r["gain_points"], r["settings"]["seeds"]
    base = r["baseline"]["pass_at_1"]
    per_seed = ", ".join(f"+{g['pipeline']['per_seed'][str(s)]}" for s in seeds)
    return (f"held-out pass@1 {pct(base)}% -> {pct(mean_trained(r, 'pipeline'))}% on average over {len(seeds)} seeds "
            f"(+{g['pipeline']['mean']} points; {per_seed}) through the gate's path in {r['settings']['steps']} "
            f"steps at 3e-5; a hand-written TRL script on the same task, steps and seeds: "
            f"{pct(mean_trained(r, 'script'))}% (+{g['script']['mean']})")


def seed_row(who: str, seed: str, run: dict) -> str:  # type: ignore[type-arg]
    """docs/results.md's table row for one run."""
    h = run["held_out"]
    return (f"| {who} | {seed} | {pct(h['pass_at_1_trained'])}% | +{pct(h['delta_pass_at_1'])} points "
            f"(+{pct(h['ci95'][0])} to +{pct(h['ci95'][1])}) |")


def test_the_tool_task_is_hard_and_both_ran_the_same_steps_and_seeds_on_an_h200() -> None:
    r = _result("inventory-tools-h200.json")
    assert r["machine"]["gpu"] == "NVIDIA H200" and r["settings"]["model"] == "embedded:smollm2-135m-instruct"
    assert r["baseline"]["pass_at_1"] < 0.10 < r["baseline"]["pass_at_k"]
    assert r["demo_designs"]["chosen"] == "shelf2-stock"  # the design examples/make_data.py writes, measured first:
    designs = _result("inventory-demo-designs-h200.json")["demo_designs"]
    assert designs["chosen"] == "shelf2-stock" and designs["measured"]["shelf2-stock"]["pass_at_1"] < 0.10
    assert r["recipe"]["healthy"] is True and set(r["recipe"]["task"]) <= {"truncation", "tool_failures"}
    seeds = [str(s) for s in r["settings"]["seeds"]]
    assert len(seeds) >= 3 and set(r["pipeline"]) == set(r["script"]) == set(seeds)
    for seed in seeds:
        pipeline, script = r["pipeline"][seed], r["script"][seed]
        [line] = pipeline["gate_recipe_values"]
        assert line.startswith("WARN") and "its only findings were the task's" in line
        assert pipeline["steps"] == r["settings"]["steps"] == len(script["reward_curve"])
        assert pipeline["held_out"]["pass_at_1_base"] == script["held_out"]["pass_at_1_base"] == r["baseline"]["pass_at_1"]


def test_the_readme_and_results_page_quote_the_files() -> None:
    r = _result("inventory-tools-h200.json")
    assert readme_figure(r) in (REPO / "README.md").read_text(encoding="utf-8")
    page = (REPO / "docs/results.md").read_text(encoding="utf-8")
    for who, label in (("pipeline", "gated path"), ("script", "hand-written script")):
        for seed, run in r[who].items():
            assert seed_row(label, seed, run) in page
    a = _result("addition-h200.json")
    [h] = [run["held_out"] for run in a["pipeline"].values()]
    assert a["baseline"]["pass_at_1"] < 0.10 and a["recipe"]["healthy"] is True
    assert (f"{100 * h['pass_at_1_base']:.1f}% -> {100 * h['pass_at_1_trained']:.1f}% (+{100 * h['delta_pass_at_1']:.1f} "
            f"points, 95% interval +{100 * h['ci95'][0]:.1f} to +{100 * h['ci95'][1]:.1f})") in page


def kept_runs() -> list[tuple[str, str]]:
    """(task, run) of every run whose metrics the benchmark kept: each task's recipe run and its learning runs, one
    a seed (`<task>-learning-<seed>-metrics.jsonl`)."""
    return sorted((path.name.split("-")[0], path.name.split("-", 1)[1].removesuffix("-metrics.jsonl"))
                  for path in RESULTS.glob("*-metrics.jsonl") if path.name.split("-")[0] in ("inventory", "addition"))


# What each task's base model cannot do yet: the findings of the task's kind a run may have and stay healthy.
TASK_FINDINGS = {"inventory": {"truncation", "tool_failures"}, "addition": {"no_signal_all_fail"}}


@pytest.mark.parametrize(("task", "run"), kept_runs())
def test_the_kept_runs_diagnose_healthy_with_only_the_tasks_findings(tmp_path: Path, task: str, run: str) -> None:
    """The learning runs' grad-norm jumps from steps where every group tied (a norm near 0) to steps with a success
    are no blow-up: diagnose measures spikes over the steps with signal alone (the first two learning runs were
    called kl_blowup from them)."""
    from llm_finetuning.diagnose import diagnose_run

    target = tmp_path / run
    target.mkdir()
    for name in ("metrics.jsonl", "eval.json"):
        if (RESULTS / f"{task}-{run}-{name}").is_file():
            shutil.copy(RESULTS / f"{task}-{run}-{name}", target / name)
    diagnosis = diagnose_run(target)
    assert diagnosis["healthy"] is True, [f["id"] for f in diagnosis["findings"]]
    assert set(diagnosis["task"]) <= TASK_FINDINGS[task]
    if run == "recipe":  # a recipe run justifies a learning run by the task's findings it names
        assert diagnosis["task"]


def test_every_seed_kept_its_runs() -> None:
    for task, name in (("inventory", "inventory-tools-h200.json"), ("addition", "addition-h200.json")):
        seeds = _result(name)["settings"]["seeds"]
        assert {run for t, run in kept_runs() if t == task} == {"recipe", *(f"learning-{s}" for s in seeds)}
