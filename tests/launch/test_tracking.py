"""`tracking.report_to: [tensorboard]` for real: a CPU run writes event files that TensorBoard's own reader
loads, with the reward and KL series step by step; metrics.jsonl is written all the same."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from launch_cases import copy_model, finetune, make_brief, metric_steps

pytestmark = pytest.mark.slow


def test_tensorboard_event_files_hold_reward_and_kl(tmp_path: Path, tiny_model_dir: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from llm_finetuning.launch import verify_run
    from llm_finetuning.launch.worker import run_worker

    monkeypatch.chdir(tmp_path)  # training changes into the run directory; undone after the test
    model = copy_model(tiny_model_dir, tmp_path / "tiny")
    brief = make_brief(tmp_path / "b", model, max_steps=3, save_steps=3,
                       extra="tracking:\n  report_to: [tensorboard]\n  run_name: tiny-tb\n")
    run = tmp_path / "run"
    rendered = finetune("render", str(brief), "-o", str(run))
    assert rendered.returncode == 0, rendered.stdout + rendered.stderr
    config = (run / "grpo_config.yaml").read_text()
    assert "report_to: [tensorboard]" in config and "run_name: tiny-tb" in config
    monkeypatch.setenv("TENSORBOARD_LOGGING_DIR", str(tmp_path / "elsewhere"))  # launch points it at the run
    assert run_worker(verify_run(run), resume=False, extra_args=[], progress=False) == 0

    events = list((run / "tensorboard").glob("events.out.tfevents.*"))
    assert events, sorted(p.name for p in run.rglob("*"))
    acc = EventAccumulator(str(run / "tensorboard"))
    acc.Reload()
    scalars = acc.Tags()["scalars"]
    assert "train/reward" in scalars and "train/kl" in scalars, scalars
    reward = acc.Scalars("train/reward")
    kl = acc.Scalars("train/kl")
    assert [e.step for e in reward] == [1, 2, 3] and [e.step for e in kl] == [1, 2, 3]
    logged = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    by_step = {row["step"]: row for row in logged if "reward" in row}
    assert [round(e.value, 5) for e in reward] == [round(by_step[s]["reward"], 5) for s in (1, 2, 3)]
    assert metric_steps(run) == [1, 2, 3]  # diagnose's source is unchanged
