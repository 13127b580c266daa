"""Inspection records: create, review, seal, and verification that names what went stale or was tampered."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from records_builders import build_inspection, loaded

from llm_finetuning.records import inspection
from llm_finetuning.records.inspection import RecordError, verify_inspection


def kinds(problems: list[Any]) -> list[tuple[str, str]]:
    return [(p.id, p.path) for p in problems]


def edit_json(path: Path, change: Any) -> None:
    rec = json.loads(path.read_text())
    change(rec)
    path.write_text(json.dumps(rec, indent=2))


def test_sealed_all_agree_record_verifies(brief: Any) -> None:
    path = build_inspection(brief)
    assert verify_inspection(brief, path)[1] == []
    rec = inspection.load_inspection(path)
    assert rec["format"] == "llm-finetuning/inspection@1"
    assert rec["review"]["reviewer"] == "Ada Reviewer"
    assert rec["review"]["counts"] == {"agree": 64, "disagree": 0, "unsure": 0}
    assert inspection.samples_path(path).name == "inspection.samples.jsonl"
    assert len(inspection.load_samples(path)) == 64
    labels = {b["name"]: sorted(b["code"]) for b in rec["bindings"]["rewards"]}
    assert "llm_finetuning/rewards/exact_match.py" in labels["exact_match"]
    assert labels["my_rewards:contains_answer"] == ["my_rewards.py"]
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def test_missing_record_is_named(brief: Any) -> None:
    problems = verify_inspection(brief, brief.folder / "records" / "inspection.json")[1]
    assert kinds(problems) == [("missing", "record")]
    assert "finetune inspect" in problems[0].fix


def test_unsealed_and_incomplete(brief: Any) -> None:
    path = build_inspection(brief, seal=False, review_all=False, verdicts={0: "agree"})
    problems = verify_inspection(brief, path)[1]
    assert kinds(problems) == [("unsealed", "review"), ("incomplete", "verdicts")]
    assert "63 of 64" in problems[1].message
    with pytest.raises(RecordError, match="63 sample"):
        inspection.seal(path, "Ada")


def test_disagreement_can_be_sealed_and_is_listed(brief: Any) -> None:
    path = build_inspection(brief, verdicts={3: "disagree", 7: "unsure"})
    problems = verify_inspection(brief, path)[1]
    assert kinds(problems) == [("disagreement", "verdicts")]
    assert "s003" in problems[0].message and "s007" not in problems[0].message
    assert problems[0].fix.startswith("fix the reward function first")


def test_sealed_record_refuses_more_verdicts(brief: Any) -> None:
    path = build_inspection(brief)
    rec = inspection.load_inspection(path)
    with pytest.raises(RecordError, match="sealed"):
        inspection.set_verdict(rec, "s000", "disagree")
    with pytest.raises(RecordError, match="sealed"):
        inspection.save_progress(path, rec)
    with pytest.raises(RecordError, match="already sealed"):
        inspection.seal(path, "Ada")


def test_one_character_in_custom_reward_source_is_stale(brief: Any) -> None:
    path = build_inspection(brief)
    src = brief.folder / "my_rewards.py"
    src.write_text(src.read_text().replace("1.0 if", "2.0 if"))
    problems = verify_inspection(brief, path)[1]
    assert kinds(problems) == [("stale", "reward_code")]
    assert "my_rewards.py (my_rewards:contains_answer) changed" in problems[0].message


def test_one_character_in_reward_args_is_stale(brief: Any) -> None:
    path = build_inspection(brief)
    text = brief.path.read_text().replace("extract: last_number", "extract: hash")
    brief.path.write_text(text)
    problems = verify_inspection(loaded(brief.path), path)[1]
    assert kinds(problems) == [("stale", "rewards_spec")]
    assert "rewards[0] (exact_match) fn/weight/args changed" in problems[0].message


def test_one_character_in_a_sample_is_tampered(brief: Any) -> None:
    path = build_inspection(brief)
    spath = inspection.samples_path(path)
    lines = spath.read_text().splitlines(keepends=True)
    lines[5] = lines[5].replace("The sum is", "The sum was")
    spath.write_text("".join(lines))
    problems = verify_inspection(brief, path)[1]
    assert kinds(problems) == [("tampered", "samples")]
    assert "changed or removed: s005" in problems[0].message


def test_one_verdict_edited_after_sealing_is_tampered(brief: Any) -> None:
    path = build_inspection(brief, verdicts={3: "disagree"})
    edit_json(path, lambda r: r["verdicts"]["s003"].update(verdict="agree"))
    problems = verify_inspection(brief, path)[1]
    assert kinds(problems) == [("tampered", "verdicts")]
    assert "s003" in problems[0].message


def test_reviewer_edited_after_sealing_is_tampered(brief: Any) -> None:
    path = build_inspection(brief)
    edit_json(path, lambda r: r["review"].update(reviewer="Someone Else"))
    assert kinds(verify_inspection(brief, path)[1]) == [("tampered", "review")]


def test_model_change_is_stale_and_named(brief: Any) -> None:
    path = build_inspection(brief)
    brief.path.write_text(brief.path.read_text().replace("Qwen2.5-0.5B", "Qwen2.5-1.5B"))
    problems = verify_inspection(loaded(brief.path), path)[1]
    assert kinds(problems) == [("stale", "model")]
    assert "model.id: 'Qwen/Qwen2.5-0.5B-Instruct' -> 'Qwen/Qwen2.5-1.5B-Instruct'" in problems[0].message
    assert kinds(verify_inspection(brief, path, model_identity="sha256:abc")[1]) == [("stale", "model")]


def test_sample_count_outside_50_100(brief: Any) -> None:
    path = build_inspection(brief, n=10)
    problems = verify_inspection(brief, path)[1]
    assert kinds(problems) == [("size", "samples")]
    assert "holds 10 samples" in problems[0].message


def test_newer_format_is_malformed_with_upgrade_fix(brief: Any) -> None:
    path = build_inspection(brief)
    edit_json(path, lambda r: r.update(format="llm-finetuning/inspection@2"))
    problems = verify_inspection(brief, path)[1]
    assert kinds(problems) == [("malformed", "record")]
    assert "upgrade llm-finetuning" in problems[0].fix


def test_create_refuses_samples_missing_a_reward(brief: Any) -> None:
    samples = [{"prompt": "p", "completion": "c", "rewards": {"exact_match": 1.0}}]
    with pytest.raises(RecordError, match="brief's rewards are"):
        inspection.create_inspection(brief, samples, brief.folder / "records" / "inspection.json", None)


def test_samples_file_must_sit_beside_the_record(brief: Any) -> None:
    path = build_inspection(brief)
    edit_json(path, lambda r: r.update(samples_file="../../elsewhere.jsonl"))
    problems = verify_inspection(brief, path)[1]
    assert kinds(problems) == [("malformed", "record")]
    assert "is not a file name beside the record" in problems[0].message


def test_verdict_seconds_default_to_unknown_and_revisits_add_up(brief: Any) -> None:
    path = build_inspection(brief, seal=False, review_all=False, verdicts={0: "agree"})
    rec = inspection.load_inspection(path)
    assert rec["verdicts"]["s000"]["seconds"] is None  # the API without seconds: unknown
    inspection.set_verdict(rec, "s001", "agree", "", 1.26)
    assert rec["verdicts"]["s001"]["seconds"] == 1.3
    inspection.set_verdict(rec, "s001", "unsure", "second look", 2.0)  # back to it: the times add up
    assert rec["verdicts"]["s001"] == {**rec["verdicts"]["s001"], "verdict": "unsure", "seconds": 3.3}
    inspection.set_verdict(rec, "s000", "agree", "", 0.44)  # unknown + known: the known part
    assert rec["verdicts"]["s000"]["seconds"] == 0.4
    inspection.set_verdict(rec, "s001", "unsure", "", None)  # judged again, time unknown: kept
    assert rec["verdicts"]["s001"]["seconds"] == 3.3
    for bad in (-1.0, float("nan"), float("inf"), True, "2"):
        with pytest.raises(RecordError, match="not a number of seconds"):
            inspection.set_verdict(rec, "s002", "agree", "", bad)  # type: ignore[arg-type]
    assert "s002" not in rec["verdicts"]


def test_seal_keeps_os_user_terminal_and_seconds(brief: Any) -> None:
    import os
    import pwd

    times = [0.5 + 0.1 * i for i in range(64)]
    path = build_inspection(brief, seconds=times)
    review = inspection.load_inspection(path)["review"]
    assert review["os_user"] == pwd.getpwuid(os.getuid()).pw_name
    assert review["tty"] == (os.ttyname(0) if os.isatty(0) else None)
    assert (review["timed_samples"], review["median_seconds"], review["total_seconds"]) == (64, 3.7, 233.6)
    assert verify_inspection(brief, path)[1] == []


def test_untimed_record_seals_without_timings(brief: Any) -> None:
    path = build_inspection(brief)
    rec = inspection.load_inspection(path)
    assert (rec["review"]["timed_samples"], rec["review"]["median_seconds"], rec["review"]["total_seconds"]) == (0, None, None)
    assert inspection.review_timing(rec) == inspection.ReviewTiming(0, 64, None, None)


def test_a_timing_edited_after_sealing_is_tampered(brief: Any) -> None:
    path = build_inspection(brief, seconds=3.0)
    edit_json(path, lambda r: r["verdicts"]["s010"].update(seconds=30.0))
    problems = verify_inspection(brief, path)[1]
    assert kinds(problems) == [("tampered", "verdicts")]
    assert "s010" in problems[0].message
    path = build_inspection(brief, seconds=3.0)
    edit_json(path, lambda r: r["review"].update(median_seconds=9.0))
    assert kinds(verify_inspection(brief, path)[1]) == [("tampered", "review")]


def test_the_sealed_review_is_parsed_once_with_one_count(brief: Any) -> None:
    """The gate reads a sealed record as `SealedReview` (attributes, not string keys): its verdict counts are
    the seal's own, counted by the one `verdict_counts`."""
    path = build_inspection(brief, verdicts={3: "unsure", 7: "unsure"}, seconds=4.0)
    checked = inspection.check_inspection(brief, path)
    review = checked.review
    assert review is not None and checked.record is not None
    assert dict(review.counts) == checked.record["review"]["counts"] == {"agree": 62, "disagree": 0, "unsure": 2}
    assert (review.samples, review.timing.median_seconds) == (64, 4.0)
    assert review.samples_sha256 == checked.record["bindings"]["samples_sha256"]
