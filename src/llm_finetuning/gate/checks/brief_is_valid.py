"""The brief is valid: everything `finetune check` enforces (schema, cross-field rules, named files)."""

from __future__ import annotations

from llm_finetuning.brief import Brief
from llm_finetuning.errors import Problem
from llm_finetuning.gate.context import GateContext
from llm_finetuning.gate.result import FAIL, PASS, CheckResult

ID = "brief_is_valid"


def from_errors(errors: list[Problem]) -> list[CheckResult]:
    """One failing result per `finetune check` error."""
    return [CheckResult(ID, FAIL, e.path, e.message, e.fix) for e in errors]


def check(brief: Brief, ctx: GateContext) -> list[CheckResult]:
    return [CheckResult(ID, PASS, "", f"valid brief '{brief.name}' (what `finetune check` enforces)")]
