"""Figures in skills and references that the code also knows are the code's figures.

Generated blocks (memory tables, bytes per parameter) are checked by tests/memory/test_memory_docgen.py;
this module holds the prose to the code: which variants drop the KL term, how many bytes a parameter
costs, and what the memory tables take as their recipe.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from skill_bundle import REPO

from llm_finetuning.brief import recipe_defaults
from llm_finetuning.brief.variants import VARIANT_SETTINGS, variant_decides
from llm_finetuning.gate.checks.recipe_values import KL_FREE_VARIANTS
from llm_finetuning.memory.docgen import BASE, state_bytes_total
from llm_finetuning.memory.estimator import NF4_BYTES, ZERO_OPTIMIZER_BYTES, state_bytes_per_parameter

# Prose pages: every skill and reference written by hand (brief-fields.md and reward-functions.md are
# generated from the schema and the source).
GENERATED_PAGES = {"brief-fields.md", "reward-functions.md"}
PAGES = sorted([*REPO.glob("skills/*/SKILL.md"), *REPO.glob("references/*.md"), *REPO.glob("commands/*.md")])
PROSE = [p for p in PAGES if p.name not in GENERATED_PAGES]

VARIANT_NAMES = {"dapo": r"\bDAPO\b", "dr_grpo": r"\bDr\.? ?GRPO\b|\bdr_grpo\b", "gspo": r"\bGSPO\b"}
# A sentence that says a variant trains without the KL term.
KL_FREE_CLAIM = re.compile(r"beta[`=: ]*0(?![.\d]*[1-9])|without the KL|drops? the KL|no KL", re.I)


def _sentences(path: Path) -> list[str]:
    """Each table row, and each list item or paragraph of the prose between them (a claim and the
    variants it names often sit in neighbouring sentences: "beta = 0 drops ... DAPO and GSPO run this way")."""
    out: list[str] = []
    for block in re.split(r"\n\s*\n", path.read_text(encoding="utf-8")):
        rows = [line for line in block.splitlines() if line.lstrip().startswith("|")]
        out += rows
        prose = "\n".join(line for line in block.splitlines() if not line.lstrip().startswith("|"))
        out += [" ".join(item.split()) for item in re.split(r"\n(?=\s*(?:[-*]|\d+\.) )", prose)]
    return out


def renderer_kl_free() -> set[str]:
    return {v for v, settings in VARIANT_SETTINGS.items() if any(k == "beta" and val == 0 for k, val, _ in settings)}


def test_variants_without_kl_agree_across_renderer_and_gate() -> None:
    gate_kl_free = {v for v in VARIANT_SETTINGS if variant_decides(v).get("beta") == 0}
    assert renderer_kl_free() == set(KL_FREE_VARIANTS) == gate_kl_free


@pytest.mark.parametrize("page", PROSE, ids=lambda p: str(p.relative_to(REPO)))
def test_prose_names_only_the_variants_that_drop_the_kl_term(page: Path) -> None:
    kl_free = renderer_kl_free()
    for sentence in _sentences(page):
        if not KL_FREE_CLAIM.search(sentence):
            continue
        # "Dr. GRPO keeps the brief's beta" names a variant in order to exclude it
        kept = re.sub(r"(Dr\.? ?GRPO|dr_grpo)`? keeps[^.;]*beta", "", sentence)
        named = {v for v, pattern in VARIANT_NAMES.items() if re.search(pattern, kept)}
        wrong = named - kl_free
        assert not wrong, (f"{page.relative_to(REPO)} says {sorted(wrong)} train(s) without the KL term, but render "
                           f"sets beta 0 only for {sorted(kl_free)}: {sentence!r}")


def test_bytes_per_parameter_in_the_lora_skill() -> None:
    text = (REPO / "skills/lora-qlora-recipes/SKILL.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| (full|LoRA|QLoRA) \|[^|]*\|([^|]*)\|", text, re.M))
    full = rows["full"]
    assert re.search(rf"\b{state_bytes_total('full', 'bfloat16'):g} bytes per parameter with bf16 weights", full), full
    assert re.search(rf"\b{state_bytes_total('full', 'float32'):g} bytes per parameter when the model is loaded in float32",
                     full), full
    assert f"({state_bytes_total('lora', 'bfloat16'):g} bytes per parameter)" in rows["LoRA"]
    qlora = float(re.search(r"([\d.]+) bytes per parameter", rows["QLoRA"]).group(1))
    assert qlora == pytest.approx(NF4_BYTES, abs=0.01)


def test_every_bytes_per_parameter_figure_is_one_the_estimator_uses() -> None:
    known = {ZERO_OPTIMIZER_BYTES, round(NF4_BYTES, 2)}
    for adapter, dtype, dist in [("full", "bfloat16", "single"), ("full", "float32", "single"),
                                 ("full", "bfloat16", "zero3"), ("lora", "bfloat16", "single"),
                                 ("qlora", "bfloat16", "single")]:
        per = state_bytes_per_parameter(adapter, dtype, dist)
        known |= {per.weights, per.gradients, per.optimizer, round(state_bytes_total(adapter, dtype, dist), 2)}
    for page in PROSE:
        for match in re.finditer(r"([\d.]+) bytes (?:a|per) parameter", page.read_text(encoding="utf-8")):
            assert float(match.group(1)) in known, f"{page.relative_to(REPO)}: {match.group(0)!r} is no figure of the estimator"
    zero = (REPO / "references/grpo-memory.md").read_text(encoding="utf-8")
    assert f"state ({ZERO_OPTIMIZER_BYTES} bytes a parameter with DeepSpeed's fp32 master copy)" in zero
    lora_page = (REPO / "references/lora-qlora.md").read_text(encoding="utf-8")
    assert (f"{state_bytes_total('full', 'bfloat16'):g} bytes a parameter in bf16, "
            f"{state_bytes_total('full', 'float32'):g} when the model is loaded in float32") in " ".join(lora_page.split())


def test_memory_tables_take_the_brief_defaults() -> None:
    defaults = recipe_defaults()
    assert BASE.max_completion_length == defaults["max_completion_length"]
    assert BASE.num_generations == defaults["num_generations"]
    assert BASE.per_device_batch == defaults["per_device_train_batch_size"]
    assert BASE.gradient_accumulation_steps == defaults["gradient_accumulation_steps"]
    assert BASE.beta == defaults["beta"]
    page = (REPO / "references/grpo-memory.md").read_text(encoding="utf-8")
    prose = page.split("<!-- BEGIN GENERATED")[0]
    assert not re.search(r"default recipe with an? \d+-token", prose), "the tables' recipe is the brief's defaults"
    assert f"completion {defaults['max_completion_length']} tokens" in page


def _variant_rows(page: Path) -> list[tuple[str, str]]:
    """(variant, row) for every table row whose first cell is a variant name."""
    out = []
    for line in page.read_text(encoding="utf-8").splitlines():
        cells = [c.strip().strip("`") for c in line.split("|")[1:-1]]
        if cells and cells[0] in VARIANT_SETTINGS:
            out.append((cells[0], line))
    return out


@pytest.mark.parametrize("page", [REPO / "docs/render-launch.md"], ids=lambda p: p.name)
def test_variant_tables_in_the_docs_show_the_renderers_values(page: Path) -> None:
    import yaml

    rows = _variant_rows(page)
    assert {v for v, _ in rows} == set(VARIANT_SETTINGS)
    for variant, row in rows:
        rendered = {k: v for k, v, _ in VARIANT_SETTINGS[variant]}
        shown = {k: yaml.safe_load(v) for k, v in re.findall(r"`([a-z_]+): ([^`]+)`", row)}
        for key, value in shown.items():
            if key in rendered:
                if isinstance(rendered[key], float) and isinstance(value, str):
                    value = float(value)  # YAML 1.1 reads 3e-4 as a string
                assert value == rendered[key], (page.name, variant, key, value, rendered[key])
        assert set(shown) & set(rendered), row


def test_dapo_clip_ceiling_in_prose() -> None:
    dapo = {k: v for k, v, _ in VARIANT_SETTINGS["dapo"]}
    text = " ".join((REPO / "references/variants.md").read_text(encoding="utf-8").split())
    assert f"a higher ceiling, {dapo['epsilon_high']:g} against 0.2" in text
