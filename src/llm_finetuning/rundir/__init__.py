"""A run directory: the names of its files, and what a run wrote there, read and written in one place.

`finetune render BRIEF -o RUN_DIR` makes one; `launch`, `status`, `stop`, `diagnose`, `eval` and `export` read it
through this package, and the gate reads a `grpo.deviation` run's diagnosis through it. The layout (docs/render-launch.md,
"What RUN_DIR holds"):

- `manifest.json`: binds the run to its brief, records, gate fingerprint and rendered files (`rundir.manifest`);
- `grpo_config.yaml`, `accelerate.yaml`, `launch.sh`, `rewards_entry.py` (and `sbatch.sh`): what render wrote;
- `metrics.jsonl`: one JSON object per logged step, then `{"event": "end", "step": N}` once training reached
  `max_steps`; `completions.jsonl`: the completions logged while training;
- `eval.jsonl`: held-out `{"step", "score"}` rows (during training, and `finetune eval --checkpoint all`);
  `eval.json`: `finetune eval`'s latest result;
- `diagnosis.json`: `finetune diagnose`'s record (its format and its verification: `records.diagnosis`);
- `checkpoints/checkpoint-<step>/`: the saves, each counted once its COMPLETE marker exists (`rundir.checkpoints`);
- `model/`: the final weights or LoRA adapter, with the tokenizer;
- `launch.pid`, `launch.log`, `launch.exit.json`: a `finetune launch --detach`'s pid record, its output and how it
  ended (their formats: `launch.detach`); `launch.lock`: the lock a training launch holds for its whole life
  (`launch.runlock`); `stop.request`: `finetune stop`'s request, read by the trainer at each step's end.

The names are spelled here only (a test in tests/structure holds every other module to these constants).

Pure: json and the file helpers.
"""

from __future__ import annotations

import json
from pathlib import Path

from llm_finetuning import integrity
from llm_finetuning.fileio import atomic_write_text, read_json_object, read_json_or_none
from llm_finetuning.jsonvalue import JsonObject
from llm_finetuning.rundir.diagnosis import Diagnosis

MANIFEST = integrity.MANIFEST  # "manifest.json", spelled where the plugin's guard reads it too
# What `finetune render` writes (SBATCH_SCRIPT for a run over several nodes only).
GRPO_CONFIG = "grpo_config.yaml"
ACCELERATE_CONFIG = "accelerate.yaml"
LAUNCH_SCRIPT = "launch.sh"
REWARDS_ENTRY = "rewards_entry.py"
SBATCH_SCRIPT = "sbatch.sh"
# What training and the verbs after it write.
METRICS = "metrics.jsonl"
COMPLETIONS = "completions.jsonl"
EVAL_JSONL = "eval.jsonl"
EVAL_JSON = "eval.json"
DIAGNOSIS = "diagnosis.json"
CHECKPOINTS = "checkpoints"
FINAL_MODEL = "model"
TRAINER_STATE = "trainer_state.json"  # what TRL's Trainer writes into each checkpoint
END_EVENT = "end"  # metrics.jsonl's last row once training reached max_steps
# What `finetune launch --detach` writes: the supervisor's pid record, the launches' output, how the run ended.
LAUNCH_PID = "launch.pid"
LAUNCH_LOG = "launch.log"
LAUNCH_EXIT = "launch.exit.json"
# The run's own lock (held by the launch that trains, `launch.runlock`) and `finetune stop`'s request to checkpoint.
LAUNCH_LOCK = "launch.lock"
STOP_REQUEST = "stop.request"


def metrics_rows(run_dir: Path) -> list[JsonObject]:
    """The JSON objects of RUN_DIR/metrics.jsonl in file order (lines that are not one skipped); [] without it."""
    try:
        lines = (Path(run_dir) / METRICS).read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    rows = []
    for line in lines:
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict):
            rows.append(row)
    return rows


def end_step(run_dir: Path) -> int | None:
    """The step of metrics.jsonl's end marker (written when training reached max_steps), or None."""
    for row in reversed(metrics_rows(run_dir)):
        step = row.get("step", 0)
        if row.get("event") == END_EVENT and isinstance(step, (int, float)):
            return int(step)
    return None


def run_finished(run_dir: Path) -> bool:
    """Training reached its last step and saved the final model."""
    return (Path(run_dir) / FINAL_MODEL).is_dir() and end_step(run_dir) is not None


def read_evaluation(run_dir: Path) -> JsonObject | None:
    """RUN_DIR/eval.json, `finetune eval`'s latest result, or None when absent or unreadable."""
    return read_json_or_none(Path(run_dir) / EVAL_JSON)


def read_diagnosis(run_dir: Path) -> Diagnosis | None:
    """RUN_DIR/diagnosis.json, parsed; None when absent, UnusableInput naming the file when it is there but not a
    diagnosis (verified against the run: `records.diagnosis`)."""
    path = Path(run_dir) / DIAGNOSIS
    if not path.is_file():
        return None
    again = f"run `finetune diagnose {run_dir}` again"
    return Diagnosis.from_json(read_json_object(path, "diagnosis record", again), str(path), again)


def write_diagnosis(run_dir: Path, record: Diagnosis) -> Path:
    """Write RUN_DIR/diagnosis.json atomically (temp file, fsync, rename, folder fsync)."""
    path = Path(run_dir) / DIAGNOSIS
    atomic_write_text(path, json.dumps(record.to_json(), indent=2, sort_keys=True) + "\n")
    return path
