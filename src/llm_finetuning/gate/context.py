"""Everything the checks need that lives outside the brief, loaded once, up front.

Checks are pure functions of (brief, context): this module is the only part of the gate that reads
records, run directories, model configs, TRL's source or the memory estimator. A piece whose input cannot
be read (a missing record, an estimate the brief's model cannot support) becomes a value saying why, and
the check that needs it reports that reason; the package's own modules are imported plainly.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from llm_finetuning.brief import Brief
from llm_finetuning.errors import Problem, UnusableInput
from llm_finetuning.fileio import read_json_or_none
from llm_finetuning.jsonvalue import JsonObject
from llm_finetuning.rundir import read_diagnosis
from llm_finetuning.rundir.diagnosis import Diagnosis
from llm_finetuning.rundir.manifest import read_manifest

if TYPE_CHECKING:
    from llm_finetuning.gate.protection import Registered
    from llm_finetuning.memory import Estimate
    from llm_finetuning.records.baseline import Baseline
    from llm_finetuning.records.inspection import SealedReview

@dataclass(frozen=True)
class Deviation:
    """What the run directory named by grpo.deviation says about itself."""

    run_dir: str
    healthy: bool | None  # None: no diagnosis found
    brief_name: str | None
    problem: str = ""
    task_findings: tuple[str, ...] = ()  # the task's findings (docs/diagnose.md): what the next run should reduce


@dataclass(frozen=True)
class ProtectionFacts:
    """Where the gate runs and what protects the brief's project (`gate.protection`), read once."""

    in_claude_code: bool  # the pinned client sets CLAUDECODE=1 for every Bash command
    project: Path
    settings: Mapping[str, object] | None  # .claude/settings.local.json merged over settings.json; None: neither there
    settings_problem: str = ""  # a settings file that cannot be read
    key_path: Path | None = None  # the reviewer's private key (locations.private_key_path)
    key_readable: bool = False  # it could be opened from this process
    registered: Registered | None = None  # what the person recorded with `finetune protect` (gate.protection)
    in_broker: bool = False  # run by the plugin's broker (LLM_FINETUNING_BROKER=1): the person's side, outside the sandbox


@dataclass
class GateContext:
    """What the checks read besides the brief, loaded once by `load_context`; where a piece could not be read,
    the field beside it says why (`baseline_problems`, `trl_problem`, `memory_problem`)."""

    baseline: Baseline | None = None
    baseline_problems: list[Problem] = field(default_factory=list)
    inspection: SealedReview | None = None  # the sealed review, parsed once (records.inspection)
    inspection_problems: list[Problem] = field(default_factory=list)  # warnings (severity) do not block
    inspection_signer: str = ""  # who signed the record, as a trusted-keys file names them (`Ada (SHA256:...)`)
    judge_problems: list[str] | None = None  # None: the brief has no judge reward
    deviation: Deviation | None = None
    model_config: JsonObject | None = None  # config.json of a local model
    trl_fields: frozenset[str] | None = None
    trl_problem: str = ""
    memory: Estimate | None = None
    memory_problem: str = ""
    memory_fix: str = ""  # what makes the estimate possible, when memory_problem says why there is none
    model_identity: str | None = None  # what the sampling verbs bound into the records (models.model_identity)
    # The brief's bindings now (records.bindings.current_bindings: reward specs and code, model, data), computed
    # once: both records are verified against them and the gate's fingerprint binds their reward code.
    bindings: JsonObject = field(default_factory=dict)
    tracker_installed: dict[str, bool] = field(default_factory=dict)  # tracking.report_to name -> importable here
    protection: ProtectionFacts | None = None


def _load_judge(brief: Brief) -> list[str] | None:
    if not brief.has_judge:
        return None
    from llm_finetuning.records.judge_calibration import verify_judge_calibration

    path = brief.resolve(brief.records.judge_calibration)
    return [str(p) for p in verify_judge_calibration(brief, path)]




def _run_brief_name(run_dir: Path, diagnosis: Diagnosis | None) -> str | None:
    """The brief the run belongs to, as its diagnosis or else its manifest names it."""
    if diagnosis is not None and diagnosis.brief_name is not None:
        return diagnosis.brief_name
    manifest = read_manifest(run_dir)
    return manifest.name if manifest is not None else None


def _load_deviation(brief: Brief) -> Deviation | None:
    """What the run named by grpo.deviation proves, by the records layer's `verify_diagnosis` (healthy,
    ended, metrics unchanged since diagnosis, same brief name)."""
    from llm_finetuning.records.diagnosis import verify_diagnosis

    ref = brief.grpo.deviation
    if not ref:
        return None
    run_dir = brief.resolve(str(ref))
    if not run_dir.is_dir():
        return Deviation(str(ref), None, None, f"run directory {run_dir} does not exist")
    problems = [str(p) for p in verify_diagnosis(run_dir, brief.name)]
    try:
        record = read_diagnosis(run_dir)
    except UnusableInput:  # verify_diagnosis said why
        record = None
    name = brief.name if not problems else _run_brief_name(run_dir, record)
    task_ids = record.task if record is not None else ()
    return Deviation(str(ref), not problems, name, "; ".join(problems), task_ids)


