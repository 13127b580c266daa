"""The reward was inspected by a person: a sealed record of 50-100 scored samples, every one with a
verdict, no disagreement, and still bound to the current reward specs, reward code, model and samples."""

from __future__ import annotations

from typing import Any

from llm_finetuning.gate.result import FAIL, PASS, WARN, CheckResult

ID = "reward_inspected"
PATH = "records.inspection"
UNSURE_WARN = 0.2


def check(brief: Any, ctx: Any) -> list[CheckResult]:
    if ctx.inspection_problems:
        return [CheckResult(ID, FAIL, PATH, f"{p.kind}: {p.message}", p.fix) for p in ctx.inspection_problems]
    rec = ctx.inspection
    review = rec["review"]
    counts = review.get("counts", {})
    n = len(rec["samples"])
    unsure = int(counts.get("unsure") or 0)
    results = [CheckResult(ID, PASS, PATH, f"{n} samples reviewed by {review['reviewer']} ({review['sealed_at']}): "
                           f"no disagreement{f', {unsure} unsure' if unsure else ''}; sealed and current")]
    if unsure >= UNSURE_WARN * n:
        results.append(CheckResult(ID, WARN, PATH, f"the reviewer was unsure on {unsure} of {n} samples: the "
                                   "reward's behaviour there is unconfirmed",
                                   "look at the unsure samples' notes; sharpen the task or the reward, then inspect again"))
    return results
