"""The tool-use figures in docs/results.md and the README are the ones bench/results/tool-task-h200.json holds
(bench/tool_task_gpu.py wrote it on an H200)."""

from __future__ import annotations

import json
from pathlib import Path

from skill_bundle import REPO

RESULT = REPO / "bench/results/tool-task-h200.json"


def _result() -> dict:  # type: ignore[type-arg]
    return json.loads(RESULT.read_text(encoding="utf-8"))


def test_the_file_describes_its_machine_and_a_real_model() -> None:
    result = _result()
    assert result["machine"]["gpu"] == "NVIDIA H200"
    assert result["smoke"] is False and result["model"] == "embedded:smollm2-135m-instruct"
    assert result["runs"]["recipe"]["healthy"] is True  # the deviation stands on a healthy recipe run
    assert result["runs"]["deviation"]["better_beyond_noise"] is True


def test_the_results_page_and_readme_quote_the_file() -> None:
    result = _result()
    run = result["runs"]["deviation"]
    low, high = run["delta_pass_at_1_ci95"]
    page = (REPO / "docs/results.md").read_text(encoding="utf-8")
    row = (f"| held-out pass@1 | {100 * run['held_out_pass_at_1_before']:.1f}% | "
           f"{100 * run['held_out_pass_at_1_after']:.1f}% | +{100 * run['delta_pass_at_1']:.1f} points "
           f"(+{100 * low:.1f} to +{100 * high:.1f}) |")
    assert row in page
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert (f"held-out pass@1 {100 * run['held_out_pass_at_1_before']:.1f}% -> "
            f"{100 * run['held_out_pass_at_1_after']:.1f}% (+{100 * run['delta_pass_at_1']:.1f} points, 95% interval "
            f"+{100 * low:.1f} to +{100 * high:.1f}) after {run['steps']} steps at 3e-5") in readme


def test_the_results_page_names_every_finding_of_the_measured_runs() -> None:
    page = (REPO / "docs/results.md").read_text(encoding="utf-8")
    section = page[page.index("## Tool use"):page.index("## How long `finetune eval` takes")]
    for run in _result()["runs"].values():
        for finding in run["findings"]:
            assert f"`{finding}`" in section, finding


def test_the_kept_run_is_diagnosed_healthy_again(tmp_path: Path) -> None:
    """`finetune diagnose` on the measured run's own metrics.jsonl and eval.json still finds it healthy."""
    from llm_finetuning.diagnose import diagnose_run

    run = tmp_path / "deviation"
    run.mkdir()
    for name in ("metrics.jsonl", "eval.json"):
        (run / name).write_bytes((REPO / f"bench/results/tool-task-deviation-{name}").read_bytes())
    diagnosis = diagnose_run(run)
    assert diagnosis["healthy"] is True, [f["id"] for f in diagnosis["findings"]]
    assert _result()["runs"]["deviation"]["healthy"] is True
