"""`finetune eval`'s work: sample a run's checkpoints on the baseline's prompts with the baseline's
settings, score them with the brief's rewards, and compare with the base model prompt by prompt.

The base side is the baseline record's own per-prompt successes when it holds them for the same k;
otherwise (an older record, another k, more prompts than it sampled) the base model is sampled here with
the same prompts and settings. `--temperature T` / `--greedy` evaluate both sides at that setting: the
base side comes from the evaluation record `finetune baseline --temperature T` / `--greedy` wrote, when
it is there and current, else the base model is sampled again at that setting on the baseline's
prompts. Results are written to RUN_DIR/eval.json (bound to the checkpoint's sha256 and the baseline
record's digest) and, for several checkpoints, RUN_DIR/eval.jsonl.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, TypeVar

from llm_finetuning.brief import Brief
from llm_finetuning.errors import UnusableInput
from llm_finetuning.evaluation.paired import paired_difference, pass_figures
from llm_finetuning.evaluation.targets import (
    FIX_NO_RUN_MANIFEST,
    NO_RUN_MANIFEST,
    Target,
    folder_sha256,
    is_model_folder,
    model_folder_target,
    sampling_folder,
    select_targets,
)
from llm_finetuning.fileio import atomic_write_bytes, atomic_write_json, shown, utc_now
from llm_finetuning.jsonvalue import JsonValue
from llm_finetuning.records.baseline import Baseline, BaselineSampling, Decoding
from llm_finetuning.rundir import EVAL_JSON, EVAL_JSONL
from llm_finetuning.rundir.manifest import has_manifest, load_manifest
from llm_finetuning.sampling.backend import SamplingSettings

if TYPE_CHECKING:
    from llm_finetuning.rewards.code import VerifiedCode
    from llm_finetuning.sampling.run import SamplingRun

FORMAT = "llm-finetuning/eval@1"
T = TypeVar("T")


class Comparison(TypedDict):
    """One checkpoint against the base model on the same prompts (docs/workflow.md, "What `--json` prints")."""

    prompts: int
    k: int
    base: dict[str, float]  # pass_at_1, pass_at_k
    trained: dict[str, float]
    delta_pass_at_1: float
    ci95: list[float]
    beyond_noise: bool


class BaselineUsed(TypedDict):
    path: str
    digest: JsonValue
    base_source: str


class SettingsUsed(TypedDict):
    temperature: float
    greedy: bool
    top_p: float
    max_completion_length: int
    seed: int
    system_prompt: str | None


class PerPrompt(TypedDict):
    base: list[int]
    trained: list[int]


class _Evaluated(Comparison):
    checkpoint: str | int | None  # "final" or the checkpoint's step
    format: str
    created_at: str
    step: int | None
    adapter: bool
    checkpoint_path: str
    checkpoint_sha256: str
    baseline: BaselineUsed
    split: str
    indices: list[int]
    temperature: float
    greedy: bool
    settings: SettingsUsed
    per_prompt: PerPrompt
    seconds: float
    backend: dict[str, JsonValue]
    notes: list[str]


class EvalResult(_Evaluated, total=False):
    """What `finetune eval` found for one checkpoint (RUN_DIR/eval.json), a superset of the --json contract;
    `evaluate` adds the seconds the base side took and the run manifest (None: a model folder without one)."""

    seconds_base: float
    run_manifest: str | None


@dataclass
class EvalPlan:
    """What both sides are sampled with: the baseline's prompts (rows of its split) and settings."""

    brief: Brief
    record: Baseline
    record_path: Path
    split: str
    indices: list[int]
    settings: SamplingSettings
    system_prompt: str
    template_sha256: str | None
    base_successes: list[int] | None  # from the record; None: sample the base model
    base_source: str = "record"  # or "sampled": where the base side's per-prompt successes came from
    notes: list[str] = field(default_factory=list)
    baseline_flag: str = ""  # what `finetune baseline BRIEF` needs to record this setting: "", " --greedy" ...


@dataclass
class Sampled:
    successes: list[int]
    seconds: float
    backend: dict[str, JsonValue]
    template_sha256: str | None


def load_run_brief(run_dir: Path) -> Brief:
    """The brief a rendered run was made from (through its manifest)."""
    path = load_manifest(run_dir).brief_path(run_dir)
    return _valid_brief(path)


def _valid_brief(path: Path) -> Brief:
    from llm_finetuning.brief import load_brief

    brief, errors = load_brief(path)
    if brief is None:
        raise UnusableInput(f"{shown(path)} is no longer a valid brief: {errors[0].what() if errors else '?'}",
                            f"run `finetune check {shown(path)}` and fix what it names", str(path))
    return brief


