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

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from llm_finetuning.brief import Brief
from llm_finetuning.errors import Problem, UnusableInput
from llm_finetuning.fileio import (
    atomic_write_json,
    canonical_json,
    read_json_object,
    sha256_json,
    shown,
    utc_now,
)
from llm_finetuning.integrity import writes_records
from llm_finetuning.jsonvalue import JsonObject, JsonValue
from llm_finetuning.records.bindings import current_bindings, stale_problems

FORMAT = "llm-finetuning/baseline@1"
FORMAT_PREFIX = "llm-finetuning/baseline@"
FRACTIONS = ("pass_at_1", "pass_at_k", "frac_groups_all_tie", "frac_truncated")
# Sampling settings the figures depend on, compared with what the brief sets now (`settings_drift`).
COMPARED_SETTINGS = ("max_completion_length", "temperature", "top_p", "system_prompt")
# Bound at sampling time and followed by the model's identity, so only their absence is reported.
RECORDED_ONLY_SETTINGS = ("chat_template",)
REDO = "run `finetune baseline BRIEF` again"

# A sampling setting's value as a record holds it and as the brief sets it.
Setting = float | int | str | None


class SamplingNow(TypedDict):
    """The sampling settings the brief sets now (`brief_sampling_settings`)."""

    max_completion_length: int
    temperature: float
    top_p: float
    system_prompt: str | None
    k: int


def brief_sampling_settings(brief: Brief) -> SamplingNow:
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


class MalformedBaseline(ValueError):
    """What makes a JSON object no baseline record (the message names the field); `Baseline.from_json` turns it
    into UnusableInput naming the file, `write_baseline` into the ValueError of a record built wrong."""


