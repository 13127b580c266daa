"""The task has a verifiable signal: at least one reward is computed by code from the completion.

A `judge` reward alone is a subjective rubric: it routes to eval-harness-first and is usable only with a
judge calibration record that agrees with human labels. Every judge reward needs that record.
"""

from __future__ import annotations

from llm_finetuning.brief import Brief
from llm_finetuning.fileio import shown
from llm_finetuning.gate.context import GateContext
from llm_finetuning.gate.result import FAIL, PASS, WARN, CheckResult
from llm_finetuning.reward_registry import VERIFIERS, is_custom

ID = "verifiable_reward"


def check(brief: Brief, ctx: GateContext) -> list[CheckResult]:
    rewards = brief.rewards
    verifiers = [f"rewards[{i}] ({r.fn})" for i, r in enumerate(rewards) if r.fn in VERIFIERS or is_custom(r.fn)]
    judges = [i for i, r in enumerate(rewards) if r.is_judge]
    calibration = brief.records.judge_calibration
    results: list[CheckResult] = []
    if judges and ctx.judge_problems:
        results.append(CheckResult(
            ID, FAIL, f"rewards[{judges[0]}]",
            "a judge reward needs a judge calibration record that agrees with human labels: "
            + "; ".join(ctx.judge_problems),
            f"follow the eval-harness-first skill: label items by hand, then run `finetune calibrate-judge "
            f"{shown(brief.path)} --labels LABELS.jsonl` (writes {calibration})"))
    if not verifiers and not judges:
        fns = ", ".join(r.fn for r in rewards)
        results.append(CheckResult(
            ID, FAIL, "rewards", f"no reward is a verifier (found {fns}): GRPO needs a pass/fail signal computed "
            "from the completion",
            "add exact_match, json_schema or unit_tests, or a custom `module:function` that checks the answer; "
            "without a verifiable signal use preference-optimization (DPO) or lora-qlora-recipes (SFT)"))
    if results:
        return results
    if not verifiers:
        return [CheckResult(ID, WARN, f"rewards[{judges[0]}]",
                            "only a judge reward: a calibrated judge stands in for a verifier (eval-harness-first route)",
                            "add a verifier reward if the task has a checkable answer")]
    judged = " and a calibrated judge" if judges else ""
    return [CheckResult(ID, PASS, "rewards", f"verifiable signal from {', '.join(verifiers)}{judged}")]
