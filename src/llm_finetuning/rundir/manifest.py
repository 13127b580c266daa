"""RUN_DIR/manifest.json: its one parser, its write, and its verification against the files it binds.

The manifest binds a run directory to its brief, records, gate fingerprint and rendered files by sha256
(`render.manifest` builds it from the brief and the plan). `finetune launch` re-reads it and refuses a run whose
brief, records or rendered files changed since rendering, naming each one as a Problem (id `missing_file`,
`edited_file`, `brief_changed` or `record_changed`; path the rendered file, `brief` or `records.<key>`).
Pure: hashlib and json only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from llm_finetuning.errors import Problem, UnusableInput
from llm_finetuning.fileio import atomic_write_text, read_json_or_none, sha256_file
from llm_finetuning.rundir import MANIFEST

MANIFEST_FORMAT = 1


def has_manifest(folder: Path) -> bool:
    """`folder` is a run directory `finetune render` wrote after a passing gate (it has manifest.json)."""
    return (Path(folder) / MANIFEST).is_file()


def read_manifest(run_dir: Path) -> dict[str, Any] | None:
    """RUN_DIR/manifest.json as written, or None when absent or unreadable: for the readers that go on without it
    (diagnose, the gate's deviation run). `load_manifest` is the strict reading."""
    return read_json_or_none(Path(run_dir) / MANIFEST)


def load_manifest(run_dir: Path) -> dict[str, Any]:
    """RUN_DIR's manifest, of this format, naming its brief; UnusableInput saying what to do otherwise."""
    path = Path(run_dir) / MANIFEST
    if not Path(run_dir).is_dir():
        raise UnusableInput(f"{run_dir} is not a directory", "give the RUN_DIR written by `finetune render BRIEF -o RUN_DIR`")
    if not path.is_file():
        raise UnusableInput(f"{path} does not exist", "render the run first: `finetune render BRIEF -o RUN_DIR`")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UnusableInput(f"{path} is not readable JSON ({exc})", "render the run again") from None
    if (not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT or "files" not in manifest
            or brief_path(run_dir, manifest) is None):
        raise UnusableInput(f"{path} is not a manifest of format {MANIFEST_FORMAT}", "render the run again")
    return manifest


def write_manifest(run_dir: Path, manifest: dict[str, Any]) -> Path:
    """Write RUN_DIR/manifest.json atomically, keys sorted (render is deterministic)."""
    path = Path(run_dir) / MANIFEST
    atomic_write_text(path, json.dumps(manifest, indent=2, sort_keys=True) + "\n", 0o644)
    return path


def brief_path(run_dir: Path, manifest: dict[str, Any]) -> Path | None:
    """The brief the run was rendered from, as the manifest names it (None when it names none)."""
    info = manifest.get("brief")
    relative = info.get("path") if isinstance(info, dict) else None
    return (Path(run_dir) / relative).resolve() if isinstance(relative, str) else None


def brief_sha256(manifest: dict[str, Any]) -> str | None:
    """The sha256 the brief had when the run was rendered."""
    info = manifest.get("brief")
    digest = info.get("sha256") if isinstance(info, dict) else None
    return digest if isinstance(digest, str) else None


def verify_manifest(run_dir: Path, manifest: dict[str, Any]) -> list[Problem]:
    """Every rendered file, the brief and each record must still have the sha256 written at render time;
    one Problem for each that does not (`manifest` as `load_manifest` returned it)."""
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
    if bpath is None or not bpath.is_file():
        problems.append(Problem("missing_file", "brief", f"{bpath} no longer exists.",
                                "render the run from its brief again"))
    elif sha256_file(bpath) != brief_sha256(manifest):
        problems.append(Problem("brief_changed", "brief", f"{bpath} changed after rendering.",
                                f"run the gate and {rerender}"))
    for key, rec in sorted(manifest.get("records", {}).items()):
        path = (run_dir / rec["path"]).resolve()
        now = sha256_file(path) if path.is_file() else None
        if now != rec.get("sha256"):
            problems.append(Problem("record_changed", f"records.{key}", f"{path} changed after rendering.",
                                    f"run `finetune gate` and {rerender}"))
    return problems
