"""Project code (custom rewards, episode tools and environments) run in a confined child, never in this process.

Whatever an agent could have written (a module beside a brief, a run folder's files) is code the person did not
write, so no process that can read the reviewer's key imports it (docs/security.md, "What runs where"). Each
process that needs such code starts one long-lived child (`ProjectCode`) and calls into it over a pipe, JSON both
ways (nothing is unpickled from the child). The child runs under bubblewrap: the whole file system read-only (the
records, trusted keys, Claude Code's settings and the plugin included), the reviewer's key folder
(`locations.key_dir()`) replaced by an empty one, its own pid, IPC and UTS namespaces, every capability dropped,
a private writable /dev/shm as its home and temporary folder. It runs the source bytes this process read and
hashed (`rewards.code`): the module files are read once, their sha256 compared with what the caller verified,
and those bytes are what the child compiles; nothing is imported from the project's folders.

Proxies stand in for the code where TRL and our sampler expect it: `ConfinedReward` (a reward callable with the
metric's `__name__`), `confined_tool` (a function with the tool's name, docstring and typed signature, so
`get_json_schema` reads the schema the child computed) and `confined_environment` (a class whose instances live
in the child). Where bubblewrap cannot run, `ConfinementUnavailable` names the fix; `LLM_FINETUNING_UNCONFINED=1`
is the documented opt-out for a person's own machine without namespaces (docs/sandbox.md).
"""

from __future__ import annotations

import atexit
import inspect
import itertools
import json
import os
import shutil
import subprocess
import sys
import threading
import types
import typing
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from llm_finetuning.errors import EXIT_UNUSABLE, Problem, ProblemError
from llm_finetuning.jsonvalue import JsonValue
from llm_finetuning.locations import isolated_python
from llm_finetuning.sandbox._project_child import NAMESPACE_TAG, Unplained, plain, unplain

UNCONFINED_ENV = "LLM_FINETUNING_UNCONFINED"
CHILD_MODULE = "llm_finetuning.sandbox._project_child"
INSTALL_FIX = ("install bubblewrap (`apt-get install bubblewrap`, `dnf install bubblewrap`) and allow unprivileged "
               f"user namespaces; on your own machine without them, `export {UNCONFINED_ENV}=1` runs project code "
               "unconfined (docs/sandbox.md)")


class ConfinementUnavailable(ProblemError):
    """Project code cannot be confined here: no bubblewrap, or bubblewrap cannot make its namespaces."""

    def __init__(self, why: str) -> None:
        super().__init__([Problem("confinement_unavailable", "", f"project code (custom rewards, tools, "
                                  f"environments) runs only confined, and confinement cannot run here: {why}",
                                  INSTALL_FIX)], EXIT_UNUSABLE)


