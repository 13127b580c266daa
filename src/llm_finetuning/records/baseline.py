"""The baseline record: how often the base model already succeeds, written by `finetune baseline`.

Format `llm-finetuning/baseline@1` (one JSON object):

- `brief` {name, sha256}, `created_at`, `model` (the sampler's identity string of the model);
- `prompts` {source, count, indices}: which prompts were sampled; `k`: completions per prompt;
- `pass_at_1`, `pass_at_k` (share of prompts with at least one success among k), `mean_reward`
  {reward name: mean}, `frac_groups_all_tie` (groups whose k rewards are all equal: no GRPO signal),
  `frac_truncated` (completions cut at max_completion_length);
- `sampling` {temperature, max_completion_length, top_p, system_prompt, chat_template {applied, sha256},
  seed, backend, greedy, purpose}: the settings the figures were measured under (records written before
  these were bound lack some; the gate says which are unknown). `purpose` is `training` (sampled at
  `grpo.temperature`, what the gate's base-success check judges; the record at `records.baseline`) or
  `evaluation` (`finetune baseline --temperature T` or `--greedy`: a second record beside it, named by
  `evaluation_record_path`, that `finetune eval --temperature T` / `--greedy` compares with; greedy
  records temperature 0); `per_prompt`: successes of each sampled prompt, in
  the order of `prompts.indices` (what `finetune eval` pairs the trained model's figures with);
- `bindings` {model, rewards_spec_sha256, rewards, reward_code_sha256, data_source, data_sha256}:
  what the figures were measured against, verified by the gate like the inspection record's;
- `digest`: sha256 over all of the above, so a record edited by hand shows as tampered.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_finetuning.brief import Brief
from llm_finetuning.errors import Problem, UnusableInput
from llm_finetuning.fileio import atomic_write_json, read_json_object, sha256_json, shown, utc_now
from llm_finetuning.integrity import writes_records
from llm_finetuning.records.bindings import current_bindings, stale_problems

FORMAT = "llm-finetuning/baseline@1"
FORMAT_PREFIX = "llm-finetuning/baseline@"
FRACTIONS = ("pass_at_1", "pass_at_k", "frac_groups_all_tie", "frac_truncated")
# Sampling settings the figures depend on, compared with what the brief sets now (`settings_drift`).
COMPARED_SETTINGS = ("max_completion_length", "temperature", "top_p", "system_prompt")
# Bound at sampling time and followed by the model's identity, so only their absence is reported.
RECORDED_ONLY_SETTINGS = ("chat_template",)


def brief_sampling_settings(brief: Brief) -> dict[str, Any]:
    """The sampling settings the brief sets now: what baseline, inspection, training and eval sample with.

    `k` is the group size GRPO trains with (`grpo.num_generations`): the baseline's share of all-tied
    groups says something about training only for groups of that size.
    """
    grpo = brief.grpo
    return {
        "max_completion_length": int(grpo.max_completion_length),
        "temperature": float(grpo.temperature),
        "top_p": grpo.number_override("top_p", 1.0),
        "system_prompt": brief.data.system_prompt or None,
        "k": int(grpo.num_generations),
    }


@dataclass(frozen=True)
class Decoding:
    """How completions are drawn: sampled at `temperature`, or greedy (`do_sample` off, temperature 0)."""

    temperature: float
    greedy: bool = False

    @property
    def label(self) -> str:
        """`greedy` or `temperature 0.7`: how messages name it."""
        return "greedy" if self.greedy else f"temperature {self.temperature:g}"

    @property
    def file_tag(self) -> str:
        """`greedy` or `t0.7`: what an evaluation record's file name carries."""
        return "greedy" if self.greedy else f"t{self.temperature:g}"

    @property
    def flag(self) -> str:
        """`--greedy` or `--temperature 0.7`: the option of `finetune baseline` and `finetune eval` that asks for it."""
        return "--greedy" if self.greedy else f"--temperature {self.temperature:g}"

    def is_training(self, brief: Brief) -> bool:
        """The setting GRPO samples its groups at: `grpo.temperature`, not greedy."""
        return not self.greedy and _same(self.temperature, brief_sampling_settings(brief)["temperature"])


def requested_decoding(brief: Brief, temperature: float | None, greedy: bool) -> Decoding | None:
    """The decoding `--temperature T` / `--greedy` ask for (None: neither given); UnusableInput for both."""
    if temperature is not None and greedy:
        raise UnusableInput("--temperature and --greedy both given",
                            "pass one of them: --greedy decodes greedily (temperature 0), --temperature T samples")
    if greedy:
        return Decoding(0.0, greedy=True)
    return Decoding(float(temperature)) if temperature is not None else None


def completions_per_prompt(k: int | None, decoding: Decoding | None, default: int) -> int:
    """`--k`, or `default`; greedy gives one (every further completion would be the same)."""
    if decoding is not None and decoding.greedy:
        if k not in (None, 1):
            raise UnusableInput(f"--greedy with --k {k}: greedy decoding gives the same completion every time",
                                "drop --k (greedy takes one completion per prompt), or sample with --temperature T",
                                "--k")
        return 1
    return k or default


