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


# --- every verb that reads a record, on each way a record can be unusable (issue 37 item 2) --------------------
# A record that is not JSON, a list instead of an object, one without a field the verb needs, or with a field of
# the wrong type: exit 2 (unusable input), a message naming the file, a `Fix:` line, no traceback.

def _broken_forms(valid: dict[str, object], drop: str, wrong: tuple[str, object]) -> dict[str, str]:
    """The four broken forms of a record whose valid content is `valid`: `drop` a required field, `wrong` a field
    set to a value of the wrong type."""
    import json

    missing = {k: v for k, v in valid.items() if k != drop}
    return {"not JSON": "{\"format\": ", "a list": json.dumps([valid]), f"no {drop}": json.dumps(missing),
            f"{wrong[0]} of the wrong type": json.dumps({**valid, wrong[0]: wrong[1]})}


def _unusable(args: list[str], names: str) -> str:
    """The verb exits 2 on a broken record, naming the file `names` with its fix, and no traceback."""
    result = CliRunner().invoke(cli, args)
    assert isinstance(result.exception, SystemExit) or result.exception is None, result.exc_info
    text = result.stdout + result.stderr
    assert result.exit_code == 2, text
    assert "Traceback" not in text and names in text, text
    assert "Fix: " in text, text
    return text


def _manifest_forms(run: Path) -> dict[str, str]:
    import json

    valid = json.loads((run / "manifest.json").read_text())
    return _broken_forms(valid, "brief", ("files", "render wrote these"))


@pytest.mark.parametrize("verb", ["eval", "export", "status", "diagnose"])
def test_verbs_that_read_a_run_refuse_a_broken_manifest(verb: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gate_fixtures import render_passing

    folder = render_passing(tmp_path, monkeypatch)
    run = folder / "runs" / "r1"
    (run / "metrics.jsonl").write_text("".join(f'{{"step": {s}, "reward": 0.5, "kl": 0.01}}\n' for s in range(1, 9)))
    args = {"eval": ["eval", "runs/r1"], "export": ["export", "runs/r1", "-o", str(tmp_path / "out")],
            "status": ["status", "runs/r1"], "diagnose": ["diagnose", "runs/r1", "--no-write"]}[verb]
    for broken, text in _manifest_forms(run).items():
        (run / "manifest.json").write_text(text)
        out = _unusable(args, "manifest.json")
        assert "render" in out, (broken, out)  # the fix: render the run again


@pytest.mark.parametrize("broken", ["not JSON", "a list", "no k", "k of the wrong type"])
def test_eval_refuses_a_broken_baseline(broken: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`finetune eval` of a model folder against the brief's baseline record: the record is read before any
    sampling."""
    import json

    from gate_fixtures import render_passing

    folder = render_passing(tmp_path, monkeypatch)
    record = folder / "records" / "baseline.json"
    record.write_text(_broken_forms(json.loads(record.read_text()), "k", ("k", "eight"))[broken])
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "llama"}')
    (model / "model.safetensors").write_bytes(b"")
    _unusable(["eval", str(model), "--brief", "brief.yaml"], "baseline")


@pytest.mark.parametrize("broken", ["not JSON", "a list", "no prompt", "label of the wrong type"])
def test_calibrate_judge_refuses_broken_labels(broken: str, tmp_path: Path) -> None:
    import json

    (tmp_path / "train.jsonl").write_text('{"prompt": "p", "answer": "1"}\n')
    brief = {"brief": 1, "name": "judge-cal", "method": "grpo", "task": {"summary": "s"},
             "model": {"id": "Qwen/Qwen2.5-0.5B-Instruct"}, "data": {"train": "train.jsonl"},
             "rewards": [{"fn": "judge", "args": {"endpoint": "http://127.0.0.1:9", "model": "m", "rubric": "r"}}]}
    (tmp_path / "brief.yaml").write_text(json.dumps(brief))
    item = {"prompt": "What is 1 + 1?", "completion": "2", "label": 1}
    lines = {"not JSON": "{\"prompt\": ", "a list": json.dumps([item]),
             "no prompt": json.dumps({"completion": "2", "label": 1}),
             "label of the wrong type": json.dumps({**item, "label": "maybe"})}
    labels = tmp_path / "labels.jsonl"
    labels.write_text((json.dumps(item) + "\n") * 3 + lines[broken] + "\n" + (json.dumps(item) + "\n") * 60)
    _unusable(["calibrate-judge", str(tmp_path / "brief.yaml"), "--labels", str(labels)], "labels.jsonl, line 4")


@pytest.mark.parametrize("broken", ["not JSON", "a list", "no k", "k of the wrong type"])
def test_gate_fails_base_success_on_a_broken_baseline(broken: str, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The gate judges records: one it cannot use fails `base_success_nonzero` (exit 1, docs/gate.md), naming
    the file and the fix, like a missing or stale one."""
    import json

    brief = prepare_brief(tmp_path / "b", "passing")
    monkeypatch.chdir(brief.parent)
    record = brief.parent / "records" / "baseline.json"
    record.write_text(_broken_forms(json.loads(record.read_text()), "k", ("k", "eight"))[broken])
    result = CliRunner().invoke(cli, ["gate", "brief.yaml"])
    text = result.stdout + result.stderr
    assert result.exit_code == 1 and "Traceback" not in text, text
    [line] = [row for row in text.splitlines() if "base_success_nonzero" in row]
    assert "malformed" in line and "baseline.json" in line and "Fix: run `finetune baseline" in line, line


@pytest.mark.parametrize("broken", ["not JSON", "a list", "no format", "healthy of the wrong type"])
def test_gate_fails_a_deviation_whose_diagnosis_is_broken(broken: str, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """`grpo.deviation: RUN_DIR` is justified by RUN_DIR/diagnosis.json; one that cannot be used fails
    `recipe_values` (exit 1) naming the file and `finetune diagnose`."""
    brief = prepare_brief(tmp_path / "b", "passing")
    monkeypatch.chdir(brief.parent)
    brief.write_text(brief.read_text().replace("learning_rate: 5.0e-7", "learning_rate: 1.0e-5\n  deviation: runs/first"))
    run = brief.parent / "runs" / "first"
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_text('{"step": 1, "reward": 0.1}\n')
    valid = {"format": 1, "healthy": True, "findings": [], "brief_name": "gate-fixture", "source": "metrics.jsonl",
             "ended": True}
    (run / "diagnosis.json").write_text(_broken_forms(valid, "format", ("healthy", "yes"))[broken])
    result = CliRunner().invoke(cli, ["gate", "brief.yaml"])
    text = result.stdout + result.stderr
    assert result.exit_code == 1 and "Traceback" not in text, text
    [line] = [row for row in text.splitlines() if "recipe_values" in row and "FAIL" in row]
    assert "diagnosis.json" in line and "finetune diagnose" in line and "Fix: " in line, line
