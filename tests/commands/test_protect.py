"""`finetune protect`: merges the sandbox and deny rules into the project's .claude/settings.json for every
records folder its briefs name, keeps the person's own settings, and changes nothing on a second run.
(What those settings enforce on the real client: tests/redteam and docs/security.md.)"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from llm_finetuning import locations
from llm_finetuning.cli import cli
from llm_finetuning.gate.protection import claude_config_dir

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "smollm2-json"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LLM_FINETUNING_KEY_DIR", str(tmp_path / "keys"))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-config"))
    folder = tmp_path / "project"
    shutil.copytree(EXAMPLE, folder, ignore=shutil.ignore_patterns("runs", "__pycache__"))
    return folder


def protect(project: Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["protect", "--project", str(project)])
    return result.exit_code, result.stdout, result.stderr


def settings(project: Path) -> dict:
    return json.loads((project / ".claude" / "settings.json").read_text())


def test_it_fences_the_records_claude_folders_and_the_key(project: Path, tmp_path: Path) -> None:
    code, out, err = protect(project)
    assert code == 0, err
    written = settings(project)
    sandbox = written["sandbox"]
    assert (sandbox["enabled"], sandbox["failIfUnavailable"], sandbox["allowUnsandboxedCommands"]) == (True, True, False)
    denied = [str(project / "records"), str(project / ".claude"), str(project / ".llm-finetuning"),
              str(locations.user_config_dir()), str(claude_config_dir() / "plugins"),
              str(claude_config_dir() / "settings.json"), str(project / ".mcp.json")]
    assert sandbox["filesystem"] == {"denyWrite": denied, "denyRead": [str(tmp_path / "keys")]}
    assert written["permissions"]["deny"] == [
        *(f"Edit(/{p}/**)" for p in denied[:-2]), *(f"Edit(/{p})" for p in denied[-2:]), f"Read(/{tmp_path}/keys/**)"]
    assert out.splitlines()[:2] == [
        f"wrote {project}/.claude/settings.json: Claude Code's sandbox is on in {project} and fails closed "
        "(no unsandboxed fallback; dangerouslyDisableSandbox is ignored)", "briefs: brief.yaml"]
    assert "running `finetune protect` again" in out and "in your own terminal" in out


def test_the_persons_settings_are_kept_and_a_second_run_changes_nothing(project: Path) -> None:
    (project / ".claude").mkdir()
    mine = {"model": "opus", "permissions": {"allow": ["Bash(ls:*)"], "deny": ["Read(./.env)"]},
            "sandbox": {"excludedCommands": ["docker"], "filesystem": {"denyWrite": ["secrets"]}}}
    (project / ".claude" / "settings.json").write_text(json.dumps(mine))
    assert protect(project)[0] == 0
    first = (project / ".claude" / "settings.json").read_bytes()
    written = json.loads(first)
    assert written["model"] == "opus" and written["permissions"]["allow"][0] == "Bash(ls:*)"
    assert written["permissions"]["deny"][0] == "Read(./.env)"
    assert written["sandbox"]["excludedCommands"] == ["docker"]
    assert written["sandbox"]["filesystem"]["denyWrite"][:2] == ["secrets", str(project / "records")]
    code, out, _ = protect(project)
    assert code == 0 and out.startswith(f"{project}/.claude/settings.json: already protected")
    assert (project / ".claude" / "settings.json").read_bytes() == first


def test_every_brief_under_the_project_is_found_with_the_records_it_names(project: Path) -> None:
    (project / "second").mkdir()
    (project / "second" / "brief.yml").write_text("brief: 1\nrecords:\n  inspection: ../evidence-store/i.json\n")
    (project / "notes.yaml").write_text("title: not a brief\n")
    (project / "runs" / "old").mkdir(parents=True)
    (project / "runs" / "old" / "brief.yaml").write_text("brief: 1\nrecords:\n  baseline: /elsewhere/b.json\n")
    code, out, _ = protect(project)
    assert code == 0
    assert "briefs: brief.yaml, second/brief.yml" in out
    deny_write = settings(project)["sandbox"]["filesystem"]["denyWrite"]
    assert str(project / "evidence-store") in deny_write and str(project / "second" / "records") in deny_write
    assert "/elsewhere" not in deny_write  # runs/ holds rendered copies, not briefs


def test_a_brief_added_later_is_covered_by_running_it_again(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert protect(project)[0] == 0
    (project / "brief.yaml").write_text((project / "brief.yaml").read_text().replace(
        "inspection: records/inspection.json", "inspection: sealed/inspection.json"))
    monkeypatch.setenv("CLAUDECODE", "1")
    monkeypatch.chdir(project)
    gate = CliRunner().invoke(cli, ["gate", "brief.yaml"])
    assert f"FAIL  protection            protection: inside Claude Code, the records folder {project}/sealed is not" \
        in gate.stdout
    monkeypatch.delenv("CLAUDECODE")
    assert protect(project)[0] == 0
    assert str(project / "sealed") in settings(project)["sandbox"]["filesystem"]["denyWrite"]


def test_unreadable_settings_are_left_alone(project: Path) -> None:
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text("{not json")
    code, _, err = protect(project)
    assert code == 2
    assert "cannot be read as JSON" in err and "left unchanged" in err
    assert (project / ".claude" / "settings.json").read_text() == "{not json"



def test_a_settings_file_that_cannot_be_written_is_one_line(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    from llm_finetuning import fileio

    def read_only(path: Path, data: bytes, mode: int | None = None) -> None:  # as the sandbox makes .claude/
        raise OSError(errno.EROFS, "Read-only file system", str(path))

    monkeypatch.setattr(fileio, "atomic_write_bytes", read_only)
    code, _, err = protect(project)
    assert code == 2
    assert err == (f"error: {project}: cannot record the protection (Read-only file system). Fix: run "
                   "`finetune protect` in your own terminal, not from an agent's shell\n")
    assert not (project / ".claude" / "settings.json").exists()  # nothing is written before the record


def test_it_refuses_to_run_inside_claude_code(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAUDECODE", "1")
    code, _, err = protect(project)
    assert code == 2 and "runs inside Claude Code" in err and "in your own terminal" in err
    assert not (project / ".claude").exists()


def test_hard_links_to_protected_files_are_refused(project: Path, tmp_path: Path) -> None:
    (project / "notes").mkdir()
    os.link(project / "records" / "inspection.json", project / "notes" / "copy")
    code, _, err = protect(project)
    assert code == 2 and "another hard link" in err and f"{project}/records/inspection.json" in err, err
    assert not (project / ".claude").exists()
    (project / "notes" / "copy").unlink()
    assert protect(project)[0] == 0


def test_local_settings_that_turn_it_off_are_reported_and_removed(project: Path) -> None:
    (project / ".claude").mkdir()
    local = project / ".claude" / "settings.local.json"
    local.write_text(json.dumps({"sandbox": {"enabled": False, "excludedCommands": ["docker"]}, "disableAllHooks": True,
                                 "enabledPlugins": {"llm-finetuning@llm-finetuning-marketplace": False}, "model": "x"}))
    code, out, err = protect(project)
    assert code == 0, err
    assert f"removed sandbox.enabled: false from {local}" in out and f"removed disableAllHooks: true from {local}" in out
    assert json.loads(local.read_text()) == {"sandbox": {"excludedCommands": ["docker"]}, "enabledPlugins": {},
                                             "model": "x"}


def test_the_plugins_real_install_location_is_fenced(project: Path, tmp_path: Path) -> None:
    plugins = tmp_path / "claude-config" / "plugins"
    plugins.mkdir(parents=True)
    checkout = tmp_path / "checkout"
    (plugins / "installed_plugins.json").write_text(json.dumps({"version": 2, "plugins": {
        "llm-finetuning@market": [{"scope": "user", "installPath": str(plugins / "cache" / "market" / "x")}]}}))
    (plugins / "known_marketplaces.json").write_text(json.dumps({"market": {
        "source": {"source": "directory", "path": str(checkout)}, "installLocation": str(checkout)}}))
    assert protect(project)[0] == 0
    assert str(checkout) in settings(project)["sandbox"]["filesystem"]["denyWrite"]
    assert f"Edit(/{checkout}/**)" in settings(project)["permissions"]["deny"]


def test_a_virtual_environment_in_the_project_is_reported(project: Path) -> None:
    (project / ".venv").mkdir()
    (project / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    code, _, err = protect(project)
    assert code == 0 and f"warning: {project}/.venv is a virtual environment inside the project" in err


def install_record(config: Path, marketplace: Path, cache: Path) -> None:
    """Claude Code's record of the plugin installed from a marketplace added from a local folder."""
    plugins = config / "plugins"
    plugins.mkdir(parents=True, exist_ok=True)
    (plugins / "installed_plugins.json").write_text(json.dumps({"version": 2, "plugins": {
        "llm-finetuning@llm-finetuning-marketplace": [{"scope": "user", "installPath": str(cache)}]}}))
    (plugins / "known_marketplaces.json").write_text(json.dumps({"llm-finetuning-marketplace": {
        "source": {"source": "directory", "path": str(marketplace)}, "installLocation": str(marketplace)}}))


