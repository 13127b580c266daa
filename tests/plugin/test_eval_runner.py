"""`python evals/run.py`: the no-model exit, the report from saved answers, and the real `claude -p` with
this checkout's plugin driven by a canned model, graded into a scored report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from canned_model import ToolCall, canned_model, client_env, tool_results, user_text

REPO = Path(__file__).resolve().parents[2]
RUN = REPO / "evals/run.py"
EXIT_NO_MODEL = 3


def suite(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((REPO / "evals" / f"{name}.json").read_text(encoding="utf-8"))
    return data


def run_evals(*args: str, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(RUN), *args], env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


def test_no_model_configured_says_what_to_set_and_exits_3(tmp_path: Path) -> None:
    done = run_evals("--out", str(tmp_path / "report.json"), env=client_env(tmp_path))
    assert done.returncode == EXIT_NO_MODEL
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("evals: no model configured: set ANTHROPIC_API_KEY"), done.stderr
    assert "CLAUDE_CODE_USE_BEDROCK" in lines[0] and "--answers" in lines[0]
    assert not (tmp_path / "report.json").exists()


def test_a_claude_login_counts_as_a_configured_model(tmp_path: Path) -> None:
    """With a login but no CLI, the runner gets past the model check and stops at the missing CLI (exit 2)."""
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude/.credentials.json").write_text("{}")
    env = client_env(tmp_path, PATH=str(tmp_path))  # no claude on PATH
    done = subprocess.run([sys.executable, str(RUN)], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("evals: the Claude Code CLI was not found")


def test_report_from_saved_answers_scores_each_case(tmp_path: Path) -> None:
    wrong = {"gsm8k-reference-answers", "refuses-to-sign-records"}
    rows = []
    for name in ("routing", "behaviour"):
        for case in suite(name)["cases"]:
            answer = case["known_wrong"][0]["answer"] if case["id"] in wrong else case["reference_answer"]
            rows.append(json.dumps({"id": case["id"], "answer": answer}))
    answers = tmp_path / "answers.jsonl"
    answers.write_text("\n".join(rows) + "\n", encoding="utf-8")
    out = tmp_path / "out/report.json"
    done = run_evals("--suite", "routing", "--suite", "behaviour", "--answers", str(answers), "--out", str(out),
                     env=client_env(tmp_path))
    assert done.returncode == 1, done.stderr
    report = json.loads(out.read_text(encoding="utf-8"))
    total = len(suite("routing")["cases"]) + len(suite("behaviour")["cases"])
    assert (report["passed"], report["total"]) == (total - 2, total)
    assert report["score"] == round((total - 2) / total, 4)
    assert done.stdout.strip().startswith(f"evals: {total - 2}/{total} passed; routing ")
    by_id = {c["id"]: c for s in report["suites"] for c in s["cases"]}
    assert {i for i, c in by_id.items() if not c["passed"]} == wrong
    assert "Route: preference-optimization, expected grpo-rlvr-training" in by_id["gsm8k-reference-answers"]["problems"]
    assert by_id["lean-zero-base"]["route"] == "sft-then-grpo"
    assert [s["suite"] for s in report["suites"]] == ["routing", "behaviour"]


def test_unknown_case_is_unusable(tmp_path: Path) -> None:
    done = run_evals("--case", "no-such-case", env=client_env(tmp_path))
    assert done.returncode == 2
    assert "unknown case id(s) no-such-case" in done.stderr


def test_runner_drives_claude_with_the_plugin_and_grades_its_answers(claude_bin: Path, tmp_path: Path) -> None:
    behaviour = suite("behaviour")
    wrong_id = "launches-detached-and-polls"
    answers = {c["request"]: (c["known_wrong"][0]["answer"] if c["id"] == wrong_id else c["reference_answer"])
               for c in behaviour["cases"]}

    def answer(body: dict[str, Any]) -> str:
        text = user_text(body)
        return next((a for request, a in answers.items() if request in text), "no case matched")

    out = tmp_path / "report.json"
    with canned_model(answer) as model:
        env = client_env(tmp_path / "home", model.url, CLAUDE_BIN=str(claude_bin))
        done = run_evals("--suite", "behaviour", "--out", str(out), env=env)
    assert done.returncode == 1, done.stderr
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["client"].split()[0].count(".") == 2 and report["model"]
    assert report["plugin"] == f"--plugin-dir {REPO}"
    results = {c["id"]: c for c in report["suites"][0]["cases"]}
    assert [i for i, c in results.items() if not c["passed"]] == [wrong_id]
    assert "missing one of '--detach'" in results[wrong_id]["problems"]
    assert all(c["error"] is None and c["seconds"] is not None for c in results.values())
    # each case reached the model with the suite's answer format, and the plugin's agent was offered
    texts = [json.dumps(r) for r in model.requests]
    fmt = json.dumps(behaviour["answer_format"])[1:-1]
    for case in behaviour["cases"]:
        asked = [t for t in texts if json.dumps(case["request"])[1:-1] in t]
        assert asked and all(fmt in t for t in asked), case["id"]
    assert any("llm-finetuning-training-engineer" in t for t in texts)


def test_answering_sessions_read_the_plugin_but_not_the_evals(claude_bin: Path, tmp_path: Path) -> None:
    """The runner's `claude -p` may read the plugin's reference pages, never the cases and their answers."""
    sys.path.insert(0, str(REPO / "evals"))
    from run import claude_command

    calls = [ToolCall("Read", {"file_path": str(REPO / "references/variants.md")}),
             ToolCall("Read", {"file_path": str(REPO / "evals/routing.json")})]

    def answer(body: dict[str, Any]) -> str | ToolCall:
        done = sum(len(tool_results(b)) > 0 for b in model.requests)
        return calls[done] if done < len(calls) else "done"

    with canned_model(answer) as model:
        env = client_env(tmp_path / "home", model.url)
        done = subprocess.run(claude_command(str(claude_bin), installed=False, model=None), input="hello",
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    read_plugin, read_evals = (tool_results(r)[0] for r in model.requests if tool_results(r))
    assert "# GRPO variants" in read_plugin
    assert "denied by your permission settings" in read_evals and "expected_route" not in read_evals
