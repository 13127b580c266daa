"""The broker (`finetune broker`) through the MCP SDK's own client over stdio, as Claude Code starts it: the
tools it serves and none other, paths held inside the project, each verb in an isolated child that imports
nothing from the project, and a long verb answered as a job that is polled while other calls are served.
(With the real client: tests/chat/test_chat_broker.py; the contract: docs/claude-code.md, "The broker".)"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from llm_finetuning.broker import TOOLS, inside, project_dir

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).parent))

from broker_cases import tiny_vowel_brief  # noqa: E402


def call_tools(project: Path, calls: list[tuple[str, dict[str, Any]]]) -> tuple[list[str], list[dict[str, Any]]]:
    """Start `finetune broker` in `project`, list its tools and make `calls` in order; their JSON answers."""
    from mcp import Client, StdioServerParameters

    async def session() -> tuple[list[str], list[dict[str, Any]]]:
        params = StdioServerParameters(command=str(Path(sys.executable).parent / "finetune"), args=["broker"],
                                       cwd=str(project), env=dict(os.environ))
        async with Client(params) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            answers = []
            for tool, arguments in calls:
                result = await client.call_tool(tool, arguments)
                answers.append(json.loads(result.content[0].text))
            return names, answers

    return anyio.run(session)


def test_it_serves_the_gated_verbs_and_never_review_keys_or_protect(make_brief: Any) -> None:
    project = make_brief("passing").parent
    names, [check] = call_tools(project, [("check", {"brief": "brief.yaml"})])
    assert names == list(TOOLS) == ["check", "baseline", "inspect", "gate", "render", "launch", "status", "stop",
                                    "diagnose", "eval", "export", "memory", "job"]
    assert (check["state"], check["exit_code"], check["result"]["ok"]) == ("finished", 0, True), check


def test_a_path_outside_the_project_is_refused_in_the_error_shape(make_brief: Any, tmp_path: Path) -> None:
    project = make_brief("passing").parent
    (project / "elsewhere").symlink_to(tmp_path)
    _, answers = call_tools(project, [("gate", {"brief": "/etc/passwd"}), ("gate", {"brief": "../brief.yaml"}),
                                      ("render", {"brief": "brief.yaml", "run_dir": "elsewhere/run"}),
                                      ("job", {"id": "gate-9"})])
    for answer, field in zip(answers[:3], ("brief", "brief", "run_dir"), strict=True):
        assert answer["ok"] is False and answer["exit_code"] == 2, answer
        [problem] = answer["problems"]
        assert (problem["id"], problem["path"], problem["severity"]) == ("outside_project", field, "error")
        assert f"outside the project {project.resolve()} this broker serves" in problem["message"]
    assert not (tmp_path / "run").exists()
    assert answers[3]["problems"][0]["id"] == "no_such_job"


def test_the_verbs_child_imports_nothing_from_the_project(make_brief: Any, tmp_path: Path) -> None:
    """Modules planted in the project under the names of the package, the standard library and a dependency are
    never imported: the broker and its children start Python isolated, not from the project's folder."""
    project = make_brief("passing").parent
    marker = tmp_path / "imported"
    for name in ("llm_finetuning/__init__.py", "json.py", "yaml.py", "click.py", "sitecustomize.py"):
        path = project / name
        path.parent.mkdir(exist_ok=True)
        path.write_text(f"open({str(marker)!r}, 'a').write({name!r} + '\\n')\n")
    _, [gate] = call_tools(project, [("gate", {"brief": "brief.yaml"})])
    assert gate["state"] == "finished" and gate["result"]["passed"] is True, gate
    assert not marker.exists(), marker.read_text()


@pytest.mark.slow
def test_a_long_verb_is_a_job_polled_while_other_calls_are_served(tiny_model_dir: Path, tmp_path: Path) -> None:
    brief = tiny_vowel_brief(tmp_path / "project", tiny_model_dir)
    project = brief.parent
    started = time.monotonic()
    _, [first, check, *polls] = call_tools(project, [("baseline", {"brief": "brief.yaml", "prompts": 8, "k": 8}),
                                                     ("check", {"brief": "brief.yaml"})]
                                           + [("job", {"id": "baseline-1", "wait_s": 50})] * 3)
    assert (first["job"], first["state"]) == ("baseline-1", "running"), first
    assert first["next"] == 'poll with the `job` tool: {"id": "baseline-1"}'
    assert check["state"] == "finished" and check["elapsed_s"] < 20, check  # served while the baseline samples
    done = next(p for p in polls if p["state"] == "finished")
    assert done["exit_code"] == 0 and done["result"]["path"] == str(project / "records" / "baseline.json"), done
    assert done["result"]["pass_at_1"] > 0
    assert (project / "records" / "baseline.json").is_file() and time.monotonic() - started < 300