def brief_and_manifest(folder: Path, brief_path: Path | None) -> tuple[Brief, bool]:
    """The brief to evaluate or export `folder` with, and whether `folder` is a run directory with a run manifest.

    A run directory's brief comes from its manifest. A model folder without one (trained outside `finetune
    launch`) is refused, unless `brief_path` names the brief to score it against: then the caller says
    NO_RUN_MANIFEST wherever it reports."""
    folder = Path(folder)
    if has_manifest(folder):
        if brief_path is not None:
            raise UnusableInput(f"--brief: {shown(folder)} is a run directory; its manifest names its brief",
                                f"drop --brief and name {shown(folder)} alone", "--brief")
        return load_run_brief(folder), True
    run = next((p for p in (folder.parent, folder.parent.parent) if has_manifest(p)), None)
    if run is not None:
        raise UnusableInput(f"{shown(folder)} is a model inside the run directory {shown(run)}",
                            f"name the run directory {shown(run)} (and --checkpoint STEP for a checkpoint)", str(folder))
    if not is_model_folder(folder):
        return load_run_brief(folder), True  # neither a run nor a model: load_manifest says what is missing
    if brief_path is None:
        raise UnusableInput(f"{NO_RUN_MANIFEST} (the folder has no manifest.json)", FIX_NO_RUN_MANIFEST, str(folder))
    return _valid_brief(brief_path), False


def _record_for(brief: Brief, decoding: Decoding | None) -> tuple[Path, Baseline, list[str]]:
    """The baseline record to evaluate against (verified), and notes: the one measured at `decoding` when
    it is there and current, else the training one (records.baseline)."""
    from llm_finetuning.models import model_identity
    from llm_finetuning.records.baseline import record_path_for, training_record_path, verify_baseline
    from llm_finetuning.records.bindings import current_bindings

    identity = model_identity(brief.model, brief.folder)
    bindings = current_bindings(brief, identity)  # once, for whichever records are verified
    training = training_record_path(brief)
    notes: list[str] = []
    if decoding is not None and not decoding.is_training(brief):
        path = record_path_for(brief, decoding)
        record, problems = verify_baseline(brief, path, identity, bindings)
        if record is not None and not problems:
            return path, record, notes
        if problems[0].id == "missing":
            why = (f"no baseline record at {decoding.label} ({shown(path)}; `finetune baseline "
                   f"{shown(brief.path)} {decoding.flag}` writes one)")
        else:
            why = f"the baseline record at {decoding.label} cannot be used ({problems[0].id}: {problems[0].message})"
        notes.append(f"{why}: the base model is sampled again at {decoding.label} on the prompts of {shown(training)}")
    record, problems = verify_baseline(brief, training, identity, bindings)
    if record is None or problems:
        first = problems[0]
        raise UnusableInput(f"the baseline record cannot stand for the base model: {first.id} ({first.path}): "
                            f"{first.message}", first.fix, "records.baseline")
    return training, record, notes


def plan_eval(brief: Brief, n_prompts: int | None, k: int | None, decoding: Decoding | None = None) -> EvalPlan:
    """The baseline record (verified against the brief) and the prompts and settings it was measured with.

    `decoding` (a `records.baseline.Decoding`, from --temperature/--greedy) replaces the record's
    temperature; the record's per-prompt successes stand for the base side only when measured at it.
    """
    from llm_finetuning.records.baseline import (
        brief_sampling_settings,
        completions_per_prompt,
    )

    path, record, notes = _record_for(brief, decoding)
    fell_back = bool(notes)  # no current record at the asked setting: the training record's prompts
    recorded = record.sampling or BaselineSampling()
    now = brief_sampling_settings(brief)
    unknown = [name for name in ("temperature", "max_completion_length", "top_p", "system_prompt")
               if name not in recorded.held]
    if unknown:
        notes.append(f"the baseline record does not hold {', '.join(unknown)}: the brief's values are used")
    indices = list(record.prompts.indices)
    if not indices:
        raise UnusableInput(f"{shown(path)} does not list the prompts it sampled", "run `finetune baseline BRIEF` again",
                            "records.baseline")
    n = min(n_prompts or len(indices), len(indices))
    if n_prompts and n_prompts > len(indices):
        notes.append(f"the baseline sampled {len(indices)} prompts; --prompts {n_prompts} is cut to those")
    measured = record.decoding
    decoding = decoding or measured
    k = completions_per_prompt(k, decoding, record.k)
    per_prompt = record.per_prompt
    base = None
    if decoding is not None and decoding != measured:  # asked for a setting this record was not measured at
        if not fell_back:
            at = measured.label if measured is not None else "a temperature it does not record"
            notes.append(f"{shown(path)} was measured at {at}: the base model is sampled again at "
                         f"{decoding.label} on its prompts")
    elif per_prompt is not None and len(per_prompt) == len(indices) and k == record.k:
        base = list(per_prompt[:n])
    else:
        notes.append("the base model is sampled again on the same prompts with the same settings ("
                     + ("the record holds no per-prompt successes" if per_prompt is None
                        else f"--k {k} differs from the record's k {record.k}") + ")")
    greedy = bool(decoding is not None and decoding.greedy)
    settings = SamplingSettings(
        k=k,
        temperature=decoding.temperature if decoding is not None else now["temperature"],
        greedy=greedy,
        max_completion_length=_or(recorded.max_completion_length, now["max_completion_length"]),
        max_prompt_length=recorded.max_prompt_length if "max_prompt_length" in recorded.held
        else brief.grpo.max_prompt_length,
        seed=_or(recorded.seed, int(brief.grpo.seed)),
        top_p=1.0 if greedy else float(_or(recorded.top_p, now["top_p"])),
    )
    system_prompt = recorded.system_prompt if "system_prompt" in recorded.held else now["system_prompt"]
    split = record.prompts.split or ("eval" if brief.data.eval else "train")
    flag = "" if decoding is None or decoding.is_training(brief) else f" {decoding.flag}"
    return EvalPlan(brief, record, path, split, indices[:n], settings,
                    system_prompt or "", recorded.chat_template_sha256, base, notes=notes, baseline_flag=flag)


