"""The manifest a render writes: the run directory bound to its brief, records, gate verdict and rendered files.

Built here from the brief and the plan; read, written and verified by `rundir.manifest` (`finetune launch`
refuses a run whose brief, records or rendered files changed since rendering, naming each one as a Problem:
id `missing_file`, `edited_file`, `brief_changed` or `record_changed`). The hashes only catch accidents
(anyone can recompute them): launch also renders the run again and compares (`render.render_differences`).
Pure (hashlib and json only).
"""

from __future__ import annotations

from pathlib import Path

from llm_finetuning import __version__
from llm_finetuning.brief import Brief
from llm_finetuning.fileio import sha256_file
from llm_finetuning.render.plan import RunPlan
from llm_finetuning.render.plan import relative_to_run as _rel
from llm_finetuning.rundir.manifest import Manifest, RecordBinding


def record_paths(brief: Brief) -> dict[str, Path]:
    """The evidence files a run is bound to: baseline, inspection, judge calibration (judge rewards only)."""
    records = brief.records
    out = {"baseline": brief.resolve(records.baseline), "inspection": brief.resolve(records.inspection)}
    if brief.has_judge:
        out["judge_calibration"] = brief.resolve(records.judge_calibration)
    return out


def build_manifest(brief: Brief, run_dir: Path, plan: RunPlan, files: dict[str, str], gate_fingerprint: str,
                   record_sha256: dict[str, str | None]) -> Manifest:
    """The manifest; each record's sha256 from `record_sha256` (the gate's) where it is there."""
    records = {}
    for key, path in sorted(record_paths(brief).items()):
        digest = record_sha256[key] if key in record_sha256 else (sha256_file(path) if path.is_file() else None)
        records[key] = RecordBinding(_rel(path, run_dir), digest)
    return Manifest(brief.name, _rel(brief.path, run_dir), brief.sha256, dict(sorted(files.items())), records,
                    gate_fingerprint, plan.topology, __version__)
