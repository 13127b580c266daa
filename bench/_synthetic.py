"""Synthetic records for the GPU benchmarks that train random-weight models (shared by bench/*_gpu.py)."""

from __future__ import annotations

import json
from pathlib import Path


def synthetic_records(brief_path: Path, writer: str) -> None:
    """A sealed inspection and a nonzero baseline through the records API, for a random-weight model that has no
    honest baseline, so that the real gate, render and launch run end to end. SYNTHETIC: never for a real run.
    The training rows need `name` and `age` (the JSON tasks of the examples); `writer` names the benchmark."""
    from llm_finetuning.brief import load_brief
    from llm_finetuning.models import model_identity
    from llm_finetuning.records import baseline, inspection
    from llm_finetuning.records.bindings import reward_names

    brief, errors = load_brief(brief_path)
    assert brief is not None, errors
    identity = model_identity(brief.data["model"], brief.folder)
    names = reward_names(brief.data["rewards"])
    rows = [json.loads(line) for line in (brief.folder / "data" / "train.jsonl").read_text().splitlines()]
    samples = [{**r, "completion": json.dumps({"name": r["name"], "age": r["age"]}), "rewards": dict.fromkeys(names, 1.0)}
               for r in (rows[i % len(rows)] for i in range(64))]  # a review needs 50-100 samples
    ipath = brief.resolve(brief.data["records"]["inspection"])
    record = inspection.create_inspection(brief, samples, ipath, identity)
    for s in record["samples"]:
        inspection.set_verdict(record, s["id"], "agree", "synthetic benchmark record")
    inspection.save_progress(ipath, record)
    inspection.seal(ipath, f"{writer} (synthetic; not a human review)")
    bpath = brief.resolve(brief.data["records"]["baseline"])
    baseline.write_baseline(bpath, baseline.make_baseline(
        brief, model_identity=identity, prompts={"source": "data/train.jsonl", "count": 16, "indices": list(range(16))},
        k=8, pass_at_1=0.2, pass_at_k=0.5, mean_reward=dict.fromkeys(names, 0.2), frac_groups_all_tie=0.3,
        frac_truncated=0.0, synthetic=f"{writer}: written so the gate passes on a random-weight model"))
