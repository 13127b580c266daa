"""The judge calibration record: its format, the judge settings it binds, and its verification for the gate.

`finetune calibrate-judge BRIEF --labels FILE.jsonl` scores human-labelled items with the brief's judge reward
(records/judge_labels.py) and writes one entry per judge at `records.judge_calibration`. A judge and a person
agree on an item when both put it on the same side of 0.5; an item the judge could not score counts as a
disagreement. The record binds the judge's settings by sha256, and `verify_judge_calibration` (used by the gate)
accepts it only while those settings are unchanged and the agreement its items give meets the brief's
`min_agreement`.

Pure: json and the file helpers; the judge's argument defaults come from the reward registry.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TypedDict

import llm_finetuning.reward_registry as registry
from llm_finetuning.brief import Brief
from llm_finetuning.fileio import atomic_write_json, sha256_bytes
from llm_finetuning.integrity import writes_records
from llm_finetuning.jsonvalue import JsonObject

FORMAT = "llm-finetuning/judge-calibration/1"
MIN_ITEMS = 50
# The judge settings that change its scores; the record binds them.
BOUND_ARGS = ("endpoint", "model", "rubric", "max_score", "temperature", "max_tokens")
_DEFAULTS = registry.arg_defaults("judge")


class Figures(TypedDict):
    """How a judge agreed with the human labels (`agreement_figures`); None where no item was scored."""

    n_items: int
    n_scored: int
    n_failed: int
    agreement: float
    cohen_kappa: float | None
    mean_abs_error: float | None
    label_pass_rate: float | None
    judge_pass_rate: float | None
    false_pass_rate: float | None
    false_fail_rate: float | None


class CalibrationEntry(TypedDict):
    """One judge's entry in the record (`records.judge_labels.calibrate` builds it)."""

    reward: str
    judge: dict[str, object]
    labels: dict[str, str]
    figures: Figures
    min_agreement: float
    meets_threshold: bool
    failures: dict[str, int]
    items: list[dict[str, int | float | None]]  # {index, label, judge}
    created_at: str


def judge_binding(args: Mapping[str, object]) -> dict[str, object]:
    """The bound settings of a judge spec's args (defaults filled) and their sha256."""
    bound = {k: args.get(k, _DEFAULTS.get(k)) for k in BOUND_ARGS}
    digest = sha256_bytes(json.dumps(bound, sort_keys=True, ensure_ascii=False).encode("utf-8"))
    return {"endpoint": bound["endpoint"], "model": bound["model"],
            "rubric_sha256": sha256_bytes(str(bound["rubric"]).encode("utf-8")),
            "settings_sha256": digest}


def judge_specs(brief: Brief) -> list[tuple[str, int, JsonObject]]:
    """(metric name, position, spec) of every judge reward in the brief."""
    return [(r.name, i, r.as_mapping()) for i, r in enumerate(brief.rewards) if r.is_judge]


def judge_args(spec: Mapping[str, object]) -> Mapping[str, object]:
    """A judge spec's `args` ({} when it has none)."""
    args = spec.get("args")
    return args if isinstance(args, dict) else {}


def min_agreement(args: Mapping[str, object]) -> float:
    """A judge spec's `args.min_agreement`, the registry's default where it gives none."""
    value = args.get("min_agreement", _DEFAULTS["min_agreement"])
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"args.min_agreement {value!r} is not a number")
    return float(value)


def agreement_figures(labels: list[float], scores: list[float | None]) -> Figures:
    """Agreement, Cohen's kappa, false-pass/false-fail rates and mean absolute error (split at 0.5)."""
    n = len(labels)
    scored = [(lab, s) for lab, s in zip(labels, scores, strict=True) if s is not None]
    agree = sum(1 for lab, s in scored if (lab >= 0.5) == (s >= 0.5))
    figures = Figures(n_items=n, n_scored=len(scored), n_failed=n - len(scored), agreement=agree / n if n else 0.0,
                      cohen_kappa=None, mean_abs_error=None, label_pass_rate=None, judge_pass_rate=None,
                      false_pass_rate=None, false_fail_rate=None)
    if scored:
        m = len(scored)
        po = agree / m
        p_lab = sum(1 for lab, _ in scored if lab >= 0.5) / m
        p_jud = sum(1 for _, s in scored if s >= 0.5) / m
        pe = p_lab * p_jud + (1 - p_lab) * (1 - p_jud)
        figures["cohen_kappa"] = (po - pe) / (1 - pe) if pe < 1 else (1.0 if po == 1 else 0.0)
        figures["mean_abs_error"] = sum(abs(lab - s) for lab, s in scored) / m
        figures["label_pass_rate"] = p_lab
        figures["judge_pass_rate"] = p_jud
        fails = [s for lab, s in scored if lab < 0.5]
        passes = [s for lab, s in scored if lab >= 0.5]
        # The dangerous direction for a reward: the judge passes what people failed.
        figures["false_pass_rate"] = sum(1 for s in fails if s >= 0.5) / len(fails) if fails else None
        figures["false_fail_rate"] = sum(1 for s in passes if s < 0.5) / len(passes) if passes else None
    return figures