def _or(recorded: T | None, brief_value: T) -> T:
    """The record's setting, or the brief's where the record does not hold it."""
    return brief_value if recorded is None else recorded


def brief_with_model(brief: Brief, folder: Path) -> Brief:
    """The brief with model.id pointed at a local model folder (the same data, rewards and settings)."""
    return brief.with_model(str(Path(folder).resolve()))


def sample_successes(brief: Brief, plan: EvalPlan, desc: str, backend: str = "auto", endpoint: str | None = None,
                     endpoint_model: str | None = None) -> Sampled:
    """Per-prompt successes of `brief`'s model on the plan's prompts and settings (progress on stderr)."""
    from llm_finetuning.sampling.chat import chat_template_identity
    from llm_finetuning.sampling.run import sample_brief

    run = sample_brief(brief, n_prompts=len(plan.indices), k=plan.settings.k, split=plan.split, backend=backend,
                       endpoint=endpoint, endpoint_model=endpoint_model, desc=desc, indices=plan.indices,
                       settings=plan.settings, system_prompt=plan.system_prompt)
    successes = scored_successes(brief, run)
    template = chat_template_identity(run.tokenizer)["sha256"] if run.tokenizer is not None else None
    return Sampled(successes, run.seconds, run.backend, template)


def scored_successes(brief: Brief, run: SamplingRun, code: VerifiedCode | None = None) -> list[int]:
    """Score a sampling run with the brief's rewards; the successes of each prompt (verifier rewards all 1).
    `code`: a run's verified reward bytes, while it trains (`evaluation.during`)."""
    from llm_finetuning.sampling.metrics import is_success, verifier_names
    from llm_finetuning.sampling.run import score_run

    try:
        score_run(brief, run, code=code)
    except ValueError as exc:  # a reward refused its spec or a row
        raise UnusableInput(str(exc), "fix the reward spec or the data, then run again", "rewards") from None
    verifiers = verifier_names(brief.rewards)
    return [sum(is_success(s["rewards"], verifiers) for s in p.scores) for p in run.prompts]


def compare(plan: EvalPlan, base: list[int], trained: list[int]) -> Comparison:
    """The `finetune eval --json` object for one checkpoint (docs/workflow.md, "What `--json` prints"), before binding."""
    k = plan.settings.k
    diff = paired_difference([b / k for b in base], [t / k for t in trained])
    return {"prompts": len(trained), "k": k, "base": pass_figures(base, k), "trained": pass_figures(trained, k),
            "delta_pass_at_1": round(diff.delta, 6), "ci95": [round(diff.ci95[0], 6), round(diff.ci95[1], 6)],
            "beyond_noise": diff.beyond_noise}