def _load_model_config(brief: Brief) -> JsonObject | None:
    if not brief.model.is_local(brief.folder):
        return None
    return read_json_or_none(brief.resolve(brief.model.id) / "config.json")


def _model_identity(brief: Brief) -> str | None:
    """The model's identity as `finetune baseline`/`inspect` bind it (hashes cached by size and mtime).

    A model that is not there (the embedded model without its package, a local folder that is gone)
    raises UnusableInput: the gate cannot vouch for records of a model it cannot find.
    """
    from llm_finetuning.models import model_identity

    try:
        return model_identity(brief.model, brief.folder)
    except UnusableInput:
        raise
    except OSError:  # an unreadable hash cache or file: the records' model fields are still compared
        return None


def _load_memory(brief: Brief) -> tuple[Estimate | None, str, str]:
    """(estimate, why there is none, the fix that would make one) for the memory check."""
    from llm_finetuning.memory import estimate_brief

    try:
        return estimate_brief(brief), "", ""
    except UnusableInput as exc:
        return None, f"the memory estimate could not be made: {exc.problem.what()}", exc.fix
    except Exception as exc:  # noqa: BLE001 - an estimator failure must not hide the other checks
        return None, f"the memory estimate failed: {type(exc).__name__}: {exc}", ""


def _trackers_installed(brief: Brief) -> dict[str, bool]:
    """For each known tracker the brief names: is its package importable here (found, not imported)."""
    import importlib.util

    from llm_finetuning.brief.tracking import TRACKERS

    out = {}
    for name in brief.tracking.report_to:
        if name in TRACKERS:
            try:
                out[name] = importlib.util.find_spec(TRACKERS[name][0].split(".")[0]) is not None
            except (ImportError, ValueError):
                out[name] = False
    return out


def _load_protection(brief: Brief) -> ProtectionFacts:
    """Whether the gate runs inside Claude Code, the project's merged Claude Code settings, and whether the
    reviewer's private key opens from here (inside the sandbox's denyRead it does not)."""
    import json
    import os

    from llm_finetuning import locations
    from llm_finetuning.gate.protection import merged_settings, read_registry

    project = locations.project_root(brief.folder)
    main = locations.project_settings_path(project)
    merged: dict[str, object] | None = None
    problem = ""
    for path in (main, main.with_name("settings.local.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            continue
        except (OSError, ValueError) as exc:
            problem = f"{path} cannot be read as JSON ({exc})"
            continue
        if isinstance(data, dict):
            merged = merged_settings(merged or {}, data)
    key = locations.private_key_path()
    try:
        with open(key, "rb"):
            readable = True
    except OSError:
        readable = False
    return ProtectionFacts(os.environ.get("CLAUDECODE") == "1", project, merged, problem, key, readable,
                           read_registry(project), os.environ.get("LLM_FINETUNING_BROKER") == "1")


def load_context(brief: Brief) -> GateContext:
    """Read every record and fact the checks need for `brief`."""
    from llm_finetuning.gate.trl_fields import FieldsUnavailable, grpo_config_fields
    from llm_finetuning.records.baseline import verify_baseline
    from llm_finetuning.records.bindings import current_bindings
    from llm_finetuning.records.inspection import check_inspection

    ctx = GateContext()
    ctx.model_identity = _model_identity(brief)
    ctx.bindings = current_bindings(brief, ctx.model_identity)
    records = brief.records
    ctx.baseline, ctx.baseline_problems = verify_baseline(brief, brief.resolve(records.baseline),
                                                          ctx.model_identity, ctx.bindings)
    inspected = check_inspection(brief, brief.resolve(records.inspection), ctx.model_identity, ctx.bindings)
    ctx.inspection, ctx.inspection_problems = inspected.review, inspected.problems
    ctx.inspection_signer = inspected.signer.who() if inspected.signer else ""
    ctx.judge_problems = _load_judge(brief)
    ctx.deviation = _load_deviation(brief)
    ctx.model_config = _load_model_config(brief)
    try:
        ctx.trl_fields = grpo_config_fields()
    except FieldsUnavailable as exc:
        ctx.trl_problem = str(exc)
    ctx.memory, ctx.memory_problem, ctx.memory_fix = _load_memory(brief)
    ctx.tracker_installed = _trackers_installed(brief)
    ctx.protection = _load_protection(brief)
    return ctx
