"""The reward was inspected by a person: a sealed record of 50-100 scored samples, every one with a
verdict, no disagreement, and still bound to the current reward specs, reward code, model and samples."""

from __future__ import annotations

from typing import Any

from llm_finetuning.gate.result import FAIL, PASS, CheckResult

ID = "reward_inspected"
PATH = "records.inspection"


def check(brief: Any, ctx: Any) -> list[CheckResult]:
    if ctx.inspection_problems:
        return [CheckResult(ID, FAIL, PATH, f"{p.kind}: {p.message}", p.fix) for p in ctx.inspection_problems]
    rec = ctx.inspection
    review = rec["review"]
    counts = review.get("counts", {})
    unsure = f", {counts.get('unsure')} unsure" if counts.get("unsure") else ""
    return [CheckResult(ID, PASS, PATH, f"{len(rec['samples'])} samples reviewed by {review['reviewer']} "
                        f"({review['sealed_at']}): no disagreement{unsure}; sealed and current")]
