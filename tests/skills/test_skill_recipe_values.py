"""The recipe the grpo-rlvr-training skill shows is the recipe the renderer uses: the brief schema's defaults."""

from __future__ import annotations

import re

import yaml
from skill_bundle import REPO

from llm_finetuning.brief import (
    MIN_NUM_GENERATIONS,
    RECIPE_BETA,
    RECIPE_LEARNING_RATE,
    recipe_defaults,
    schema,
)

SKILL = REPO / "skills/grpo-rlvr-training/SKILL.md"
CORE = {"num_generations", "learning_rate", "beta", "per_device_train_batch_size", "gradient_accumulation_steps",
        "seed", "logging_steps"}


def recipe_table() -> dict[str, str]:
    """`setting -> value` from the rows of the skill's recipe table (| `setting` | value | why |)."""
    text = SKILL.read_text(encoding="utf-8")
    section = text.split("## The reference recipe", 1)[1].split("\n## ", 1)[0]
    return dict(re.findall(r"^\| `([a-z_.]+)` \| ([^|]+?) \|", section, re.M))


def test_recipe_table_equals_the_schema_defaults() -> None:
    table = recipe_table()
    defaults = recipe_defaults()
    assert set(table) >= CORE, f"the recipe table lacks {sorted(CORE - set(table))}"
    compared = 0
    for key, shown in table.items():
        if key in defaults:
            assert float(shown) == float(defaults[key]), f"{key}: skill shows {shown}, schema default {defaults[key]}"
            compared += 1
    assert compared >= len(CORE)
    dtype = schema()["properties"]["model"]["properties"]["dtype"]["default"]
    assert table["model.dtype"] == dtype


def test_recipe_constants_agree() -> None:
    defaults = recipe_defaults()
    assert defaults["learning_rate"] == RECIPE_LEARNING_RATE
    assert defaults["beta"] == RECIPE_BETA
    assert defaults["num_generations"] == MIN_NUM_GENERATIONS


def test_brief_writing_example_keeps_the_recipe() -> None:
    text = (REPO / "references/brief-writing.md").read_text(encoding="utf-8")
    example = yaml.safe_load(re.search(r"```yaml\n(.*?)```", text, re.S).group(1))
    defaults = recipe_defaults()
    for key, value in example["grpo"].items():
        if key in CORE | {"max_completion_length", "max_steps", "variant"}:
            assert value == defaults[key], f"references/brief-writing.md grpo.{key}: {value} != {defaults[key]}"