def _number(value: JsonValue, key: str) -> float | None:
    """A JSON number as a float (None for null); MalformedBaseline for anything else."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise MalformedBaseline(f"field {key!r} is {value!r}; expected a number")
    return float(value)


def _integer(value: JsonValue, key: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise MalformedBaseline(f"field {key!r} is {value!r}; expected an integer")
    return value


def _text(value: JsonValue, key: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise MalformedBaseline(f"field {key!r} is {value!r}; expected a string")
    return value


def _mean(value: JsonValue, reward: str) -> float:
    mean = _number(value, f"mean_reward.{reward}")
    if mean is None:
        raise MalformedBaseline(f"field 'mean_reward.{reward}' is null; expected a number")
    return mean


def _object(value: JsonValue, key: str) -> JsonObject:
    if not isinstance(value, dict):
        raise MalformedBaseline(f"field {key!r} is missing or not an object")
    return value


@dataclass(frozen=True)
class BaselinePrompts:
    """Which prompts were sampled: how many, from which split, their rows in it (in the order sampled)."""

    count: int | None
    split: str | None
    indices: tuple[int, ...]

    @classmethod
    def from_json(cls, data: JsonObject) -> BaselinePrompts:
        raw = data.get("indices") or []
        if not isinstance(raw, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in raw):
            raise MalformedBaseline(f"field 'prompts.indices' is {raw!r}; expected a list of row numbers")
        return cls(_integer(data.get("count"), "prompts.count"), _text(data.get("split"), "prompts.split"),
                   tuple(i for i in raw if isinstance(i, int)))


@dataclass(frozen=True)
class BaselineSampling:
    """The settings the figures were measured under (`sampling`); `held` names the settings the record holds,
    since a record written before a setting was bound lacks it (unknown, which is not the same as null)."""

    held: frozenset[str] = frozenset()
    temperature: float | None = None
    greedy: bool = False
    purpose: str | None = None
    max_completion_length: int | None = None
    max_prompt_length: int | None = None
    top_p: float | None = None
    system_prompt: str | None = None
    seed: int | None = None
    backend: str | None = None
    seconds: float | None = None
    chat_template_sha256: str | None = None

    @classmethod
    def from_json(cls, data: JsonObject) -> BaselineSampling:
        template = data.get("chat_template")
        return cls(
            frozenset(data), _number(data.get("temperature"), "sampling.temperature"), data.get("greedy") is True,
            _text(data.get("purpose"), "sampling.purpose"),
            _integer(data.get("max_completion_length"), "sampling.max_completion_length"),
            _integer(data.get("max_prompt_length"), "sampling.max_prompt_length"),
            _number(data.get("top_p"), "sampling.top_p"), _text(data.get("system_prompt"), "sampling.system_prompt"),
            _integer(data.get("seed"), "sampling.seed"), _text(data.get("backend"), "sampling.backend"),
            _number(data.get("seconds"), "sampling.seconds"),
            _text(template.get("sha256"), "sampling.chat_template.sha256") if isinstance(template, dict) else None)

    def compared(self) -> dict[str, Setting]:
        """The settings of COMPARED_SETTINGS the record holds, by name."""
        values: dict[str, Setting] = {"max_completion_length": self.max_completion_length,
                                      "temperature": self.temperature, "top_p": self.top_p,
                                      "system_prompt": self.system_prompt}
        return {name: values[name] for name in COMPARED_SETTINGS if name in self.held}


@dataclass(frozen=True)
class Baseline:
    """A baseline record, parsed once where it is read (`load_baseline`): the figures, the settings they were
    measured under and the bindings the gate verifies. `digest` is the one the record carries, `content_sha256`
    the sha256 of the rest as read: they differ when the record was edited by hand."""

    model: str | None
    created_at: str | None
    prompts: BaselinePrompts
    k: int
    pass_at_1: float
    pass_at_k: float
    frac_groups_all_tie: float
    frac_truncated: float
    mean_reward: Mapping[str, float]
    bindings: JsonObject
    sampling: BaselineSampling | None  # None: written before the settings were bound
    per_prompt: tuple[int, ...] | None  # successes of each prompt, in the order of prompts.indices
    advice: tuple[str, ...]  # what `finetune baseline` advised (the record's verdict)
    digest: str | None
    content_sha256: str

    @classmethod
    def from_json(cls, data: JsonObject, path: Path | str = "baseline record") -> Baseline:
        """The record `data` read from `path`; UnusableInput naming the file, what is wrong, and how to write it
        again."""
        try:
            return cls.parse(data)
        except MalformedBaseline as exc:
            raise UnusableInput(f"{path} {exc}", REDO, str(path)) from None

    @classmethod
    def parse(cls, data: JsonObject) -> Baseline:
        """The record in `data`; MalformedBaseline saying which field is wrong."""
        fmt = data.get("format")
        if fmt != FORMAT:
            if isinstance(fmt, str) and fmt.startswith(FORMAT_PREFIX):
                raise MalformedBaseline(f"is {fmt}; this llm-finetuning reads {FORMAT}")
            raise MalformedBaseline(f"is not a baseline record (format {fmt!r}, expected {FORMAT})")
        k = data.get("k")
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise MalformedBaseline("field 'k' is not a positive integer")
        fractions = []
        for key in FRACTIONS:
            v = data.get(key)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:
                raise MalformedBaseline(f"field {key!r} is {v!r}; expected a number in [0, 1]")
            fractions.append(float(v))
        mean_reward, bindings, prompts = (_object(data.get(key), key) for key in ("mean_reward", "bindings", "prompts"))
        _object(data.get("brief"), "brief")
        sampling = data.get("sampling")
        per_prompt = data.get("per_prompt")
        if per_prompt is not None and not (isinstance(per_prompt, list) and all(
                isinstance(s, int) and not isinstance(s, bool) for s in per_prompt)):
            raise MalformedBaseline(f"field 'per_prompt' is {per_prompt!r}; expected a list of success counts")
        verdict = data.get("verdict")
        advice = verdict.get("advice") if isinstance(verdict, dict) else None
        return cls(
            _text(data.get("model"), "model"), _text(data.get("created_at"), "created_at"),
            BaselinePrompts.from_json(prompts), k, fractions[0], fractions[1], fractions[2], fractions[3],
            {name: _mean(v, name) for name, v in mean_reward.items()}, bindings,
            BaselineSampling.from_json(_object(sampling, "sampling")) if sampling is not None else None,
            tuple(s for s in per_prompt if isinstance(s, int)) if isinstance(per_prompt, list) else None,
            tuple(a for a in advice if isinstance(a, str) and a) if isinstance(advice, list) else (),
            _text(data.get("digest"), "digest"), sha256_json({key: v for key, v in data.items() if key != "digest"}))

    @property
    def tampered(self) -> bool:
        """The record's digest is not that of its content: it was edited after `finetune baseline` wrote it."""
        return self.digest != self.content_sha256

    @property
    def decoding(self) -> Decoding | None:
        """The decoding the figures were measured with (None: the record does not say)."""
        if self.sampling is None:
            return None
        if self.sampling.greedy:
            return Decoding(0.0, greedy=True)
        return Decoding(self.sampling.temperature) if self.sampling.temperature is not None else None

    @property
    def for_evaluation(self) -> bool:
        """The record holds an evaluation setting's figures (`--temperature`/`--greedy`), not the training one."""
        return self.sampling is not None and (self.sampling.purpose == "evaluation" or self.sampling.greedy)

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


