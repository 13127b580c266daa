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
from typing import Any

STR_TAG = "__str__"
NAMESPACE_TAG = "__namespace__"


def plain(value: Any, depth: int = 0) -> Any:
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


def unplain(value: Any) -> Any:
    """What `plain` sent, as the code receives it (a namespace for `trainer_state`, text for the rest)."""
    if isinstance(value, list):
        return [unplain(v) for v in value]
    if isinstance(value, dict):
        if set(value) == {STR_TAG}:
            return value[STR_TAG]
        if set(value) == {NAMESPACE_TAG}:
            return types.SimpleNamespace(**value[NAMESPACE_TAG])
        return {k: unplain(v) for k, v in value.items()}
    return value


class _SentSources(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports the modules the parent sent, from their source text, before any finder looks at a folder."""

    def __init__(self) -> None:
        self.modules: dict[str, dict[str, Any]] = {}

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        sent = self.modules.get(name)
        if sent is None:
            return None
        return importlib.util.spec_from_loader(name, self, origin=sent["file"], is_package=bool(sent["package"]))

    def create_module(self, spec: Any) -> None:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        sent = self.modules[module.__name__]
        module.__file__ = sent["file"]
        code = compile(sent["source"], sent["file"], "exec", dont_inherit=True)
        exec(code, module.__dict__)  # noqa: S102 - the verified bytes, inside the confinement


class Child:
    def __init__(self) -> None:
        self.sources = _SentSources()
        sys.meta_path.insert(0, self.sources)
        self.handles: dict[int, Any] = {}
        self.next_handle = 1
        self.lock = threading.Lock()
        self.out = sys.stdout
        sys.stdout = sys.stderr  # what the code prints goes to the log, never into the protocol

    def keep(self, obj: Any) -> int:
        with self.lock:
            handle = self.next_handle
            self.next_handle += 1
            self.handles[handle] = obj
        return handle

    def reply(self, message: dict[str, Any]) -> None:
        line = json.dumps(message)
        with self.lock:
            self.out.write(line + "\n")
            self.out.flush()

    def op_load(self, req: dict[str, Any]) -> dict[str, Any]:
        """Import `ref` from the sent modules. A module sent before with other bytes or from another file (another
        brief's `mine.py`) is imported afresh, with every sent module, so the sent bytes are what runs."""
        sent_now = dict(req["modules"])
        if any(self.sources.modules.get(name) != sent for name, sent in sent_now.items()):
            for name in sent_now:
                sys.modules.pop(name, None)
        self.sources.modules.update(sent_now)
        module, _, attr = str(req["ref"]).partition(":")
        obj = getattr(importlib.import_module(module), attr)
        return describe(obj, self.keep(obj), bool(req.get("schema")))

    def op_call(self, req: dict[str, Any]) -> Any:
        obj = self.handles[req["handle"]]
        if req.get("attr"):
            obj = getattr(obj, req["attr"])
        return obj(*unplain(req.get("args") or []), **unplain(req.get("kwargs") or {}))

    def op_new(self, req: dict[str, Any]) -> Any:
        return self.keep(self.handles[req["handle"]]())

    def op_drop(self, req: dict[str, Any]) -> None:
        with self.lock:
            self.handles.pop(req["handle"], None)

    def serve(self, req: dict[str, Any]) -> None:
        try:
            value = getattr(self, "op_" + str(req["op"]))(req)
            self.reply({"id": req["id"], "ok": plain(value)})
        except BaseException as exc:  # noqa: BLE001 - every failure goes back to the parent as data
            self.reply({"id": req["id"], "error": {"type": type(exc).__name__, "message": str(exc),
                                                   "where": self.where(exc)}})

    def where(self, exc: BaseException) -> str:
        """`file:line` of the innermost frame in a sent module (the project's own code), '' when none is: the
        traceback's frames do not cross the pipe, so the place is sent as text."""
        files = {sent["file"] for sent in self.sources.modules.values()}
        mine = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename in files]
        return f"{mine[-1].filename.rsplit('/', 1)[-1]}:{mine[-1].lineno}" if mine else ""

    def run(self) -> None:
        for line in sys.stdin:
            req = json.loads(line)
            if req.get("op") == "call" or req.get("op") == "new":
                threading.Thread(target=self.serve, args=(req,), daemon=True).start()
            else:
                self.serve(req)


def _schema(func: Any) -> tuple[Any, str | None]:
    try:
        from transformers.utils.chat_template_utils import get_json_schema

        return get_json_schema(func), None
    except Exception as exc:  # noqa: BLE001 - transformers raises several kinds here
        return None, f"{type(exc).__name__}: {exc}"


def describe(obj: Any, handle: int, schema: bool) -> dict[str, Any]:
    """What the parent needs to stand in for `obj`: its kind, name and docstring, and for tools their JSON schemas."""
    out: dict[str, Any] = {"handle": handle, "name": getattr(obj, "__name__", type(obj).__name__),
                           "doc": inspect.getdoc(obj) if inspect.isclass(obj) else getattr(obj, "__doc__", None),
                           "callable": callable(obj), "class": inspect.isclass(obj),
                           "explained": callable(getattr(obj, "explained", None)),
                           "explain": callable(getattr(obj, "explain", None))}
    if inspect.isclass(obj):
        members = dict(inspect.getmembers(obj, predicate=inspect.isfunction))
        out["has_reset"] = "reset" in members
        out["has_get_reward"] = "get_reward" in members
        out["methods"] = []
        for name, func in members.items():
            if name in ("reset", "get_reward") or name.startswith("_"):
                continue
            entry: dict[str, Any] = {"name": name, "doc": func.__doc__}
            if schema:
                entry["schema"], entry["schema_error"] = _schema(types.MethodType(func, object()))
            out["methods"].append(entry)
    elif schema and callable(obj):
        out["schema"], out["schema_error"] = _schema(obj)
    return out


if __name__ == "__main__":
    sys.dont_write_bytecode = True
    Child().run()
