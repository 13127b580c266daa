"""No verb ends in a traceback on a record it cannot use (issue 37): each verb that reads records, given a
record that is not JSON, a record of another shape, or a key it cannot read, ends through the CLI's one
conversion of ProblemError (`commands._common.fail`): exit 1 or 2, and every problem with its fix."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from llm_finetuning.cli import cli
from llm_finetuning.errors import ProblemError, UnusableInput
from llm_finetuning.records.inspection import RecordError
from llm_finetuning.records.signing import KeyProblem

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "gate"))
sys.path.insert(0, str(REPO / "tests" / "sampling"))

from gate_fixtures import prepare_brief  # noqa: E402
from ptydrive import PtyDriver  # noqa: E402

BROKEN = {"not JSON": "{\"format\": ", "another shape": "[1, 2, 3]\n", "another format": "{\"format\": \"x@9\"}\n"}


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_FINETUNING_CACHE", str(tmp_path / "cache"))


def test_every_error_with_a_fix_is_a_problem_error() -> None:
    for cls in (RecordError, KeyProblem):
        err = cls("the record is sealed", "run `finetune inspect` again")
        assert isinstance(err, ProblemError) and isinstance(err, UnusableInput)
        assert err.problems[0].fix == "run `finetune inspect` again" and err.exit_code == 2


def _ends_cleanly(args: list[str]) -> str:
    result = CliRunner().invoke(cli, args)
    assert isinstance(result.exception, SystemExit) or result.exception is None, result.exc_info
    assert result.exit_code in (1, 2), result.output
    text = result.stdout + result.stderr
    assert "Traceback" not in text
    assert "Fix: " in text or '"fix": "' in text  # every problem with its fix, as text or as the JSON shape
    return result.stdout + result.stderr


@pytest.mark.parametrize("record", ["baseline", "inspection"])
@pytest.mark.parametrize("broken", sorted(BROKEN))
def test_gate_render_launch_and_review_refuse_a_broken_record(record: str, broken: str, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    brief = prepare_brief(tmp_path / "b", "passing")
    monkeypatch.chdir(brief.parent)
    assert CliRunner().invoke(cli, ["render", "brief.yaml", "-o", "runs/r1"]).exit_code == 0
    (brief.parent / "records" / f"{record}.json").write_text(BROKEN[broken])
    assert f"records.{record}" in _ends_cleanly(["gate", "brief.yaml"])
    _ends_cleanly(["render", "brief.yaml", "-o", "runs/r2"])
    _ends_cleanly(["launch", "runs/r1", "--plan"])
    if record == "inspection":  # review wants a terminal: run it on a pseudo-terminal, as a person would
        drive = PtyDriver([sys.executable, "-m", "llm_finetuning.cli", "review", "records/inspection.json"],
                          env={**os.environ, "LLM_FINETUNING_CACHE": str(tmp_path / "cache")}, cwd=str(brief.parent))
        code = drive.wait(60)
        assert code == 2 and "Traceback" not in drive.text and "Fix: " in drive.text, drive.text
