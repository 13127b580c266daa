"""The reward was inspected by a person: a sealed record of 50-100 scored samples, every one with a
verdict, no disagreement, and still bound to the current reward specs, reward code, model and samples.

The pass names who signed the seal (the trusted key's comment and id). Warnings (the gate still passes): a
record sealed before signing, while no trusted-keys file lists a key; many unsure verdicts; a median under `MIN_MEDIAN_SECONDS` a sample,
too quick for a careful read; and, softer, a record with no timings at all (sealed by a `finetune review`
older than the timings, so how long each sample was read is unknown).
"""

from __future__ import annotations

from llm_finetuning.brief import Brief
from llm_finetuning.errors import Severity
from llm_finetuning.fileio import shown
from llm_finetuning.gate.context import GateContext
from llm_finetuning.gate.result import FAIL, PASS, WARN, CheckResult
from llm_finetuning.records.inspection import ReviewTiming

ID = "reward_inspected"
PATH = "records.inspection"
UNSURE_WARN = 0.2
MIN_MEDIAN_SECONDS = 2.0  # below this median a sample, the review was too quick to be a careful read


def _timing_results(brief: Brief, timing: ReviewTiming) -> list[CheckResult]:
    redo = (f"run `finetune inspect {shown(brief.path)}`, then the reviewer runs "
            f"`finetune review {shown(brief.resolve(brief.records.inspection))}` and reads every sample")
    if timing.median_seconds is None:
        return [CheckResult(ID, WARN, PATH, "note: the record has no review timings (sealed by an older "
                            "`finetune review`), so how long each sample was read is unknown",
                            f"nothing is required; for a timed review, {redo}")]
    if timing.median_seconds >= MIN_MEDIAN_SECONDS:
        return []
    untimed = f" ({timing.samples - timing.timed} untimed)" if timing.timed < timing.samples else ""
    return [CheckResult(ID, WARN, PATH, f"median {timing.median_seconds:.1f} s a sample over {timing.timed} "
                        f"samples{untimed}; a careful read takes longer: ask the reviewer to look again", redo)]


def _settle_episode(brief: Brief, problem: str) -> str:
    """Before the first inspection of a tool-use brief: the episode is bound to the records, so settle it now."""
    if brief.episode is None or problem != "missing":
        return ""
    return (f"; first settle the episode (episode.max_turns {brief.episode.max_turns}, the tools, the chat template): "
            "the baseline and the inspection are bound to it, and a change after them needs both again")


def check(brief: Brief, ctx: GateContext) -> list[CheckResult]:
    errors = [p for p in ctx.inspection_problems if p.severity == Severity.ERROR]
    if errors:
        return [CheckResult(ID, FAIL, PATH, f"{p.id}: {p.message}", p.fix + _settle_episode(brief, p.id))
                for p in errors]
    review = ctx.inspection
    assert review is not None  # load_context loads the sealed review whenever it has no error
    n, unsure, timing = review.samples, review.counts["unsure"], review.timing
    median = f", median {timing.median_seconds:.1f} s a sample" if timing.median_seconds is not None else ""
    signed = f"; signed by {ctx.inspection_signer}" if ctx.inspection_signer else ""
    results = [CheckResult(ID, PASS, PATH, f"{n} samples reviewed by {review.reviewer} ({review.sealed_at}"
                           f"{median}): no disagreement{f', {unsure} unsure' if unsure else ''}; sealed and current"
                           f"{signed}")]
    results += [CheckResult(ID, WARN, PATH, f"{p.id}: {p.message}", p.fix) for p in ctx.inspection_problems]
    if unsure >= UNSURE_WARN * n:
        results.append(CheckResult(ID, WARN, PATH, f"the reviewer was unsure on {unsure} of {n} samples: the "
                                   "reward's behaviour there is unconfirmed",
                                   "look at the unsure samples' notes; sharpen the task or the reward, then inspect again"))
    return results + _timing_results(brief, timing)