class ProjectCodeError(Exception):
    """An exception the project's code raised in the child: `str()` is its message, `kind` its type's name,
    `where` the `file:line` of the innermost frame in the project's own files ('' when none was)."""

    def __init__(self, kind: str, message: str, where: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.where = where


class ShapeError(ProjectCodeError):
    """The code loaded, but is not what its place asks for (a tool without a schema, an environment without reset)."""

    def __init__(self, message: str) -> None:
        super().__init__("ValueError", message)


def hidden_paths() -> list[Path]:
    """What the child must not see at all: the reviewer's key folder (resolved, so a link to it is covered too),
    made now (empty, private) when it does not exist yet, so that a key made later is hidden too; where it cannot
    be made, its nearest existing folder other than the root."""
    from llm_finetuning.locations import key_dir

    folder = key_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError:
        while not folder.is_dir() and folder.parent != folder:
            folder = folder.parent
    return [p for p in dict.fromkeys([folder, folder.resolve()]) if p.is_dir() and p != Path(p.anchor)]


def key_out_of_reach() -> bool:
    """Whether this process already runs inside a sandbox that hides the reviewer's key folder: the folder is a
    mount point of its own showing nothing (Claude Code's Bash mounts an empty one there for
    `sandbox.filesystem.denyRead`, and refuses a nested bubblewrap its namespaces). A child started plainly there
    stays in that sandbox. In a person's terminal the key folder is a plain folder, so this does not hold there."""
    from llm_finetuning.locations import key_dir

    folder = key_dir()
    try:
        return folder.is_dir() and os.path.ismount(folder) and not any(folder.iterdir())
    except OSError:
        return False


def bwrap_command(full: bool) -> list[str]:
    """bubblewrap's arguments; `full` adds a pid namespace with its own /proc (refused inside another sandbox,
    where /proc is bound read-only instead and the pids stay the outer sandbox's)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise ConfinementUnavailable("bubblewrap (bwrap) is not installed")
    cmd = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--tmpfs", "/dev/shm"]
    cmd += ["--proc", "/proc", "--unshare-pid"] if full else ["--ro-bind", "/proc", "/proc"]
    for path in hidden_paths():
        cmd += ["--tmpfs", str(path), "--remount-ro", str(path)]
    cmd += ["--unshare-ipc", "--unshare-uts", "--unshare-user-try", "--unshare-cgroup-try", "--die-with-parent",
            "--new-session", "--cap-drop", "ALL", "--chdir", "/dev/shm", "--setenv", "HOME", "/dev/shm",
            "--setenv", "TMPDIR", "/dev/shm", "--setenv", "PYTHONDONTWRITEBYTECODE", "1", "--"]
    return cmd


def unconfined() -> bool:
    return os.environ.get(UNCONFINED_ENV) == "1"


class ProjectCode:
    """One confined child serving every piece of project code a process uses (started on first use)."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[str] | None = None
        self._pending: dict[int, Future[Unplained]] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._start_lock = threading.Lock()

    def _spawn(self, prefix: list[str]) -> subprocess.Popen[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        return subprocess.Popen([*prefix, *isolated_python(CHILD_MODULE)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=None, text=True, bufsize=1, env=env,
                                cwd="/", close_fds=True)

    def _ensure(self) -> subprocess.Popen[str]:
        with self._start_lock:
            if self._proc is not None and self._proc.poll() is None:
                return self._proc
            proc = self._spawn([]) if unconfined() else self._started_confined()
            self._proc = proc
            threading.Thread(target=self._read, args=(proc,), daemon=True, name="project-code-reader").start()
            return proc

    def _started_confined(self) -> subprocess.Popen[str]:
        """The child under bubblewrap: with its own pid namespace where it can make one, else without."""
        last = ""
        for full in (True, False):
            probe = subprocess.run([*bwrap_command(full), sys.executable, "-I", "-c", "pass"], capture_output=True,
                                   text=True, check=False, timeout=60)
            if probe.returncode == 0:
                return self._spawn(bwrap_command(full))
            last = (probe.stderr.strip().splitlines() or [f"exit {probe.returncode}"])[-1]
        if key_out_of_reach():
            return self._spawn([])  # already inside a sandbox that hides the key (Claude Code's Bash)
        raise ConfinementUnavailable(f"bubblewrap failed: {last}")

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                message: JsonValue = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if not isinstance(message, dict):
                continue  # not an answer: the protocol is ours, but the code in the child may write anything
            rid = message.get("id", 0)
            if not isinstance(rid, int):
                continue
            with self._lock:
                future = self._pending.pop(rid, None)
            if future is None:
                continue
            if "error" in message:
                error = message["error"]
                err = error if isinstance(error, dict) else {}
                future.set_exception(ProjectCodeError(str(err.get("type")), str(err.get("message")),
                                                      str(err.get("where") or "")))
            else:
                try:
                    future.set_result(unplain(message.get("ok")))
                except (TypeError, RecursionError) as exc:  # a namespace tag around a non-object; too deep
                    future.set_exception(ProjectCodeError(type(exc).__name__, str(exc)))
        with self._lock:
            pending, self._pending = self._pending, {}
        for future in pending.values():
            future.set_exception(ProjectCodeError("ChildExited", f"the confined child exited ({proc.wait()})"))

    def send(self, op: str, **fields: object) -> None:
        """Send one request whose answer nobody waits for (dropping a handle); nothing when the child is gone."""
        proc = self._proc
        if proc is None or proc.poll() is not None or proc.stdin is None:
            return
        with self._lock:
            try:
                proc.stdin.write(json.dumps({"id": 0, "op": op, **fields}) + "\n")
                proc.stdin.flush()
            except (OSError, ValueError):
                pass

    def request(self, op: str, **fields: object) -> Unplained:
        """Send one request and wait for its answer (a ProjectCodeError when the code raised)."""
        proc = self._ensure()
        future: Future[Unplained] = Future()
        with self._lock:
            rid = next(self._ids)
            self._pending[rid] = future
            assert proc.stdin is not None
            try:
                proc.stdin.write(json.dumps({"id": rid, "op": op, **fields}) + "\n")
                proc.stdin.flush()
            except (BrokenPipeError, OSError) as exc:
                self._pending.pop(rid, None)
                raise ProjectCodeError("ChildExited", f"the confined child is gone: {exc}") from None
        return future.result()

    def load(self, ref: str, modules: Mapping[str, Mapping[str, object]], schema: bool = False) -> dict[str, Unplained]:
        """Load `module:name` from the sent `modules` (name -> {source, file, package}); its description (the
        child's `describe`), as the child sent it."""
        out = self.request("load", ref=ref, modules=dict(modules), schema=schema)
        if not isinstance(out, dict):
            raise ProjectCodeError("TypeError", f"the confined child described {ref} as {type(out).__name__}")
        return out

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            assert proc.stdin is not None
            proc.stdin.close()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()



_SHARED: ProjectCode | None = None
_SHARED_LOCK = threading.Lock()
_SHARED_PID: dict[str, int] = {}


def shared_child() -> ProjectCode:
    """The process's one confined child (each verb or run uses one; a forked process starts its own)."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None or _SHARED_PID.get("pid") != os.getpid():
            _SHARED = ProjectCode()
            _SHARED_PID["pid"] = os.getpid()
            atexit.register(_SHARED.close)
        return _SHARED


# --- proxies -----------------------------------------------------------------------------------------------------

class Confined:
    """A handle on an object in the child; calling it calls the object there."""

    def __init__(self, child: ProjectCode, handle: int) -> None:
        self.child, self.handle = child, handle

    def call(self, *args: object, attr: str | None = None, **kwargs: object) -> Unplained:
        return self.child.request("call", handle=self.handle, attr=attr, args=plain(list(args)),
                                  kwargs={k: _sent(k, v) for k, v in kwargs.items() if not callable(v)})


def _sent(name: str, value: object) -> JsonValue:
    """A keyword argument as the child gets it: TRL's `trainer_state` as a namespace of its counters."""
    if name == "trainer_state" and value is not None:
        return {NAMESPACE_TAG: {k: plain(getattr(value, k, None)) for k in ("global_step", "max_steps", "epoch",
                                                                             "num_train_epochs")}}
    return plain(value)


def _handle(value: Unplained) -> int:
    """A handle the child answered with: the int it keeps the object under."""
    if not isinstance(value, int):
        raise ProjectCodeError("TypeError", f"the confined child answered {type(value).__name__} for a handle")
    return value


def load_confined(ref: str, modules: Mapping[str, Mapping[str, object]], schema: bool = False,
                  child: ProjectCode | None = None) -> tuple[Confined, dict[str, Unplained]]:
    """`ref` (`module:name`) loaded in the child from `modules` (the source bytes `rewards.code` read and
    checked): its handle and description."""
    child = child or shared_child()
    info = child.load(ref, modules, schema=schema)
    return Confined(child, _handle(info["handle"])), info


def _fields(value: Unplained) -> dict[str, Unplained]:
    """A JSON object of the child's description; anything else reads as an empty one."""
    return value if isinstance(value, dict) else {}


def _text(value: Unplained) -> str | None:
    return value if isinstance(value, str) else None


@dataclass(frozen=True)
class Described:
    """A tool, or a public method of an environment class, as the child described it (`_project_child.describe`):
    its JSON schema as transformers' `get_json_schema` read it there, or why there is none."""

    name: str
    doc: str | None
    schema: dict[str, Unplained] | None
    schema_error: str | None

    @classmethod
    def parse(cls, info: Mapping[str, Unplained]) -> Described:
        schema, error = info.get("schema"), info.get("schema_error")
        return cls(str(info["name"]), _text(info.get("doc")), schema if isinstance(schema, dict) else None,
                   None if error is None else str(error))


@dataclass(frozen=True)
class DescribedClass:
    """An environment class as the child described it: whether it has `reset` and `get_reward`, and its other
    public methods, the tools."""

    name: str
    doc: str | None
    is_class: bool
    has_reset: bool
    has_get_reward: bool
    methods: list[Described]

    @classmethod
    def parse(cls, info: Mapping[str, Unplained]) -> DescribedClass:
        methods = info.get("methods")
        return cls(str(info["name"]), _text(info.get("doc")), bool(info.get("class")), bool(info.get("has_reset")),
                   bool(info.get("has_get_reward")),
                   [Described.parse(_fields(entry)) for entry in methods] if isinstance(methods, list) else [])


# The annotation transformers' `get_json_schema` reads back as each JSON schema type (for "any", the typing one).
_JSON_TYPES: dict[str, object] = {"string": str, "integer": int, "number": float, "boolean": bool,
                                  "null": type(None), "object": dict, "array": list, "any": typing.Any}


def _python_type(schema: Mapping[str, Unplained]) -> object:
    """A Python annotation that transformers' `get_json_schema` turns back into `schema`."""
    kind = schema.get("type", "any")
    enum = schema.get("enum")
    if "enum" in schema and isinstance(enum, list):
        return typing.Literal[tuple(enum)]
    if isinstance(kind, list):
        members = [_python_type({**schema, "type": k}) for k in kind]
        return typing.Union[tuple(members)]  # noqa: UP007 - built from a list at run time
    items, values = schema.get("items"), schema.get("additionalProperties")
    if kind == "array" and isinstance(items, dict):
        return list[_python_type(items)]  # type: ignore[misc]
    if kind == "object" and isinstance(values, dict):
        return dict[str, _python_type(values)]  # type: ignore[misc]
    return _JSON_TYPES.get(str(kind), _JSON_TYPES["any"])


def _signature(schema: Mapping[str, Unplained], method: bool) -> inspect.Signature:
    function = schema.get("function")
    fields = function if isinstance(function, dict) else schema
    params = _fields(fields.get("parameters"))
    props = _fields(params.get("properties"))
    required_names = params.get("required")
    required = set(required_names) if isinstance(required_names, list) else set()
    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)] if method else []
    for name, prop in props.items():
        default = inspect.Parameter.empty if name in required else None
        parameters.append(inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default,
                                            annotation=_python_type(_fields(prop))))
    returns = fields.get("return")
    return inspect.Signature(parameters, return_annotation=_python_type(returns) if isinstance(returns, dict)
                             else inspect.Signature.empty)