def load_record(path: Path) -> JsonObject:
    """The judge calibration record at `path`; OSError or ValueError when it cannot be read or is not one."""
    record = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(record, dict) or record.get("format") != FORMAT or not isinstance(record.get("judges"), dict):
        raise ValueError(f"not a judge calibration record (format {FORMAT})")
    return record


@writes_records
def write_record(path: Path, entry: CalibrationEntry) -> dict[str, object]:
    """Add or replace one judge's entry in the record at `path`, atomically."""
    path = Path(path)
    try:
        record: dict[str, object] = {**load_record(path)}
    except (OSError, ValueError):
        record = {"format": FORMAT, "judges": {}}
    judges = record.get("judges")
    record["judges"] = {**(judges if isinstance(judges, dict) else {}), entry["reward"]: entry}
    atomic_write_json(path, record)
    return record


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def verify_judge_calibration(brief: Brief, record_path: Path) -> list[str]:
    """Problems with the calibration of the brief's judge rewards (empty list: every judge is calibrated)."""
    judges = judge_specs(brief)
    if not judges:
        return []
    fix = "run `finetune calibrate-judge BRIEF --labels FILE.jsonl`"
    try:
        record = load_record(Path(record_path))
    except FileNotFoundError:
        return [f"no judge calibration record at {record_path}; {fix}"]
    except (OSError, ValueError) as exc:
        return [f"judge calibration record {record_path} is unusable ({exc}); {fix}"]
    problems = []
    for name, i, spec in judges:
        where = f"rewards[{i}] ({name})"
        stored = record.get("judges")
        entry = stored.get(name) if isinstance(stored, dict) else None
        if not isinstance(entry, dict):
            problems.append(f"{where}: the record at {record_path} has no calibration for this judge; {fix}")
            continue
        args = judge_args(spec)
        binding = judge_binding(args)
        found = entry.get("judge")
        recorded = found if isinstance(found, dict) else {}
        if recorded.get("settings_sha256") != binding["settings_sha256"]:
            changed = [k for k in ("endpoint", "model", "rubric_sha256") if recorded.get(k) != binding[k]]
            what = ", ".join(changed) if changed else "max_score, temperature or max_tokens"
            problems.append(f"{where}: the judge changed since calibration ({what}); {fix}")
            continue
        found_items = entry.get("items") or []
        items = found_items if isinstance(found_items, list) else [found_items]
        pairs = [(it.get("label"), it.get("judge")) for it in items if isinstance(it, dict)]
        if len(pairs) != len(items) or not all(_number(lab) and (s is None or _number(s)) for lab, s in pairs):
            problems.append(f"{where}: the calibration items are malformed; {fix}")
            continue
        labels = [float(lab) for lab, _ in pairs if isinstance(lab, (int, float))]
        scores = [float(s) if isinstance(s, (int, float)) else None for _, s in pairs]
        figures = agreement_figures(labels, scores)
        stated_in = entry.get("figures")
        stated = stated_in.get("agreement") if isinstance(stated_in, dict) else None
        if not isinstance(stated, (int, float)) or abs(float(stated) - figures["agreement"]) > 1e-9:
            problems.append(f"{where}: the stated agreement {stated!r} does not match the recorded items "
                            f"({figures['agreement']:.3f}); the record was edited; {fix}")
            continue
        if figures["n_items"] < MIN_ITEMS:
            problems.append(f"{where}: calibrated on {figures['n_items']} items, fewer than {MIN_ITEMS}; {fix}")
            continue
        threshold = min_agreement(args)
        if figures["agreement"] < threshold:
            problems.append(f"{where}: agreement with human labels {figures['agreement']:.2f} is below "
                            f"args.min_agreement {threshold:.2f}; improve the rubric or the judge model and recalibrate")
    return problems
