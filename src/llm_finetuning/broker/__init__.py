"""The broker's core: which verbs it runs, how, and for which project (docs/claude-code.md, "The broker").

The broker (`finetune broker`, the plugin's stdio MCP server; the protocol side is `broker.server`) runs
outside Claude Code's Bash sandbox, as the person, so it is on the trusted side: it never imports code from
the project. Each tool call runs one `finetune` verb in a child started isolated
(`python -I -m llm_finetuning.cli VERB --json ...`: no working directory, PYTHONPATH or user site on
`sys.path`) with the project as its working directory and `LLM_FINETUNING_BROKER=1` in its environment (the
gate's `protection` check reads it). Every call is a job: a quick verb's answer comes back in the same call,
a long one (baseline, inspect, eval, export, or any verb still running after `quick_wait_s`) comes back as a
job id that the `job` tool polls, with the last lines of its progress. Paths must lie inside the project
(symlinks resolved), and so must a brief's records (which the verb writes as the person) and its local data
files; anything else is answered with a Problem in the JSON error shape. There is no tool for `review`, `keys`
or `protect`: those need the person.

No MCP SDK here (only `broker.server` imports it), so that `import llm_finetuning.cli` stays free of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from llm_finetuning.errors import EXIT_UNUSABLE, Problem, problems_json
from llm_finetuning.jsonvalue import JsonObject, JsonValue

BROKER_ENV = "LLM_FINETUNING_BROKER"  # set to 1 in the environment of every verb the broker runs
SERVER_NAME = "finetune"  # the plugin's .mcp.json names the server so: tools reach the model as TOOL_PREFIX + tool
PLUGIN_NAME = "llm-finetuning"
TOOL_PREFIX = f"mcp__plugin_{PLUGIN_NAME}_{SERVER_NAME}__"
# the verbs the broker serves, as tools of the same name (and `job`, which polls); never review, keys, protect
VERBS = ("check", "baseline", "inspect", "gate", "render", "launch", "status", "stop", "diagnose", "eval",
         "export", "memory")
TOOLS = (*VERBS, "job")
LONG_VERBS = frozenset({"baseline", "inspect", "eval", "export"})  # sample or load a model: minutes, polled
QUICK_WAIT_S = 25.0  # how long a call waits for a verb before it answers with a job id instead
LONG_WAIT_S = 2.0  # a long verb's first answer: long enough to catch a refusal at once
MAX_WAIT_S = 50.0  # the most a `job` poll waits (well under the client's tool timeout)
PROGRESS_LINES = 5
OUTPUT_LIMIT = 200_000  # characters of a verb's stdout returned (a result longer than that is cut, and said so)

# What a tool answers: a JSON object (a job's state and its verb's result, or the JSON error shape) that the MCP SDK
# sends as the call's structured content. Built here, never read back.
Answer = dict[str, object]


def project_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The project the broker serves: `$CLAUDE_PROJECT_DIR` when the client sets it, else the working directory
    the client started the broker in."""
    chosen = (os.environ if environ is None else environ).get("CLAUDE_PROJECT_DIR")
    return Path(os.path.realpath(chosen or os.getcwd()))