def recorded_decoding(record: Baseline) -> Decoding | None:
    """The decoding a baseline record was measured with (None: the record does not say)."""
    return record.decoding


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


def measured_for_evaluation(record: Baseline) -> bool:
    """The record holds an evaluation setting's figures (`--temperature`/`--greedy`), not the training one."""
    return record.for_evaluation


@dataclass(frozen=True)
class SettingDrift:
    """One sampling setting whose recorded value differs from the brief's (`recorded` None: unknown)."""

    name: str
    yaml_path: str
    recorded: Setting
    now: Setting


SETTING_PATHS = {"max_completion_length": "grpo.max_completion_length", "temperature": "grpo.temperature",
                 "top_p": "grpo.overrides.top_p", "system_prompt": "data.system_prompt",
                 "k": "grpo.num_generations", "chat_template": "model.id"}


def settings_drift(record: Baseline, brief: Brief) -> tuple[list[SettingDrift], list[str]]:
    """(settings whose recorded value differs from the brief's, names of settings the record does not hold).

    Pure: compares the record's `sampling` (and `k`) with `brief_sampling_settings(brief)`.
    """
    sampling = record.sampling or BaselineSampling()
    now = brief_sampling_settings(brief)
    brief_values: dict[str, Setting] = {"max_completion_length": now["max_completion_length"],
                                        "temperature": now["temperature"], "top_p": now["top_p"],
                                        "system_prompt": now["system_prompt"], "k": now["k"]}
    recorded = {**sampling.compared(), "k": record.k}
    drift = [SettingDrift(name, SETTING_PATHS[name], recorded[name], brief_values[name])
             for name in (*COMPARED_SETTINGS, "k")
             if name in recorded and not _same(recorded[name], brief_values[name])]
    unknown = [name for name in (*COMPARED_SETTINGS, *RECORDED_ONLY_SETTINGS) if name not in sampling.held]
    return drift, unknown


def _same(a: Setting, b: Setting) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(float(a) - float(b)) <= 1e-9
    return a == b


def make_baseline(brief: Brief, *, model_identity: str | None, prompts: JsonObject, k: int,
                  pass_at_1: float, pass_at_k: float, mean_reward: dict[str, float],
                  frac_groups_all_tie: float, frac_truncated: float, **extra: object) -> dict[str, object]:
    """A baseline record for `brief` with its bindings computed now (`extra`: more fields to keep)."""
    record: dict[str, object] = {
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


@writes_records
def write_baseline(path: Path, record: Mapping[str, object]) -> JsonObject:
    """Check the record's fields and write it atomically with its digest. Returns what was written (read back
    with `Baseline.parse`)."""
    rec = {k: v for k, v in record.items() if k != "digest"}
    rec.setdefault("format", FORMAT)
    rec.setdefault("created_at", utc_now())
    rec["digest"] = sha256_json(rec)
    written: JsonObject = json.loads(canonical_json(rec))  # the JSON object the file holds
    try:
        Baseline.parse(written)
    except MalformedBaseline as exc:
        raise ValueError(f"baseline record {exc}") from None
    atomic_write_json(Path(path), rec)
    return written


def load_baseline(path: Path) -> Baseline:
    """The baseline record at `path`; UnusableInput when it is missing or not one."""
    return Baseline.from_json(read_json_object(Path(path), "baseline record",
                                               "run `finetune baseline BRIEF` to write it again"), path)


def verify_baseline(brief: Brief, path: Path, model_identity: str | None = None,
                    bindings: JsonObject | None = None) -> tuple[Baseline | None, list[Problem]]:
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
    if rec.tampered:
        problems.append(Problem("tampered", "record", f"{shown(path)} was edited after `finetune baseline` wrote it", redo))
    current = bindings if bindings is not None else current_bindings(brief, model_identity)
    problems += stale_problems(rec.bindings, current, redo, check_identity=model_identity is not None,
                               check_data=True)
    return rec, problems