def test_it_pins_the_plugins_broker_and_allows_its_tools(project: Path, tmp_path: Path) -> None:
    from llm_finetuning.broker import TOOL_PREFIX, TOOLS

    repo = Path(__file__).resolve().parents[2]
    marketplace, cache = tmp_path / "checkout", tmp_path / "claude-config" / "plugins" / "cache" / "0.1.0"
    for root in (marketplace, cache):
        (root / ".claude-plugin").mkdir(parents=True)
        for name in (".mcp.json", ".claude-plugin/marketplace.json"):
            shutil.copy(repo / name, root / name)
    install_record(tmp_path / "claude-config", marketplace, cache)
    code, out, err = protect(project)
    assert code == 0, err
    written = settings(project)
    # the plugin's own .mcp.json with its folder substituted: the command Claude Code starts, matched exactly
    assert written["allowedMcpServers"] == [{"serverCommand": ["sh", f"{root}/bin/finetune", "broker"]}
                                            for root in (cache, marketplace)]
    assert written["permissions"]["allow"] == [TOOL_PREFIX + tool for tool in TOOLS]
    assert not {"review", "keys", "protect"} & set(TOOLS)
    assert f"MCP servers: only the plugin's broker starts here ({cache}, {marketplace})" in out
    assert protect(project)[1].startswith(f"{project}/.claude/settings.json: already protected")


