"""A brief the tiny random model passes the gate with, through the real verbs: the launch tests' tiny brief with
a built-in reward it meets at random (exact_match on the last vowel of its completion, the answer `e`: a
baseline pass@1 near 40%)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "launch"))

from launch_cases import TINY_BRIEF  # noqa: E402

JSON_REWARD = "  - fn: json_schema\n    args: {{schema_field: schema}}\n"
VOWEL_REWARD = '  - fn: exact_match\n    args: {{answer_field: answer, extract: "regex:([aeiou])", math_verify: false}}\n'
assert JSON_REWARD in TINY_BRIEF


def tiny_vowel_brief(folder: Path, model_dir: Path, max_steps: int = 4) -> Path:
    """brief.yaml and 32 rows of data in `folder` (made a git project); no records."""
    (folder / "data").mkdir(parents=True)
    (folder / ".git").mkdir()
    rows = [{"prompt": f"Say a word that ends on the vowel e (number {i}).", "answer": "e"} for i in range(32)]
    (folder / "data" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    path = folder / "brief.yaml"
    text = TINY_BRIEF.replace(JSON_REWARD, VOWEL_REWARD)
    path.write_text(text.format(model=model_dir, max_steps=max_steps, save_steps=2, gpus=0,
                                generation="transformers", extra=""), encoding="utf-8")
    return path
