"""The skill evals (evals/*.json) are well formed, satisfiable, cover every route, and their reference
briefs are briefs the loader accepts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from skill_bundle import REPO, SKILLS

from llm_finetuning.brief import load_brief, recipe_defaults

EVALS = REPO / "evals"
ROUTES = {"grpo-rlvr-training", "preference-optimization", "lora-qlora-recipes", "eval-harness-first", "sft-then-grpo"}
sys.path.insert(0, str(EVALS))
from grade import grade  # noqa: E402


def suite(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EVALS / f"{name}.json").read_text(encoding="utf-8"))
    return data


@pytest.mark.parametrize("name", ["routing", "brief-writing"])
def test_suite_matches_the_schema(name: str) -> None:
    schema = json.loads((EVALS / "schema.json").read_text(encoding="utf-8"))
    data = suite(name)
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(data), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors)
    assert data["suite"] == name and data["skill"] in SKILLS
    ids = [c["id"] for c in data["cases"]]
    assert len(ids) == len(set(ids)), "case ids must be unique"


@pytest.mark.parametrize("name", ["routing", "brief-writing"])
def test_every_reference_answer_passes_its_case(name: str) -> None:
    failures = {c["id"]: grade(c["reference_answer"], c) for c in suite(name)["cases"]}
    assert not {k: v for k, v in failures.items() if v}


def test_a_wrong_answer_fails() -> None:
    case = next(c for c in suite("routing")["cases"] if c["id"] == "llm-judge-as-verifier-trap")
    assert grade("Yes, that is verifiable. Route: grpo-rlvr-training.", case)


def test_routing_covers_every_route_and_the_traps() -> None:
    cases = suite("routing")["cases"]
    assert len(cases) >= 12
    assert all(c.get("expected_route") in ROUTES for c in cases)
    assert {c["expected_route"] for c in cases} == ROUTES
    traps = [c for c in cases if "trap" in c.get("tags", [])]
    assert len(traps) >= 3
    assert any("judge" in c["id"] for c in traps) and any("format" in c["id"] for c in traps)


def test_brief_writing_has_enough_cases_with_reference_briefs() -> None:
    cases = suite("brief-writing")["cases"]
    assert len(cases) >= 4
    assert sum("reference_brief" in c for c in cases) >= 4


@pytest.mark.parametrize("case", [c for c in suite("brief-writing")["cases"] if "reference_brief" in c],
                         ids=lambda c: c["id"])
def test_reference_brief_loads_and_keeps_the_recipe(case: dict[str, Any], tmp_path: Path) -> None:
    from llm_finetuning.brief.columns import needed_columns

    raw = yaml.safe_load(case["reference_brief"])
    # stand-in data: one row holding every column the brief names (check reads them)
    row = {n.column: "p" for n in needed_columns(raw["data"], raw["rewards"])}
    for key in ("train", "eval"):
        if raw["data"].get(key):
            (tmp_path / raw["data"][key]).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / raw["data"][key]).write_text(json.dumps(row) + "\n", encoding="utf-8")
    path = tmp_path / "brief.yaml"
    path.write_text(case["reference_brief"], encoding="utf-8")
    brief, errors = load_brief(path)
    assert not errors, "\n".join(map(str, errors))
    assert brief is not None
    defaults = recipe_defaults()
    grpo = brief.data["grpo"]
    for key in ("num_generations", "learning_rate", "per_device_train_batch_size", "gradient_accumulation_steps",
                "seed"):
        assert grpo[key] == defaults[key], key
    # DAPO and GSPO train without the KL term; every other variant keeps the recipe's beta
    assert grpo["beta"] == (0 if grpo["variant"] in ("dapo", "gspo") else defaults["beta"])


def test_grader_command_line(tmp_path: Path) -> None:
    cases = suite("routing")["cases"]
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps({"id": c["id"], "answer": c["reference_answer"]}) + "\n" for c in cases))
    ok = subprocess.run([sys.executable, str(EVALS / "grade.py"), str(EVALS / "routing.json"), str(answers)],
                        capture_output=True, text=True, check=False)
    assert ok.returncode == 0, ok.stdout
    assert f"{len(cases)}/{len(cases)} passed" in ok.stdout
    answers.write_text(json.dumps({"id": cases[0]["id"], "answer": "use DPO"}) + "\n")
    bad = subprocess.run([sys.executable, str(EVALS / "grade.py"), str(EVALS / "routing.json"), str(answers)],
                         capture_output=True, text=True, check=False)
    assert bad.returncode == 1
    assert f"FAIL {cases[0]['id']}: missing one of" in bad.stdout
