"""Real CPU training of the tiny model: through `finetune launch` (killed with SIGKILL and resumed to
the same final step; stopped by SIGTERM after saving a checkpoint) and through TRL's own
`trl grpo --config` on a rendered file. The kill happens to a child process; the resumed and the
signalled runs train in this process (same code as `finetune launch`, without a second start-up)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from pathlib import Path

import pytest
from launch_cases import (
    child_env,
    copy_model,
    finetune,
    make_brief,
    metric_steps,
    start_launch,
    trainer_state,
    wait_for,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def model(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_model(tiny_model_dir, tmp_path_factory.mktemp("m") / "tiny")


def _complete(ckpts: Path) -> list[int]:
    return sorted(int(p.name.split("-")[1]) for p in ckpts.glob("checkpoint-*") if (p / "COMPLETE").is_file())


def test_sigkill_then_resume_reaches_the_same_final_step(tmp_path: Path, model: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from llm_finetuning.launch import verify_run
    from llm_finetuning.launch.worker import run_worker

    monkeypatch.chdir(tmp_path)  # training changes into the run directory; undone after the test
    # long enough that the kill after checkpoint-2 lands before the last step on a loaded machine
    brief = make_brief(tmp_path / "b", model, max_steps=10, save_steps=2)
    run = tmp_path / "run"
    assert finetune("render", str(brief), "-o", str(run)).returncode == 0
    ckpts, log = run / "checkpoints", tmp_path / "launch.log"

    proc = start_launch(run, log=log)  # the real CLI in its own process group
    wait_for(lambda: (ckpts / "checkpoint-2" / "COMPLETE").is_file(), proc, 300, log)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert "GRPO" in log.read_text(errors="replace")  # the progress bar ran
    assert not (run / "model").exists()

    assert run_worker(verify_run(run), resume=False, extra_args=[]) == 1  # would overwrite: refused, pointing at --resume
    assert run_worker(verify_run(run), resume=True, extra_args=[], progress=False) == 0
    assert trainer_state(ckpts / "checkpoint-10")["global_step"] == 10
    assert metric_steps(run) == list(range(1, 11))  # rows the killed run logged after checkpoint-2 were dropped
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert all({"step", "epoch", "reward", "rewards/json_schema/mean", "kl", "entropy"} <= set(r)
               for r in rows if "loss" in r)
    completion = json.loads((run / "completions.jsonl").read_text().splitlines()[-1])
    assert set(completion) == {"step", "prompt", "completion", "rewards"} and completion["step"] == 10
    assert (run / "model" / "model.safetensors").is_file()


def test_sigterm_saves_a_checkpoint_before_exiting(tmp_path: Path, model: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from llm_finetuning.launch import verify_run
    from llm_finetuning.launch.worker import run_worker

    monkeypatch.chdir(tmp_path)
    brief = make_brief(tmp_path / "b", model, max_steps=50, save_steps=50)
    run = tmp_path / "run"
    assert finetune("render", str(brief), "-o", str(run)).returncode == 0
    stop = threading.Event()

    def send_sigterm_after_first_step() -> None:
        while not stop.is_set():
            if metric_steps(run):
                os.kill(os.getpid(), signal.SIGTERM)
                return
            stop.wait(0.05)

    sender = threading.Thread(target=send_sigterm_after_first_step, daemon=True)
    sender.start()
    try:
        code = run_worker(verify_run(run), resume=False, extra_args=[], progress=False)
    finally:
        stop.set()
        sender.join()
    assert code == 1
    saved = _complete(run / "checkpoints")
    assert saved and saved[-1] < 50  # saved where the signal landed, not at save_steps
    assert trainer_state(run / "checkpoints" / f"checkpoint-{saved[-1]}")["global_step"] == saved[-1]
    assert not (run / "model").exists()


def test_trl_grpo_cli_trains_the_rendered_file(tmp_path: Path, model: Path) -> None:
    brief = make_brief(tmp_path / "b", model, max_steps=2, save_steps=2)
    run = tmp_path / "run"
    assert finetune("render", str(brief), "-o", str(run)).returncode == 0
    out = subprocess.run(["trl", "grpo", "--config", "grpo_config.yaml"], cwd=run, capture_output=True, text=True,
                         env=child_env(), timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    state = trainer_state(run / "checkpoints" / "checkpoint-2")
    assert state["global_step"] == 2
    assert any("rewards/json_schema/mean" in entry for entry in state["log_history"])


def test_lora_run_trains_an_adapter(tmp_path: Path, model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from llm_finetuning.launch import verify_run
    from llm_finetuning.launch.worker import run_worker

    monkeypatch.chdir(tmp_path)
    brief = make_brief(tmp_path / "b", model, max_steps=1, save_steps=1)
    text = brief.read_text().replace("  dtype: float32\n", "  dtype: float32\n  adapter: lora\n  lora: {r: 4, alpha: 8}\n")
    brief.write_text(text)
    from _synthetic import synthetic_records

    synthetic_records(brief, "llm-finetuning tests")  # the brief changed: its records are made again
    run = tmp_path / "run"
    assert finetune("render", str(brief), "-o", str(run)).returncode == 0
    assert run_worker(verify_run(run), resume=False, extra_args=[], progress=False) == 0
    assert (run / "model" / "adapter_config.json").is_file()
    assert json.loads((run / "model" / "adapter_config.json").read_text())["r"] == 4
