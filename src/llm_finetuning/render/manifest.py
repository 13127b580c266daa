"""manifest.json: binds a run directory to its brief, records, gate verdict and rendered files by sha256.

`finetune launch` re-reads it and refuses a run whose brief, records or rendered files changed since
rendering, naming each one as a Problem (id `missing_file`, `edited_file`, `brief_changed` or
`record_changed`; path the rendered file, `brief` or `records.<key>`). The hashes only catch accidents
(anyone can recompute them): launch also renders the run again and compares (`render.render_differences`).
Pure (hashlib and json only).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from llm_finetuning import __version__
from llm_finetuning.brief import Brief
from llm_finetuning.errors import Problem, UnusableInput
from llm_finetuning.fileio import sha256_file
from llm_finetuning.render.plan import RunPlan
from llm_finetuning.render.plan import relative_to_run as _rel

MANIFEST = "manifest.json"
MANIFEST_FORMAT = 1


def record_paths(brief: Brief) -> dict[str, Path]:
    """The evidence files a run is bound to: baseline, inspection, judge calibration (judge rewards only)."""
    records = brief.data.get("records", {})
    out = {"baseline": brief.resolve(records["baseline"]), "inspection": brief.resolve(records["inspection"])}
    if any(r.get("fn") == "judge" for r in brief.data.get("rewards", [])):
        out["judge_calibration"] = brief.resolve(records["judge_calibration"])
    return out


def build_manifest(brief: Brief, run_dir: Path, plan: RunPlan, files: dict[str, str], gate_fingerprint: str) -> dict[str, Any]:
    records = {}
    for key, path in sorted(record_paths(brief).items()):
        records[key] = {"path": _rel(path, run_dir), "sha256": sha256_file(path) if path.is_file() else None}
    return {
        "format": MANIFEST_FORMAT,
        "llm_finetuning_version": __version__,
        "name": brief.name,
        "brief": {"path": _rel(brief.path, run_dir), "sha256": brief.sha256},
        "gate_fingerprint": gate_fingerprint,
        "records": records,
        "files": dict(sorted(files.items())),
        "topology": plan.topology.to_json(),
    }


def load_manifest(run_dir: Path) -> dict[str, Any]:
    path = Path(run_dir) / MANIFEST
    if not Path(run_dir).is_dir():
        raise UnusableInput(f"{run_dir} is not a directory", "give the RUN_DIR written by `finetune render BRIEF -o RUN_DIR`")
    if not path.is_file():
        raise UnusableInput(f"{path} does not exist", "render the run first: `finetune render BRIEF -o RUN_DIR`")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UnusableInput(f"{path} is not readable JSON ({exc})", "render the run again") from None
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT or "files" not in manifest:
        raise UnusableInput(f"{path} is not a manifest of format {MANIFEST_FORMAT}", "render the run again")
    return manifest


def brief_path(run_dir: Path, manifest: dict[str, Any]) -> Path:
    relative: str = manifest["brief"]["path"]
    return (Path(run_dir) / relative).resolve()


def verify_manifest(run_dir: Path, manifest: dict[str, Any]) -> list[Problem]:
    """Every rendered file, the brief and each record must still have the sha256 written at render time;
    one Problem for each that does not."""
    run_dir = Path(run_dir)
    rerender = "change the brief if needed and run `finetune render BRIEF -o RUN_DIR` again"
    problems = []
    for name, digest in sorted(manifest["files"].items()):
        path = run_dir / name
        if not path.is_file():
            problems.append(Problem("missing_file", name, "is missing from the run directory.", rerender))
        elif sha256_file(path) != digest:
            problems.append(Problem(
                "edited_file", name, "was edited after rendering (its sha256 differs from manifest.json); rendered "
                "files are not edited by hand.", rerender))
    bpath = brief_path(run_dir, manifest)
    if not bpath.is_file():
        problems.append(Problem("missing_file", "brief", f"{bpath} no longer exists.",
                                "render the run from its brief again"))
    elif sha256_file(bpath) != manifest["brief"]["sha256"]:
        problems.append(Problem("brief_changed", "brief", f"{bpath} changed after rendering.",
                                f"run the gate and {rerender}"))
    for key, rec in sorted(manifest.get("records", {}).items()):
        path = (run_dir / rec["path"]).resolve()
        now = sha256_file(path) if path.is_file() else None
        if now != rec.get("sha256"):
            problems.append(Problem("record_changed", f"records.{key}", f"{path} changed after rendering.",
                                    f"run `finetune gate` and {rerender}"))
    return problems
