"""The brief's held_out_eval for real: a CPU run of the tiny model scores its policy on held-out prompts
every N steps into eval.jsonl, which finetune diagnose reads, without changing what the run trains on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from launch_cases import copy_model, finetune, make_brief

pytestmark = pytest.mark.slow

HELD_OUT = "held_out_eval: {every_steps: 2, prompts: 3, k: 2}\n"


def _train(folder: Path, model: Path, extra: str) -> Path:
    from llm_finetuning.launch import verify_run
    from llm_finetuning.launch.worker import run_worker

    brief = make_brief(folder / "b", model, max_steps=4, save_steps=4, extra=extra)
    run = folder / "run"
    rendered = finetune("render", str(brief), "-o", str(run))
    assert rendered.returncode == 0, rendered.stdout + rendered.stderr
    assert run_worker(verify_run(run), resume=False, extra_args=[], progress=False) == 0
    return run


def test_policy_scored_every_n_steps_without_changing_the_run(tmp_path: Path, tiny_model_dir: Path,
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              capfd: pytest.CaptureFixture[str]) -> None:
    from llm_finetuning.diagnose.context import load_context

    monkeypatch.chdir(tmp_path)  # training changes into the run directory; undone after the test
    model = copy_model(tiny_model_dir, tmp_path / "tiny")
    plain = _train(tmp_path / "plain", model, "")
    evaluated = _train(tmp_path / "evaluated", model, HELD_OUT)

    rows = [json.loads(line) for line in (evaluated / "eval.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [2, 4]
    assert all(r["prompts"] == 3 and r["k"] == 2 and 0 <= r["score"] <= 1 and r["seconds"] > 0 for r in rows)
    assert "held-out eval at step 2: pass@1" in capfd.readouterr().err  # its cost, as it runs
    assert load_context(evaluated).eval_steps == [2, 4]  # what diagnose reads
    assert not (plain / "eval.jsonl").exists()

    def completions(run: Path) -> list[str]:
        return [json.loads(line)["completion"] for line in (run / "completions.jsonl").read_text().splitlines()]

    assert completions(evaluated) == completions(plain)  # the run's own sampling is untouched (RNG forked)
