"""The math-verify worker: a child process that compares a gold answer with a predicted one.

math-verify bounds its own work with signal alarms, which only work on a process's main thread; a
reward runs on whatever thread the trainer or a scorer uses. So the comparison runs here, on this
process's main thread, and the parent (`exact_match.MathVerifyWorker`) enforces a wall-clock timeout
by killing this process. Protocol: one JSON object per line on stdin (`{"id", "gold", "pred",
"timeout_s"}`) and one per line on stdout (`{"id", "equal"}` or `{"id", "error"}`); the first line
out is `{"ready": true, "math_verify": bool}`. math-verify is imported here and nowhere else.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypedDict

from llm_finetuning.jsonvalue import JsonObject, JsonValue


class Request(TypedDict):
    """One comparison the parent asks for."""

    id: int
    gold: str
    pred: str
    timeout_s: float


class Reply(TypedDict, total=False):
    """The answer to one request: `equal`, or the `error` that kept it from being compared."""

    id: JsonValue
    equal: bool
    error: str


@dataclass(frozen=True)
class _Comparison:
    """A request line as read: the fields `_answer` uses (a missing one raises KeyError, sent back as data)."""

    id: JsonValue
    gold: str
    pred: str
    timeout_s: float

    @classmethod
    def of(cls, message: JsonObject) -> _Comparison:
        timeout = message.get("timeout_s", 5)
        if not isinstance(timeout, (int, float, str)):
            raise TypeError(f"timeout_s is {type(timeout).__name__}, not a number")
        return cls(message["id"], str(message["gold"]), str(message["pred"]), float(timeout))


def _boxed(answer: str) -> str:
    """Wrap an extracted answer so math-verify reads it as one LaTeX expression."""
    return "\\boxed{" + answer + "}"


def _answer(message: JsonObject, parse: Callable[..., object], verify: Callable[..., object]) -> Reply:
    req = _Comparison.of(message)
    limit = max(1, math.ceil(req.timeout_s))
    gold = parse(_boxed(req.gold), parsing_timeout=limit)
    pred = parse(_boxed(req.pred), parsing_timeout=limit)
    if not gold or not pred:
        return {"id": req.id, "equal": False}
    # Order matters: math-verify treats the first argument as the reference.
    return {"id": req.id, "equal": bool(verify(gold, pred, timeout_seconds=limit))}


def main() -> int:
    try:
        from math_verify import parse, verify
    except Exception:  # noqa: BLE001 - any import failure means "not available"
        print(json.dumps({"ready": True, "math_verify": False}), flush=True)
        return 0
    print(json.dumps({"ready": True, "math_verify": True}), flush=True)
    for line in sys.stdin:
        try:
            req: JsonValue = json.loads(line)
        except ValueError:
            continue
        if not isinstance(req, dict):
            continue
        out: Reply
        try:
            out = _answer(req, parse, verify)
        except Exception as exc:  # noqa: BLE001 - reported to the parent as data
            out = {"id": req.get("id"), "error": f"{type(exc).__name__}: {exc}"[:300]}
        print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