def recorded_decoding(record: dict[str, Any]) -> Decoding | None:
    """The decoding a baseline record was measured with (None: the record does not say)."""
    sampling = record.get("sampling")
    if not isinstance(sampling, dict):
        return None
    if sampling.get("greedy") is True:
        return Decoding(0.0, greedy=True)
    t = sampling.get("temperature")
    return Decoding(float(t)) if isinstance(t, (int, float)) and not isinstance(t, bool) else None


def training_record_path(brief: Brief) -> Path:
    """Where the training-temperature baseline lives: `records.baseline`."""
    return Path(brief.resolve(brief.records.baseline))


def evaluation_record_path(training_path: Path, decoding: Decoding) -> Path:
    """The record of an evaluation setting, beside the training one: `baseline.json` -> `baseline.t0.7.json`."""
    training_path = Path(training_path)
    return training_path.with_name(f"{training_path.stem}.{decoding.file_tag}{training_path.suffix}")


def record_path_for(brief: Brief, decoding: Decoding) -> Path:
    """The record a measurement at `decoding` belongs in: `records.baseline` at the training temperature,
    else the evaluation record beside it."""
    path = training_record_path(brief)
    return path if decoding.is_training(brief) else evaluation_record_path(path, decoding)


def measured_for_evaluation(record: dict[str, Any]) -> bool:
    """The record holds an evaluation setting's figures (`--temperature`/`--greedy`), not the training one."""
    sampling = record.get("sampling")
    return isinstance(sampling, dict) and (sampling.get("purpose") == "evaluation" or sampling.get("greedy") is True)


@dataclass(frozen=True)
class SettingDrift:
    """One sampling setting whose recorded value differs from the brief's (`recorded` None: unknown)."""

    name: str
    yaml_path: str
    recorded: Any
    now: Any


SETTING_PATHS = {"max_completion_length": "grpo.max_completion_length", "temperature": "grpo.temperature",
                 "top_p": "grpo.overrides.top_p", "system_prompt": "data.system_prompt",
                 "k": "grpo.num_generations", "chat_template": "model.id"}


def settings_drift(record: dict[str, Any], brief: Brief) -> tuple[list[SettingDrift], list[str]]:
    """(settings whose recorded value differs from the brief's, names of settings the record does not hold).

    Pure: compares the record's `sampling` (and `k`) with `brief_sampling_settings(brief)`.
    """
    found = record.get("sampling")
    sampling: dict[str, Any] = found if isinstance(found, dict) else {}
    now = brief_sampling_settings(brief)
    recorded = {**{name: sampling[name] for name in COMPARED_SETTINGS if name in sampling}, "k": record.get("k")}
    drift = [SettingDrift(name, SETTING_PATHS[name], recorded[name], now[name])
             for name in (*COMPARED_SETTINGS, "k")
             if name in recorded and not _same(recorded[name], now[name])]
    unknown = [name for name in (*COMPARED_SETTINGS, *RECORDED_ONLY_SETTINGS) if name not in sampling]
    return drift, unknown


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return abs(float(a) - float(b)) <= 1e-9
    return bool(a == b)


def make_baseline(brief: Brief, *, model_identity: str | None, prompts: dict[str, Any], k: int,
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


@writes_records
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
    rec = read_json_object(Path(path), "baseline record", "run `finetune baseline BRIEF` to write it again")
    problem = _structure_problem(rec)
    if problem:
        raise UnusableInput(f"{path} {problem}", "run `finetune baseline BRIEF` again", str(path))
    return rec


def verify_baseline(brief: Brief, path: Path, model_identity: str | None = None,
                    bindings: dict[str, Any] | None = None) -> tuple[dict[str, Any] | None, list[Problem]]:
    """(the record at `path`, every reason it cannot stand for `brief` now): no problem means it can; the record
    is None when it is missing or malformed. `bindings`: the brief's `current_bindings`, when the caller has them
    already (a verb computes them once for all its records)."""
    path = Path(path)
    redo = f"run `finetune baseline {shown(brief.path)}`"
    if not path.exists():
        beside = sorted(shown(p) for p in path.parent.glob(f"{path.stem}.*{path.suffix}")) if path.parent.is_dir() else []
        also = (f" ({', '.join(beside)} beside it measure evaluation settings, not the training temperature "
                "the gate judges)") if beside else ""
        return None, [Problem("missing", "record", f"no baseline record at {shown(path)}{also}", redo)]
    try:
        rec = load_baseline(path)
    except UnusableInput as exc:
        return None, [Problem("malformed", "record", exc.message, redo)]
    problems = []
    if rec.get("digest") != sha256_json({k: v for k, v in rec.items() if k != "digest"}):
        problems.append(Problem("tampered", "record", f"{shown(path)} was edited after `finetune baseline` wrote it", redo))
    current = bindings if bindings is not None else current_bindings(brief, model_identity)
    problems += stale_problems(rec["bindings"], current, redo, check_identity=model_identity is not None,
                               check_data=True)
    return rec, problems
