"""Through the gate: a review whose median time a sample is under the threshold warns (naming the figure),
a record with no timings gets a softer note, a careful review has neither, and the docs state the same
threshold as the code."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from records_builders import build_inspection, loaded

from llm_finetuning.cli import cli
from llm_finetuning.gate.checks.reward_inspected import MIN_MEDIAN_SECONDS

REPO = Path(__file__).resolve().parents[2]
HURRIED = ("median 0.6 s a sample over 64 samples; a careful read takes longer: ask the reviewer to look again")
UNTIMED = ("note: the record has no review timings (sealed by an older `finetune review`), so how long each "
           "sample was read is unknown")

UNSIGNED = ("unsigned: sealed with a sha256 only (by a `finetune review` older than signing): anyone can recompute "
            "it; this passes until a trusted-keys file lists a key")


def gate_json(brief: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[int, dict]:
    monkeypatch.chdir(brief.parent)
    result = CliRunner().invoke(cli, ["gate", brief.name, "--json"])
    return result.exit_code, json.loads(result.stdout)


def inspected(report: dict, verdict: str) -> list[str]:
    return [c["reason"] for c in report["checks"] if c["id"] == "reward_inspected" and c["verdict"] == verdict]


@pytest.mark.parametrize(("seconds", "warnings"), [
    (0.6, [HURRIED]),
    (MIN_MEDIAN_SECONDS, []),  # at the threshold: no warning
    (7.5, []),
    (None, [UNTIMED]),
])
def test_median_time_a_sample_warns_below_the_threshold(seconds: float | None, warnings: list[str], make_brief,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    path = make_brief("passing")
    build_inspection(loaded(path), seconds=seconds)
    code, report = gate_json(path, monkeypatch)
    assert code == 0 and report["passed"] is True  # a warning never rejects
    assert inspected(report, "warn") == warnings
    assert report["summary"]["warnings"] == len(warnings) + sum(
        1 for c in report["checks"] if c["verdict"] == "warn" and c["id"] != "reward_inspected")
    [passed] = inspected(report, "pass")
    if seconds is not None:
        assert f"median {seconds:.1f} s a sample" in passed


def test_the_warning_shows_as_a_warn_line_with_the_fix(make_brief, monkeypatch: pytest.MonkeyPatch) -> None:
    path = make_brief("passing")
    build_inspection(loaded(path), seconds=[0.4] * 40 + [None] * 24)
    monkeypatch.chdir(path.parent)
    result = CliRunner().invoke(cli, ["gate", path.name])
    assert result.exit_code == 0, result.stdout
    [line] = [x for x in result.stdout.splitlines() if x.startswith("WARN  reward_inspected")]
    assert line == ("WARN  reward_inspected      records.inspection: median 0.4 s a sample over 40 samples (24 untimed); "
                    "a careful read takes longer: ask the reviewer to look again Fix: run `finetune inspect brief.yaml`, "
                    "then the reviewer runs `finetune review records/inspection.json` and reads every sample")


def test_a_tampered_timing_fails_the_gate(make_brief, monkeypatch: pytest.MonkeyPatch) -> None:
    path = make_brief("passing")
    record = build_inspection(loaded(path), seconds=0.6)
    rec = json.loads(record.read_text())
    for v in rec["verdicts"].values():  # make the hurried review look careful
        v["seconds"] = 6.0
    rec["review"]["median_seconds"] = 6.0
    record.write_text(json.dumps(rec))
    code, report = gate_json(path, monkeypatch)
    assert code == 1
    failed = inspected(report, "fail")
    assert failed[0].startswith("tampered: verdicts edited after sealing: sample(s) s000, s001")
    assert "tampered: the record's review was edited after sealing" in failed
    assert inspected(report, "warn") == []


def test_the_shipped_example_sealed_before_timings_still_passes(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    example = shutil.copytree(REPO / "examples" / "smollm2-json", tmp_path / "smollm2-json")
    code, report = gate_json(example / "brief.yaml", monkeypatch)
    assert code == 0 and report["passed"] is True, report
    # sealed before signing too: it passes, with the upgrade named, while no trusted-keys file lists a key
    assert inspected(report, "warn") == [UNSIGNED, UNTIMED]


def test_the_docs_state_the_threshold_of_the_code() -> None:
    skill = (REPO / "skills" / "grpo-rlvr-training" / "SKILL.md").read_text()
    stated = re.findall(r"median is under ([0-9.]+) s a sample", skill)
    assert stated == [f"{MIN_MEDIAN_SECONDS:g}"]
    assert "not proof of a human" in skill
