"""The Claude Code settings that make the operating system keep an agent off a project's records and the
reviewer's key: what `finetune protect` writes and what the gate's `protection` check looks for.

Tested on Claude Code 2.1.332 with the real client (docs/security.md, "What the sandbox enforces"):

- `sandbox.filesystem.denyWrite` holds for every Bash command and its children (read-only file system);
  `sandbox.filesystem.denyRead` hides a folder from Bash but not from the Read tool;
- a `Read(...)` deny rule stops the Read tool and is merged into the sandbox's denyRead, an `Edit(...)`
  deny rule stops Write and Edit and is merged into denyWrite (the client warns that `Write(...)` rules
  are never matched: Edit rules cover every file-editing tool);
- absolute paths are written `/abs` in sandbox.filesystem and `//abs` in a permission rule (there `/abs`
  is relative to the project).

Standard library only: the gate answers inside an agent's chat.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from llm_finetuning import locations
from llm_finetuning.fileio import atomic_write_json, sha256_bytes
from llm_finetuning.jsonvalue import JsonObject

# sandbox on; no unsandboxed fallback when bubblewrap/Seatbelt is missing; `dangerouslyDisableSandbox` ignored
SANDBOX_FLAGS: dict[str, bool] = {"enabled": True, "failIfUnavailable": True, "allowUnsandboxedCommands": False}
FIX = "run `finetune protect --project {project}` in your own terminal, then restart Claude Code there"
PLUGIN_NAME = "llm-finetuning"
REGISTRY_DIR_NAME = "protected-projects"
REGISTRY_FORMAT = "llm-finetuning/protected-project-1"


def claude_config_dir() -> Path:
    """Claude Code's own folder (`$CLAUDE_CONFIG_DIR`, else `~/.claude`): the installed plugins and the user's
    settings live there, where an agent could switch the plugin's guard off."""
    chosen = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(chosen).expanduser() if chosen else Path.home() / ".claude"


def records_folders(record_paths: Iterable[str], brief_folder: Path) -> list[Path]:
    """The folders of a brief's `records.*` paths (with the schema's defaults applied: `records/` beside the
    brief unless it names others), absolute."""
    folders = set()
    for rel in record_paths:
        path = Path(str(rel)).expanduser()
        folders.add(Path(os.path.abspath((path if path.is_absolute() else brief_folder / path).parent)))
    return sorted(folders)


def plugin_locations() -> list[Path]:
    """Where Claude Code runs this plugin from: each install path it lists, and the folder of a marketplace added
    from a local directory or file, which the client runs in place of its cached copy (FACTS, docs/security.md)."""
    plugins = claude_config_dir() / "plugins"
    found: list[Path] = []
    installed = _json_object(plugins / "installed_plugins.json").get("plugins")
    for key, entries in (installed.items() if isinstance(installed, dict) else []):
        name, _, market = str(key).partition("@")
        if name != PLUGIN_NAME:
            continue
        found += [Path(str(e.get("installPath"))) for e in (entries if isinstance(entries, list) else [])
                  if isinstance(e, dict) and isinstance(e.get("installPath"), str)]
        source = _mapping(_mapping(_json_object(plugins / "known_marketplaces.json"), market), "source")
        local = source.get("path") if source.get("source") in ("directory", "file") else None
        if isinstance(local, str):
            found.append(Path(local) if source.get("source") == "directory" else Path(local).parent)
    return [Path(os.path.abspath(p)) for p in dict.fromkeys(found)]


def _json_object(path: Path) -> JsonObject:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


# -- the person's record of the projects they protected ------------------------------------------------------
# `finetune protect`, run by the person outside Claude Code, writes one file a project into the user config
# folder, which every protected project's sandbox keeps read-only: the folders it fenced. Inside Claude Code the
# gate trusts a project, and a brief's records folders, only as far as this record says: a folder the agent made
# (a `.git` file in a temporary folder, settings and trusted keys of its own) has no record, and cannot get one.

