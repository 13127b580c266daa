"""`finetune launch` on CPU sizes torch's threads as the sampler does (one helper, `cputhreads`).

A launch on a busy machine used to keep torch's default thread count and oversubscribe the cores;
the sampler already took only the idle ones.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from launch_cases import child_env, copy_model, finetune, make_brief

from llm_finetuning.cputhreads import ENV, cpu_threads


def test_threads_follow_the_idle_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    assert cpu_threads(8, load=10.0, cores=2) == 1  # oversubscribed: one thread, never zero
    assert cpu_threads(8, load=0.2, cores=2) == 2
    assert cpu_threads(2, load=0.0, cores=16) == 2  # never above torch's default
    assert cpu_threads(16, load=5.4, cores=16) == 11
    monkeypatch.setenv(ENV, "3")
    assert cpu_threads(8, load=10.0, cores=2) == 3  # the person's choice wins


@pytest.mark.slow
@pytest.mark.parametrize("verb", ["launch", "baseline"])
def test_launch_and_sampler_use_the_same_threads(tmp_path: Path, tiny_model_dir: Path, verb: str) -> None:
    """Both verbs, on a real tiny model on CPU, report and use the thread count the helper chose."""
    model = copy_model(tiny_model_dir, tmp_path / "tiny")
    brief = make_brief(tmp_path / "b", model, max_steps=1, save_steps=1)
    env = child_env()
    env[ENV] = "1"
    if verb == "launch":
        run = tmp_path / "run"
        assert finetune("render", str(brief), "-o", str(run)).returncode == 0
        args = ["launch", str(run)]
    else:
        args = ["baseline", str(brief), "--prompts", "2", "--k", "2"]
    proc = subprocess.run([sys.executable, "-m", "llm_finetuning.cli", *args], env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    what = "Training" if verb == "launch" else "Sampling"
    assert f"{what} on CPU: 1 torch thread(s)" in proc.stderr, proc.stderr
