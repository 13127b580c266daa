"""The schedule default is the one the GPU benchmark measured best, and the reference shows that measurement
as bench/results/schedule-h200.json holds it."""

from __future__ import annotations

import json
import sys

from skill_bundle import REPO

from llm_finetuning.brief import recipe_defaults

sys.path.insert(0, str(REPO / "bench"))
from _schedule_table import PAGE, RESULTS, page_with_table  # noqa: E402


def test_the_reference_shows_the_measured_table() -> None:
    page = PAGE.read_text(encoding="utf-8")
    assert page_with_table(page, json.loads(RESULTS.read_text())) == page, (
        "references/grpo-recipe.md differs from bench/results/schedule-h200.json: run "
        "`python bench/schedule_gpu.py --phase report --partials ...` again")


def test_the_default_schedule_learned_most_at_the_deviation_on_every_task() -> None:
    result = json.loads(RESULTS.read_text())
    default = recipe_defaults()["lr_scheduler"]
    for task in result["base"]:
        rows = [r for r in result["runs"] if r["task"] == task and r["learning_rate"] > recipe_defaults()["learning_rate"]]
        best = max(rows, key=lambda r: r["T=0.7"]["pass_at_1"])
        assert best["schedule"] == default, f"{task}: {best['schedule']} learned most, the default is {default}"
        linear = next(r for r in rows if r["schedule"] == "linear")
        chosen = next(r for r in rows if r["schedule"] == default)
        assert chosen["T=0.7"]["ci95"][0] > linear["T=0.7"]["ci95"][1], f"{task}: not beyond linear's interval"
