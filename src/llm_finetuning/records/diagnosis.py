"""The diagnosis record, RUN_DIR/diagnosis.json: its format and its verification for the gate.

`finetune diagnose` writes it (diagnose/report.py builds it from the findings and the metrics diagnosed). It lets
the gate accept `grpo.deviation: RUN_DIR` only for a run of the same brief that was diagnosed healthy, from the
metrics as they are now. The run directory package (`rundir`) names the file, reads and writes it. Pure: json and
the file helpers.
"""

from __future__ import annotations

from pathlib import Path

from llm_finetuning.errors import UnusableInput
from llm_finetuning.fileio import sha256_file
from llm_finetuning.rundir import DIAGNOSIS, read_diagnosis
from llm_finetuning.rundir.diagnosis import DIAGNOSIS_FORMAT

__all__ = ["DIAGNOSIS_FORMAT", "verify_diagnosis"]


def verify_diagnosis(run_dir: str | Path, brief_name: str | None = None) -> list[str]:
    """Problems that keep RUN_DIR from justifying a `grpo.deviation` (empty list: it does).

    The run must have been diagnosed (diagnosis.json of this format), healthy, to its end marker, from the
    metrics file as it is now (sha256), and be a run of the brief named `brief_name` when given.
    """
    root = Path(run_dir)
    path = root / DIAGNOSIS
    try:
        record = read_diagnosis(root)
    except UnusableInput as exc:
        return [f"{exc.message}: run `finetune diagnose {root}` again"]
    if record is None:
        return [f"{path} does not exist: run `finetune diagnose {root}` after the run ends"]
    problems = []
    if not record.healthy:
        found = [f for f in record.findings if f.is_failure]
        own = ", ".join(f.id for f in found if f.kind == "training")
        task = ", ".join(f.id for f in found if f.kind == "task")
        problems.append(f"{path}: the run was not diagnosed healthy (the run's findings: {own or 'unknown'}"
                        + (f"; the task's, which alone would not stop it: {task}" if task else "") + ")")
    if not record.ended:
        problems.append(f"{path}: the run had not ended when diagnosed; diagnose it again after it finishes")
    if brief_name is not None and record.brief_name != brief_name:
        problems.append(f"{path}: diagnosed run belongs to brief {record.brief_name!r}, not {brief_name!r}")
    source = root / (record.source or "")
    if not record.source or not source.is_file():
        problems.append(f"{path}: the diagnosed metrics file {record.source!r} is gone")
    elif sha256_file(source) != record.source_sha256:
        problems.append(f"{source} changed since it was diagnosed: run `finetune diagnose {root}` again")
    return problems
