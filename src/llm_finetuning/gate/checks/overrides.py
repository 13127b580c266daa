"""`grpo.overrides` keys are real GRPOConfig fields of the installed TRL and do not contradict the variant.

TRL's field list is read from its source by `gate.trl_fields` (loaded into the context): no TRL import.
"""

from __future__ import annotations

import difflib

from llm_finetuning.brief import Brief
from llm_finetuning.brief.variants import variant_decides
from llm_finetuning.gate.context import GateContext
from llm_finetuning.gate.result import FAIL, PASS, WARN, CheckResult

ID = "overrides"
# GRPOConfig fields the renderer derives from other parts of the brief: overriding them would contradict it.
DECIDED_ELSEWHERE = {
    "use_vllm": "hardware.generation", "vllm_mode": "hardware.generation",
    "vllm_gpu_memory_utilization": "hardware.vllm_gpu_memory_utilization", "vllm_server_host": "hardware.generation",
    "vllm_server_port": "hardware.generation", "output_dir": "output_dir", "reward_weights": "rewards[*].weight",
    "bf16": "model.dtype", "fp16": "model.dtype", "model_init_kwargs": "model.dtype", "use_cpu": "hardware.gpus",
    "lr_scheduler_type": "grpo.lr_scheduler", "warmup_steps": "grpo.warmup_ratio", "warmup_ratio": "grpo.warmup_ratio",
    "chat_template_kwargs": "data.chat_template_kwargs",
}
SCALE_REWARDS_ALIASES = {True: "group", False: "none"}


def _normal(key: str, value: object) -> object:
    if key == "scale_rewards" and isinstance(value, bool):
        return SCALE_REWARDS_ALIASES[value]
    return value


def check(brief: Brief, ctx: GateContext) -> list[CheckResult]:
    overrides = brief.grpo.overrides
    variant = brief.grpo.variant
    decided = variant_decides(variant)  # an override may repeat what the variant sets, not contradict it
    results = []
    # only a beta the file writes contradicts the variant: the schema's default is replaced by the variant's 0
    stated_beta = brief.grpo.beta if brief.states("grpo.beta") else None
    if "beta" in decided and stated_beta is not None and stated_beta > 0:
        results.append(CheckResult(ID, FAIL, "grpo.beta", f"found {stated_beta:g}; {variant} trains without the KL term",
                                   "set `grpo.beta: 0` (or remove it: the variant sets beta 0)"))
    for key in sorted(overrides):
        value = overrides[key]
        path = f"grpo.overrides.{key}"
        if key in DECIDED_ELSEWHERE:
            where = DECIDED_ELSEWHERE[key]
            results.append(CheckResult(ID, FAIL, path, f"{key} is rendered from {where}; an override would contradict it",
                                       f"remove {path} and set {where} instead"))
            continue
        if ctx.trl_fields is not None and key not in ctx.trl_fields:
            close = difflib.get_close_matches(key, sorted(ctx.trl_fields), n=1)
            fix = f"rename it to `{close[0]}`" if close else "remove it (see TRL's GRPOConfig documentation)"
            results.append(CheckResult(ID, FAIL, path, f"{key!r} is not a field of the installed TRL's GRPOConfig", fix))
            continue
        if key in decided and _normal(key, value) != decided[key]:
            results.append(CheckResult(
                ID, FAIL, path, f"{key}={value!r} contradicts variant {variant}, which sets {key}={decided[key]!r}",
                f"remove {path}; to change the loss, change grpo.variant after `finetune diagnose` shows the symptom"))
    if results:
        return results
    if ctx.trl_fields is None and overrides:
        return [CheckResult(ID, WARN, "grpo.overrides", f"not assessed: {ctx.trl_problem}",
                            "install the train extra (`pip install 'llm-finetuning[train]'`) and run the gate again")]
    shown = ", ".join(sorted(overrides)) or "none"
    return [CheckResult(ID, PASS, "grpo.overrides", f"overrides ({shown}) are GRPOConfig fields consistent with {variant}")]
