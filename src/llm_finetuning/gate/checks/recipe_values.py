"""Learning rate and beta start at the recipe's settled values (5e-7, 0.01).

A deviation is allowed only when `grpo.deviation` names an earlier run of this brief whose
`finetune diagnose` verdict was healthy; it is then reported as a warning, not a failure. A run whose only
findings are the task's (what the base model cannot do yet: failing tool calls, episodes cut, rare successes)
is healthy, and the warning names those findings as what the deviation run should reduce (docs/gate.md).
"""

from __future__ import annotations

from llm_finetuning.brief import RECIPE_BETA, RECIPE_LEARNING_RATE, Brief, GrpoSpec
from llm_finetuning.brief.schedule import Schedule
from llm_finetuning.gate.context import GateContext
from llm_finetuning.gate.result import FAIL, PASS, WARN, CheckResult

ID = "recipe_values"
KL_FREE_VARIANTS = ("dapo", "gspo")  # the variant sets beta 0; the brief's 0.01 is replaced at render


def yaml_number(x: float) -> str:
    """A float as YAML reads it back as a float (PyYAML needs a dot in `5.0e-7`; `5e-07` is a string)."""
    text = repr(float(x))
    if "e" not in text:
        return text
    mantissa, exponent = text.split("e")
    mantissa = mantissa if "." in mantissa else mantissa + ".0"
    sign = "-" if exponent.startswith("-") else ""
    return f"{mantissa}e{sign}{exponent.lstrip('+-').lstrip('0') or '0'}"


def deviations(grpo: GrpoSpec) -> list[tuple[str, float, float]]:
    out = []
    if grpo.learning_rate != RECIPE_LEARNING_RATE:
        out.append(("learning_rate", grpo.learning_rate, RECIPE_LEARNING_RATE))
    beta_ok = grpo.beta == RECIPE_BETA or (grpo.variant in KL_FREE_VARIANTS and grpo.beta == 0)
    if not beta_ok:
        out.append(("beta", grpo.beta, RECIPE_BETA))
    return out


def _deviation_problem(brief: Brief, ctx: GateContext) -> str:
    d = ctx.deviation
    if d is None:
        return "grpo.deviation is not set"
    if d.problem:
        return f"grpo.deviation {d.run_dir} does not justify it: {d.problem}"
    if d.healthy is None:
        return f"grpo.deviation names {d.run_dir}, which has no diagnosis (no diagnosis.json)"
    if not d.healthy:
        return f"grpo.deviation names {d.run_dir}, whose diagnosis was not healthy"
    if d.brief_name != brief.name:
        return f"grpo.deviation names {d.run_dir}, a run of brief {d.brief_name!r}, not {brief.name!r}"
    return ""


def schedule_report(s: Schedule) -> str:
    """What learning rate the run will see: `schedule constant, no warm-up: mean learning rate 5.0e-7 over 500 steps`."""
    mean = s.mean_learning_rate
    share = f" ({mean / s.peak:.0%} of the peak)" if s.peak and abs(mean - s.peak) > 1e-3 * s.peak else ""
    return f"schedule {s.describe()}: mean learning rate {mean:.3g}{share} over {s.max_steps} steps"


def check(brief: Brief, ctx: GateContext) -> list[CheckResult]:
    grpo = brief.grpo
    schedule = Schedule.of_spec(grpo)
    found = deviations(grpo)
    if not found:
        return [CheckResult(ID, PASS, "grpo.learning_rate",
                            f"learning_rate {yaml_number(grpo.learning_rate)} and beta {yaml_number(grpo.beta)} "
                            f"are the recipe's start; {schedule_report(schedule)}")]
    problem = _deviation_problem(brief, ctx)
    justified_by = ctx.deviation.run_dir if ctx.deviation is not None and not problem else None
    task = ctx.deviation.task_findings if ctx.deviation is not None else ()
    because = (f" (its only findings were the task's, {', '.join(task)}: what the base model cannot do yet, which "
               "this run should reduce)") if task else ""
    results = []
    for key, value, recipe in found:
        if justified_by is None:
            results.append(CheckResult(
                ID, FAIL, f"grpo.{key}", f"found {yaml_number(value)}; the recipe starts at {yaml_number(recipe)} and {problem}",
                f"set `grpo.{key}: {yaml_number(recipe)}` for the first run; deviate only after `finetune diagnose RUN_DIR` "
                "called a run of this brief healthy, naming it in `grpo.deviation: RUN_DIR`"))
        else:
            report = f"; {schedule_report(schedule)}" if key == "learning_rate" else ""
            results.append(CheckResult(
                ID, WARN, f"grpo.{key}", f"found {yaml_number(value)}, not the recipe's {yaml_number(recipe)}; justified by the healthy "
                f"run {justified_by}{because}{report}", "watch the first steps with `finetune diagnose RUN_DIR`"))
    return results
