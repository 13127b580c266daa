"""Reading runs: metrics.jsonl, TRL's trainer_state.json (latest checkpoint), completions, manifest and brief."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from llm_finetuning.diagnose import load_context, load_trajectory
from llm_finetuning.diagnose.context import read_eval
from llm_finetuning.errors import UnusableInput
from llm_finetuning.models import is_moe as model_config_is_moe

from . import synth

FIXTURES = Path(__file__).parent / "fixtures"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_metrics_jsonl_rows_end_marker_and_partial_last_line(tmp_path: Path) -> None:
    run = synth.write_run(tmp_path / "run", synth.healthy(10), ended=False)
    with (run / "metrics.jsonl").open("a") as fh:
        fh.write('{"step": 10, "train_runtime": 3.0, "train_loss": 0.1}\n')  # TRL's summary: not a step
        fh.write('{"step": 11, "loss": 0.1, "rew')  # a live run mid-write
    traj = load_trajectory(run)
    assert traj.steps == list(range(1, 11)) and not traj.ended and traj.skipped_lines == 1
    assert traj.reward_components() == ["exact_match"]
    with (run / "metrics.jsonl").open("a") as fh:
        fh.write('\n{"event": "end", "step": 10}\n')
    traj = load_trajectory(run)
    assert traj.ended and traj.end_step == 10


def test_an_end_marker_before_resumed_steps_does_not_end_the_run(tmp_path: Path) -> None:
    rows = synth.healthy(10)
    run = synth.write_run(tmp_path / "run", rows[:5])  # stopped at step 5 with its end marker
    with (run / "metrics.jsonl").open("a") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in rows[5:])  # resumed
    traj = load_trajectory(run)
    assert traj.last_step == 10 and not traj.ended


def test_nan_values_are_kept_out_of_series_but_remembered(tmp_path: Path) -> None:
    run = synth.write_run(tmp_path / "run", synth.nan_loss())
    loss = load_trajectory(run).series("loss")
    assert len(loss) == 32 and loss.nonfinite_steps[0] == 33


def test_trainer_state_from_the_latest_checkpoint(tmp_path: Path) -> None:
    state = json.loads((FIXTURES / "real-healthy" / "trainer_state.json").read_text())
    run = tmp_path / "run"
    for step in (10, 30):
        ckpt = run / "checkpoints" / f"checkpoint-{step}"
        ckpt.mkdir(parents=True)
        history = [e for e in state["log_history"] if e.get("step", 0) <= step]
        (ckpt / "trainer_state.json").write_text(json.dumps({**state, "global_step": step, "log_history": history}))
    traj = load_trajectory(run)
    assert traj.source == run / "checkpoints" / "checkpoint-30" / "trainer_state.json"
    assert traj.last_step == 30 and "rewards/correct/mean" in traj.keys()  # noqa: SIM118


def test_metrics_and_state_agree_on_the_real_runs() -> None:
    for name in ("real-healthy", "real-truncation", "real-hackable"):
        a = load_trajectory(FIXTURES / name / "metrics.jsonl")
        b = load_trajectory(FIXTURES / name / "trainer_state.json")
        assert a.steps == b.steps and a.series("reward").values == b.series("reward").values


@pytest.mark.parametrize("make", [
    lambda p: None,
    lambda p: p.mkdir(),
    lambda p: (p.mkdir(), (p / "metrics.jsonl").write_text('{"event": "end", "step": 0}\n')),
    lambda p: (p.mkdir(), (p / "trainer_state.json").write_text("{not json")),
])
def test_unusable_runs(tmp_path: Path, make: object) -> None:
    run = tmp_path / "run"
    make(run)  # type: ignore[operator]
    with pytest.raises(UnusableInput):
        load_trajectory(run)


def test_context_from_manifest_brief_and_checkpoint_config(tmp_path: Path) -> None:
    shutil.copytree(EXAMPLES / "math-exact", tmp_path / "brief")
    run = tmp_path / "run"
    (run / "checkpoints" / "checkpoint-5").mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps(
        {"format": 1, "name": "math-exact", "files": {}, "brief": {"path": "../brief/brief.yaml", "sha256": "abc"}}))
    (run / "checkpoints" / "checkpoint-5" / "config.json").write_text(
        json.dumps({"model_type": "qwen3_moe", "num_experts": 128}))
    ctx = load_context(run)
    assert ctx.brief_name == "math-exact" and ctx.variant == "grpo"
    assert ctx.correctness == ["exact_match"] and ctx.reward_weights == {"exact_match": 1.0}
    assert ctx.max_completion_length == 64 and ctx.learning_rate == 5e-7
    assert ctx.is_moe is True and "checkpoint-5" in ctx.moe_source
    assert ctx.brief_sha256 == "abc"  # the brief changed since rendering: the manifest's hash is kept
    assert load_context(run, architecture="dense").is_moe is False
    shutil.rmtree(run / "checkpoints")  # no checkpoint: the brief's hub id, in the table of known shapes
    ctx = load_context(run)
    assert ctx.is_moe is False and "Qwen/Qwen2.5-0.5B-Instruct" in ctx.moe_source
    brief_text = (tmp_path / "brief" / "brief.yaml").read_text()
    (tmp_path / "brief" / "brief.yaml").write_text(brief_text.replace("Qwen/Qwen2.5-0.5B-Instruct", "Qwen/Qwen3-30B-A3B"))
    assert load_context(run).is_moe is True


def test_moe_detection_from_config() -> None:
    assert model_config_is_moe({"num_local_experts": 8, "model_type": "mixtral"})
    assert model_config_is_moe({"architectures": ["Qwen3MoeForCausalLM"]})
    assert not model_config_is_moe({"model_type": "qwen2", "num_experts": 1})


def test_eval_file(tmp_path: Path) -> None:
    path = tmp_path / "eval.jsonl"
    path.write_text('{"step": 20, "score": 0.5}\n{"step": 10, "score": 0.25}\n')
    assert read_eval(path) == ([10, 20], [0.25, 0.5])
    path.write_text('{"step": "x"}\n')
    with pytest.raises(UnusableInput):
        read_eval(path)
