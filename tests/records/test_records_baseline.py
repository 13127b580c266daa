"""Baseline records: versioned format, atomic write, digest, and stale bindings named."""

from __future__ import annotations

import json
from typing import Any

import pytest
from records_builders import build_baseline, loaded

from llm_finetuning.records import baseline
from llm_finetuning.records.baseline import verify_baseline


def test_roundtrip_and_verify(brief: Any) -> None:
    path = build_baseline(brief)
    rec = baseline.load_baseline(path)
    assert rec["format"] == "llm-finetuning/baseline@1"
    assert rec["pass_at_k"] == 0.5 and rec["k"] == 8
    assert set(rec["bindings"]) >= {"model", "rewards_spec_sha256", "reward_code_sha256", "data_sha256"}
    assert verify_baseline(brief, path) == []


def test_hand_edit_is_tampered(brief: Any) -> None:
    path = build_baseline(brief, pass_at_k=0.0)
    rec = json.loads(path.read_text())
    rec["pass_at_k"] = 0.25
    path.write_text(json.dumps(rec))
    assert [(p.kind, p.what) for p in verify_baseline(brief, path)] == [("tampered", "record")]


def test_data_change_is_stale(brief: Any) -> None:
    path = build_baseline(brief)
    with (brief.folder / "data" / "train.jsonl").open("a") as f:
        f.write('{"prompt": "What is 9 + 9?", "answer": "18"}\n')
    problems = verify_baseline(brief, path)
    assert [(p.kind, p.what) for p in problems] == [("stale", "data")]


def test_reward_weight_change_is_stale(brief: Any) -> None:
    path = build_baseline(brief)
    brief.path.write_text(brief.path.read_text().replace("weight: 0.5", "weight: 0.6"))
    problems = verify_baseline(loaded(brief.path), path)
    assert [(p.kind, p.what) for p in problems] == [("stale", "rewards_spec")]
    assert "rewards[1] (my_rewards:contains_answer)" in problems[0].message


def test_write_refuses_bad_fields(brief: Any) -> None:
    rec = baseline.make_baseline(brief, model_identity=None, prompts={}, k=8, pass_at_1=0.1, pass_at_k=1.5,
                                 mean_reward={}, frac_groups_all_tie=0.0, frac_truncated=0.0)
    with pytest.raises(ValueError, match="pass_at_k"):
        baseline.write_baseline(brief.folder / "b.json", rec)
    assert not (brief.folder / "b.json").exists()


def test_wrong_format_is_malformed(brief: Any) -> None:
    path = brief.folder / "records" / "baseline.json"
    path.parent.mkdir()
    path.write_text('{"format": "something-else"}')
    problems = verify_baseline(brief, path)
    assert [(p.kind, p.what) for p in problems] == [("malformed", "record")]