class OutsideProject(Exception):
    """A path argument that does not resolve inside the project; `problem` says which and why."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem.line())
        self.problem = problem


def inside(project: Path, field_name: str, value: str) -> str:
    """`value` (relative to the project, or absolute) resolved, symlinks followed, as an absolute path; it must
    be the project or lie under it. Returned absolute, so it can never read as an option to the verb."""
    if not value or "\x00" in value:
        raise OutsideProject(Problem("outside_project", field_name, f"{value!r} is not a path.",
                                     "give a path inside the project, relative to it"))
    resolved = Path(os.path.realpath(project / Path(value).expanduser()))
    if resolved != project and project not in resolved.parents:
        raise OutsideProject(Problem(
            "outside_project", field_name, f"{value} resolves to {resolved}, outside the project {project} "
            "this broker serves.", "use a path inside the project; work on another project from a Claude Code "
            "session started there"))
    return str(resolved)


def brief_paths_outside(project: Path, brief: str) -> list[Problem]:
    """What the brief at `brief` (already inside the project) points at outside it: a `records.*` path the verb
    would write as the person, or a local `data.*` file it would read (and might quote in an error, the key
    file among them). Read as data (YAML and the schema's defaults); a brief that does not load is left to the
    verb, which names what is wrong with it."""
    from llm_finetuning.brief.defaults import apply_defaults
    from llm_finetuning.brief.load import load_yaml_file
    from llm_finetuning.errors import UnusableInput

    folder = Path(brief).parent
    try:
        data = apply_defaults(load_yaml_file(Path(brief)))
    except (UnusableInput, OSError, ValueError, TypeError, AttributeError):
        return []
    records, sources = data.get("records") or {}, data.get("data", {})
    if not isinstance(records, dict) or not isinstance(sources, dict):
        return []  # a section of the wrong type: the verb's check names it
    named = [(f"records.{k}", v, True) for k, v in records.items()]
    named += [(f"data.{k}", sources.get(k), False) for k in ("train", "eval")]
    problems = []
    for field_name, value, always in named:
        if not isinstance(value, str) or not value:
            continue
        path = folder / Path(value).expanduser()
        if not (always or os.path.lexists(path)):
            continue  # not a local file: a dataset id, or missing (the verb says so)
        try:
            inside(project, field_name, str(path))
        except OutsideProject as exc:
            problems.append(exc.problem)
    return problems


def child_command(verb: str, args: Sequence[str], python: str = sys.executable) -> list[str]:
    """The isolated child that runs one verb: nothing from the working directory, PYTHONPATH or user site."""
    return [python, "-I", "-m", "llm_finetuning.cli", verb, *args]


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env[BROKER_ENV] = "1"
    env.pop("PYTHONPATH", None)
    env.pop("PYTHONSTARTUP", None)
    return env


def last_lines(text: str, n: int = PROGRESS_LINES) -> list[str]:
    """The last `n` non-empty lines of a stream, a progress bar's carriage-return updates counted as lines."""
    lines = [line.strip() for line in text.replace("\r", "\n").split("\n")]
    return [line for line in lines if line][-n:]


@dataclass
class Job:
    """One verb run by the broker: its child, and the files its stdout and stderr go to."""

    id: str
    verb: str
    argv: list[str]
    folder: Path
    started: float = field(default_factory=time.monotonic)
    process: asyncio.subprocess.Process | None = None
    exit_code: int | None = None
    ended: float | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def stdout_path(self) -> Path:
        return self.folder / f"{self.id}.out"

    @property
    def stderr_path(self) -> Path:
        return self.folder / f"{self.id}.err"

    def _read(self, path: Path) -> str:
        try:
            return path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def answer(self) -> Answer:
        """What the tool returns: the verb's result once it ended (its JSON when it printed JSON), else the job
        id, how long it has run and its last progress lines."""
        out: Answer = {"job": self.id, "verb": self.verb}
        elapsed = (self.ended or time.monotonic()) - self.started
        out["elapsed_s"] = round(elapsed, 1)
        stderr = self._read(self.stderr_path)
        if self.exit_code is None:
            out.update(state="running", progress=last_lines(stderr),
                       next=f"poll with the `job` tool: {{\"id\": \"{self.id}\"}}")
            return out
        stdout = self._read(self.stdout_path)
        out.update(state="finished", exit_code=self.exit_code)
        try:
            result: JsonValue = json.loads(stdout)
            out["result"] = result
        except ValueError:
            out["stdout"] = stdout[-OUTPUT_LIMIT:]
            if len(stdout) > OUTPUT_LIMIT:
                out["stdout_cut"] = f"the first {len(stdout) - OUTPUT_LIMIT} characters are left out"
        if stderr.strip():
            out["stderr"] = "\n".join(last_lines(stderr, 40))
        return out


class Jobs:
    """The verbs the broker runs, started as children of this process and awaited concurrently."""

    def __init__(self, project: Path, python: str = sys.executable) -> None:
        self.project = project
        self.python = python
        self.folder = Path(tempfile.mkdtemp(prefix="llm-finetuning-broker-"))
        self.jobs: dict[str, Job] = {}
        self._ids = itertools.count(1)

    async def start(self, verb: str, args: Sequence[str]) -> Job:
        job = Job(f"{verb}-{next(self._ids)}", verb, child_command(verb, args, self.python), self.folder)
        with job.stdout_path.open("wb") as out, job.stderr_path.open("wb") as err:
            job.process = await asyncio.create_subprocess_exec(
                *job.argv, cwd=self.project, env=child_env(), stdin=asyncio.subprocess.DEVNULL, stdout=out,
                stderr=err)
        self.jobs[job.id] = job
        asyncio.get_running_loop().create_task(self._reap(job))
        return job

    async def _reap(self, job: Job) -> None:
        assert job.process is not None
        job.exit_code = await job.process.wait()
        job.ended = time.monotonic()
        job.done.set()

    async def wait(self, job: Job, seconds: float) -> Answer:
        """The job's answer once it ended or after `seconds`, whichever comes first."""
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(job.done.wait(), timeout=max(0.0, min(seconds, MAX_WAIT_S)))
        return job.answer()

    async def run(self, verb: str, args: Sequence[str]) -> Answer:
        """Start `verb` and answer within `QUICK_WAIT_S` (a long verb within `LONG_WAIT_S`)."""
        job = await self.start(verb, args)
        return await self.wait(job, LONG_WAIT_S if verb in LONG_VERBS else QUICK_WAIT_S)

    async def poll(self, job_id: str, wait_s: float) -> Answer:
        job = self.jobs.get(job_id)
        if job is None:
            known = ", ".join(self.jobs) or "none yet"
            return refusal(Problem("no_such_job", "id", f"no job {job_id!r} in this session (jobs: {known}).",
                                   "use the id a tool answered with; jobs do not outlive the chat session"))
        return await self.wait(job, wait_s)

    def close(self) -> None:
        """End the verbs still running (a detached launch is not one: it runs in its own session) and remove
        their output files."""
        for job in self.jobs.values():
            if job.process is not None and job.exit_code is None:
                with contextlib.suppress(ProcessLookupError):
                    job.process.terminate()
        shutil.rmtree(self.folder, ignore_errors=True)


def mcp_servers(path: Path) -> JsonObject:
    """The `mcpServers` object of the `.mcp.json` at `path`; empty when there is none, or it is not JSON."""
    try:
        document: JsonValue = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    servers = document.get("mcpServers") if isinstance(document, dict) else None
    return servers if isinstance(servers, dict) else {}


def declared_command(entry: JsonValue) -> list[str] | None:
    """A server entry's command line (`command`, then `args`); None when it declares none."""
    if not isinstance(entry, dict) or "command" not in entry:
        return None
    args = entry.get("args") or []
    return [str(entry["command"]), *map(str, args)] if isinstance(args, list) else None


def server_command(root: Path) -> list[str] | None:
    """The broker's command line as Claude Code starts it from the plugin at `root`: the plugin's own `.mcp.json`
    entry, `${CLAUDE_PLUGIN_ROOT}` replaced by `root` (the exact command `allowedMcpServers` pins); None when
    `root` holds no such entry."""
    words = declared_command(mcp_servers(root / ".mcp.json").get(SERVER_NAME))
    if words is None:
        return None
    return [w.replace("${CLAUDE_PLUGIN_ROOT}", str(root)) for w in words]


def pinning_settings(roots: Sequence[Path]) -> JsonObject:
    """What `finetune protect` merges into the project's settings for the broker: `allowedMcpServers` holding
    the broker's exact command from each of `roots` (so no other stdio server, a project `.mcp.json` of the
    agent's among them, starts there; an empty list lets none start), and the broker's tools allowed (a plugin
    cannot allow its own tools: the person's settings must)."""
    commands = [c for c in map(server_command, roots) if c is not None]
    return {"allowedMcpServers": [{"serverCommand": [*c]} for c in commands],
            "permissions": {"allow": [TOOL_PREFIX + tool for tool in TOOLS]}}


def project_servers_like_the_broker(project: Path, roots: Sequence[Path]) -> list[str]:
    """The servers a project's `.mcp.json` declares with the broker's own command: Claude Code starts such a
    server in the broker's place, with the environment the file gives it (a PATH that finds another `finetune`
    first), and `allowedMcpServers` matches the command only. The plugin declares the broker itself."""
    pinned = [c for c in map(server_command, roots) if c is not None]
    return [name for name, entry in mcp_servers(project / ".mcp.json").items() if declared_command(entry) in pinned]


def refusal(*problems: Problem) -> Answer:
    """The JSON error shape (docs/gate.md) for what the broker refuses before running any verb."""
    return problems_json(list(problems), exit_code=EXIT_UNUSABLE)
