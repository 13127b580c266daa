"""Run the eval suites against a model through Claude Code, grade the answers and write a scored report.

Usage: python evals/run.py [--suite NAME ...] [--case ID ...] [--out report.json] [--answers FILE.jsonl]
                           [--claude PATH] [--installed] [--model M] [--timeout S]

For each case it runs `claude -p` (the request on stdin, plus the suite's answer format) in a fresh
temporary folder, with this checkout's plugin loaded (`--plugin-dir`, or the installed plugin with
`--installed`), against whatever model Claude Code is configured for (ANTHROPIC_API_KEY,
ANTHROPIC_AUTH_TOKEN with ANTHROPIC_BASE_URL, CLAUDE_CODE_USE_BEDROCK, CLAUDE_CODE_USE_VERTEX,
CLAUDE_CODE_USE_FOUNDRY, CLAUDE_CODE_OAUTH_TOKEN, or a `claude` login). `--answers` grades saved answers
instead ({"id", "answer"} per line) and asks no model.

Exit codes: 0 every case passed; 1 a case failed; 2 unusable input (unknown suite or case, unreadable
answers, no Claude Code CLI); 3 no model configured, nothing run. Progress goes to stderr. Pure
standard library.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from grade import EVALS, SUITES, CaseResult, grade_case, load_answers, load_suite, result_line, suite_report  # noqa: E402

REPO = EVALS.parent
EXIT_PASSED, EXIT_FAILED, EXIT_UNUSABLE, EXIT_NO_MODEL = 0, 1, 2, 3
MODEL_VARIABLES = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN")
PROVIDER_SWITCHES = ("CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX", "CLAUDE_CODE_USE_FOUNDRY")
NO_MODEL = ("evals: no model configured: set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN with ANTHROPIC_BASE_URL), "
            "or CLAUDE_CODE_USE_BEDROCK=1 / CLAUDE_CODE_USE_VERTEX=1 with that provider's credentials, or log in "
            "with `claude`; or grade saved answers with --answers FILE.jsonl")
# the tools an answering session may use: load skills and read their reference pages, nothing that acts
ALLOWED_TOOLS = "Skill,Read"


def model_source(env: Mapping[str, str]) -> str | None:
    """What configures Claude Code's model in this environment (a variable's name, a settings file, a
    login), or None when nothing does."""
    for name in MODEL_VARIABLES:
        if env.get(name, "").strip():
            return name
    for name in PROVIDER_SWITCHES:
        if env.get(name, "").strip().lower() in ("1", "true", "yes"):
            return name
    config = Path(env.get("CLAUDE_CONFIG_DIR") or Path(env.get("HOME", "~")).expanduser() / ".claude")
    if (config / ".credentials.json").is_file():
        return f"a claude login ({config / '.credentials.json'})"
    try:
        settings = json.loads((config / "settings.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if isinstance(settings, dict):
        if settings.get("apiKeyHelper"):
            return f"apiKeyHelper in {config / 'settings.json'}"
        configured = settings.get("env")
        configured = configured if isinstance(configured, dict) else {}
        if any(configured.get(n) for n in (*MODEL_VARIABLES, *PROVIDER_SWITCHES)):
            return f"env in {config / 'settings.json'}"
    return None


def find_claude(explicit: str | None, env: Mapping[str, str]) -> str | None:
    """--claude, else $CLAUDE_BIN, else `claude` on PATH."""
    candidate = explicit or env.get("CLAUDE_BIN") or shutil.which("claude", path=env.get("PATH"))
    return candidate if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK) else None


def claude_command(claude: str, installed: bool, model: str | None) -> list[str]:
    cmd = [claude, "-p", "--output-format", "json", "--allowedTools", ALLOWED_TOOLS,
           "--disallowedTools", f"Read(/{EVALS}/**)"]
    if not installed:
        cmd += ["--plugin-dir", str(REPO)]
    if model:
        cmd += ["--model", model]
    return cmd


def ask(cmd: list[str], prompt: str, timeout: float) -> tuple[str | None, str | None, str | None]:
    """(answer, error, model) from one `claude -p` session in a fresh folder."""
    with tempfile.TemporaryDirectory(prefix="llm-finetuning-eval-") as workdir:
        try:
            done = subprocess.run(cmd, input=prompt, cwd=workdir, capture_output=True, text=True, timeout=timeout,
                                  check=False)
        except subprocess.TimeoutExpired:
            return None, f"claude -p did not answer within {timeout:g} s", None
    try:
        reply = json.loads(done.stdout)
    except ValueError:
        tail = (done.stderr.strip() or done.stdout.strip()).splitlines()[-1:] or ["no output"]
        return None, f"claude -p exited {done.returncode}: {tail[0]}", None
    model = next(iter(reply.get("modelUsage") or {}), None)
    if reply.get("is_error") or done.returncode != 0:
        return None, f"claude -p exited {done.returncode}: {reply.get('result') or reply.get('subtype')}", model
    return str(reply.get("result", "")), None, model


def client_version(claude: str) -> str | None:
    try:
        done = subprocess.run([claude, "--version"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None


def prompt_for(suite: dict[str, Any], case: dict[str, Any]) -> str:
    fmt = suite.get("answer_format")
    return str(case["request"]) + (f"\n\n{fmt}" if fmt else "")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python evals/run.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", action="append", choices=SUITES, help="a suite to run (repeatable; default: all)")
    parser.add_argument("--case", action="append", default=[], help="only this case id (repeatable)")
    parser.add_argument("--out", type=Path, help="write the scored report (JSON) here")
    parser.add_argument("--answers", type=Path, help="grade these saved answers instead of asking a model")
    parser.add_argument("--claude", help="the Claude Code CLI (default: $CLAUDE_BIN, else claude on PATH)")
    parser.add_argument("--installed", action="store_true",
                        help="use the installed llm-finetuning plugin instead of this checkout's (--plugin-dir)")
    parser.add_argument("--model", help="passed to claude --model")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per case (default 300)")
    return parser.parse_args(argv)


def run(argv: list[str], env: Mapping[str, str]) -> int:
    args = parse_args(argv)
    suites = [load_suite(EVALS / f"{name}.json") for name in (args.suite or SUITES)]
    known = {c["id"] for s in suites for c in s["cases"]}
    unknown = sorted(set(args.case) - known)
    if unknown:
        print(f"evals: unknown case id(s) {', '.join(unknown)}; see the ids in {EVALS}/*.json", file=sys.stderr)
        return EXIT_UNUSABLE
    answers: dict[str, str] | None = None
    cmd: list[str] = []
    report: dict[str, Any] = {"format": 1, "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
    if args.answers is not None:
        try:
            answers = load_answers(args.answers)
        except (OSError, ValueError, KeyError) as exc:
            print(f"evals: cannot read {args.answers}: {exc}; want one {{\"id\", \"answer\"}} object a line",
                  file=sys.stderr)
            return EXIT_UNUSABLE
        report.update(source=f"answers from {args.answers}", client=None, model=None)
    else:
        source = model_source(env)
        if source is None:
            print(NO_MODEL, file=sys.stderr)
            return EXIT_NO_MODEL
        claude = find_claude(args.claude, env)
        if claude is None:
            print("evals: the Claude Code CLI was not found: install it (npm install -g @anthropic-ai/claude-code) "
                  "or pass --claude PATH / set CLAUDE_BIN", file=sys.stderr)
            return EXIT_UNUSABLE
        cmd = claude_command(claude, args.installed, args.model)
        report.update(source=f"claude -p, model configured by {source}", client=client_version(claude), model=None,
                      plugin="installed" if args.installed else f"--plugin-dir {REPO}")

    scored = []
    for suite in suites:
        cases = [c for c in suite["cases"] if not args.case or c["id"] in args.case]
        results: list[CaseResult] = []
        for case in cases:
            started = time.monotonic()
            if answers is not None:
                result = grade_case(case, answers.get(case["id"]))
            else:
                answer, error, model = ask(cmd, prompt_for(suite, case), args.timeout)
                report["model"] = report["model"] or model
                result = grade_case(case, answer, error, round(time.monotonic() - started, 1))
            results.append(result)
            print(f"{suite['suite']}/{result_line(result)}", file=sys.stderr)
        if cases:
            scored.append(suite_report(suite, results))
    passed, total = sum(s["passed"] for s in scored), sum(s["total"] for s in scored)
    report.update(passed=passed, total=total, score=round(passed / total, 4) if total else 0.0, suites=scored)
    print(f"evals: {passed}/{total} passed" + "".join(f"; {s['suite']} {s['passed']}/{s['total']}" for s in scored))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"evals: report written to {args.out}", file=sys.stderr)
    return EXIT_PASSED if passed == total else EXIT_FAILED


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:], os.environ))
