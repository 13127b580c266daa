"""The diagnosis record, RUN_DIR/diagnosis.json: its format and its verification for the gate.

`finetune diagnose` writes it (diagnose/report.py builds it from the findings and the metrics diagnosed). It lets
the gate accept `grpo.deviation: RUN_DIR` only for a run of the same brief that was diagnosed healthy, from the
metrics as they are now. The run directory package (`rundir`) names the file, reads and writes it. Pure: json and
the file helpers.
"""

from __future__ import annotations

import json
from pathlib import Path

from llm_finetuning.fileio import sha256_file
from llm_finetuning.rundir import DIAGNOSIS

DIAGNOSIS_FORMAT = 1


def verify_diagnosis(run_dir: str | Path, brief_name: str | None = None) -> list[str]:
    """Problems that keep RUN_DIR from justifying a `grpo.deviation` (empty list: it does).

    The run must have been diagnosed (diagnosis.json of this format), healthy, to its end marker, from the
    metrics file as it is now (sha256), and be a run of the brief named `brief_name` when given.
    """
    root = Path(run_dir)
    path = root / DIAGNOSIS
    if not path.is_file():
        return [f"{path} does not exist: run `finetune diagnose {root}` after the run ends"]
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return [f"{path} is not readable JSON ({exc}): run `finetune diagnose {root}` again"]
    if not isinstance(record, dict) or record.get("format") != DIAGNOSIS_FORMAT:
        return [f"{path} is not a diagnosis of format {DIAGNOSIS_FORMAT}: run `finetune diagnose {root}` again"]
    problems = []
    if record.get("healthy") is not True:
        found = [f for f in record.get("findings", []) if isinstance(f, dict) and f.get("severity") != "info"]
        own = ", ".join(str(f.get("id")) for f in found if f.get("kind", "training") == "training")
        task = ", ".join(str(f.get("id")) for f in found if f.get("kind") == "task")
        problems.append(f"{path}: the run was not diagnosed healthy (the run's findings: {own or 'unknown'}"
                        + (f"; the task's, which alone would not stop it: {task}" if task else "") + ")")
    if record.get("ended") is not True:
        problems.append(f"{path}: the run had not ended when diagnosed; diagnose it again after it finishes")
    if brief_name is not None and record.get("brief_name") != brief_name:
        problems.append(f"{path}: diagnosed run belongs to brief {record.get('brief_name')!r}, not {brief_name!r}")
    source = root / str(record.get("source", ""))
    if not record.get("source") or not source.is_file():
        problems.append(f"{path}: the diagnosed metrics file {record.get('source')!r} is gone")
    else:
        if sha256_file(source) != record.get("source_sha256"):
            problems.append(f"{source} changed since it was diagnosed: run `finetune diagnose {root}` again")
    return problems
