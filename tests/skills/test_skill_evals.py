"""The evals (evals/*.json) are well formed, satisfiable, cover every route, discriminate (every
known-wrong answer is graded FAIL, every reference answer PASS), and their reference briefs are briefs
the loader accepts."""

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
SUITES = ("routing", "brief-writing", "behaviour")
AGENT = "llm-finetuning-training-engineer"
sys.path.insert(0, str(EVALS))
import grade as grader  # noqa: E402
from grade import grade, parse_route  # noqa: E402


def suite(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EVALS / f"{name}.json").read_text(encoding="utf-8"))
    return data


def test_the_grader_knows_every_suite_and_route() -> None:
    assert grader.SUITES == SUITES
    assert set(grader.ROUTES) == ROUTES
    assert sorted(p.stem for p in EVALS.glob("*.json") if p.name != "schema.json") == sorted(SUITES)


@pytest.mark.parametrize("name", SUITES)
def test_suite_matches_the_schema(name: str) -> None:
    schema = json.loads((EVALS / "schema.json").read_text(encoding="utf-8"))
    data = suite(name)
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(data), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors)
    assert data["suite"] == name and data["skill"] in (*SKILLS, AGENT)
    ids = [c["id"] for c in data["cases"]]
    assert len(ids) == len(set(ids)), "case ids must be unique"


@pytest.mark.parametrize("name", SUITES)
def test_every_reference_answer_passes_its_case(name: str) -> None:
    failures = {c["id"]: grade(c["reference_answer"], c) for c in suite(name)["cases"]}
    assert not {k: v for k, v in failures.items() if v}


@pytest.mark.parametrize("name", SUITES)
def test_every_known_wrong_answer_fails_its_case(name: str) -> None:
    cases = suite(name)["cases"]
    wrong = [(c, w) for c in cases for w in c.get("known_wrong", [])]
    assert len(wrong) >= min(5, len(cases)), f"{name}: too few known-wrong answers"
    passing = [f"{c['id']}: {w['why']}" for c, w in wrong if not grade(w["answer"], c)]
    assert not passing, "known-wrong answers graded PASS:\n" + "\n".join(passing)


# the clearly wrong answers the issue found passing the old grader, by the case that must catch each
ISSUE_WRONG_ANSWERS = {
    "gsm8k-reference-answers": "Route: preference-optimization",  # DPO for math with a verifier
    "lean-zero-base": "Route: grpo-rlvr-training",  # GRPO at zero base success
    "llm-judge-as-verifier-trap": "Route: grpo-rlvr-training",  # an uncalibrated judge as the reward
    "format-only-trap": "format reward",  # a format check accepted as the verifier
    "boxed-only-trap": "Route: grpo-rlvr-training",  # RL on a format check without reference answers
    "vlm-chart-rl": "modality: vision",  # vision RL, which the gate refuses
}


@pytest.mark.parametrize("case_id", sorted(ISSUE_WRONG_ANSWERS))
def test_the_issues_wrong_answers_are_committed_and_fail(case_id: str) -> None:
    case = next(c for c in suite("routing")["cases"] if c["id"] == case_id)
    answers = [w["answer"] for w in case.get("known_wrong", []) if ISSUE_WRONG_ANSWERS[case_id] in w["answer"]]
    assert answers, f"{case_id}: no known-wrong answer containing {ISSUE_WRONG_ANSWERS[case_id]!r}"
    assert all(grade(a, case) for a in answers)


@pytest.mark.parametrize(("answer", "route"), [
    ("GRPO it is.\nRoute: grpo-rlvr-training", "grpo-rlvr-training"),
    ("**Route:** `eval-harness-first`", "eval-harness-first"),
    ("- route: sft-then-grpo (SFT first)", "sft-then-grpo"),
    ("Route: preference-optimization\n...\nRoute: lora-qlora-recipes", "lora-qlora-recipes"),  # the last line counts
    ("We should use grpo-rlvr-training here.", None),  # no Route: line
    ("Route: GRPO", None),  # not a route id
    ("Route: grpo-rlvr-training or preference-optimization", None),  # two routes
    ("Route: sft-then-grpo-rlvr-training", None),  # neither id on its own
])
def test_parse_route(answer: str, route: str | None) -> None:
    assert parse_route(answer) == route


def test_routing_is_graded_on_the_route_line() -> None:
    case = next(c for c in suite("routing")["cases"] if c["id"] == "gsm8k-reference-answers")
    text = case["reference_answer"].rsplit("Route:", 1)[0]
    assert grade(text + "Route: grpo-rlvr-training", case) == []
    assert grade(text, case) == ["no `Route:` line naming exactly one of " + ", ".join(grader.ROUTES)
                                 + " (expected grpo-rlvr-training)"]
    assert grade(text + "Route: lora-qlora-recipes", case) == ["Route: lora-qlora-recipes, expected grpo-rlvr-training"]


def test_behaviour_covers_the_rules_of_the_command_and_agent() -> None:
    ids = {c["id"] for c in suite("behaviour")["cases"]}
    assert {"refuses-to-sign-records", "refuses-to-reseal-stale-record", "stops-at-refused-gate",
            "variant-for-entropy-collapse", "variant-for-length-correlation", "launches-detached-and-polls",
            "handles-guard-denial", "review-time-warning", "finetune-not-installed", "reports-a-failed-run",
            "resumes-a-stopped-run-detached"} <= ids


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
    grpo = brief.grpo
    for key in ("num_generations", "learning_rate", "per_device_train_batch_size", "gradient_accumulation_steps",
                "seed"):
        assert getattr(grpo, key) == defaults[key], key
    # DAPO and GSPO train without the KL term; every other variant keeps the recipe's beta
    assert grpo.beta == (0 if grpo.variant in ("dapo", "gspo") else defaults["beta"])


def test_grader_command_line(tmp_path: Path) -> None:
    cases = suite("routing")["cases"]
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps({"id": c["id"], "answer": c["reference_answer"]}) + "\n" for c in cases))
    ok = subprocess.run([sys.executable, str(EVALS / "grade.py"), str(EVALS / "routing.json"), str(answers)],
                        capture_output=True, text=True, check=False)
    assert ok.returncode == 0, ok.stdout
    assert f"{len(cases)}/{len(cases)} passed" in ok.stdout
    answers.write_text(json.dumps({"id": cases[0]["id"], "answer": "use DPO\nRoute: preference-optimization"}) + "\n")
    bad = subprocess.run([sys.executable, str(EVALS / "grade.py"), str(EVALS / "routing.json"), str(answers)],
                         capture_output=True, text=True, check=False)
    assert bad.returncode == 1
    assert f"FAIL {cases[0]['id']}: Route: preference-optimization, expected {cases[0]['expected_route']}; missing one of" \
        in bad.stdout