def _stand_in(name: str, doc: str | None, schema: Mapping[str, Unplained] | None, call: Callable[..., object],
              method: bool) -> Callable[..., object]:
    """A plain function named `name` whose docstring and signature give `schema` back through `get_json_schema`."""
    def stand_in(*args: object, **kwargs: object) -> object:
        return call(*args, **kwargs)

    stand_in.__name__ = stand_in.__qualname__ = name
    stand_in.__doc__ = doc
    if schema is not None:
        sig = _signature(schema, method)
        stand_in.__signature__ = sig  # type: ignore[attr-defined]
        stand_in.__annotations__ = {p.name: p.annotation for p in sig.parameters.values()
                                    if p.annotation is not inspect.Parameter.empty}
        if sig.return_annotation is not inspect.Signature.empty:
            stand_in.__annotations__["return"] = sig.return_annotation
    return stand_in


def confined_tool(ref: str, modules: Mapping[str, Mapping[str, object]],
                  child: ProjectCode | None = None) -> Callable[..., object]:
    """A tool (`module:function`) run in the child, standing in for it where TRL and the sampler call tools."""
    handle, info = load_confined(ref, modules, schema=True, child=child)
    tool = Described.parse(info)
    if tool.schema is None:
        raise ShapeError(f"{ref}: no JSON schema from its signature and docstring: {tool.schema_error}")
    stand_in = _stand_in(tool.name, tool.doc, tool.schema, lambda *a, **kw: handle.call(*a, **kw), method=False)
    _same_schema(ref, stand_in, tool.schema)
    return stand_in


