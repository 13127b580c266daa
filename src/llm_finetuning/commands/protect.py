"""`finetune protect [--project DIR]`: make Claude Code's sandbox, not the plugin's hook, keep an agent off
the project's records and the reviewer's key.

Merges into `DIR/.claude/settings.json` (the person's other settings are kept): the sandbox on and failing
closed, `dangerouslyDisableSandbox` ignored, and write and read denials, both in `sandbox.filesystem` (Bash
and every process it starts) and as `Edit(...)`/`Read(...)` deny rules (the file tools), for every records
folder the project's briefs name, `.claude/`, `.llm-finetuning/`, the user config folder, Claude Code's
plugins and user settings, every folder Claude Code runs this plugin from, and the key folder. It pins the plugin's broker
(`allowedMcpServers` with its exact command, so no other MCP server starts in the project; a project
`.mcp.json` that declares that command is refused) and allows the broker's tools. What each entry does on the
pinned client: docs/security.md. Before writing it covers what was there before it: it refuses to run
inside Claude Code and refuses protected files with another hard link, removes from the other settings layers
what would turn the sandbox or the hooks off, reports a virtual environment inside the project, and records the
project and the folders it fenced in the user config folder (what the gate trusts inside Claude Code).
Idempotent; a brief added later is covered by running it again. Exit 0 written or already so, 2 unusable.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

import click

from llm_finetuning import locations
from llm_finetuning.errors import UnusableInput
from llm_finetuning.jsonvalue import JsonObject, JsonValue

if TYPE_CHECKING:
    from llm_finetuning.gate.protection import Protection, Registered

BRIEF_LINE = re.compile(rb"^brief:[ \t]*\d+[ \t]*(#.*)?$", re.MULTILINE)
SKIPPED_FOLDERS = {".git", ".venv", "venv", "node_modules", "__pycache__", ".claude", ".llm-finetuning", "runs"}
MAX_BRIEF_BYTES = 1 << 20
PLUGIN_FOLDERS = ("hooks", ".claude-plugin", "bin", "src")  # in a plugin location: what runs as the person
# Settings that would undo the protection from a layer Claude Code reads besides the project's settings.json
# (settings.local.json wins over it): (path of keys, the value that undoes it).
UNDOING: tuple[tuple[tuple[str, ...], bool], ...] = ((("sandbox", "enabled"), False), (("sandbox", "failIfUnavailable"), False),
           (("sandbox", "allowUnsandboxedCommands"), True), (("disableAllHooks",), True))


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
            named = [str(v) for v in records.values()] if isinstance(records, dict) else []
            folders.update(records_folders(named, path.parent))
        except UnusableInput as exc:
            warnings.append(f"warning: {exc.line()} (its records are not covered; the gate's protection check "
                            "fails for it until they are)")
    return sorted(folders), warnings


def read_settings(path: Path) -> JsonObject:
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


def hard_links(folders: list[Path]) -> list[Path]:
    """Files under `folders` with more than one hard link: a link made elsewhere before the folder was fenced
    writes the same bytes through any path the sandbox leaves writable."""
    found = []
    for folder in folders:
        files = [folder] if folder.is_file() else (p for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else []
        for path in files:
            try:
                if os.lstat(path).st_nlink > 1:
                    found.append(path)
            except OSError:
                continue
    return sorted(set(found))


def undoing(settings: JsonObject) -> list[tuple[tuple[str, ...], bool]]:
    """The entries of one settings layer that turn the sandbox or the hooks off, or disable this plugin."""
    found: list[tuple[tuple[str, ...], bool]] = []
    for keys, bad in UNDOING:
        node: JsonValue = settings
        for key in keys:
            node = node.get(key) if isinstance(node, dict) else None
        if node is bad:
            found.append((keys, bad))
    plugins = settings.get("enabledPlugins")
    for name, on in (plugins.items() if isinstance(plugins, dict) else []):
        if str(name).split("@")[0] == "llm-finetuning" and on is False:
            found.append((("enabledPlugins", str(name)), False))
    return found


def drop(settings: JsonObject, keys: tuple[str, ...]) -> None:
    node = settings
    for key in keys[:-1]:
        child = node[key]
        assert isinstance(child, dict)  # `undoing` found the entry under it
        node = child
    del node[keys[-1]]


def fix_layers(paths: list[Path]) -> list[str]:
    """Remove from each settings layer what would undo the protection; one line a removal."""
    from llm_finetuning.fileio import atomic_write_bytes

    lines = []
    for path in paths:
        settings = read_settings(path)
        found = undoing(settings)
        for keys, bad in found:
            drop(settings, keys)
            lines.append(f"removed {'.'.join(keys)}: {json.dumps(bad)} from {path}: it would turn the protection off")
        if found:
            atomic_write_bytes(path, (json.dumps(settings, indent=2) + "\n").encode(), mode=0o644)
    return lines


def virtual_environments(project: Path) -> list[Path]:
    """Virtual environments inside the project (a `pyvenv.cfg` at most three folders down)."""
    return sorted(p.parent for depth in ("*", "*/*", "*/*/*") for p in project.glob(f"{depth}/pyvenv.cfg")
                  if not any(part in ("node_modules", ".git") for part in p.relative_to(project).parts))


def refuse_hard_links(protection: Protection, project: Path) -> None:
    """Refuse when a file protect fences (in a plugin location: only what runs) has another hard link."""
    from llm_finetuning.gate.protection import claude_config_dir

    plugins = set(protection.plugin_locations)  # a checkout can be large
    linked = hard_links([p / sub for p in plugins for sub in PLUGIN_FOLDERS] + list(protection.deny_write_files)
                        + [p for p in protection.deny_write if p not in plugins and p != claude_config_dir() / "plugins"])
    if linked:
        raise UnusableInput(f"{len(linked)} protected file(s) have another hard link, through which the sandbox "
                            f"would let an agent write them: {', '.join(map(str, linked[:10]))}.",
                            "remove the other links (`find / -xdev -samefile FILE`), or copy each file over itself "
                            "(`cp FILE FILE.new && mv FILE.new FILE`), then run `finetune protect` again", str(project))


def report_before_writing(project: Path, warnings: list[str]) -> None:
    """Fix the settings layers that would undo the protection, and say so; warn of what protect cannot fence."""
    from llm_finetuning.gate.protection import claude_config_dir

    local = locations.project_settings_path(project).with_name("settings.local.json")
    layers = [local, claude_config_dir() / "settings.json", claude_config_dir() / "settings.local.json"]
    for line in warnings:
        click.echo(line, err=True)
    for line in fix_layers([p for p in layers if p.is_file()]):
        click.echo(line)
    for venv in virtual_environments(project):
        click.echo(f"warning: {venv} is a virtual environment inside the project, which the agent can write: a `.pth` "
                   "file there runs in every Python started from it, your next `finetune` included; install "
                   "`finetune` outside the project", err=True)


def record_unprotected(project: Path, reason: str) -> None:
    from llm_finetuning.gate.protection import Registered

    if not reason.strip():
        raise UnusableInput("--unprotected needs a reason.", "say why the project runs without the sandbox",
                            "--unprotected")
    click.echo(f"recorded {record(project, Registered((), reason.strip()))}: {project} runs without the sandbox; "
               "briefs there that say `protection: {required: false}` pass the protection check with a warning")


def refuse_inside_claude_code() -> None:
    if os.environ.get("CLAUDECODE") == "1":
        raise UnusableInput("runs inside Claude Code: a project is protected by its person, in their own terminal, "
                            "never from the agent's shell (the record it writes is what the gate trusts).",
                            "run `finetune protect` in your own terminal", "protect")


def record(project: Path, entry: Registered) -> Path:
    from llm_finetuning.gate.protection import write_registry

    try:
        return write_registry(project, entry)
    except OSError as exc:  # inside a protected project's sandbox the user config folder is read-only
        raise UnusableInput(f"cannot record the protection ({exc.strerror or exc}).",
                            "run `finetune protect` in your own terminal, not from an agent's shell",
                            str(project)) from None


@click.command("protect")
@click.option("--project", "project", type=click.Path(file_okay=False, exists=True, path_type=Path),
              default=Path("."), show_default=True, help="The project folder whose .claude/settings.json is written.")
@click.option("--unprotected", "unprotected", metavar="REASON", default=None,
              help="Record instead that you run this project without the sandbox, for REASON: its briefs' "
                   "`protection: {required: false}` then counts inside Claude Code (with a warning).")
def command(project: Path, unprotected: str | None) -> None:
    """Turn Claude Code's sandbox on in PROJECT, failing closed, with the records, .claude/, the plugin's files
    and the reviewer's key outside what an agent's Bash commands and file tools may write or read."""
    from llm_finetuning.broker import pinning_settings, project_servers_like_the_broker, server_command
    from llm_finetuning.fileio import atomic_write_bytes
    from llm_finetuning.gate.protection import Protection, Registered, claude_config_dir, merged_settings

    refuse_inside_claude_code()
    project = project.resolve()
    if unprotected is not None:
        record_unprotected(project, unprotected)
        return
    briefs = find_briefs(project)
    records, warnings = briefs_records(briefs)
    protection = Protection.for_project(project, records)
    target = locations.project_settings_path(project)
    existing = read_settings(target)  # an UnusableInput ends through the CLI's one conversion
    roots = [p for p in protection.plugin_locations if server_command(p) is not None]
    like_the_broker = project_servers_like_the_broker(project, roots)
    if like_the_broker:
        raise UnusableInput(
            f"declares the server {like_the_broker[0]!r} with the broker's own command: Claude Code would start it in "
            "the broker's place, outside the sandbox, with the environment this file gives it; nothing written.",
            "remove that server from .mcp.json (the plugin declares the broker itself), then run `finetune protect` "
            "again", str(project / ".mcp.json"))
    settings = merged_settings(merged_settings(existing, protection.settings()), pinning_settings(roots))
    refuse_hard_links(protection, project)
    record(project, Registered(tuple(protection.deny_write)))
    report_before_writing(project, warnings)
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
    if roots:
        click.echo("MCP servers: only the plugin's broker starts here (" + ", ".join(map(str, roots)) + "), its "
                   "tools allowed; add your own servers to allowedMcpServers in the settings to keep them")
    else:
        click.echo(f"warning: the llm-finetuning plugin is not installed in Claude Code ({claude_config_dir()}): no "
                   "MCP server starts in this project, the broker included; install the plugin, then run "
                   "`finetune protect` again", err=True)
    click.echo("Restart Claude Code in this project for it to apply. A brief added later is covered by running "
               "`finetune protect` again (until then the gate's protection check fails for it). The agent can no "
               "longer write records here: it runs baseline, inspect and launch through the plugin's broker; `finetune "
               "review` stays yours, in your own terminal.")
