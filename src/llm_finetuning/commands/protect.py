"""`finetune protect [--project DIR]`: make Claude Code's sandbox, not the plugin's hook, keep an agent off
the project's records and the reviewer's key.

Merges into `DIR/.claude/settings.json` (the person's other settings are kept): the sandbox on and failing
closed, `dangerouslyDisableSandbox` ignored, and write and read denials, both in `sandbox.filesystem` (Bash
and every process it starts) and as `Edit(...)`/`Read(...)` deny rules (the file tools), for every records
folder the project's briefs name, `.claude/`, `.llm-finetuning/`, the user config folder, Claude Code's
plugins and user settings, and the key folder. What each entry does on the pinned client: docs/security.md.
Idempotent; a brief added later is covered by running it again. Exit 0 written or already so, 2 unusable.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import click

from llm_finetuning import locations
from llm_finetuning.errors import UnusableInput

BRIEF_LINE = re.compile(rb"^brief:[ \t]*\d+[ \t]*(#.*)?$", re.MULTILINE)
SKIPPED_FOLDERS = {".git", ".venv", "venv", "node_modules", "__pycache__", ".claude", ".llm-finetuning", "runs"}
MAX_BRIEF_BYTES = 1 << 20


def find_briefs(project: Path) -> list[Path]:
    """YAML files under `project` with a `brief: N` version line (hidden folders, runs and venvs skipped)."""
    found = []
    for path in sorted(project.rglob("*.y*ml")):
        parts = path.relative_to(project).parts[:-1]
        if any(p in SKIPPED_FOLDERS or p.startswith(".") for p in parts) or path.suffix not in (".yaml", ".yml"):
            continue
        try:
            if path.stat().st_size <= MAX_BRIEF_BYTES and BRIEF_LINE.search(path.read_bytes()):
                found.append(path)
        except OSError:
            continue
    return found


def briefs_records(briefs: list[Path]) -> tuple[list[Path], list[str]]:
    """Every records folder the briefs name, and a warning for each brief that could not be read."""
    from llm_finetuning.brief.defaults import apply_defaults
    from llm_finetuning.brief.load import load_yaml_file
    from llm_finetuning.gate.protection import records_folders

    folders: set[Path] = set()
    warnings = []
    for path in briefs:
        try:
            records = apply_defaults(load_yaml_file(path)).get("records") or {}
            folders.update(records_folders(records.values(), path.parent))
        except UnusableInput as exc:
            warnings.append(f"warning: {exc.line()} (its records are not covered; the gate's protection check "
                            "fails for it until they are)")
    return sorted(folders), warnings


def read_settings(path: Path) -> dict[str, object]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UnusableInput(f"cannot be read as JSON ({exc}); left unchanged.",
                            "repair or move the file, then run `finetune protect` again", str(path)) from None
    if not isinstance(data, dict):
        raise UnusableInput("is not a JSON object; left unchanged.",
                            "repair or move the file, then run `finetune protect` again", str(path))
    return data


@click.command("protect")
@click.option("--project", "project", type=click.Path(file_okay=False, exists=True, path_type=Path),
              default=Path("."), show_default=True, help="The project folder whose .claude/settings.json is written.")
def command(project: Path) -> None:
    """Turn Claude Code's sandbox on in PROJECT, failing closed, with the records, .claude/, the plugin's files
    and the reviewer's key outside what an agent's Bash commands and file tools may write or read."""
    from llm_finetuning.fileio import atomic_write_bytes
    from llm_finetuning.gate.protection import Protection, merged_settings

    project = project.resolve()
    briefs = find_briefs(project)
    records, warnings = briefs_records(briefs)
    protection = Protection.for_project(project, records)
    target = locations.project_settings_path(project)
    existing = read_settings(target)  # an UnusableInput ends through the CLI's one conversion
    settings = merged_settings(existing, protection.settings())
    for line in warnings:
        click.echo(line, err=True)
    if settings == existing:
        click.echo(f"{target}: already protected")
    else:
        try:
            atomic_write_bytes(target, (json.dumps(settings, indent=2) + "\n").encode(), mode=0o644)
        except OSError as exc:  # inside a protected project's sandbox .claude/ is read-only, as it should be
            raise UnusableInput(f"cannot be written ({exc.strerror or exc}).",
                                "run `finetune protect` in your own terminal, not from an agent's shell",
                                str(target)) from None
        click.echo(f"wrote {target}: Claude Code's sandbox is on in {project} and fails closed "
                   "(no unsandboxed fallback; dangerouslyDisableSandbox is ignored)")
    click.echo("briefs: " + (", ".join(str(b.relative_to(project)) for b in briefs) or "none found"))
    click.echo("no Bash command or file tool may write: "
               + ", ".join(map(str, (*protection.deny_write, *protection.deny_write_files))))
    click.echo("nor read: " + ", ".join(map(str, protection.deny_read)))
    click.echo("Restart Claude Code in this project for it to apply. A brief added later is covered by running "
               "`finetune protect` again (until then the gate's protection check fails for it). The agent can no "
               "longer write records here: run `finetune baseline`, `inspect` and `review` in your own terminal.")