def _same_schema(ref: str, func: Callable[..., object], schema: Mapping[str, Unplained]) -> None:
    """Refuse a stand-in whose schema, as transformers reads it, is not the tool's own (the model would be shown
    a different tool)."""
    from transformers.utils.chat_template_utils import get_json_schema

    mine = get_json_schema(func)
    if mine != schema:
        raise ShapeError(f"{ref}: its JSON schema cannot be carried out of the confinement ({json.dumps(schema)}); "
                         "use plain JSON types (str, int, float, bool, list, dict, Literal, X | None) in its signature")


class _EnvironmentInstance(Protocol):
    """An instance of a class `confined_environment` made: its object lives in the child."""

    _confined: Confined


def confined_environment(ref: str, modules: Mapping[str, Mapping[str, object]],
                         child: ProjectCode | None = None) -> type:
    """An environment class (`module:Class`) whose instances live in the child; its public methods are tools."""
    handle, info = load_confined(ref, modules, schema=True, child=child)
    described = DescribedClass.parse(info)
    if not described.is_class or not described.has_reset:
        raise ShapeError(f"{ref} is not a class with a reset() method")

    def __init__(self: _EnvironmentInstance) -> None:
        self._confined = Confined(handle.child, _handle(handle.child.request("new", handle=handle.handle)))

    def __del__(self: _EnvironmentInstance) -> None:
        confined = getattr(self, "_confined", None)
        if confined is not None:
            confined.child.send("drop", handle=confined.handle)

    def method(name: str) -> Callable[..., object]:
        return lambda self, *a, **kw: self._confined.call(*a, attr=name, **kw)

    body: dict[str, object] = {"__init__": __init__, "__del__": __del__, "__doc__": described.doc,
                               "__module__": ref.partition(":")[0], "reset": method("reset")}
    if described.has_get_reward:
        body["get_reward"] = method("get_reward")
    for entry in described.methods:
        if entry.schema is None:
            raise ShapeError(f"{ref} method {entry.name}: no JSON schema from its signature and docstring: "
                             f"{entry.schema_error}")
        tool = _stand_in(entry.name, entry.doc, entry.schema, method(entry.name), method=True)
        body[entry.name] = tool
        _same_schema(f"{ref}.{entry.name}", types.MethodType(tool, object()), entry.schema)
    if not described.methods:
        raise ShapeError(f"{ref} has no public method to call as a tool")
    return type(described.name, (), body)
