"""Grade answers against the eval suites in this folder (the format is in evals/README.md).

Usage: python evals/grade.py evals/routing.json ANSWERS.jsonl
ANSWERS.jsonl holds one {"id": <case id>, "answer": <the agent's final answer>} per line. Prints one
line per case (PASS, or FAIL with every problem) and exits 0 when every case passes, 1 otherwise, 2 when
an input cannot be read. `evals/run.py` uses the same functions to grade a model's answers. Pure
standard library.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROUTES = ("grpo-rlvr-training", "preference-optimization", "lora-qlora-recipes", "eval-harness-first", "sft-then-grpo")
SUITES = ("routing", "brief-writing", "behaviour")
EVALS = Path(__file__).resolve().parent
# a line that starts with "Route:", allowing Markdown emphasis, a list marker or a quote before it
ROUTE_LINE = re.compile(r"^[\s>*_#`-]*route[*_`]*\s*:(.*)$", re.I | re.M)


def parse_route(answer: str) -> str | None:
    """The route named on the answer's last `Route:` line, or None when there is no such line or it
    names no route, or more than one."""
    lines = ROUTE_LINE.findall(answer)
    if not lines:
        return None
    named = [route for route in ROUTES if re.search(rf"(?<![\w-]){re.escape(route)}(?![\w-])", lines[-1], re.I)]
    return named[0] if len(named) == 1 else None


def grade(answer: str, case: dict[str, Any]) -> list[str]:
    """Problems with `answer` for `case` (empty when it passes): a missing or wrong route, unmet
    requirements, forbidden strings and patterns."""
    text = answer.lower()
    problems = []
    expected = case.get("expected_route")
    if expected is not None:
        route = parse_route(answer)
        if route is None:
            problems.append(f"no `Route:` line naming exactly one of {', '.join(ROUTES)} (expected {expected})")
        elif route != expected:
            problems.append(f"Route: {route}, expected {expected}")
    for alternatives in case["must_contain"]:
        if not any(alt.lower() in text for alt in alternatives):
            problems.append("missing one of " + " | ".join(repr(a) for a in alternatives))
    for forbidden in case["must_not_contain"]:
        if forbidden.lower() in text:
            problems.append(f"contains forbidden {forbidden!r}")
    for pattern in case.get("must_match", []):
        if not re.search(pattern, answer, re.I | re.M):
            problems.append(f"does not match /{pattern}/")
    for pattern in case.get("must_not_match", []):
        found = re.search(pattern, answer, re.I | re.M)
        if found:
            problems.append(f"matches forbidden /{pattern}/: {found.group(0).strip()!r}")
    return problems


@dataclass
class CaseResult:
    """One graded case, as it appears in a report."""

    id: str
    passed: bool
    problems: list[str] = field(default_factory=list)
    route: str | None = None
    answer: str | None = None
    error: str | None = None
    seconds: float | None = None


def grade_case(case: dict[str, Any], answer: str | None, error: str | None = None,
               seconds: float | None = None) -> CaseResult:
    """Grade one answer; no answer (or an error getting one) fails the case."""
    if answer is None:
        return CaseResult(case["id"], False, [error or "no answer"], error=error, seconds=seconds)
    problems = grade(answer, case)
    route = parse_route(answer) if "expected_route" in case else None
    return CaseResult(case["id"], not problems, problems, route, answer, error, seconds)


def suite_report(suite: dict[str, Any], results: list[CaseResult]) -> dict[str, Any]:
    """The scored part of a report for one suite."""
    passed = sum(r.passed for r in results)
    return {"suite": suite["suite"], "passed": passed, "total": len(results),
            "score": round(passed / len(results), 4) if results else 0.0, "cases": [asdict(r) for r in results]}


def result_line(result: CaseResult) -> str:
    return f"{'PASS' if result.passed else 'FAIL'} {result.id}" + (": " + "; ".join(result.problems)
                                                                   if result.problems else "")


def load_suite(path: Path) -> dict[str, Any]:
    """One eval suite file as a dict."""
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def load_answers(path: Path) -> dict[str, str]:
    """{case id: answer} from a JSONL file of {"id", "answer"} rows."""
    answers = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            answers[row["id"]] = row["answer"]
    return answers


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python evals/grade.py SUITE.json ANSWERS.jsonl", file=sys.stderr)
        return 2
    try:
        suite = load_suite(Path(argv[0]))
        answers = load_answers(Path(argv[1]))
    except (OSError, ValueError, KeyError) as exc:
        print(f"error: cannot read the inputs: {exc}", file=sys.stderr)
        return 2
    results = [grade_case(case, answers.get(case["id"])) for case in suite["cases"]]
    for result in results:
        print(result_line(result))
    failed = sum(not r.passed for r in results)
    print(f"{len(results) - failed}/{len(results)} passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
