"""The recipe the grpo-rlvr-training skill shows is the recipe the renderer uses: the brief schema's defaults."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
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
        "seed", "logging_steps", "lr_scheduler", "warmup_ratio"}


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
            default = defaults[key]
            same = shown == default if isinstance(default, str) else float(shown) == float(default)
            assert same, f"{key}: skill shows {shown}, schema default {default}"
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


def recipe_code_kwargs() -> dict[str, object]:
    """The literal keyword arguments of the GRPOConfig(...) call in references/grpo-recipe.md."""
    import ast

    text = (REPO / "references/grpo-recipe.md").read_text(encoding="utf-8")
    tree = ast.parse(re.search(r"```python\n(.*?)```", text, re.S).group(1))
    call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "GRPOConfig")
    return {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords if kw.arg}


def test_recipe_code_keeps_the_schema_defaults() -> None:
    kwargs = recipe_code_kwargs()
    defaults = recipe_defaults()
    shared = set(kwargs) & set(defaults)
    assert shared >= CORE - {"variant", "lr_scheduler", "warmup_ratio"}  # these two have TRL names there
    for key in shared:
        assert kwargs[key] == defaults[key], f"references/grpo-recipe.md {key}={kwargs[key]}, schema {defaults[key]}"
    from llm_finetuning.brief.schedule import Schedule

    schedule = Schedule.of({**defaults, "max_steps": defaults["max_steps"]})
    assert (kwargs["lr_scheduler_type"], kwargs["warmup_steps"]) == (schedule.trl_type, schedule.warmup_steps)
    assert kwargs["loss_type"] == "grpo" and kwargs["bf16"] is True


@pytest.mark.slow
def test_recipe_code_uses_real_grpoconfig_fields() -> None:
    import dataclasses

    trl = pytest.importorskip("trl")
    fields = {f.name for f in dataclasses.fields(trl.GRPOConfig)}
    assert set(recipe_code_kwargs()) <= fields, sorted(set(recipe_code_kwargs()) - fields)


def test_variant_table_equals_what_the_renderer_sets() -> None:
    """references/variants.md shows, per variant, exactly the GRPOConfig values render applies."""
    import ast

    from llm_finetuning.brief.variants import VARIANT_SETTINGS

    text = (REPO / "references/variants.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\|[^|\n]*\|[^|\n]*\| `([a-z_]+)`[^|\n]*\| ([^\n]+) \|$", text, re.M)
    shown = {variant: {k: ast.literal_eval(v) for k, v in re.findall(r"`([a-z_]+)=([^`]+)`", cells)}
             for variant, cells in rows}
    assert set(shown) == set(VARIANT_SETTINGS)
    for variant, settings in VARIANT_SETTINGS.items():
        assert shown[variant] == {k: v for k, v, _ in settings}, variant


AGENT = REPO / "agents/llm-finetuning-training-engineer.md"


def agent_variant_advice() -> dict[str, tuple[str, float]]:
    """variant -> (symptom, beta) as the agent's step 7 tells it to write them into the brief."""
    text = AGENT.read_text(encoding="utf-8")
    pairs = dict((v, s) for s, v in re.findall(r"`([a-z_]+)` -> `([a-z_]+)`", text))
    kl_free = re.search(r"DAPO and GSPO train at beta 0: set `grpo\.beta: 0`", text)
    assert kl_free, "the agent no longer says that DAPO and GSPO train at beta 0"
    keeps = re.search(r"Dr\.GRPO keeps ([0-9.]+)", text)
    assert keeps, "the agent no longer says which beta Dr.GRPO keeps"
    return {v: (s, 0.0 if v in ("dapo", "gspo") else float(keeps.group(1))) for v, s in pairs.items()}


@pytest.mark.parametrize("variant", ["dapo", "dr_grpo", "gspo"])
def test_the_agents_variant_advice_passes_the_gate(variant: str, tmp_path: Path) -> None:
    """The brief the agent writes for a diagnosed symptom passes the gate's variant, recipe and overrides
    checks; the same brief keeping beta 0.01 for a KL-free variant fails `overrides` with the agent's fix."""
    from llm_finetuning.gate import Verdict, run_gate

    advice = agent_variant_advice()
    assert set(advice) == {"dapo", "dr_grpo", "gspo"}
    symptom, beta = advice[variant]
    shutil.copytree(REPO / "examples/code-tests", tmp_path / "b")
    path = tmp_path / "b/brief.yaml"
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    raw["grpo"].update(variant=variant, symptom=symptom, beta=beta)
    raw["model"]["architecture"] = "moe" if variant == "gspo" else "dense"
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    ruled = ("variant_table", "recipe_values", "overrides")
    failed = [c for c in run_gate(path).checks if c.id in ruled and c.verdict == Verdict.FAIL]
    assert not failed, failed
    if beta == RECIPE_BETA:
        return
    raw["grpo"]["beta"] = RECIPE_BETA
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    failed = [c for c in run_gate(path).checks if c.id in ruled and c.verdict == Verdict.FAIL]
    assert [(c.id, c.path) for c in failed] == [("overrides", "grpo.beta")]
    assert "`grpo.beta: 0`" in failed[0].fix
