"""The gate's `protection` check: inside Claude Code it fails until `finetune protect` has fenced the brief's
records and the reviewer's key in the project's settings; in a person's own terminal it passes with a note.
(tests/redteam checks with the real client that those settings hold.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from llm_finetuning.cli import cli
from llm_finetuning.gate.protection import Protection, Registered, write_registry


@pytest.fixture
def project(make_brief: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A passing fixture brief in a git project, gated as from inside Claude Code, with a key folder of its own."""
    brief = make_brief("passing")
    (brief.parent / ".git").mkdir()
    monkeypatch.setenv("CLAUDECODE", "1")
    monkeypatch.setenv("LLM_FINETUNING_KEY_DIR", str(tmp_path / "keys"))
    monkeypatch.chdir(brief.parent)
    write_registry(brief.parent, Registered((brief.parent / "records",)))  # the person protected it
    return brief.parent


def protection_rows(*args: str) -> list[dict[str, str]]:
    result = CliRunner().invoke(cli, ["gate", "brief.yaml", "--json", *args])
    return [c for c in json.loads(result.stdout)["checks"] if c["id"] == "protection"]


def write_settings(project: Path, settings: dict[str, Any], name: str = "settings.json") -> None:
    (project / ".claude").mkdir(exist_ok=True)
    (project / ".claude" / name).write_text(json.dumps(settings))


def protected(project: Path) -> dict[str, Any]:
    return Protection.for_project(project, [project / "records"]).settings()


