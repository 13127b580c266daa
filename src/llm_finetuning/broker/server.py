"""The broker's MCP side: one tool per verb it serves, on the `mcp` SDK's server over stdio (`MCPServer`, the
name FastMCP has in mcp 2.x).

Each tool checks its path arguments (inside the project), builds the verb's arguments and hands them to
`broker.Jobs`; what runs and why is in the package's docstring and docs/claude-code.md ("The broker").
Imported only by `finetune broker`, so the rest of the CLI never loads the MCP SDK.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Literal

from mcp.server.mcpserver import MCPServer

from llm_finetuning.broker import (
    SERVER_NAME,
    Answer,
    Jobs,
    OutsideProject,
    brief_paths_outside,
    inside,
    project_dir,
    refusal,
)

INSTRUCTIONS = (
    "The llm-finetuning verbs, run outside the sandbox for this project only: check, baseline, inspect, gate, "
    "render, launch (detached), status, stop, diagnose, eval, export, memory. Paths are relative to the project. "
    "A long verb answers with a job id: poll it with `job`. The person's review is never done here: they run "
    "`finetune review RECORD` in their own terminal.")


def build(jobs: Jobs) -> MCPServer:
    """The server with every tool bound to `jobs` (one project)."""

    @asynccontextmanager
    async def lifespan(server: MCPServer) -> AsyncIterator[None]:
        try:
            yield
        finally:
            jobs.close()

    mcp = MCPServer(SERVER_NAME, instructions=INSTRUCTIONS, lifespan=lifespan)

    async def run(verb: str, build_args: Callable[[], Sequence[str]]) -> Answer:
        try:
            args = list(build_args())
        except OutsideProject as exc:
            return refusal(exc.problem)
        return await jobs.run(verb, args)

    def path(name: str, value: str) -> str:
        return inside(jobs.project, name, value)

    def brief_path(value: str) -> str:
        """A brief inside the project whose records and data files lie inside it too."""
        resolved = path("brief", value)
        problems = brief_paths_outside(jobs.project, resolved)
        if problems:
            raise OutsideProject(problems[0])
        return resolved

    def opt(flag: str, value: object) -> list[str]:
        return [] if value is None else [flag, str(value)]

    @mcp.tool()
    async def check(brief: str) -> Answer:
        """`finetune check BRIEF --json`: validate a brief (schema, rewards, data, episode tools)."""
        return await run("check", lambda: [brief_path(brief), "--json"])

    @mcp.tool()
    async def baseline(brief: str, prompts: int | None = None, k: int | None = None) -> Answer:
        """`finetune baseline BRIEF --json`: sample the base model and write the baseline record. Long: answers
        with a job id; poll it with `job`."""
        return await run("baseline", lambda: [brief_path(brief), *opt("--prompts", prompts), *opt("--k", k),
                                              "--json"])

    @mcp.tool()
    async def inspect(brief: str, samples: int | None = None) -> Answer:
        """`finetune inspect BRIEF --json`: sample completions with their rewards into the inspection record,
        which the person then reviews in their own terminal (`finetune review RECORD`). Long: poll with `job`."""
        return await run("inspect", lambda: [brief_path(brief), *opt("--samples", samples), "--json"])

    @mcp.tool()
    async def gate(brief: str) -> Answer:
        """`finetune gate BRIEF --json`: the Phase 1 gate; every check's verdict, and each problem's fix."""
        return await run("gate", lambda: [brief_path(brief), "--json"])

    @mcp.tool()
    async def render(brief: str, run_dir: str) -> Answer:
        """`finetune render BRIEF -o RUN_DIR --json`: gate again and write the run directory."""
        return await run("render", lambda: [brief_path(brief), "-o", path("run_dir", run_dir), "--json"])

    @mcp.tool()
    async def launch(run_dir: str, resume: bool = False) -> Answer:
        """`finetune launch RUN_DIR --detach`: verify the run and start training in its own session; returns at
        once, and the run goes on after the chat ends. Watch it with `status` and `diagnose`."""
        return await run("launch", lambda: [path("run_dir", run_dir), "--detach", *(["--resume"] if resume else [])])

    @mcp.tool()
    async def status(run_dir: str) -> Answer:
        """`finetune status RUN_DIR --json`: running, finished, failed, stopped or not_started, with progress."""
        return await run("status", lambda: [path("run_dir", run_dir), "--json"])

    @mcp.tool()
    async def stop(run_dir: str) -> Answer:
        """`finetune stop RUN_DIR`: ask the run to checkpoint at the next step boundary and stop."""
        return await run("stop", lambda: [path("run_dir", run_dir)])

    @mcp.tool()
    async def diagnose(run_dir: str, brief: str | None = None) -> Answer:
        """`finetune diagnose RUN_DIR --json`: the run's findings so far (steps, evidence, variant, fix)."""
        return await run("diagnose", lambda: [path("run_dir", run_dir),
                                              *(["--brief", brief_path(brief)] if brief else []), "--json"])

    @mcp.tool(name="eval")
    async def eval_(run_dir: str, checkpoint: str = "final", prompts: int | None = None, k: int | None = None) -> Answer:
        """`finetune eval RUN_DIR --json`: held-out pass@1 and pass@k before and after, with the paired 95%
        interval and its verdict. Long: poll with `job`."""
        return await run("eval", lambda: [path("run_dir", run_dir), "--checkpoint", checkpoint,
                                          *opt("--prompts", prompts), *opt("--k", k), "--json"])

    @mcp.tool()
    async def export(run_dir: str, out: str, checkpoint: str | None = None, merge: bool = False,
                     dtype: Literal["bfloat16", "float16", "float32"] | None = None) -> Answer:
        """`finetune export RUN_DIR -o OUT`: the trained model with its model card (`merge` for a LoRA run).
        Long: poll with `job`."""
        return await run("export", lambda: [path("run_dir", run_dir), "-o", path("out", out),
                                            *opt("--checkpoint", checkpoint), *(["--merge"] if merge else []),
                                            *opt("--dtype", dtype)])

    @mcp.tool()
    async def memory(brief: str | None = None, model: str | None = None,
                     adapter: Literal["full", "lora", "qlora"] | None = None, gpus: int | None = None,
                     gpu_memory_gib: float | None = None) -> Answer:
        """`finetune memory --json`: the GPU memory a brief (or a model with these settings) needs, and the
        cheapest advice when it does not fit."""
        return await run("memory", lambda: [*(["--brief", brief_path(brief)] if brief else []),
                                            *opt("--model", model and (path("model", model) if model.startswith(("/", ".", "~")) else model)), *opt("--adapter", adapter), *opt("--gpus", gpus),
                                            *opt("--gpu-memory-gib", gpu_memory_gib), "--json"])

    @mcp.tool()
    async def job(id: str, wait_s: float = 20.0) -> Answer:  # noqa: A002 - the field the model sees
        """A job's answer: its result once the verb ended, else its progress; waits up to `wait_s` seconds
        (at most 50) for it to end."""
        return await jobs.poll(id, wait_s)

    return mcp


def serve() -> None:
    """Serve the project in the working directory (or `$CLAUDE_PROJECT_DIR`) over stdio until the client ends."""
    build(Jobs(project_dir())).run("stdio")