def registry_dir() -> Path:
    """`<user config>/protected-projects`: one file a project the person protected (or chose to leave open)."""
    return locations.user_config_dir() / REGISTRY_DIR_NAME


def registry_path(project: Path) -> Path:
    """The person's record for `project`: `registry_dir()/<sha256 of its absolute path>.json`."""
    return registry_dir() / f"{sha256_bytes(str(Path(os.path.abspath(project))).encode('utf-8'))[:32]}.json"


@dataclass(frozen=True)
class Registered:
    """What the person recorded for a project with `finetune protect`: the folders it fenced, or, with
    `--unprotected REASON`, that they run it without the sandbox (then `fenced` is empty)."""

    fenced: tuple[Path, ...]
    unprotected: str = ""


def read_registry(project: Path) -> Registered | None:
    """The person's record for `project`, or None when they never ran `finetune protect` on it."""
    data = _json_object(registry_path(project))
    fenced, unprotected = data.get("fenced"), data.get("unprotected", "")
    if (data.get("format") != REGISTRY_FORMAT or data.get("project") != str(Path(os.path.abspath(project)))
            or not isinstance(fenced, list) or not isinstance(unprotected, str)):
        return None
    return Registered(tuple(Path(p) for p in fenced if isinstance(p, str)), unprotected)


def write_registry(project: Path, entry: Registered) -> Path:
    """Record `entry` for `project` (OSError inside a protected project's sandbox, which fences the folder)."""
    path = registry_path(project)
    atomic_write_json(path, {"format": REGISTRY_FORMAT, "project": str(Path(os.path.abspath(project))),
                             "fenced": [str(p) for p in entry.fenced], "unprotected": entry.unprotected})
    return path


def outside_registered(registered: Registered | None, project: Path, records: Iterable[Path]) -> list[str]:
    """Why the person's record does not vouch for the brief's records inside Claude Code, one phrase each."""
    if registered is None:
        return [f"{project} is not a project the person protected: `finetune protect` was never run on it in their "
                f"own terminal (no record in the user config folder's {REGISTRY_DIR_NAME}/); a folder with a `.git` "
                "or settings of its own is not one"]
    if registered.unprotected:
        return []
    return [f"the records folder {folder} lies outside the folders `finetune protect` fenced in {project}"
            for folder in records if not _covered(folder, registered.fenced)]


@dataclass(frozen=True)
class Protection:
    """The folders (and single files) an agent's tools may not write, and the folders they may not read."""

    deny_write: tuple[Path, ...]
    deny_write_files: tuple[Path, ...]
    deny_read: tuple[Path, ...]
    plugin_locations: tuple[Path, ...] = ()  # where Claude Code runs this plugin from (also in deny_write)

    @classmethod
    def for_project(cls, project: Path, records: Iterable[Path]) -> Protection:
        project = Path(os.path.abspath(project))
        plugins = plugin_locations()
        write = [*records, project / ".claude", project / locations.PROJECT_DIR_NAME, locations.user_config_dir(),
                 claude_config_dir() / "plugins", *plugins]
        # the project's .mcp.json: a server declared there runs outside the sandbox, as the person, and one with
        # the broker's own command and an environment of its choosing would replace the broker (docs/security.md)
        return cls(tuple(dict.fromkeys(Path(os.path.abspath(p)) for p in write)),
                   (Path(os.path.abspath(claude_config_dir() / "settings.json")), project / ".mcp.json"),
                   (Path(os.path.abspath(locations.key_dir())),), tuple(plugins))

    def settings(self) -> dict[str, object]:
        """The settings fragment: sandbox flags, sandbox.filesystem and the permission deny rules."""
        rules = ([f"Edit(/{p}/**)" for p in self.deny_write] + [f"Edit(/{p})" for p in self.deny_write_files]
                 + [f"Read(/{p}/**)" for p in self.deny_read])
        write = [str(p) for p in (*self.deny_write, *self.deny_write_files)]
        return {"sandbox": {**SANDBOX_FLAGS, "filesystem": {"denyWrite": write,
                                                            "denyRead": [str(p) for p in self.deny_read]}},
                "permissions": {"deny": rules}}