def test_inside_and_project_dir(tmp_path: Path) -> None:
    project = tmp_path / "p"
    (project / "sub").mkdir(parents=True)
    assert inside(project, "brief", "sub/../sub/b.yaml") == str(project / "sub" / "b.yaml")
    assert inside(project, "brief", str(project)) == str(project)
    assert project_dir({"CLAUDE_PROJECT_DIR": str(project / "sub" / "..")}) == project


def test_a_brief_pointing_its_records_or_data_outside_the_project_is_refused(make_brief: Any, tmp_path: Path) -> None:
    """The broker writes as the person, outside the sandbox: a brief the agent edited to put a record elsewhere, or
    to read a file outside the project as its data (through a symlink too), is refused before any verb runs."""
    project = make_brief("passing").parent
    secret = tmp_path / "secret.jsonl"
    secret.write_text('{"prompt": "not the project\'s", "answer": "e"}\n')
    (project / "data" / "linked.jsonl").symlink_to(secret)
    text = (project / "brief.yaml").read_text()
    (project / "records-out.yaml").write_text(text + "records:\n  baseline: ../../elsewhere/baseline.json\n")
    (project / "data-out.yaml").write_text(text.replace("data/train.jsonl", "data/linked.jsonl"))
    assert "data/linked.jsonl" in (project / "data-out.yaml").read_text()
    _, answers = call_tools(project, [("baseline", {"brief": "records-out.yaml"}), ("check", {"brief": "data-out.yaml"}),
                                      ("gate", {"brief": "brief.yaml"})])
    problems = [a["problems"][0] for a in answers[:2]]
    assert [(p["id"], p["path"]) for p in problems] == [("outside_project", "records.baseline"),
                                                        ("outside_project", "data.train")], answers
    assert str(secret) in problems[1]["message"]
    assert not (tmp_path / "elsewhere").exists()
    assert answers[2]["state"] == "finished" and answers[2]["result"]["passed"] is True  # the brief as it was


def test_the_jobs_folder_goes_with_the_session(make_brief: Any) -> None:
    import asyncio

    from llm_finetuning.broker import Jobs

    project = make_brief("passing").parent

    async def session() -> tuple[dict[str, Any], Path, bool]:
        jobs = Jobs(project)
        answer = await jobs.run("check", [str(project / "brief.yaml"), "--json"])
        existed = jobs.folder.is_dir()
        jobs.close()
        return answer, jobs.folder, existed

    answer, folder, existed = asyncio.run(session())
    assert answer["result"]["ok"] is True and existed and not folder.exists()


@pytest.mark.slow
def test_at_the_sessions_end_a_running_verb_stops_with_the_broker(tiny_model_dir: Path, tmp_path: Path) -> None:
    """Claude Code ends its MCP servers with SIGINT when a session ends: the broker's jobs go with it (a detached
    launch is no job: tests/chat/test_chat_broker.py sees a run train on after the chat)."""
    import signal
    import subprocess

    from mcp import Client, StdioServerParameters

    project = tiny_vowel_brief(tmp_path / "project", tiny_model_dir).parent
    seen: dict[str, Any] = {}

    def processes(pattern: str) -> list[int]:
        found = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True, check=False).stdout
        return [int(p) for p in found.split()]

    async def session() -> None:
        params = StdioServerParameters(command=str(Path(sys.executable).parent / "finetune"), args=["broker"],
                                       cwd=str(project), env=dict(os.environ, TMPDIR=str(tmp_path)))
        try:
            async with Client(params) as client:
                result = await client.call_tool("baseline", {"brief": "brief.yaml", "prompts": 8, "k": 8})
                seen["first"] = json.loads(result.content[0].text)
                seen["baseline"] = processes(f"llm_finetuning.cli baseline {project}")
                seen["folders"] = list(tmp_path.glob("llm-finetuning-broker-*"))
                for pid in processes("llm_finetuning.cli broker$"):
                    if Path(f"/proc/{pid}/cwd").resolve() == project.resolve():
                        os.kill(pid, signal.SIGINT)
                await anyio.sleep(5)
        except Exception:  # noqa: BLE001 - the client sees its server go; what matters is what is left running
            pass

    anyio.run(session)
    assert seen["first"]["state"] == "running" and seen["baseline"] and seen["folders"], seen
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in seen["baseline"]):
        time.sleep(0.2)
    assert not any(Path(f"/proc/{p}").exists() for p in seen["baseline"])
    assert not list(tmp_path.glob("llm-finetuning-broker-*")) and not (project / "records").exists()
