"""`finetune score` end to end, registry resolution, names, and the reward source files."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from llm_finetuning.cli import cli
from llm_finetuning.rewards import build_reward, reward_names, reward_source_files

CUSTOM = '''
def shout(prompts, completions, bonus=0.0, **columns):
    """1 + bonus for completions in capitals, None where the row is marked skip."""
    return [None if skip else (1.0 + bonus if c.isupper() else 0.0)
            for c, skip in zip(completions, columns["skip"])]

def broken(prompts, completions, **columns):
    return ["high"] * len(completions)
'''


def write_brief(folder: Path, rewards: list[dict[str, Any]]) -> Path:
    (folder / "train.jsonl").write_text('{"prompt": "p", "answer": "1"}\n')
    (folder / "myrewards.py").write_text(CUSTOM)
    brief = {"brief": 1, "name": "score-test", "method": "grpo", "task": {"summary": "s"},
             "model": {"id": "Qwen/Qwen2.5-0.5B-Instruct"}, "data": {"train": "train.jsonl"},
             "rewards": rewards, "grpo": {"max_completion_length": 20}}
    path = folder / "brief.yaml"
    path.write_text(json.dumps(brief))
    return path


def write_rows(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def run(*args: str) -> Any:
    return CliRunner().invoke(cli, ["score", *args])


REWARDS = [
    {"fn": "exact_match", "weight": 1.0},
    {"fn": "exact_match", "weight": 0.5, "args": {"extract": "hash"}},
    {"fn": "myrewards:shout", "weight": 2.0, "args": {"bonus": 0.5}},
    {"fn": "length_penalty", "weight": 1.0, "args": {"unit": "chars", "buffer": 5}},
]


def test_score_json_shape_names_and_totals(tmp_path: Path) -> None:
    brief = write_brief(tmp_path, REWARDS)
    rows = write_rows(tmp_path / "rows.jsonl", [
        {"prompt": "What is 1+1?", "completion": "\\boxed{2} #### 2", "answer": "2", "skip": False},
        {"prompt": "Shout.", "completion": "YES", "answer": None, "skip": False},
        {"prompt": "x", "completion": "no answer at all, far too long", "answer": None, "skip": True},
    ])
    result = run(str(brief), "--completions", str(rows), "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out == {"rows": [
        {"index": 0, "rewards": {"exact_match": 1.0, "exact_match#2": 1.0, "myrewards:shout": 0.0,
                                 "length_penalty": -0.2}, "total": 1.3},  # 16 chars: 1 into the buffer
        {"index": 1, "rewards": {"exact_match": None, "exact_match#2": None, "myrewards:shout": 1.5,
                                 "length_penalty": 0.0}, "total": 3.0},
        {"index": 2, "rewards": {"exact_match": None, "exact_match#2": None, "myrewards:shout": None,
                                 "length_penalty": -1.0}, "total": -1.0},
    ]}


def test_score_human_table(tmp_path: Path) -> None:
    brief = write_brief(tmp_path, REWARDS[:1])
    rows = write_rows(tmp_path / "rows.jsonl", [{"prompt": "p", "completion": "1", "answer": "1"},
                                                 {"prompt": "p", "completion": "2", "answer": None}])
    result = run(str(brief), "--completions", str(rows))
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [
        "index  exact_match  total", "    0            1      1", "    1         null   null", "",
        "mean exact_match: 1 over 1 of 2 rows", "mean total: 1 over 1 of 2 rows"]


def test_score_conversational_rows_and_a_long_file(tmp_path: Path) -> None:
    brief = write_brief(tmp_path, REWARDS[:1])
    conv = {"prompt": [{"role": "user", "content": "2+2?"}], "completion": "\\boxed{4}", "answer": "4"}
    rows = write_rows(tmp_path / "rows.jsonl", [conv] * 150)
    result = run(str(brief), "--completions", str(rows), "--json")
    assert result.exit_code == 0
    scored = json.loads(result.stdout)["rows"]
    assert [r["index"] for r in scored] == list(range(150)) and {r["total"] for r in scored} == {1.0}


@pytest.mark.parametrize(("line", "message"), [
    ("{not json", "line 2: not JSON"),
    ('{"prompt": "p"}', "line 2: missing 'completion'"),
    ('["p", "c"]', "line 2: expected a JSON object"),
    ('{"prompt": "p", "completion": 3}', "line 2: 'completion' must be a string"),
])
def test_bad_row_is_named_by_line_and_exits_2(tmp_path: Path, line: str, message: str) -> None:
    brief = write_brief(tmp_path, REWARDS[:1])
    rows = write_rows(tmp_path / "rows.jsonl", [{"prompt": "p", "completion": "1", "answer": "1"}, line])
    result = run(str(brief), "--completions", str(rows))
    assert result.exit_code == 2
    assert message in result.stderr


def test_missing_column_and_bad_custom_output_exit_2(tmp_path: Path) -> None:
    brief = write_brief(tmp_path, REWARDS[:1])
    rows = write_rows(tmp_path / "rows.jsonl", [{"prompt": "p", "completion": "1"}])
    result = run(str(brief), "--completions", str(rows), "--json")
    assert result.exit_code == 2
    assert "args.answer_field" in json.loads(result.stdout)["problems"][0]["message"]
    brief = write_brief(tmp_path, [{"fn": "myrewards:broken"}])
    result = run(str(brief), "--completions", str(rows))
    assert result.exit_code == 2
    assert "reward myrewards:broken returned 'high'" in result.stderr


def test_missing_file_exits_2(tmp_path: Path) -> None:
    brief = write_brief(tmp_path, REWARDS[:1])
    result = run(str(brief), "--completions", str(tmp_path / "nope.jsonl"))
    assert result.exit_code == 2 and "does not exist" in result.stderr


def test_unknown_name_lists_the_valid_ones(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="use one of exact_match, json_schema, judge, length_penalty, tool_call, unit_tests"):
        build_reward({"fn": "exact_matchh"}, tmp_path)
    with pytest.raises(ValueError, match=r"rewards\[\]\.args: Additional properties"):
        build_reward({"fn": "exact_match", "args": {"answer_fields": "a"}}, tmp_path)


def test_custom_reward_is_named_picklable_and_gets_its_args(tmp_path: Path) -> None:
    write_brief(tmp_path, REWARDS)
    reward = build_reward({"fn": "myrewards:shout", "args": {"bonus": 1.0}}, tmp_path, 2)
    assert reward.__name__ == "myrewards:shout#2"
    copy = pickle.loads(pickle.dumps(reward))
    assert copy(prompts=["p"], completions=["HI"], skip=[False]) == [2.0]


def test_names_are_suffixed_where_they_repeat() -> None:
    specs = [{"fn": "a"}, {"fn": "b"}, {"fn": "a"}, {"fn": "a"}]
    assert reward_names(specs) == ["a", "b", "a#2", "a#3"]


def test_source_files_of_builtins_and_custom(tmp_path: Path) -> None:
    names = {p.name for p in reward_source_files("exact_match", tmp_path)}
    # reward_registry.py holds the argument defaults the reward runs with, so a changed default makes a record stale
    assert names == {"exact_match.py", "_text.py", "_mathverify_worker.py", "explain.py", "reward_registry.py"}
    assert {p.name for p in reward_source_files("judge", tmp_path)} == {"judge.py", "_text.py", "reward_registry.py"}
    (tmp_path / "helpers.py").write_text("X = 1\n")
    (tmp_path / "mine.py").write_text("from helpers import X\nimport json\n\ndef f(prompts, completions, **k):\n"
                                      "    return [X] * len(completions)\n")
    assert [p.name for p in reward_source_files("mine:f", tmp_path)] == ["helpers.py", "mine.py"]
    assert reward_source_files("nope:f", tmp_path) == []


def test_a_row_without_the_tests_column_scores_null_and_the_others_are_scored(tmp_path: Path) -> None:
    """As unit_tests documents: a row without tests scores None; only a column no row has is refused."""
    brief = write_brief(tmp_path, [{"fn": "unit_tests", "args": {"timeout_s": 5.0}}])
    (tmp_path / "train.jsonl").write_text('{"prompt": "p", "tests": ["assert f(1) == 2"]}\n')
    code = "def f(x):\n    return x + 1\n"
    rows = write_rows(tmp_path / "rows.jsonl", [{"prompt": "p", "completion": code, "tests": ["assert f(1) == 2"]},
                                                {"prompt": "p", "completion": code}])
    result = run(str(brief), "--completions", str(rows), "--json")
    assert result.exit_code == 0, result.output
    assert [r["rewards"]["unit_tests"] for r in json.loads(result.stdout)["rows"]] == [1.0, None]
    rows = write_rows(tmp_path / "rows.jsonl", [{"prompt": "p", "completion": code}])
    result = run(str(brief), "--completions", str(rows), "--json")
    assert result.exit_code == 2
    assert "args.tests_field" in json.loads(result.stdout)["problems"][0]["message"]
