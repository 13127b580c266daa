"""Experiment trackers: every `tracking.report_to` name is one TRL 1.16 accepts, and its package is here.

An unknown name would make the trainer die at start (`... is not supported`); a tracker whose package is
missing dies the same way, but the gate may run on another machine than the trainer, so that is a
warning with the install command. No trackers: passes (metrics.jsonl is written regardless).
"""

from __future__ import annotations

import difflib

from llm_finetuning.brief import Brief
from llm_finetuning.brief.tracking import TRACKERS
from llm_finetuning.gate.context import GateContext
from llm_finetuning.gate.result import FAIL, PASS, WARN, CheckResult

ID = "tracking"
PATH = "tracking.report_to"


def check(brief: Brief, ctx: GateContext) -> list[CheckResult]:
    names = list(brief.tracking.report_to)
    if not names:
        return [CheckResult(ID, PASS, PATH, "no experiment tracker: metrics go to metrics.jsonl only")]
    results = []
    for i, name in enumerate(names):
        if name in TRACKERS:
            continue
        close = difflib.get_close_matches(str(name), sorted(TRACKERS), n=1)
        fix = (f"use `{close[0]}`; " if close else "") + f"report_to takes any of: {', '.join(sorted(TRACKERS))}"
        if name in ("none", "all"):
            fix = ("leave tracking.report_to empty for none" if name == "none"
                   else "name the trackers (`all` reports to whichever happen to be installed)")
        results.append(CheckResult(ID, FAIL, f"{PATH}[{i}]", f"{name!r} is not a tracker TRL 1.16 reports to", fix))
    for name in names:
        if name in TRACKERS and not ctx.tracker_installed.get(name, True):
            module, install = TRACKERS[name]
            results.append(CheckResult(ID, WARN, PATH, f"{name}: its package ({module}) is not installed here, so "
                                       "the trainer would refuse to start on this machine", install))
    if not any(r.verdict == FAIL for r in results):
        results.insert(0, CheckResult(ID, PASS, PATH, f"reports to {', '.join(names)} besides metrics.jsonl"))
    return results
