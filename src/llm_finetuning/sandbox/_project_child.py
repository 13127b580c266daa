"""The confined child's side of `sandbox.project_code`: `python -I -m llm_finetuning.sandbox._project_child`.

Started inside bubblewrap by the parent. It reads one JSON request per line on stdin and answers one JSON line per
request on stdout, tagged with the request's id; each call runs in a thread of its own, so a tool that hangs holds
up no other call. Project modules come only from the source text the parent sent (`load`), compiled under the name
of the file they were read from: nothing is imported from the project's folders, and no bytecode is written.
Values cross as JSON both ways (`plain`); what JSON cannot carry crosses as its `str()`.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import inspect
import json
import sys
import threading
import traceback
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib.machinery import ModuleSpec
from typing import TypeAlias, Union

from llm_finetuning.jsonvalue import JsonObject, JsonValue

STR_TAG = "__str__"
NAMESPACE_TAG = "__namespace__"

# A value as `unplain` gives it back: JSON, with a tagged text as its str and a tagged namespace as a
# SimpleNamespace. The code's arguments in the child; the code's answer in the parent.
Unplained: TypeAlias = Union[str, int, float, bool, None, "list[Unplained]", "dict[str, Unplained]",
                             types.SimpleNamespace]


def plain(value: object, depth: int = 0) -> JsonValue:
    """`value` as JSON can carry it: containers walked, numbers from numpy/torch scalars, anything else its str()."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if depth > 64:
        return {STR_TAG: str(value)}
    if isinstance(value, (list, tuple)):
        return [plain(v, depth + 1) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: plain(v, depth + 1) for k, v in value.items()}
    item = getattr(value, "item", None)
    if callable(item):
        try:
            scalar = item()
        except Exception:  # noqa: BLE001 - not a scalar: shown as text
            scalar = None
        if isinstance(scalar, (bool, int, float)):
            return scalar
    return {STR_TAG: str(value)}


def unplain(value: JsonValue) -> Unplained:
    """What `plain` sent, as the code receives it (a namespace for `trainer_state`, text for the rest)."""
    if isinstance(value, list):
        items: list[Unplained] = [unplain(v) for v in value]
        return items
    if isinstance(value, dict):
        if set(value) == {STR_TAG}:
            text = value[STR_TAG]
            return text if isinstance(text, str) else unplain(text)  # `plain` always sends a str
        if set(value) == {NAMESPACE_TAG}:
            return types.SimpleNamespace(**_object(value[NAMESPACE_TAG], "a namespace"))
        fields: dict[str, Unplained] = {k: unplain(v) for k, v in value.items()}
        return fields
    return value


def _object(value: JsonValue, what: str) -> JsonObject:
    if not isinstance(value, dict):
        raise TypeError(f"{what} is a JSON object, not {type(value).__name__}")
    return value


@dataclass(frozen=True)
class SentModule:
    """A module's source text as the parent read and checked it, and the file it was read from."""

    source: str
    file: str
    package: bool

    @classmethod
    def parse(cls, sent: JsonValue) -> SentModule:
        fields = _object(sent, "a sent module")
        source, file = fields.get("source"), fields.get("file")
        if not isinstance(source, str) or not isinstance(file, str):
            raise TypeError("a sent module is {source, file, package}, its source and file texts")
        return cls(source, file, bool(fields.get("package")))


@dataclass(frozen=True)
class Request:
    """One request line from the parent, parsed once: `op` with the fields that op reads."""

    id: JsonValue
    op: str
    ref: str = ""  # load
    modules: dict[str, SentModule] = field(default_factory=dict)  # load
    schema: bool = False  # load
    handle: int = 0  # call, new, drop
    attr: str | None = None  # call: a method of the handle's object
    args: list[JsonValue] = field(default_factory=list)  # call
    kwargs: dict[str, JsonValue] = field(default_factory=dict)  # call

    @classmethod
    def parse(cls, message: JsonObject) -> Request:
        op = str(message["op"])
        if op == "load":
            modules = _object(message["modules"], "modules")
            return cls(message["id"], op, ref=str(message["ref"]), schema=bool(message.get("schema")),
                       modules={name: SentModule.parse(sent) for name, sent in modules.items()})
        if op not in ("call", "new", "drop"):
            raise ValueError(f"unknown request {op!r}")
        handle = message["handle"]
        if not isinstance(handle, int):
            raise TypeError(f"a handle is an int, not {type(handle).__name__}")
        attr, args, kwargs = message.get("attr"), message.get("args") or [], message.get("kwargs") or {}
        if not isinstance(args, list):
            raise TypeError(f"args is a JSON array, not {type(args).__name__}")
        return cls(message["id"], op, handle=handle, attr=str(attr) if attr else None, args=args,
                   kwargs=_object(kwargs, "kwargs"))