def merged_settings(existing: Mapping[str, object], fragment: Mapping[str, object]) -> dict[str, object]:
    """`existing` with `fragment` added: a list gains the entries it lacks (its own order kept), a mapping is
    merged key by key, any other value is replaced. Nothing of the person's own is dropped."""
    out = dict(existing)
    for key, value in fragment.items():
        old = out.get(key)
        if isinstance(value, dict) and isinstance(old, dict):
            out[key] = merged_settings(old, value)
        elif isinstance(value, list) and isinstance(old, list):
            out[key] = old + [v for v in value if v not in old]
        else:
            out[key] = value
    return out


def _sandbox_path(entry: str, project: Path) -> Path:
    """A sandbox.filesystem path as the client reads it: `//abs` and `/abs` absolute, `~/` the home, else
    relative to the project."""
    if entry.startswith("~"):
        return Path(os.path.abspath(Path(entry).expanduser()))
    if entry.startswith("/"):
        return Path(os.path.abspath("/" + entry.lstrip("/")))
    return Path(os.path.abspath(project / entry))


def _rule_paths(rules: Iterable[object], tool: str, project: Path) -> list[Path]:
    """The folders `Tool(path/**)` deny rules name: `//abs` absolute, `~/` the home, `/x` and `x` in the project."""
    out = []
    for rule in rules:
        if not (isinstance(rule, str) and rule.startswith(f"{tool}(") and rule.endswith(")")):
            continue
        spec = rule[len(tool) + 1:-1].removesuffix("/**").removesuffix("/*").rstrip("/") or "/"
        if spec.startswith("//") or spec.startswith("~"):
            out.append(_sandbox_path(spec, project))
        else:
            out.append(Path(os.path.abspath(project / spec.lstrip("/"))))
    return out


def _covered(folder: Path, by: Iterable[Path]) -> bool:
    return any(folder == p or p in folder.parents for p in by)


def _mapping(parent: Mapping[str, object], key: str) -> Mapping[str, object]:
    value = parent.get(key)
    return value if isinstance(value, dict) else {}


def _strings(value: object) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def missing_protection(settings: Mapping[str, object], project: Path, records: Iterable[Path]) -> list[str]:
    """What the project's (merged) settings lack for the brief's records folders and the reviewer's key,
    one phrase each; empty when the protection holds."""
    sandbox = _mapping(settings, "sandbox")
    filesystem = _mapping(sandbox, "filesystem")
    deny_rules = _mapping(settings, "permissions").get("deny")
    deny_rules = deny_rules if isinstance(deny_rules, list) else []
    missing = [f"sandbox.{key} is not {str(value).lower()}" for key, value in SANDBOX_FLAGS.items()
               if sandbox.get(key) is not value]
    edit_rules = _rule_paths(deny_rules, "Edit", project)
    write = [_sandbox_path(str(e), project) for e in _strings(filesystem.get("denyWrite"))] + edit_rules
    for folder in records:
        if not _covered(folder, write):
            missing.append(f"the records folder {folder} is not in sandbox.filesystem.denyWrite")
        elif not _covered(folder, edit_rules):
            missing.append(f"no Edit({folder}) deny rule keeps the Write and Edit tools off {folder}")
    key = Path(os.path.abspath(locations.key_dir()))
    read_rules = _rule_paths(deny_rules, "Read", project)
    if not _covered(key, [_sandbox_path(e, project) for e in _strings(filesystem.get("denyRead"))] + read_rules):
        missing.append(f"the key folder {key} is not in sandbox.filesystem.denyRead")
    elif not _covered(key, read_rules):
        missing.append(f"no Read({key}) deny rule keeps the Read tool off the key folder")
    return missing
