"""The embedded SmolLM2-135M-Instruct end to end on CPU: baseline, inspect, a review typed at a
pseudo-terminal, and the records passing the gate's record verification."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from llm_finetuning.models import EMBEDDED_ID, model_identity

from .conftest import FINETUNE, cli_env, copy_example, load
from .ptydrive import PtyDriver


@pytest.mark.slow
def test_embedded_baseline_inspect_review_verify(tmp_path: Path) -> None:
    from llm_finetuning.records.baseline import verify_baseline
    from llm_finetuning.records.inspection import verify_inspection

    brief_path = copy_example("json-person", tmp_path, **{"model.id": EMBEDDED_ID,
                                                          "grpo.max_completion_length": 24})
    env = cli_env()
    base = subprocess.run([*FINETUNE, "baseline", str(brief_path), "--prompts", "8", "--k", "4"],
                          capture_output=True, text=True, env=env, timeout=900)
    assert base.returncode == 0, base.stderr[-2000:]
    assert "prompts 8/8" in base.stderr and "completion/s" in base.stderr  # progress bar with a rate
    assert "Verdict:" in base.stdout

    insp = subprocess.run([*FINETUNE, "inspect", str(brief_path), "--samples", "50", "--json"],
                          capture_output=True, text=True, env=env, timeout=900)
    assert insp.returncode == 0, insp.stderr[-2000:]
    out = json.loads(insp.stdout)
    assert "prompts 50/50" in insp.stderr

    drive = PtyDriver([*FINETUNE, "review", out["record"]], env=cli_env(USER="ada", TERM="xterm"),
                      cwd=str(tmp_path))
    for i in range(1, 51):
        drive.expect(rf"Sample {i}/50")
        drive.expect(r"> ")
        drive.send("a")
    drive.expect(r"\[s\] seal the review")
    drive.send("s")
    drive.expect(r"recorded as the reviewer")
    drive.send("Ada Lovelace")
    assert drive.wait() == 0

    brief = load(brief_path)
    identity = model_identity(brief.model, brief.folder)
    assert verify_baseline(brief, brief.resolve("records/baseline.json"), identity)[1] == []
    assert verify_inspection(brief, Path(out["record"]), identity)[1] == []
