"""plugin.json, marketplace.json, pyproject.toml, every frontmatter and the files that exist agree."""

from __future__ import annotations

import json
import os
import re
import struct
import sys
from pathlib import Path
from typing import Any

import yaml

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]
SKILLS = {"finetuning-method-selection", "grpo-rlvr-training", "preference-optimization",
          "eval-harness-first", "lora-qlora-recipes"}
AGENT = "llm-finetuning-training-engineer"
# what the command pre-approves: the verbs it runs, the one search that lists briefs, and Read (Claude Code
# 2.1.332 has no separate Glob or Grep tool)
COMMAND_TOOLS = {"Bash(finetune gate:*)", "Bash(finetune render:*)", "Bash(finetune launch:*)",
                 "Bash(finetune status:*)", "Bash(finetune diagnose:*)", "Bash(finetune stop:*)", "Bash(finetune eval:*)",
                 "Bash(grep -rlE:*)", "Read"} | {f"mcp__plugin_llm-finetuning_finetune__{tool}" for tool in (
                     "gate", "render", "launch", "status", "diagnose", "stop", "eval", "job")}  # the broker's
CLAUDE_CODE_CHECKED = (REPO / ".ci/claude-code-version").read_text().strip()  # the client the docs name
# a bare `/finetune` typed as a command, not `/llm-finetuning:finetune` or a path such as commands/finetune.md
BARE_SLASH = re.compile(r"(?<![\w.:/-])/finetune(?![\w./-])")
TELLS_THE_TRUTH = ("/llm-finetuning:finetune", "finetune install-command")


def frontmatter(path: Path) -> dict[str, Any]:
    text = path.read_text(encoding="utf-8")
    match = re.match(r"---\n(.*?)\n---\n", text, re.S)
    assert match, f"{path.relative_to(REPO)}: no YAML frontmatter"
    data = yaml.safe_load(match.group(1))
    assert isinstance(data, dict), path
    return data


def load_json(rel: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((REPO / rel).read_text(encoding="utf-8"))
    return data


def test_manifests_agree_with_each_other_and_pyproject() -> None:
    plugin = load_json(".claude-plugin/plugin.json")
    market = load_json(".claude-plugin/marketplace.json")
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]

    assert plugin["name"] == "llm-finetuning" == project["name"]
    assert plugin["version"] == project["version"] == "0.1.0"
    assert plugin["license"] == project["license"] == "MIT"
    assert plugin["homepage"] == project["urls"]["Homepage"]
    assert plugin["repository"] == project["urls"]["Repository"]
    assert plugin["author"]["name"] == project["authors"][0]["name"]
    assert plugin["description"] and plugin["keywords"]

    assert market["name"] == "llm-finetuning-marketplace"
    assert len(market["plugins"]) == 1
    entry = market["plugins"][0]
    assert entry["name"] == plugin["name"] and entry["source"] == "./"
    for key in ("version", "license", "homepage", "repository"):
        assert entry[key] == plugin[key], key


