"""Each fixture brief fails exactly its own check, and the gate's failing lines match `<check>.expected.txt`."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from gate_fixtures import directives

from llm_finetuning.cli import cli
from llm_finetuning.gate.checks import CHECKS

FIXTURES = Path(__file__).parent / "fixtures"
CASES = sorted(p.stem for p in FIXTURES.glob("*.yaml") if p.stem != "passing")


def run_gate_cli(brief: Path, monkeypatch: pytest.MonkeyPatch, *extra: str) -> tuple[int, str]:
    monkeypatch.chdir(brief.parent)
    result = CliRunner().invoke(cli, ["gate", brief.name, *extra])
    # messages from other areas may name absolute paths: show them relative to the brief's folder
    folder = str(brief.parent.resolve())
    return result.exit_code, result.stdout.replace(folder + "/", "").replace(folder, ".")


def fail_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("FAIL")]


def test_every_registered_check_has_a_fixture() -> None:
    ids = [check_id for check_id, _ in CHECKS]
    assert len(ids) == len(set(ids))
    assert {c.split("-")[0] for c in CASES} == set(ids)


@pytest.mark.parametrize("case", CASES)
def test_fixture_fails_only_its_check(case: str, make_brief, monkeypatch: pytest.MonkeyPatch,
                                      update_golden: bool) -> None:
    check_id = case.split("-")[0]
    brief = make_brief(case)  # its records are sealed with the session's key, before the fixture's env applies
    for name, value in directives((FIXTURES / f"{case}.yaml").read_text()).get("env", {}).items():
        monkeypatch.setenv(name, value)  # the protection fixture runs as inside Claude Code
    code, out = run_gate_cli(brief, monkeypatch)
    assert code == 1, out
    failing = fail_lines(out)
    assert failing, out
    assert {line.split()[1] for line in failing} == {check_id}, out
    expected = FIXTURES / f"{case}.expected.txt"
    got = "\n".join(failing) + "\n"
    if update_golden:
        expected.write_text(got)
    assert got == expected.read_text(), f"gate output differs from {expected.name}:\n{out}"


def test_passing_brief_passes(make_brief, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    code, out = run_gate_cli(make_brief("passing"), monkeypatch, "--json")
    report = json.loads(out)
    assert code == 0, out
    assert report["passed"] is True and len(report["fingerprint"]) == 64
    verdicts = {c["id"]: c["verdict"] for c in report["checks"]}
    assert set(verdicts) == {check_id for check_id, _ in CHECKS}
    assert all(set(c) == {"id", "verdict", "path", "reason", "fix"} for c in report["checks"])
    assert verdicts["memory_fits"] == "pass"


def test_no_records_lists_every_missing_piece_at_once(make_brief, monkeypatch: pytest.MonkeyPatch) -> None:
    code, out = run_gate_cli(make_brief("passing", records=False), monkeypatch)
    assert code == 1
    assert fail_lines(out) == [
        "FAIL  base_success_nonzero  records.baseline: missing: no baseline record at records/baseline.json "
        "Fix: run `finetune baseline brief.yaml`",
        "FAIL  reward_inspected      records.inspection: missing: no inspection record at records/inspection.json "
        "Fix: run `finetune inspect brief.yaml` then `finetune review records/inspection.json`",
    ]


def test_unreadable_brief_exits_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "brief.yaml").write_text("brief: [1\n")
    code, out = run_gate_cli(tmp_path / "brief.yaml", monkeypatch, "--json")
    assert code == 2
    assert "not valid YAML" in out