def evaluate(run_dir: Path, which: str = "final", n_prompts: int | None = None, k: int | None = None,
             backend: str = "auto", endpoint: str | None = None,
             endpoint_model: str | None = None, temperature: float | None = None,
             greedy: bool = False, brief_path: Path | None = None) -> list[EvalResult]:
    """Score the chosen checkpoints of `run_dir` against the baseline; write eval.json (and eval.jsonl for
    several). Returns one result per checkpoint, oldest first, each a superset of the --json contract.
    `temperature` / `greedy`: evaluate both sides at that setting instead of the baseline record's.
    `brief_path`: `run_dir` is a model folder without a run manifest, scored against this brief's baseline."""
    from llm_finetuning.records.baseline import requested_decoding
    from llm_finetuning.rundir import MANIFEST

    run_dir = Path(run_dir).resolve()
    brief, manifest = brief_and_manifest(run_dir, brief_path)
    targets = select_targets(run_dir, which) if manifest else [model_folder_target(run_dir, which)]
    plan = plan_eval(brief, n_prompts, k, requested_decoding(brief, temperature, greedy))
    if endpoint and len(targets) > 1:
        raise UnusableInput("--endpoint serves one model; --checkpoint all would score it as every checkpoint",
                            "serve one checkpoint and name it with --checkpoint STEP or final", "--endpoint")
    if not manifest:
        plan.notes.insert(0, NO_RUN_MANIFEST)
    for note in plan.notes:
        print(f"note: {note}", file=sys.stderr, flush=True)
    base_seconds = 0.0
    if plan.base_successes is None:
        if endpoint:
            raise UnusableInput("the base model must be sampled again (see the note above), and --endpoint serves "
                                "the trained model", f"run `finetune baseline BRIEF{plan.baseline_flag}` (it records "
                                "per-prompt successes at that setting), or drop --endpoint", "records.baseline")
        started = time.monotonic()
        plan.base_successes = sample_successes(brief, plan, "Held-out (base)", backend).successes
        plan.base_source = "sampled"
        base_seconds = time.monotonic() - started
    results = []
    for target in targets:
        results.append(_evaluate_target(run_dir, brief, plan, target, backend, endpoint, endpoint_model))
        results[-1]["seconds_base"] = round(base_seconds, 1)
        results[-1]["run_manifest"] = str(run_dir / MANIFEST) if manifest else None
    _write_results(run_dir, which, results)
    return results


def _evaluate_target(run_dir: Path, brief: Brief, plan: EvalPlan, target: Target, backend: str,
                     endpoint: str | None, endpoint_model: str | None) -> EvalResult:
    folder = target.folder if endpoint else sampling_folder(target, brief, run_dir)
    desc = f"Held-out ({target.label})"
    sampled = sample_successes(brief_with_model(brief, folder), plan, desc, backend, endpoint, endpoint_model)
    assert plan.base_successes is not None
    comparison = compare(plan, plan.base_successes, sampled.successes)
    if plan.template_sha256 and sampled.template_sha256 and plan.template_sha256 != sampled.template_sha256:
        print(f"warning: {target.label}'s chat template differs from the one the baseline was sampled with: "
              "the prompts are formatted differently on the two sides", file=sys.stderr, flush=True)
    return {
        "checkpoint": target.label if target.label == "final" else target.step, **comparison,
        "format": FORMAT, "created_at": utc_now(), "step": target.step, "adapter": target.adapter,
        "checkpoint_path": str(target.folder), "checkpoint_sha256": folder_sha256(target.folder),
        "baseline": {"path": str(plan.record_path), "digest": plan.record.digest, "base_source": plan.base_source},
        "split": plan.split, "indices": plan.indices,
        "temperature": plan.settings.temperature, "greedy": plan.settings.greedy,
        "settings": {"temperature": plan.settings.temperature, "greedy": plan.settings.greedy,
                     "top_p": plan.settings.top_p,
                     "max_completion_length": plan.settings.max_completion_length, "seed": plan.settings.seed,
                     "system_prompt": plan.system_prompt or None},
        "per_prompt": {"base": plan.base_successes, "trained": sampled.successes},
        "seconds": round(sampled.seconds, 1), "backend": sampled.backend, "notes": plan.notes,
    }


def _write_results(run_dir: Path, which: str, results: list[EvalResult]) -> None:
    import json

    last: dict[str, object] = dict(results[-1])
    if which == "all":
        last["all"] = [_contract_keys(r) for r in results]
        rows = [{"step": r["step"], "score": r["trained"]["pass_at_1"], "pass_at_k": r["trained"]["pass_at_k"],
                 "checkpoint": r["checkpoint"]} for r in results if r["step"] is not None]
        atomic_write_bytes(run_dir / EVAL_JSONL, "".join(json.dumps(row) + "\n" for row in rows).encode("utf-8"))
    atomic_write_json(run_dir / EVAL_JSON, last)


CONTRACT_KEYS = ("checkpoint", "prompts", "k", "base", "trained", "delta_pass_at_1", "ci95", "beyond_noise",
                 "temperature", "greedy")  # docs/workflow.md's keys, the decoding both sides were measured at last


def _contract_keys(result: Mapping[str, object]) -> dict[str, object]:
    return {key: result[key] for key in CONTRACT_KEYS}


def contract(result: EvalResult) -> dict[str, object]:
    """The keys docs/workflow.md promises for `finetune eval --json` and the decoding (temperature 0: greedy); for a
    model folder without a run manifest, also `run_manifest: null` and `no_run_manifest` saying what that means."""
    out = _contract_keys(result)
    if "run_manifest" in result and result["run_manifest"] is None:
        out.update(run_manifest=None, no_run_manifest=NO_RUN_MANIFEST)
    return out
