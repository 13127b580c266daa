"""`finetune diagnose`: exit codes, the --json contract, diagnosis.json for the gate, --plot and --follow."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

from click.testing import CliRunner

from llm_finetuning.cli import cli
from llm_finetuning.diagnose import FINDING_IDS, load_trajectory
from llm_finetuning.diagnose.context import RunContext
from llm_finetuning.diagnose.follow import follow
from llm_finetuning.records.diagnosis import verify_diagnosis

from . import synth


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["diagnose", *args])
    return result.exit_code, result.stdout, result.stderr


def test_healthy_run_exits_0_and_says_keep_grpo(tmp_path: Path) -> None:
    run = synth.write_run(tmp_path / "run", synth.healthy())
    code, out, _ = invoke(str(run))
    assert code == 0
    assert out.startswith(f"finetune diagnose {run}: healthy (40 logged steps to step 40, from metrics.jsonl)")
    assert "keep plain GRPO" in out


def test_findings_exit_1_with_the_json_contract(tmp_path: Path) -> None:
    run = synth.write_run(tmp_path / "run", synth.entropy_collapse())
    code, out, _ = invoke(str(run), "--json")
    assert code == 1
    data = json.loads(out)
    assert data["healthy"] is False
    f = data["findings"][0]
    assert {"id", "severity", "steps", "evidence", "variant", "fix"} <= set(f)
    assert f["id"] in FINDING_IDS and f["id"] == "entropy_collapse" and f["variant"] == "dapo"
    assert f["severity"] == "error" and f["steps"] and isinstance(f["evidence"]["message"], str)


def test_human_output_shows_evidence_variant_fix_and_brief_edit(tmp_path: Path) -> None:
    run = synth.write_run(tmp_path / "run", synth.length_bias())
    code, out, _ = invoke(str(run))
    assert code == 1
    assert "warning length_reward_correlation  steps 21-40" in out
    assert "variant: dr_grpo" in out
    assert "          grpo:\n            variant: dr_grpo\n            symptom: length_reward_correlation" in out


def test_unusable_run_exits_2(tmp_path: Path) -> None:
    code, out, err = invoke(str(tmp_path / "missing"))
    assert code == 2 and "does not exist" in err
    code, out, _ = invoke(str(tmp_path / "missing"), "--json")
    payload = json.loads(out)
    assert code == 2 and payload["ok"] is False and "does not exist" in payload["problems"][0]["message"]


def test_diagnosis_record_binds_brief_and_metrics_for_the_gate(tmp_path: Path) -> None:
    run = synth.write_run(tmp_path / "run", synth.healthy())
    (run / "manifest.json").write_text(json.dumps({"format": 1, "name": "math-exact", "files": {},
                                                   "brief": {"path": "brief.yaml", "sha256": "f" * 64}}))
    assert invoke(str(run))[0] == 0
    record = json.loads((run / "diagnosis.json").read_text())
    assert record["healthy"] is True and record["findings"] == [] and record["format"] == 1
    assert record["brief_name"] == "math-exact" and record["brief_sha256"] == "f" * 64
    assert record["source"] == "metrics.jsonl" and record["ended"] is True and record["last_step"] == 40
    assert verify_diagnosis(run, "math-exact") == []
    assert any("brief 'math-exact', not 'other'" in p for p in verify_diagnosis(run, "other"))
    with (run / "metrics.jsonl").open("a") as fh:
        fh.write("\n")
    assert any("changed since it was diagnosed" in p for p in verify_diagnosis(run))


def test_unhealthy_or_unfinished_runs_do_not_justify_a_deviation(tmp_path: Path) -> None:
    sick = synth.write_run(tmp_path / "sick", synth.kl_climb())
    assert invoke(str(sick))[0] == 1
    assert any("not diagnosed healthy (the run's findings: kl_blowup)" in p for p in verify_diagnosis(sick))
    live = synth.write_run(tmp_path / "live", synth.healthy(), ended=False)
    assert invoke(str(live))[0] == 0
    assert any("had not ended" in p for p in verify_diagnosis(live))
    assert "does not exist" in verify_diagnosis(tmp_path / "nowhere")[0]
    assert invoke(str(synth.write_run(tmp_path / "ro", synth.healthy())), "--no-write")[0] == 0
    assert not (tmp_path / "ro" / "diagnosis.json").exists()


def test_diagnose_run_gives_the_json_object_without_writing(tmp_path: Path) -> None:
    from llm_finetuning.diagnose import diagnose_run

    run = synth.write_run(tmp_path / "run", synth.all_pass())
    assert [f["id"] for f in diagnose_run(run)["findings"]] == ["no_signal_all_pass"]
    assert not (run / "diagnosis.json").exists()


def test_plot_has_five_panels_and_a_real_png(tmp_path: Path) -> None:
    from matplotlib.image import imread

    from llm_finetuning.diagnose import diagnose
    from llm_finetuning.diagnose.plot import PANELS, plot_run

    run = synth.write_run(tmp_path / "run", synth.format_hack())
    traj = load_trajectory(run)
    findings = diagnose(traj)
    fig = plot_run(traj, findings)  # not drawn: the CLI below draws the PNG
    assert len(fig.axes) == PANELS == 5
    assert [len(ax.get_lines()) for ax in fig.axes] == [1, 2, 1, 2, 2]
    code, _, err = invoke(str(run), "--plot", str(tmp_path / "cli.png"))
    assert code == 1 and "plot:" in err
    image = imread(tmp_path / "cli.png")
    assert image.shape[0] == 1100 and image.shape[1] == 900 and image.std() > 0.05


def test_a_short_runs_steps_are_whole_and_the_band_stays_in_the_rewards_range(tmp_path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from llm_finetuning.diagnose.plot import plot_run
    from llm_finetuning.reward_registry import total_range

    rows = [{**row, "reward": 0.9, "reward_std": 0.3} for row in synth.healthy()[:3]]
    traj = load_trajectory(synth.write_run(tmp_path / "run", rows))
    assert traj.steps == [1, 2, 3]
    one_zero_one = total_range([("exact_match", 1.0)])
    assert one_zero_one == (0.0, 1.0) and total_range([("my:reward", 1.0)]) is None
    fig = plot_run(traj, [], reward_range=one_zero_one)
    FigureCanvasAgg(fig).draw()
    ticks = [t for t in fig.axes[-1].get_xticks() if 1 <= t <= 3]
    assert ticks and all(float(t).is_integer() for t in ticks)
    [band] = fig.axes[0].collections
    top = max(y for path in band.get_paths() for _, y in path.vertices)
    assert top == 1.0  # 0.9 + 0.3 clipped to the 0/1 reward's top


def test_follow_reports_findings_as_they_appear_and_stops_at_the_end_marker(tmp_path: Path) -> None:
    rows = synth.truncated(1.0)
    run = tmp_path / "run"
    run.mkdir()
    metrics = run / "metrics.jsonl"

    def writer() -> None:
        for i, row in enumerate(rows):
            with metrics.open("a") as fh:
                fh.write(json.dumps(row) + "\n")
            if i % 10 == 9:
                time.sleep(0.05)
        with metrics.open("a") as fh:
            fh.write(json.dumps({"event": "end", "step": rows[-1]["step"]}) + "\n")

    seen: list[tuple[str, int]] = []
    thread = threading.Thread(target=writer)
    thread.start()
    result = follow(run, RunContext(), lambda f, t: seen.append((f.id, t.last_step)), interval=0.02, timeout=20)
    thread.join()
    assert result.stopped == "ended" and result.trajectory is not None and result.trajectory.last_step == 40
    assert [s[0] for s in seen] == ["truncation"]
    assert [f.id for f in result.findings] == ["truncation"]


def test_follow_stops_when_the_run_ended_without_its_end_marker(tmp_path: Path) -> None:
    run = synth.write_run(tmp_path / "run", synth.all_fail(), ended=False)
    result = follow(run, RunContext(), lambda f, t: None, interval=0.02, timeout=20, run_ended=lambda: True)
    assert result.stopped == "run ended without its end marker" and result.trajectory is not None
    assert [f.id for f in result.findings] == ["no_signal_all_fail"]


def test_follow_cli_times_out_on_a_run_that_never_ends(tmp_path: Path) -> None:
    run = synth.write_run(tmp_path / "run", synth.all_fail(), ended=False)
    code, out, err = invoke(str(run), "--follow", "--interval", "0.05", "--timeout", "0.2", "--json")
    assert code == 1 and "stopped following (timeout)" in err
    assert "no_signal_all_fail" in err.split("stopped")[0]  # printed when it appeared
    assert json.loads(out)["findings"][0]["id"] == "no_signal_all_fail"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert invoke(str(empty), "--follow", "--interval", "0.05", "--timeout", "0.1")[0] == 2


def test_diagnose_imports_no_ml_stack() -> None:
    code = ("import sys, llm_finetuning.cli, llm_finetuning.diagnose, llm_finetuning.commands.diagnose; "
            "import llm_finetuning.diagnose.plot, llm_finetuning.diagnose.follow; "
            "bad = [m for m in ('torch', 'transformers', 'trl', 'numpy', 'matplotlib') if m in sys.modules]; "
            "print(bad); sys.exit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_follow_reads_held_out_scores_as_training_appends_them(tmp_path: Path) -> None:
    """held_out_eval appends to eval.jsonl while the run trains: --follow flags reward hacking live."""
    rows = synth.healthy()
    run = tmp_path / "run"
    run.mkdir()
    metrics, held_out = run / "metrics.jsonl", run / "eval.jsonl"

    def writer() -> None:
        for row in rows:
            with metrics.open("a") as fh:
                fh.write(json.dumps(row) + "\n")
            if row["step"] % 10 == 0:  # the policy's held-out score stays flat while training reward rises
                with held_out.open("a") as fh:
                    fh.write(json.dumps({"step": row["step"], "score": 0.2, "seconds": 1.0}) + "\n")
                time.sleep(0.05)
        with metrics.open("a") as fh:
            fh.write(json.dumps({"event": "end", "step": rows[-1]["step"]}) + "\n")

    seen: list[str] = []
    thread = threading.Thread(target=writer)
    thread.start()
    result = follow(run, RunContext(), lambda f, t: seen.append(f.id), interval=0.02, timeout=20)
    thread.join()
    assert result.stopped == "ended"
    assert "reward_hacking" in seen and "reward_hacking" in [f.id for f in result.findings]


def test_converged_run_exits_0_healthy_and_says_what_happened(tmp_path: Path) -> None:
    run = synth.write_run(tmp_path / "run", synth.entropy_converged())
    code, out, _ = invoke(str(run))
    assert code == 0
    assert out.startswith(f"finetune diagnose {run}: healthy (40 logged steps")
    assert "\ninfo    converged  steps" in out and "convergence, not entropy collapse" in out
    assert "note: Nothing to fix" in out and "variant:" not in out
    code, out, _ = invoke(str(run), "--json")
    assert code == 0 and json.loads(out)["healthy"] is True


def test_the_text_report_says_what_each_brief_edit_costs(tmp_path: Path) -> None:
    run = synth.write_run(tmp_path / "run", synth.entropy_collapse())
    code, out, _ = invoke(str(run))
    assert code == 1 and "brief edit (keeps the records: gate, render and launch again):" in out
    data = json.loads(invoke(str(run), "--json")[1])
    [f] = [f for f in data["findings"] if f["id"] == "entropy_collapse"]
    assert (f["kind"], f["edit_cost"]) == ("training", "keeps the records: gate, render and launch again")


def test_the_context_reads_the_briefs_baseline_and_reward_range(tmp_path: Path) -> None:
    """What the all-fail fix and the plot's band read: the baseline record's pass@k and k, and the total's range."""
    import shutil

    from llm_finetuning.diagnose.context import load_context

    example = Path(__file__).resolve().parents[2] / "examples" / "smollm2-json"
    shutil.copytree(example, tmp_path / "brief")
    recorded = json.loads((tmp_path / "brief" / "records" / "baseline.json").read_text())
    (tmp_path / "run").mkdir()
    ctx = load_context(tmp_path / "run", brief=tmp_path / "brief" / "brief.yaml")
    assert (ctx.base_pass_at_k, ctx.base_k) == (recorded["pass_at_k"], recorded["k"])
    assert ctx.reward_range is None  # a custom reward: its range is unknown, the band is drawn unclipped