def test_license_and_readme_exist() -> None:
    text = (REPO / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License")
    assert "Copyright (c) 2026 the llm-finetuning maintainers" in text
    assert (REPO / "README.md").is_file()


def test_icon_is_a_square_png() -> None:
    data = (REPO / "assets/icon.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert width == height >= 256


def test_components_are_where_the_manifest_expects_them() -> None:
    assert sorted(p.name for p in (REPO / ".claude-plugin").iterdir()) == ["marketplace.json", "plugin.json"]
    skill_dirs = {p.name for p in (REPO / "skills").iterdir() if p.is_dir()}
    assert skill_dirs == SKILLS
    for name in SKILLS:
        assert frontmatter(REPO / "skills" / name / "SKILL.md")["name"] == name
    agents = sorted(p.stem for p in (REPO / "agents").glob("*.md"))
    assert agents == [AGENT]
    agent = frontmatter(REPO / "agents" / f"{AGENT}.md")
    assert agent["name"] == AGENT and len(agent["description"]) <= 1024
    assert "Bash" in [t.strip() for t in agent["tools"].split(",")]


def test_the_command_and_the_agent_name_only_tools_the_broker_serves() -> None:
    """The plugin's .mcp.json declares the broker as server `finetune`; every broker tool the command and the agent
    name is one it serves, and the agent has all of them (docs/claude-code.md, "The broker")."""
    from llm_finetuning.broker import SERVER_NAME, TOOL_PREFIX, TOOLS

    assert list(json.loads((REPO / ".mcp.json").read_text())["mcpServers"]) == [SERVER_NAME]
    command = {t.strip() for t in frontmatter(REPO / "commands/finetune.md")["allowed-tools"].split(",")}
    agent = [t.strip() for t in frontmatter(REPO / "agents" / f"{AGENT}.md")["tools"].split(",")]
    assert {t for t in command if t.startswith(TOOL_PREFIX)} <= {TOOL_PREFIX + t for t in TOOLS}
    assert [t for t in agent if t.startswith(TOOL_PREFIX)] == [TOOL_PREFIX + t for t in TOOLS]


def test_command_frontmatter_limits_its_tools() -> None:
    command = frontmatter(REPO / "commands/finetune.md")
    assert set(command) == {"description", "argument-hint", "allowed-tools"}
    assert command["argument-hint"] == "BRIEF"
    tools = {t.strip() for t in command["allowed-tools"].split(",")}
    assert tools == COMMAND_TOOLS
    assert "Bash(finetune:*)" not in tools and "Bash" not in tools  # verbs, never every finetune or shell call
    body = (REPO / "commands/finetune.md").read_text(encoding="utf-8")
    for step in ("finetune gate $ARGUMENTS", "finetune render $ARGUMENTS -o RUN_DIR",
                 "finetune launch RUN_DIR --detach", "finetune diagnose RUN_DIR --follow --timeout 240",
                 "finetune status RUN_DIR", "finetune stop RUN_DIR", "finetune eval RUN_DIR", "grep -rlE --include='*.yaml' '^brief: *1 *$' ."):
        assert step in body, step
    assert AGENT in body


def test_command_handles_every_exit_code_and_state() -> None:
    """Each verb's section of the command names what to do on every exit code of the CLI contract."""
    body = (REPO / "commands/finetune.md").read_text(encoding="utf-8")
    sections = dict(re.findall(r"^## \d\. (\w+)[^\n]*\n(.*?)(?=^## |\Z)", body, re.M | re.S))
    for section, codes in (("Gate", ("Exit 0", "Exit 1", "Exit 2", "exit 127")), ("Render", ("Exit 0", "Exit 1", "Exit 2")),
                           ("Launch", ("Exit 0", "Exit 1", "Exit 2")), ("Watch", ("Exit 0", "Exit 1", "Exit 2"))):
        missing = [c for c in codes if c not in sections[section]]
        assert not missing, f"## {section} handles no {missing}"
    for state in ("`running`", "`finished`", "`failed`", "`stopped`", "`not_started`"):
        assert state in sections["Watch"], state
    for needed in ("WARN", "llm-finetuning-setup --train", "The argument is `$ARGUMENTS`. If it is empty", "PreToolUse:Bash hook error",
                   "never run `finetune review`", "300000 ms"):
        assert needed in body, needed
    assert not re.search(r"finetune launch RUN_DIR(?! --detach| --resume --detach)", body)


def test_no_page_tells_anyone_to_type_a_bare_slash_finetune() -> None:
    """Claude Code namespaces plugin commands: `/finetune` alone is "Unknown command" unless the project has
    `.claude/commands/finetune.md` (written by `finetune install-command`). Every paragraph of a skill,
    reference, agent, command or eval that shows a bare `/finetune` also names one of the true forms."""
    pages = [*REPO.glob("skills/*/SKILL.md"), *REPO.glob("skills/*/references/*.md"), *REPO.glob("references/*.md"),
             *REPO.glob("agents/*.md"), *REPO.glob("commands/*.md"), REPO / "evals/README.md"]
    paragraphs = [(p.relative_to(REPO).as_posix(), block) for p in pages
                  for block in re.split(r"\n\s*\n", p.read_text(encoding="utf-8"))]
    for suite in REPO.glob("evals/*.json"):
        paragraphs += [(suite.relative_to(REPO).as_posix(), text) for text in re.findall(r'"((?:[^"\\]|\\.)*)"',
                                                                                         suite.read_text(encoding="utf-8"))]
    untrue = [f"{where}: {block.strip()[:120]!r}" for where, block in paragraphs
              if BARE_SLASH.search(block) and not any(form in block for form in TELLS_THE_TRUTH)]
    assert not untrue, "a bare /finetune without /llm-finetuning:finetune or finetune install-command:\n" + "\n".join(untrue)
    truthful = [where for where, block in paragraphs if "/llm-finetuning:finetune" in block]
    assert any(w.startswith("skills/") for w in truthful) and any(w.startswith("agents/") for w in truthful)


def test_the_bare_slash_check_catches_a_bare_slash() -> None:
    assert BARE_SLASH.search("then run `/finetune BRIEF`") and BARE_SLASH.search("type /finetune")
    assert not BARE_SLASH.search("/llm-finetuning:finetune BRIEF, commands/finetune.md, .claude/commands/finetune.md")


def test_pages_that_name_the_namespaced_form_name_the_client_version() -> None:
    for page in [REPO / "skills/grpo-rlvr-training/SKILL.md", REPO / "references/brief-writing.md"]:
        text = page.read_text(encoding="utf-8")
        assert "/llm-finetuning:finetune" in text and f"Claude Code {CLAUDE_CODE_CHECKED}" in text, page


def test_launchers_are_executable_shell_scripts() -> None:
    for name in ("finetune", "llm-finetuning-setup"):
        path = REPO / "bin" / name
        assert os.access(path, os.X_OK), f"bin/{name} is not executable"
        assert path.read_text(encoding="utf-8").startswith("#!/bin/sh\n")


def test_every_component_named_in_the_bundle_exists() -> None:
    """Skill and agent names mentioned in any skill, agent, command or reference page exist."""
    known = SKILLS | {AGENT}
    pattern = re.compile(r"\b[a-z]+(?:-[a-z]+)+-(?:training|selection|optimization|first|recipes|engineer)\b")
    pages = [*REPO.glob("skills/*/SKILL.md"), *REPO.glob("agents/*.md"), REPO / "commands/finetune.md",
             *REPO.glob("references/*.md")]
    unknown = {(p.relative_to(REPO).as_posix(), m) for p in pages
               for m in pattern.findall(p.read_text(encoding="utf-8")) if m not in known}
    assert not unknown, sorted(unknown)


def test_agent_covers_every_gate_check() -> None:
    """The training engineer's table of gate checks names exactly the checks the gate runs."""
    from llm_finetuning.gate.checks import CHECKS

    body = (REPO / "agents" / f"{AGENT}.md").read_text(encoding="utf-8")
    listed = re.findall(r"^\s*\| `([a-z_]+)` \|", body, re.M)
    assert listed == [check_id for check_id, _ in CHECKS]


def test_files_the_hooks_run_exist() -> None:
    """Every ${CLAUDE_PLUGIN_ROOT}/... path in hooks/hooks.json (when the plugin has hooks) is a file."""
    hooks = REPO / "hooks/hooks.json"
    if not hooks.is_file():
        return
    paths = re.findall(r"\$\{CLAUDE_PLUGIN_ROOT\}/([\w./-]+)", hooks.read_text(encoding="utf-8"))
    assert paths, "hooks.json runs nothing from the plugin"
    missing = [p for p in paths if not (REPO / p).is_file()]
    assert not missing, missing


def test_agent_drives_runs_that_outlive_the_turn_and_keeps_the_rules() -> None:
    """The agent launches detached, polls in bounded calls, stops and resumes through the CLI, reports
    the guard's denials and the review-time warning, and sends a missing CLI to the setup script."""
    body = (REPO / "agents" / f"{AGENT}.md").read_text(encoding="utf-8")
    for needed in ("finetune launch RUN_DIR --detach", "finetune diagnose RUN_DIR --follow --timeout 240",
                   "finetune status RUN_DIR", "finetune stop RUN_DIR", "finetune launch RUN_DIR --resume --detach",
                   "300000 ms", "PreToolUse:Bash hook error", "under 2 s", "never re-review", "llm-finetuning-setup",
                   "`WARN`", "Never run `finetune review`"):
        assert needed in body, needed
    for state in ("`running`", "`finished`", "`failed`", "`stopped`", "`not_started`"):
        assert state in body, state
    assert not re.search(r"finetune launch RUN_DIR(?! --detach| --resume --detach)", body)
    assert not re.search(r"diagnose RUN_DIR --follow(?! --timeout)", body)
