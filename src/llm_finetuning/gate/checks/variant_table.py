"""The variant follows the table: grpo by default; dapo for entropy_collapse, dr_grpo for
length_reward_correlation; a mixture-of-experts model must use gspo (and only MoE models use it)."""

from __future__ import annotations

import re

from llm_finetuning.brief import Brief
from llm_finetuning.brief.variants import VARIANT_SYMPTOM as SYMPTOM_OF
from llm_finetuning.gate.context import GateContext
from llm_finetuning.gate.result import FAIL, PASS, WARN, CheckResult
from llm_finetuning.models import config_experts, is_moe

ID = "variant_table"
VARIANT_OF = {s: v for v, s in SYMPTOM_OF.items()}
MOE_NAME = re.compile(r"(moe|mixtral|[-_]a\d+(\.\d+)?b\b|deepseek-v[23]|gpt-oss|olmoe|dbrx|jamba)", re.I)


def model_is_moe(brief: Brief, ctx: GateContext) -> tuple[bool | None, str]:
    """(True/False/None for unknown, where the answer came from)."""
    arch = brief.model.architecture
    if arch != "auto":
        return arch == "moe", f"model.architecture: {arch}"
    config = ctx.model_config
    if config is not None:
        if is_moe(config):
            experts = config_experts(config)
            return True, f"config.json names {experts} experts" if experts > 1 else "config.json names a MoE model"
        return False, "config.json names no experts"
    return None, "model.architecture is auto and the model config is not local"


def check(brief: Brief, ctx: GateContext) -> list[CheckResult]:
    variant, symptom = brief.grpo.variant, brief.grpo.symptom
    moe, source = model_is_moe(brief, ctx)
    results = []
    if variant != "grpo" and symptom != SYMPTOM_OF[variant]:
        want = VARIANT_OF.get(str(symptom))
        results.append(CheckResult(
            ID, FAIL, "grpo.variant", f"{variant} answers symptom {SYMPTOM_OF[variant]}, but grpo.symptom is {symptom}",
            f"set `grpo.variant: {want}`" if want else f"set `grpo.symptom: {SYMPTOM_OF[variant]}` only if "
            "`finetune diagnose` showed it"))
    if moe and variant != "gspo":
        results.append(CheckResult(
            ID, FAIL, "grpo.variant", f"the model is a mixture of experts ({source}); token-level ratios are "
            "unstable when routing shifts between old and new policy",
            "set `grpo.variant: gspo` and `grpo.symptom: moe` (sequence-level importance ratios)"))
    if moe is False and variant == "gspo":
        results.append(CheckResult(
            ID, FAIL, "grpo.variant", f"gspo is the variant for mixture-of-experts models and this one is dense ({source})",
            "set `grpo.variant: grpo` and remove grpo.symptom, unless the model really is MoE "
            "(then set `model.architecture: moe`)"))
    if results:
        return results
    if moe is None and variant != "gspo" and MOE_NAME.search(brief.model.id):
        return [CheckResult(ID, WARN, "model.architecture", f"{source}; the name {brief.model.id!r} "
                            "suggests a mixture of experts",
                            "set `model.architecture: moe` and `grpo.variant: gspo` if it is MoE, or "
                            "`model.architecture: dense`")]
    why = f"symptom {symptom}" if variant != "grpo" else "the default"
    kind = {True: "MoE", False: "dense", None: "assumed dense"}[moe]
    return [CheckResult(ID, PASS, "grpo.variant", f"{variant} ({why}); {kind} model ({source})")]
