"""The baseline record: how often the base model already succeeds, written by `finetune baseline`.

Format `llm-finetuning/baseline@1` (one JSON object):

- `brief` {name, sha256}, `created_at`, `model` (the sampler's identity string of the model);
- `prompts` {source, count, indices}: which prompts were sampled; `k`: completions per prompt;
- `pass_at_1`, `pass_at_k` (share of prompts with at least one success among k), `mean_reward`
  {reward name: mean}, `frac_groups_all_tie` (groups whose k rewards are all equal: no GRPO signal),
  `frac_truncated` (completions cut at max_completion_length);
- `bindings` {model, rewards_spec_sha256, rewards, reward_code_sha256, data_source, data_sha256}:
  what the figures were measured against, verified by the gate like the inspection record's;
- `digest`: sha256 over all of the above, so a record edited by hand shows as tampered.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from llm_finetuning.errors import UnusableInput
from llm_finetuning.records._io import atomic_write_json, read_json_object, sha256_json, shown, utc_now
from llm_finetuning.records.bindings import current_bindings, stale_problems
from llm_finetuning.records.problem import Problem

FORMAT = "llm-finetuning/baseline@1"
FORMAT_PREFIX = "llm-finetuning/baseline@"
FRACTIONS = ("pass_at_1", "pass_at_k", "frac_groups_all_tie", "frac_truncated")


def make_baseline(brief: Any, *, model_identity: str | None, prompts: dict[str, Any], k: int,
                  pass_at_1: float, pass_at_k: float, mean_reward: dict[str, float],
                  frac_groups_all_tie: float, frac_truncated: float, **extra: Any) -> dict[str, Any]:
    """A baseline record for `brief` with its bindings computed now (`extra`: more fields to keep)."""
    record: dict[str, Any] = {
        "format": FORMAT,
        "brief": {"name": brief.name, "sha256": brief.sha256},
        "created_at": utc_now(),
        "model": model_identity,
        "prompts": prompts,
        "k": k,
        "pass_at_1": pass_at_1,
        "pass_at_k": pass_at_k,
        "mean_reward": mean_reward,
        "frac_groups_all_tie": frac_groups_all_tie,
        "frac_truncated": frac_truncated,
        "bindings": current_bindings(brief, model_identity),
    }
    record.update(extra)
    return record


def _structure_problem(rec: dict[str, Any]) -> str:
    """'' when `rec` has the baseline fields with the right types, else what is wrong."""
    if rec.get("format") != FORMAT:
        fmt = rec.get("format")
        if isinstance(fmt, str) and fmt.startswith(FORMAT_PREFIX):
            return f"is {fmt}; this llm-finetuning reads {FORMAT}"
        return f"is not a baseline record (format {fmt!r}, expected {FORMAT})"
    if not isinstance(rec.get("k"), int) or isinstance(rec.get("k"), bool) or rec["k"] < 1:
        return "field 'k' is not a positive integer"
    for key in FRACTIONS:
        v = rec.get(key)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:
            return f"field {key!r} is {v!r}; expected a number in [0, 1]"
    for key in ("mean_reward", "bindings", "prompts", "brief"):
        if not isinstance(rec.get(key), dict):
            return f"field {key!r} is missing or not an object"
    return ""


def write_baseline(path: Path, record: dict[str, Any]) -> dict[str, Any]:
    """Check the record's fields and write it atomically with its digest. Returns what was written."""
    rec = {k: v for k, v in record.items() if k != "digest"}
    rec.setdefault("format", FORMAT)
    rec.setdefault("created_at", utc_now())
    problem = _structure_problem(rec)
    if problem:
        raise ValueError(f"baseline record {problem}")
    rec["digest"] = sha256_json(rec)
    atomic_write_json(Path(path), rec)
    return rec


def load_baseline(path: Path) -> dict[str, Any]:
    """The baseline record at `path`; UnusableInput when it is missing or not one."""
    rec = read_json_object(Path(path), "baseline record")
    problem = _structure_problem(rec)
    if problem:
        raise UnusableInput(f"{path} {problem}", "run `finetune baseline BRIEF` again", str(path))
    return rec


def verify_baseline(brief: Any, path: Path, model_identity: str | None = None) -> list[Problem]:
    """Every reason the baseline at `path` cannot stand for `brief` now (empty: it can)."""
    path = Path(path)
    redo = f"run `finetune baseline {shown(brief.path)}`"
    if not path.exists():
        return [Problem("missing", "record", f"no baseline record at {shown(path)}", redo)]
    try:
        rec = load_baseline(path)
    except UnusableInput as exc:
        return [Problem("malformed", "record", exc.reason, redo)]
    problems = []
    if rec.get("digest") != sha256_json({k: v for k, v in rec.items() if k != "digest"}):
        problems.append(Problem("tampered", "record", f"{shown(path)} was edited after `finetune baseline` wrote it", redo))
    problems += stale_problems(rec["bindings"], current_bindings(brief, model_identity), redo,
                               check_identity=model_identity is not None, check_data=True)
    return problems