def test_outside_claude_code_it_passes_with_a_note(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CLAUDECODE")
    [row] = protection_rows()
    assert row["verdict"] == "pass" and "not run inside Claude Code" in row["reason"]


def test_inside_claude_code_an_unprotected_project_fails_with_the_fix(project: Path) -> None:
    [row] = protection_rows()
    assert row["verdict"] == "fail"
    assert row["reason"] == f"inside Claude Code, {project}/.claude/settings.json does not exist"
    assert row["fix"] == (f"run `finetune protect --project {project}` in your own terminal, then restart "
                          "Claude Code there")


def test_protect_makes_it_pass(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CLAUDECODE")  # the person's terminal
    assert CliRunner().invoke(cli, ["protect", "--project", str(project)]).exit_code == 0
    monkeypatch.setenv("CLAUDECODE", "1")
    [row] = protection_rows()
    assert row["verdict"] == "pass", row


@pytest.mark.parametrize("weaken, found", [
    (lambda s: s["sandbox"].update(enabled=False), "sandbox.enabled is not true"),
    (lambda s: s["sandbox"].pop("failIfUnavailable"), "sandbox.failIfUnavailable is not true"),
    (lambda s: s["sandbox"].update(allowUnsandboxedCommands=True), "sandbox.allowUnsandboxedCommands is not false"),
    (lambda s: s["sandbox"]["filesystem"].update(denyWrite=[]) or s["permissions"].update(deny=[
        r for r in s["permissions"]["deny"] if "records" not in r]), "records is not in sandbox.filesystem.denyWrite"),
    (lambda s: s["permissions"].update(deny=[r for r in s["permissions"]["deny"] if "records" not in r]),
     "deny rule keeps the Write and Edit tools off"),
    (lambda s: s["sandbox"]["filesystem"].update(denyRead=[]) or s["permissions"].update(deny=[
        r for r in s["permissions"]["deny"] if not r.startswith("Read(")]), "keys is not in sandbox.filesystem.denyRead"),
    (lambda s: s["permissions"].update(deny=[r for r in s["permissions"]["deny"] if not r.startswith("Read(")]),
     "deny rule keeps the Read tool off the key folder"),
])
def test_each_missing_piece_fails_and_is_named(project: Path, weaken: Any, found: str) -> None:
    settings = protected(project)
    weaken(settings)
    write_settings(project, settings)
    rows = protection_rows()
    assert [r["verdict"] for r in rows] == ["fail"], rows
    assert found in rows[0]["reason"], rows


def test_settings_local_json_is_read_over_settings_json(project: Path) -> None:
    write_settings(project, protected(project))
    write_settings(project, {"sandbox": {"enabled": False}}, "settings.local.json")
    [row] = protection_rows()
    assert row["verdict"] == "fail" and "sandbox.enabled is not true" in row["reason"]


def test_relative_and_home_paths_count_as_the_client_reads_them(project: Path, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("LLM_FINETUNING_KEY_DIR", str(tmp_path / "keys"))
    write_settings(project, {"sandbox": {"enabled": True, "failIfUnavailable": True, "allowUnsandboxedCommands": False,
                                         "filesystem": {"denyWrite": ["records"], "denyRead": ["~/keys"]}},
                             "permissions": {"deny": ["Edit(records/**)", "Read(~/keys/**)"]}})
    [row] = protection_rows()
    assert row["verdict"] == "pass", row


def test_a_readable_private_key_fails_even_when_the_settings_hold(project: Path, tmp_path: Path) -> None:
    write_settings(project, protected(project))
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "reviewer.ed25519").write_bytes(b"secret")
    [row] = protection_rows()
    assert row["verdict"] == "fail"
    assert row["reason"] == (f"inside Claude Code, the reviewer's private key {tmp_path}/keys/reviewer.ed25519 is "
                             "readable from the gate's own process")


def test_a_project_the_person_never_protected_fails_whatever_its_settings(project: Path,
                                                                          protected_projects_registry: Path) -> None:
    """A folder the agent made, with a `.git` and protect's settings of its own, has no record of the person's."""
    write_settings(project, protected(project))
    for entry in protected_projects_registry.iterdir():
        entry.unlink()
    [row] = protection_rows()
    assert row["verdict"] == "fail" and "is not a project the person protected" in row["reason"], row


def test_records_outside_the_fenced_folders_fail(project: Path) -> None:
    (project / "elsewhere").mkdir()
    settings = Protection.for_project(project, [project / "records", project / "elsewhere"]).settings()
    write_settings(project, settings)  # settings the agent could not write, naming a folder protect never fenced
    brief = project / "brief.yaml"
    brief.write_text(brief.read_text() + "records:\n  inspection: elsewhere/inspection.json\n")
    rows = protection_rows()
    assert [r["verdict"] for r in rows] == ["fail"], rows
    assert f"the records folder {project}/elsewhere lies outside the folders `finetune protect` fenced" in rows[0]["reason"]


def test_in_the_broker_a_readable_key_is_the_persons_side_and_the_settings_decide(project: Path, tmp_path: Path,
                                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The broker runs outside the sandbox as the person (docs/claude-code.md, "The broker"): it reads the key by
    design, so there only the project's settings decide whether the agent is fenced."""
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "reviewer.ed25519").write_bytes(b"secret")
    monkeypatch.setenv("LLM_FINETUNING_BROKER", "1")
    [row] = protection_rows()
    assert (row["verdict"], row["reason"]) == ("fail", f"inside Claude Code, {project}/.claude/settings.json does not exist")
    write_settings(project, protected(project))
    [row] = protection_rows()
    assert row["verdict"] == "pass" and row["reason"].startswith("in the plugin's broker (outside the sandbox)"), row


def test_the_briefs_opt_out_alone_does_not_count(project: Path) -> None:
    brief = project / "brief.yaml"
    brief.write_text(brief.read_text() + "protection:\n  required: false\n  reason: a throwaway container\n")
    [row] = protection_rows()
    assert row["verdict"] == "fail"
    assert f"`finetune protect --project {project} --unprotected REASON`" in row["fix"]


def test_an_opt_out_the_person_recorded_gets_a_warning(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    brief = project / "brief.yaml"
    brief.write_text(brief.read_text() + "protection:\n  required: false\n  reason: a throwaway container\n")
    monkeypatch.delenv("CLAUDECODE")  # the person's terminal
    done = CliRunner().invoke(cli, ["protect", "--project", str(project), "--unprotected", "a CI container"])
    assert done.exit_code == 0, done.output
    monkeypatch.setenv("CLAUDECODE", "1")
    [row] = protection_rows()
    assert row["verdict"] == "warn"
    assert row["reason"].endswith("the brief does without it: a throwaway container (the person left this project "
                                  "open: a CI container)")


def test_opting_out_needs_a_reason(project: Path) -> None:
    brief = project / "brief.yaml"
    brief.write_text(brief.read_text() + "protection:\n  required: false\n")
    result = CliRunner().invoke(cli, ["check", "brief.yaml"])
    assert result.exit_code == 2
    assert "protection" in result.stderr and "reason" in result.stderr, result.stderr
