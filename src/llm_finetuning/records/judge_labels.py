"""Judge calibration: how often a judge reward agrees with human labels, measured for the record the gate reads.

`finetune calibrate-judge BRIEF --labels FILE.jsonl` scores at least `MIN_ITEMS` human-labelled items
(`{"prompt", "completion", "label"}`, label a number in [0, 1] or a boolean) with the brief's judge
reward and writes the record at `records.judge_calibration`. The record (its format, the agreement
figures, the judge settings it binds by sha256, and `verify_judge_calibration`, used by the gate) is
records/judge_calibration.py; this module reads the labels and scores them.

Pure: no reward code is imported here; `calibrate` is handed a built judge.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from pathlib import Path

from llm_finetuning.errors import UnusableInput
from llm_finetuning.fileio import sha256_file
from llm_finetuning.jsonvalue import JsonObject, JsonValue
from llm_finetuning.records.judge_calibration import (
    MIN_ITEMS,
    CalibrationEntry,
    agreement_figures,
    judge_args,
    judge_binding,
    min_agreement,
)


def _label_value(value: JsonValue) -> float | None:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)) and math.isfinite(value) and 0 <= value <= 1:
        return float(value)
    if isinstance(value, str) and value.strip().lower() in ("pass", "fail", "good", "bad", "yes", "no"):
        return 1.0 if value.strip().lower() in ("pass", "good", "yes") else 0.0
    return None


def load_labels(path: Path) -> list[JsonObject]:
    """The labelled items of a JSONL file; UnusableInput naming the line of the first bad one."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise UnusableInput(f"{path} does not exist", "give a JSONL file of {prompt, completion, label} items") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UnusableInput(f"{path} cannot be read: {exc}", "save the labels as UTF-8 JSON Lines") from None
    items = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError as exc:
            raise UnusableInput(f"{path}, line {number}: not JSON ({exc.args[0][:80]})", "write one JSON object per line") from None
        if not isinstance(item, dict) or not all(k in item for k in ("prompt", "completion", "label")):
            raise UnusableInput(f"{path}, line {number}: expected an object with prompt, completion and label",
                                "add the missing keys")
        label = _label_value(item["label"])
        if label is None:
            raise UnusableInput(f"{path}, line {number}: label {item['label']!r} is not a number in [0, 1] or a boolean",
                                "label each item 0..1 (1 = meets the rubric), true/false, or pass/fail")
        items.append({**item, "label": label})
    if len(items) < MIN_ITEMS:
        raise UnusableInput(f"{path} holds {len(items)} labelled items; calibration needs at least {MIN_ITEMS}",
                            f"label at least {MIN_ITEMS} items (a mix of good and bad completions)")
    return items


def calibrate(judge: Callable[..., list[float | None]], spec: Mapping[str, object], name: str,
              items: list[JsonObject], labels_path: Path) -> CalibrationEntry:
    """Score the items with `judge` (`load_labels`' items, each label a number) and return this judge's
    calibration entry."""
    extra = sorted({k for it in items for k in it} - {"prompt", "completion", "label"})
    columns = {k: [it.get(k) for it in items] for k in extra}  # passed through as in training
    scores = judge(prompts=[it["prompt"] for it in items], completions=[it["completion"] for it in items],
                   **columns)
    labels = [float(label) for it in items if isinstance(label := it["label"], (int, float))]
    figures = agreement_figures(labels, scores)
    args = judge_args(spec)
    threshold = min_agreement(args)
    return {
        "reward": name,
        "judge": judge_binding(args),
        "labels": {"path": str(labels_path), "sha256": sha256_file(labels_path)},
        "figures": figures,
        "min_agreement": threshold,
        "meets_threshold": figures["n_scored"] > 0 and figures["agreement"] >= threshold,
        "failures": {k: v for k, v in sorted(getattr(judge, "stats", {}).items()) if k.startswith("failed_")},
        "items": [{"index": i, "label": lab, "judge": s}
                  for i, (lab, s) in enumerate(zip(labels, scores, strict=True))],
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