class _SentSources(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports the modules the parent sent, from their source text, before any finder looks at a folder."""

    def __init__(self) -> None:
        self.modules: dict[str, SentModule] = {}

    def find_spec(self, name: str, path: Sequence[str] | None = None,
                  target: types.ModuleType | None = None) -> ModuleSpec | None:
        sent = self.modules.get(name)
        if sent is None:
            return None
        return importlib.util.spec_from_loader(name, self, origin=sent.file, is_package=sent.package)

    def create_module(self, spec: ModuleSpec) -> None:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        sent = self.modules[module.__name__]
        module.__file__ = sent.file
        code = compile(sent.source, sent.file, "exec", dont_inherit=True)
        exec(code, module.__dict__)  # noqa: S102 - the verified bytes, inside the confinement


class Child:
    def __init__(self) -> None:
        self.sources = _SentSources()
        sys.meta_path.insert(0, self.sources)
        self.handles: dict[int, object] = {}  # the project's objects the parent holds a handle on
        self.next_handle = 1
        self.lock = threading.Lock()
        self.out = sys.stdout
        sys.stdout = sys.stderr  # what the code prints goes to the log, never into the protocol

    def keep(self, obj: object) -> int:
        with self.lock:
            handle = self.next_handle
            self.next_handle += 1
            self.handles[handle] = obj
        return handle

    def reply(self, message: JsonObject) -> None:
        line = json.dumps(message)
        with self.lock:
            self.out.write(line + "\n")
            self.out.flush()

    def op_load(self, req: Request) -> dict[str, object]:
        """Import `ref` from the sent modules. A module sent before with other bytes or from another file (another
        brief's `mine.py`) is imported afresh, with every sent module, so the sent bytes are what runs."""
        if any(self.sources.modules.get(name) != sent for name, sent in req.modules.items()):
            for name in req.modules:
                sys.modules.pop(name, None)
        self.sources.modules.update(req.modules)
        module, _, attr = req.ref.partition(":")
        obj = getattr(importlib.import_module(module), attr)
        return describe(obj, self.keep(obj), req.schema)

    def op_call(self, req: Request) -> object:
        obj = self.handles[req.handle]
        if req.attr:
            obj = getattr(obj, req.attr)
        return _called(obj)(*[unplain(a) for a in req.args], **{k: unplain(v) for k, v in req.kwargs.items()})

    def op_new(self, req: Request) -> int:
        return self.keep(_called(self.handles[req.handle])())

    def op_drop(self, req: Request) -> None:
        with self.lock:
            self.handles.pop(req.handle, None)

    def answer(self, req: Request) -> object:
        ops: dict[str, Callable[[Request], object]] = {"load": self.op_load, "call": self.op_call, "new": self.op_new,
                                                       "drop": self.op_drop}
        return ops[req.op](req)

    def serve(self, message: JsonObject) -> None:
        try:
            value = self.answer(Request.parse(message))
            self.reply({"id": message["id"], "ok": plain(value)})
        except BaseException as exc:  # noqa: BLE001 - every failure goes back to the parent as data
            self.reply({"id": message["id"], "error": {"type": type(exc).__name__, "message": str(exc),
                                                       "where": self.where(exc)}})

    def where(self, exc: BaseException) -> str:
        """`file:line` of the innermost frame in a sent module (the project's own code), '' when none is: the
        traceback's frames do not cross the pipe, so the place is sent as text."""
        files = {sent.file for sent in self.sources.modules.values()}
        mine = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename in files]
        return f"{mine[-1].filename.rsplit('/', 1)[-1]}:{mine[-1].lineno}" if mine else ""

    def run(self) -> None:
        for line in sys.stdin:
            req = _object(json.loads(line), "a request")
            if req.get("op") == "call" or req.get("op") == "new":
                threading.Thread(target=self.serve, args=(req,), daemon=True).start()
            else:
                self.serve(req)


def _called(obj: object) -> Callable[..., object]:
    """`obj`, to be called: Python's own TypeError when it cannot be."""
    if not callable(obj):
        raise TypeError(f"'{type(obj).__name__}' object is not callable")
    return obj


def _schema(func: Callable[..., object]) -> tuple[JsonObject | None, str | None]:
    try:
        from transformers.utils.chat_template_utils import get_json_schema

        return get_json_schema(func), None
    except Exception as exc:  # noqa: BLE001 - transformers raises several kinds here
        return None, f"{type(exc).__name__}: {exc}"


def describe(obj: object, handle: int, schema: bool) -> dict[str, object]:
    """What the parent needs to stand in for `obj`: its kind, name and docstring, and for tools their JSON schemas
    (values as the code gave them: `plain` makes them JSON)."""
    out: dict[str, object] = {"handle": handle, "name": getattr(obj, "__name__", type(obj).__name__),
                           "doc": inspect.getdoc(obj) if inspect.isclass(obj) else getattr(obj, "__doc__", None),
                           "callable": callable(obj), "class": inspect.isclass(obj),
                           "explained": callable(getattr(obj, "explained", None)),
                           "explain": callable(getattr(obj, "explain", None))}
    if inspect.isclass(obj):
        members = dict(inspect.getmembers(obj, predicate=inspect.isfunction))
        out["has_reset"] = "reset" in members
        out["has_get_reward"] = "get_reward" in members
        methods: list[dict[str, object]] = []
        for name, func in members.items():
            if name in ("reset", "get_reward") or name.startswith("_"):
                continue
            entry: dict[str, object] = {"name": name, "doc": func.__doc__}
            if schema:
                entry["schema"], entry["schema_error"] = _schema(types.MethodType(func, object()))
            methods.append(entry)
        out["methods"] = methods
    elif schema and callable(obj):
        out["schema"], out["schema_error"] = _schema(obj)
    return out


if __name__ == "__main__":
    sys.dont_write_bytecode = True
    Child().run()