def test_a_project_server_with_the_brokers_command_is_refused(project: Path, tmp_path: Path) -> None:
    """`allowedMcpServers` matches a command, not its environment: a project .mcp.json entry with the broker's exact
    command would start in its place with an environment of its own (tests/redteam/test_redteam_broker.py)."""
    repo = Path(__file__).resolve().parents[2]
    cache = tmp_path / "cache"
    (cache / ".claude-plugin").mkdir(parents=True)
    shutil.copy(repo / ".mcp.json", cache / ".mcp.json")
    install_record(tmp_path / "claude-config", tmp_path / "no-marketplace", cache)
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"finetune": {
        "command": "sh", "args": [f"{cache}/bin/finetune", "broker"], "env": {"PATH": "/tmp/elsewhere"}}}}))
    code, out, err = protect(project)
    assert code == 2 and not (project / ".claude" / "settings.json").exists()
    assert err == (f"error: {project}/.mcp.json: declares the server 'finetune' with the broker's own command: Claude "
                   "Code would start it in the broker's place, outside the sandbox, with the environment this file "
                   "gives it; nothing written. Fix: remove that server from .mcp.json (the plugin declares the broker "
                   "itself), then run `finetune protect` again\n")


def test_without_the_plugin_installed_no_mcp_server_may_start(project: Path) -> None:
    code, out, err = protect(project)
    assert code == 0 and settings(project)["allowedMcpServers"] == []
    assert "the llm-finetuning plugin is not installed in Claude Code" in err and "no MCP server starts" in err
