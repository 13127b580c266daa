"""The gate reports the schedule the run will see, and keeps the schedule in the brief's own fields."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from llm_finetuning.cli import cli


def gate_json(brief: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    monkeypatch.chdir(brief.parent)
    result = CliRunner().invoke(cli, ["gate", brief.name, "--json"])
    return json.loads(result.stdout)


def edit_grpo(brief: Path, text: str) -> None:
    brief.write_text(brief.read_text().replace("grpo:\n", "grpo:\n" + text, 1))


def test_the_pass_line_states_the_schedule_and_mean_learning_rate(make_brief, monkeypatch) -> None:
    brief = make_brief("passing")
    edit_grpo(brief, "  lr_scheduler: linear\n  max_steps: 40\n")
    [line] = [c for c in gate_json(brief, monkeypatch)["checks"] if c["id"] == "recipe_values"]
    assert line["verdict"] == "pass"
    assert line["reason"].endswith("schedule linear decay to 0, no warm-up: mean learning rate 2.56e-07 (51% of the "
                                   "peak) over 40 steps")


@pytest.mark.parametrize("key, where", [("lr_scheduler_type", "grpo.lr_scheduler"),
                                        ("warmup_steps", "grpo.warmup_ratio")])
def test_an_override_of_the_schedule_is_refused(key: str, where: str, make_brief, monkeypatch) -> None:
    brief = make_brief("passing")
    edit_grpo(brief, f"  overrides: {{{key}: 5}}\n")
    report = gate_json(brief, monkeypatch)
    [fail] = [c for c in report["checks"] if c["verdict"] == "fail"]
    assert fail["path"] == f"grpo.overrides.{key}" and fail["fix"] == f"remove grpo.overrides.{key} and set {where} instead"
