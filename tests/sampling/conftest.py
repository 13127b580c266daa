"""Fixtures for the sampling verbs: example briefs pointed at a local model, and inspection records."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
FINETUNE = [sys.executable, "-m", "llm_finetuning.cli"]


def copy_example(name: str, dest: Path, **changes: Any) -> Path:
    """Copy examples/<name> into dest and apply `changes` ({"model.id": ..., "grpo.x": ...}); the brief's path."""
    folder = dest / name
    shutil.copytree(EXAMPLES / name, folder)
    brief_path = folder / "brief.yaml"
    data = yaml.safe_load(brief_path.read_text(encoding="utf-8"))
    for dotted, value in changes.items():
        node = data
        *parents, last = dotted.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value
    brief_path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return brief_path


def cli_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"})
    env.update(extra)
    return env


@pytest.fixture
def tiny_person_brief(tmp_path: Path, tiny_model_dir: Path) -> Path:
    """examples/json-person on the tiny random model with 8-token completions."""
    return copy_example("json-person", tmp_path, **{"model.id": str(tiny_model_dir),
                                                    "grpo.max_completion_length": 8})


def load(brief_path: Path) -> Any:
    from llm_finetuning.brief import load_brief

    brief, errors = load_brief(brief_path)
    assert not errors, errors
    return brief


def make_inspection(brief_path: Path, n: int = 50, explain: bool = False) -> Path:
    """An unreviewed inspection record of `n` hand-written completions (half right, half wrong), scored by
    the brief's real rewards; no model is sampled. `explain`: the samples carry the rewards' explanations
    (as `finetune inspect` writes them); without it they look like samples written before explanations."""
    from llm_finetuning.models import model_identity
    from llm_finetuning.records.inspection import create_inspection
    from llm_finetuning.rewards import score_rows

    brief = load(brief_path)
    rows = [json.loads(line) for line in (brief.folder / "data/train.jsonl").read_text().splitlines()[:n]]
    scored_rows = []
    for i, row in enumerate(rows):
        age = row["age"] if i % 2 == 0 else row["age"] + 1
        scored_rows.append({**row, "completion": json.dumps({"name": row["name"], "age": age})})
    scores = score_rows(brief, scored_rows, explain=explain)
    samples = [{"id": f"s{i:03d}", "prompt": r["prompt"], "completion": r["completion"], "rewards": s["rewards"],
                "total": s["total"], "success": s["total"] == 1.0, "truncated": False,
                "reference": {k: v for k, v in r.items() if k not in ("prompt", "completion")},
                **({"explanations": s["explanations"]} if explain else {})}
               for i, (r, s) in enumerate(zip(scored_rows, scores, strict=True))]
    record = brief.resolve("records/inspection.json")
    create_inspection(brief, samples, record, model_identity(brief.model, brief.folder))
    return record
