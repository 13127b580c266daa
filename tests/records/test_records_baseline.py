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
    assert not rec.tampered
    assert rec.pass_at_k == 0.5 and rec.k == 8
    assert set(rec.bindings) >= {"model", "rewards_spec_sha256", "reward_code_sha256", "data_sha256"}
    assert verify_baseline(brief, path)[1] == []


def test_hand_edit_is_tampered(brief: Any) -> None:
    path = build_baseline(brief, pass_at_k=0.0)
    rec = json.loads(path.read_text())
    rec["pass_at_k"] = 0.25
    path.write_text(json.dumps(rec))
    assert [(p.id, p.path) for p in verify_baseline(brief, path)[1]] == [("tampered", "record")]


def test_data_change_is_stale(brief: Any) -> None:
    path = build_baseline(brief)
    with (brief.folder / "data" / "train.jsonl").open("a") as f:
        f.write('{"prompt": "What is 9 + 9?", "answer": "18"}\n')
    problems = verify_baseline(brief, path)[1]
    assert [(p.id, p.path) for p in problems] == [("stale", "data")]


def test_reward_weight_change_is_stale(brief: Any) -> None:
    path = build_baseline(brief)
    brief.path.write_text(brief.path.read_text().replace("weight: 0.5", "weight: 0.6"))
    problems = verify_baseline(loaded(brief.path), path)[1]
    assert [(p.id, p.path) for p in problems] == [("stale", "rewards_spec")]
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
    problems = verify_baseline(brief, path)[1]
    assert [(p.id, p.path) for p in problems] == [("malformed", "record")]


def test_evaluation_records_sit_beside_the_training_one(brief: Any) -> None:
    """--temperature/--greedy measurements get their own file; the training temperature keeps records.baseline."""
    training = baseline.training_record_path(brief)
    t = baseline.brief_sampling_settings(brief)["temperature"]
    assert baseline.record_path_for(brief, baseline.Decoding(t)) == training
    assert baseline.record_path_for(brief, baseline.Decoding(0.7)) == training.with_name("baseline.t0.7.json")
    greedy = baseline.Decoding(0.0, greedy=True)
    assert baseline.record_path_for(brief, greedy) == training.with_name("baseline.greedy.json")
    assert (greedy.label, baseline.Decoding(0.7).label) == ("greedy", "temperature 0.7")
    assert not greedy.is_training(brief) and baseline.Decoding(t).is_training(brief)


def test_requested_decoding_and_completions_per_prompt(brief: Any) -> None:
    from llm_finetuning.errors import UnusableInput

    assert baseline.requested_decoding(brief, None, False) is None
    assert baseline.requested_decoding(brief, 0.7, False) == baseline.Decoding(0.7)
    greedy = baseline.requested_decoding(brief, None, True)
    assert greedy == baseline.Decoding(0.0, greedy=True)
    with pytest.raises(UnusableInput, match="--temperature and --greedy both given"):
        baseline.requested_decoding(brief, 0.7, True)
    assert baseline.completions_per_prompt(None, greedy, 8) == 1
    assert baseline.completions_per_prompt(None, baseline.Decoding(0.7), 8) == 8
    assert baseline.completions_per_prompt(4, None, 8) == 4
    with pytest.raises(UnusableInput, match="greedy decoding gives the same completion every time"):
        baseline.completions_per_prompt(4, greedy, 8)


def test_recorded_decoding_and_purpose(brief: Any) -> None:
    path = build_baseline(brief, sampling={"temperature": 0.0, "greedy": True, "purpose": "evaluation"})
    rec = baseline.load_baseline(path)
    assert baseline.recorded_decoding(rec) == baseline.Decoding(0.0, greedy=True)
    assert baseline.measured_for_evaluation(rec)
    rec = baseline.load_baseline(build_baseline(brief))
    assert baseline.recorded_decoding(rec) == baseline.Decoding(1.0) and not baseline.measured_for_evaluation(rec)
    assert baseline.recorded_decoding(baseline.load_baseline(build_baseline(brief, settings=False))) is None


def test_missing_training_record_names_the_evaluation_records_beside_it(brief: Any) -> None:
    path = build_baseline(brief, sampling={"temperature": 0.7, "purpose": "evaluation"})
    path.rename(path.with_name("baseline.t0.7.json"))
    [problem] = verify_baseline(brief, path)[1]
    assert problem.id == "missing"
    assert "baseline.t0.7.json beside it measure evaluation settings, not the training temperature" in problem.message


@pytest.mark.parametrize(("field", "value", "says"), [
    ("k", "eight", "field 'k' is not a positive integer"),
    ("pass_at_1", None, "field 'pass_at_1' is None; expected a number in [0, 1]"),
    ("mean_reward", {"exact_match": None}, "field 'mean_reward.exact_match' is null"),
    ("prompts", {"indices": ["a"]}, "field 'prompts.indices'"),
    ("sampling", {"temperature": "hot"}, "field 'sampling.temperature' is 'hot'; expected a number"),
    ("per_prompt", "all", "field 'per_prompt'"),
])
def test_a_field_of_the_wrong_type_is_named_with_the_file_and_the_fix(brief: Any, field: str, value: object,
                                                                       says: str) -> None:
    path = build_baseline(brief)
    rec = json.loads(path.read_text())
    path.write_text(json.dumps({**rec, field: value}))
    with pytest.raises(baseline.UnusableInput) as caught:
        baseline.load_baseline(path)
    assert caught.value.message == f"{path} {says}" or (str(path) in caught.value.message
                                                        and says in caught.value.message)
    assert caught.value.fix == "run `finetune baseline BRIEF` again"
    [problem] = verify_baseline(brief, path)[1]
    assert problem.id == "malformed" and says in problem.message
