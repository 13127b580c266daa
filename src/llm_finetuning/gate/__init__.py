"""The Phase 1 gate: every check on a brief, each with an id, a verdict, the YAML path, the reason and the fix.

`run_gate(brief_path)` loads the brief (with a cached fast path for briefs that were valid before) and gates
it; a verb that loaded the brief itself calls `gate_brief(brief)`. The gate loads the records and facts every
check needs once (`gate.context`), then runs the checks registered in `gate.checks` in order. Checks never
read files. A passing report carries the gate's fingerprint (`fingerprint_of`), which binds a render and a
launch to the exact brief, records and reward code the gate saw, and the sha256 of each record file it hashed
for it, which render writes into the manifest.

Pure: imports no torch, transformers, trl, vllm or jsonschema on the fast path.
"""

from __future__ import annotations

from pathlib import Path

from llm_finetuning.brief import Brief
from llm_finetuning.gate.result import CheckResult, GateReport, Verdict

GATE_VERSION = 1

__all__ = ["CheckResult", "GateReport", "run_gate", "gate_brief", "gate_fingerprint", "Verdict"]


def run_gate(brief_path: Path) -> GateReport:
    """Run every check on the brief at `brief_path`. Raises UnusableInput when it cannot be read at all."""
    from llm_finetuning.gate.checks import brief_is_valid
    from llm_finetuning.gate.fastload import load_brief_for_gate

    brief, errors = load_brief_for_gate(Path(brief_path))
    if brief is None:
        report = GateReport(str(brief_path), None, brief_is_valid.from_errors(errors))
        report.checks.append(CheckResult(
            "brief_is_valid", Verdict.FAIL, "", "the other checks run once the brief is valid",
            f"fix the errors above (`finetune check {brief_path}` lists the same), then run the gate again"))
        return report
    return gate_brief(brief, brief_path)


def gate_brief(brief: Brief, shown_path: str | Path | None = None,
               record_sha256: dict[str, str | None] | None = None) -> GateReport:
    """Run every check on a loaded, valid brief; the report names it as `shown_path` (as the user typed it),
    else by its path. `record_sha256`: record files' sha256 (by `record_files` key) the caller verified just now
    (launch: the manifest's), which the fingerprint takes instead of hashing the files again."""
    from llm_finetuning.gate.checks import CHECKS
    from llm_finetuning.gate.context import load_context

    ctx = load_context(brief)
    report = GateReport(str(brief.path if shown_path is None else shown_path), brief.name, memory=ctx.memory,
                        memory_problem=ctx.memory_problem)
    for check_id, check in CHECKS:
        try:
            report.checks.extend(check(brief, ctx))
        except Exception as exc:  # noqa: BLE001 - a check that breaks rejects; it never passes by accident
            report.checks.append(CheckResult(
                check_id, Verdict.FAIL, "", f"the check itself failed: {type(exc).__name__}: {exc}",
                "report this as a bug in llm-finetuning, with the brief and its records"))
    if report.passed:
        from llm_finetuning.fileio import sha256_file_or_none

        known = dict(record_sha256 or {})
        if ctx.inspection is not None:  # verified: the samples file is the one the record binds
            known.setdefault("inspection_samples", ctx.inspection.samples_sha256)
        report.record_sha256 = {key: known[key] if key in known else sha256_file_or_none(path)
                                for key, path in record_files(brief).items()}
        report.fingerprint = fingerprint_of(brief, report.record_sha256, ctx.bindings["rewards"])
    return report


def record_files(brief: Brief) -> dict[str, Path]:
    """The record files a passing gate trusted, by key: baseline, inspection and its samples, judge calibration
    (judge rewards only)."""
    from llm_finetuning.records.inspection import samples_path

    records = brief.records
    files = {"baseline": brief.resolve(records.baseline), "inspection": brief.resolve(records.inspection)}
    files["inspection_samples"] = samples_path(files["inspection"])
    if brief.has_judge:
        files["judge_calibration"] = brief.resolve(records.judge_calibration)
    return files


def fingerprint_of(brief: Brief, record_sha256: dict[str, str | None], reward_bindings: object) -> str:
    """sha256 over what a passing gate trusted: the brief's text, every record file (`record_files`, by sha256),
    and the reward specs and source files (`records.bindings.reward_bindings`). Every change changes it."""
    from llm_finetuning.fileio import sha256_json

    return sha256_json({
        "gate": GATE_VERSION,
        "brief_sha256": brief.sha256,
        "records": dict(sorted(record_sha256.items())),
        "rewards": reward_bindings,
    })


def gate_fingerprint(brief: Brief) -> str:
    """The fingerprint of `brief` and its records as they are now, hashed here (`gate_brief` hands the one it
    computed from what it verified to the report instead)."""
    from llm_finetuning.fileio import sha256_file_or_none
    from llm_finetuning.records.bindings import reward_bindings

    hashes = {key: sha256_file_or_none(path) for key, path in record_files(brief).items()}
    return fingerprint_of(brief, hashes, reward_bindings(brief.rewards, brief.folder))
