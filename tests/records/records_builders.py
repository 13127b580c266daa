"""Builders of briefs and records for the records, gate and hook tests, through the public records API."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

from llm_finetuning.brief import load_brief
from llm_finetuning.records import baseline, inspection

MY_REWARDS = '''\
"""A custom reward for the fixtures: 1.0 when the completion contains the answer."""


def contains_answer(prompts, completions, answer, **kwargs):
    return [1.0 if str(a) in str(c) else 0.0 for c, a in zip(completions, answer, strict=True)]
'''

BRIEF = """\
brief: 1
name: gate-fixture
method: grpo
task:
  summary: One-digit addition; the reply is the sum
  modality: text
model:
  id: Qwen/Qwen2.5-0.5B-Instruct
data:
  train: data/train.jsonl
rewards:
  - fn: exact_match
    args: {answer_field: answer, extract: last_number}
  - fn: my_rewards:contains_answer
    weight: 0.5
grpo:
  per_device_train_batch_size: 8
  gradient_accumulation_steps: 4
hardware:
  gpus: 1
  generation: vllm-colocate
"""


def write_brief_folder(folder: Path, brief_text: str = BRIEF, rewards_source: str = MY_REWARDS) -> Path:
    """A brief folder: brief.yaml, my_rewards.py and a small data file. Returns the brief path."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "data").mkdir(exist_ok=True)
    rows = [{"prompt": f"What is {a} + {b}?", "answer": str(a + b)} for a in range(4) for b in range(4)]
    (folder / "data" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "my_rewards.py").write_text(rewards_source)
    path = folder / "brief.yaml"
    path.write_text(textwrap.dedent(brief_text))
    return path


def loaded(path: Path) -> Any:
    brief, errors = load_brief(path)
    assert not errors, errors
    return brief


def make_samples(brief: Any, n: int = 64) -> list[dict[str, Any]]:
    """n scored samples, one value per reward of the brief, as `finetune inspect` would write them."""
    names = brief.reward_names
    out = []
    for i in range(n):
        a, b = i % 10, (i * 7) % 10
        ok = i % 3 != 0
        completion = f"The sum is {a + b}." if ok else f"The sum is {a + b + 1}."
        out.append({"prompt": f"What is {a} + {b}?", "completion": completion, "answer": str(a + b),
                    "rewards": {name: (1.0 if ok else 0.0) for name in names}})
    return out


def identity(brief: Any) -> str:
    """The model identity the sampling verbs bind (`models.model_identity`)."""
    from llm_finetuning.models import model_identity

    return model_identity(brief.model, brief.folder)


def build_inspection(brief: Any, *, n: int = 64, verdicts: dict[int, str] | None = None, seal: bool = True,
                     review_all: bool = True, seconds: float | list[float] | None = None) -> Path:
    """A reviewed (and by default sealed, all-agree) inspection record at the brief's records.inspection.

    `seconds`: the time spent on each sample (one figure for all, or one per sample); None: untimed, as
    a record sealed before `finetune review` kept timings."""
    path = brief.resolve(brief.records.inspection)
    record = inspection.create_inspection(brief, make_samples(brief, n), path, identity(brief))
    verdicts = verdicts or {}
    for i, s in enumerate(record["samples"]):
        if review_all or i in verdicts:
            spent = seconds[i] if isinstance(seconds, list) else seconds
            inspection.set_verdict(record, s["id"], verdicts.get(i, "agree"), "", spent)
    inspection.save_progress(path, record)
    if seal:
        inspection.seal(path, "Ada Reviewer")
    return path


def build_baseline(brief: Any, *, pass_at_k: float = 0.5, pass_at_1: float = 0.2, tie: float = 0.3,
                   truncated: float = 0.05, settings: bool = True, sampling: dict[str, Any] | None = None,
                   verdict: dict[str, Any] | None = None) -> Path:
    """A baseline record at the brief's records.baseline with the given figures, measured (`settings`) under
    the brief's sampling settings, as `finetune baseline` records them; without them, as older records.
    `sampling`: recorded settings that replace the brief's (an evaluation setting's temperature, greedy ...);
    `verdict`: the learning-signal verdict `finetune baseline` writes beside the figures."""
    path = brief.resolve(brief.records.baseline)
    extra: dict[str, Any] = {}
    k = baseline.brief_sampling_settings(brief)["k"] if settings else 8
    if settings:
        now = baseline.brief_sampling_settings(brief)
        extra["sampling"] = {**{k: v for k, v in now.items() if k != "k"},
                             "chat_template": {"applied": True, "sha256": "0" * 64}, **(sampling or {})}
    if verdict is not None:
        extra["verdict"] = verdict
    record = baseline.make_baseline(
        brief, model_identity=identity(brief), prompts={"source": "data/train.jsonl", "count": 16, "indices": list(range(16))},
        k=k, pass_at_1=pass_at_1, pass_at_k=pass_at_k,
        mean_reward={name: pass_at_1 for name in brief.reward_names},
        frac_groups_all_tie=tie, frac_truncated=truncated, **extra)
    baseline.write_baseline(path, record)
    return path
