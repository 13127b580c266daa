"""`finetune calibrate-judge` against the local model server, and the gate's `verify_judge_calibration`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from llm_finetuning.brief import load_brief
from llm_finetuning.cli import cli
from llm_finetuning.records.judge_calibration import agreement_figures, verify_judge_calibration
from llm_finetuning.rewards.judge import Judge

RUBRIC = "Full marks when the reply answers the question."
ITEMS = [{"prompt": f"Question {i}: what is {i} + 1?", "completion": f"It is {i + 1}."} for i in range(50)]


def write_brief(folder: Path, url: str, **args: Any) -> Path:
    (folder / "train.jsonl").write_text('{"prompt": "p", "answer": "1"}\n')  # exact_match below reads answer
    judge_args = {"endpoint": url, "model": "tiny", "rubric": RUBRIC, "max_retries": 0, "timeout_s": 60,
                  "min_agreement": 0.8, **args}
    brief = {"brief": 1, "name": "judge-cal", "method": "grpo", "task": {"summary": "s"},
             "model": {"id": "Qwen/Qwen2.5-0.5B-Instruct"}, "data": {"train": "train.jsonl"},
             "rewards": [{"fn": "judge", "args": judge_args}]}
    path = folder / "brief.yaml"
    path.write_text(json.dumps(brief))
    return path


def write_labels(path: Path, labels: list[Any]) -> Path:
    path.write_text("".join(json.dumps({**it, "label": lab}) + "\n" for it, lab in zip(ITEMS, labels, strict=False)))
    return path


@pytest.fixture(scope="module")
def judge_says(judge_server) -> list[bool]:  # type: ignore[no-untyped-def]
    """What the judge answers for ITEMS (the 'human' labels of the agreeing case are built from it)."""
    scores = Judge(endpoint=judge_server.url("ok"), model="tiny", rubric=RUBRIC, timeout_s=60)(prompts=[i["prompt"] for i in ITEMS],
                                                             completions=[i["completion"] for i in ITEMS])
    assert all(s is not None for s in scores)
    return [s >= 0.5 for s in scores]  # type: ignore[operator]


def calibrate(brief: Path, labels: Path) -> Any:
    return CliRunner().invoke(cli, ["calibrate-judge", str(brief), "--labels", str(labels), "--json"])


def test_agreeing_labels_pass_and_the_gate_accepts_the_record(tmp_path: Path, judge_server,  # type: ignore[no-untyped-def]
                                                              judge_says: list[bool]) -> None:
    url = judge_server.url("ok")
    brief_path = write_brief(tmp_path, url)
    labels = write_labels(tmp_path / "labels.jsonl", judge_says)
    result = calibrate(brief_path, labels)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["meets_threshold"] is True and out["figures"]["agreement"] == 1.0 and out["figures"]["n_items"] == 50
    record = tmp_path / "records" / "judge-calibration.json"
    assert Path(out["record"]) == record
    brief, _ = load_brief(brief_path)
    assert verify_judge_calibration(brief, record) == []

    # A changed rubric makes the record stale.
    brief_path = write_brief(tmp_path, url, rubric=RUBRIC + " Be strict.")
    brief, _ = load_brief(brief_path)
    problems = verify_judge_calibration(brief, record)
    assert len(problems) == 1 and "rubric_sha256" in problems[0] and "calibrate-judge" in problems[0]

    # A stricter threshold in the brief than the measured agreement is refused; the record is not rewritten.
    brief_path = write_brief(tmp_path, url)
    data = json.loads(record.read_text())
    entry = data["judges"]["judge"]
    entry["items"][0]["label"] = 1.0 - entry["items"][0]["label"]
    record.write_text(json.dumps(data))
    brief, _ = load_brief(brief_path)
    assert "does not match the recorded items" in verify_judge_calibration(brief, record)[0]


def test_disagreeing_labels_exit_1_and_the_gate_refuses(tmp_path: Path, judge_server,  # type: ignore[no-untyped-def]
                                                        judge_says: list[bool]) -> None:
    url = judge_server.url("ok")
    brief_path = write_brief(tmp_path, url)
    labels = write_labels(tmp_path / "labels.jsonl", [not v for v in judge_says])
    result = CliRunner().invoke(cli, ["calibrate-judge", str(brief_path), "--labels", str(labels)])
    assert result.exit_code == 1, result.output
    assert "does NOT meet args.min_agreement 0.80" in result.stdout
    brief, _ = load_brief(brief_path)
    problems = verify_judge_calibration(brief, tmp_path / "records" / "judge-calibration.json")
    assert len(problems) == 1 and "agreement with human labels 0.00 is below" in problems[0]


def test_unusable_inputs_exit_2(tmp_path: Path, judge_server) -> None:  # type: ignore[no-untyped-def]
    brief_path = write_brief(tmp_path, judge_server.url("ok"))
    few = write_labels(tmp_path / "few.jsonl", [True] * 10)
    result = calibrate(brief_path, few)
    assert result.exit_code == 2 and "at least 50" in json.loads(result.stdout)["problems"][0]["message"]
    bad = write_labels(tmp_path / "bad.jsonl", [True] * 20 + ["maybe"] + [True] * 29)
    result = calibrate(brief_path, bad)
    assert result.exit_code == 2 and "line 21" in json.loads(result.stdout)["problems"][0]["message"]
    # A judge endpoint that answers garbage scores nothing: unusable, and no record is written.
    brief_path = write_brief(tmp_path, judge_server.url("badjson"))
    result = calibrate(brief_path, write_labels(tmp_path / "ok.jsonl", [True] * 50))
    assert result.exit_code == 2 and "bad_response x50" in json.loads(result.stdout)["problems"][0]["message"]
    assert not (tmp_path / "records" / "judge-calibration.json").exists()


def test_verify_without_a_record_or_a_judge(tmp_path: Path) -> None:
    brief_path = write_brief(tmp_path, "http://127.0.0.1:9/v1")
    brief, _ = load_brief(brief_path)
    assert "no judge calibration record" in verify_judge_calibration(brief, tmp_path / "none.json")[0]
    (tmp_path / "junk.json").write_text("{}")
    assert "unusable" in verify_judge_calibration(brief, tmp_path / "junk.json")[0]
    data = json.loads(brief_path.read_text())
    data["rewards"] = [{"fn": "exact_match"}]
    brief_path.write_text(json.dumps(data))
    brief, _ = load_brief(brief_path)
    assert verify_judge_calibration(brief, tmp_path / "none.json") == []


def test_agreement_figures() -> None:
    f = agreement_figures([1, 1, 0, 0], [0.9, 0.2, 0.1, None])
    assert f["agreement"] == 0.5 and f["n_failed"] == 1 and f["n_scored"] == 3
    assert f["mean_abs_error"] == (0.1 + 0.8 + 0.1) / 3
    assert abs(f["cohen_kappa"] - 0.4) < 1e-9
    assert f["false_pass_rate"] == 0.0 and f["false_fail_rate"] == 0.5
