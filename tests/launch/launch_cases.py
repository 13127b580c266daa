"""A brief for the tiny model that passes the real gate: records built through the records API."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

from _synthetic import synthetic_records  # noqa: E402  (records API; synthetic, tests and benchmarks only)

TINY_BRIEF = """\
brief: 1
name: tiny-launch
method: grpo
task:
  summary: Return a JSON object with the person's name and age
model:
  id: {model}
  dtype: float32
data:
  train: data/train.jsonl
rewards:
  - fn: json_schema
    args: {{schema_field: schema}}
grpo:
  num_generations: 8
  per_device_train_batch_size: 8
  gradient_accumulation_steps: 1
  max_completion_length: 8
  max_steps: {max_steps}
  save_steps: {save_steps}
  logging_steps: 1
  gradient_checkpointing: false
hardware:
  gpus: {gpus}
  generation: {generation}
{extra}"""


def make_brief(folder: Path, model_dir: Path, *, max_steps: int = 4, save_steps: int = 2, gpus: int = 0,
               generation: str = "transformers", extra: str = "", records: bool = True) -> Path:
    """brief.yaml for the tiny model with 16 rows of data, and (by default) a sealed inspection and a
    nonzero baseline bound to it through the records API, so the real gate passes."""
    from llm_finetuning.brief import load_brief

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "data").mkdir(exist_ok=True)
    rows = (REPO / "examples" / "json-person" / "data" / "train.jsonl").read_text(encoding="utf-8").splitlines()[:16]
    (folder / "data" / "train.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    text = TINY_BRIEF.format(model=model_dir, max_steps=max_steps, save_steps=save_steps, gpus=gpus,
                             generation=generation, extra=extra)
    path = folder / "brief.yaml"
    path.write_text(text, encoding="utf-8")
    brief, errors = load_brief(path)
    assert brief is not None, errors
    if records:
        synthetic_records(path, "llm-finetuning tests")
    return path


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


def finetune(*args: str) -> Ran:
    """The real `finetune` CLI in this process (render, gate and --plan import no ML library)."""
    from click.testing import CliRunner

    from llm_finetuning.cli import cli

    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return Ran(result.exit_code, result.stdout, result.stderr)


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               PYTHONUNBUFFERED="1")
    return env


def start_launch(run_dir: Path, *extra: str, log: Path) -> subprocess.Popen[bytes]:
    """`finetune launch RUN_DIR` in its own process group (so a kill reaches every process it started)."""
    fh = open(log, "ab")  # noqa: SIM115 - closed by the child's exit
    return subprocess.Popen([sys.executable, "-m", "llm_finetuning.cli", "launch", str(run_dir), *extra],
                            stdout=fh, stderr=subprocess.STDOUT, env=child_env(), start_new_session=True)


def wait_for(predicate: Callable[[], bool], proc: subprocess.Popen[bytes], timeout: float, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if proc.poll() is not None:
            raise AssertionError(f"launch exited ({proc.returncode}) early:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.2)
    raise AssertionError(f"timed out:\n{log.read_text(errors='replace')[-3000:]}")


def metric_steps(run_dir: Path) -> list[int]:
    path = run_dir / "metrics.jsonl"
    if not path.is_file():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [row["step"] for row in rows if "loss" in row]  # training steps (not the end-of-training summary)


def trainer_state(checkpoint: Path) -> dict[str, Any]:
    return json.loads((checkpoint / "trainer_state.json").read_text())  # type: ignore[no-any-return]


def copy_model(src: Path, dst: Path) -> Path:
    if not dst.exists():
        shutil.copytree(src, dst)
    return dst


def cli(*args: str, timeout: float = 120) -> Ran:
    """The real `finetune` CLI in a child process (what an agent's shell runs)."""
    out = subprocess.run([sys.executable, "-m", "llm_finetuning.cli", *args], capture_output=True, text=True,
                         env=child_env(), timeout=timeout)
    return Ran(out.returncode, out.stdout, out.stderr)


def run_status(run_dir: Path) -> dict[str, Any]:
    """`finetune status RUN_DIR --json` through the real CLI, with its exit code under "rc"."""
    out = cli("status", str(run_dir), "--json")
    assert out.returncode in (0, 1), out.stderr
    status: dict[str, Any] = json.loads(out.stdout)
    status["rc"] = out.returncode
    return status


def wait_until(predicate: Callable[[], bool], timeout: float, what: str, log: Path) -> None:
    """Poll `predicate` until it holds; on timeout fail with the run's log."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.3)
    text = log.read_text(errors="replace")[-3000:] if log.is_file() else "(no log)"
    raise AssertionError(f"timed out waiting for {what}:\n{text}")
