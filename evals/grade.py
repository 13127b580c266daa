"""Grade answers against the skill eval suites in this folder (the format is in evals/README.md).

Usage: python evals/grade.py evals/routing.json ANSWERS.jsonl
ANSWERS.jsonl holds one {"id": <case id>, "answer": <the agent's final answer>} per line. Prints one
line per case (PASS, or FAIL with what was missing or forbidden) and exits 0 when every case passes,
1 otherwise, 2 when an input cannot be read. Pure standard library.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def grade(answer: str, case: dict[str, Any]) -> list[str]:
    """Problems with `answer` for `case` (empty when it passes): unmet requirements, forbidden strings."""
    text = answer.lower()
    problems = []
    for alternatives in case["must_contain"]:
        if not any(alt.lower() in text for alt in alternatives):
            problems.append("missing one of " + " | ".join(repr(a) for a in alternatives))
    for forbidden in case["must_not_contain"]:
        if forbidden.lower() in text:
            problems.append(f"contains forbidden {forbidden!r}")
    return problems


def load_suite(path: Path) -> dict[str, Any]:
    """One eval suite file as a dict."""
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python evals/grade.py SUITE.json ANSWERS.jsonl", file=sys.stderr)
        return 2
    try:
        suite = load_suite(Path(argv[0]))
        answers = {}
        for line in Path(argv[1]).read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                answers[row["id"]] = row["answer"]
    except (OSError, ValueError, KeyError) as exc:
        print(f"error: cannot read the inputs: {exc}", file=sys.stderr)
        return 2
    failed = 0
    for case in suite["cases"]:
        if case["id"] not in answers:
            print(f"FAIL {case['id']}: no answer")
            failed += 1
            continue
        problems = grade(answers[case["id"]], case)
        print(f"{'FAIL' if problems else 'PASS'} {case['id']}" + (": " + "; ".join(problems) if problems else ""))
        failed += bool(problems)
    print(f"{len(suite['cases']) - failed}/{len(suite['cases'])} passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
