"""Strict reward for the smollm2-json example: the reply must be exactly the JSON object asked for.

1.0 when the whole completion (optionally one fenced ```json block and nothing else) is a JSON object
with exactly the keys `name` and `age`, equal to the row's `name` (string) and `age` (integer, not a
boolean or a float); else 0.0. Strict JSON: NaN/Infinity, duplicate keys and trailing text are refused.
Prose around the object scores 0: the task is to answer with the object alone.
"""

from __future__ import annotations

import json
import re
from typing import Any

_FENCE = re.compile(r"```(?:json)?[ \t]*\n(.*?)\n?```", re.DOTALL)


def _text(completion: Any) -> str:
    if isinstance(completion, list):  # conversational: the last assistant message
        for message in reversed(completion):
            if isinstance(message, dict) and message.get("role") == "assistant":
                return str(message.get("content") or "")
        return ""
    return str(completion)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError("duplicate key")
    return dict(pairs)


def _reject_constant(token: str) -> Any:
    raise ValueError(f"non-standard JSON constant {token}")


def parse_strict(text: str) -> Any:
    """The completion as strict JSON, or raise ValueError."""
    body = text.strip()
    fenced = _FENCE.fullmatch(body)
    if fenced:
        body = fenced.group(1).strip()
    return json.loads(body, object_pairs_hook=_no_duplicates, parse_constant=_reject_constant)


def person_json(prompts: list[Any], completions: list[Any], name: list[str], age: list[int],
                **_: Any) -> list[float]:
    """TRL reward: 1.0 for exactly {"name": <name>, "age": <age>}, else 0.0."""
    scores = []
    for completion, want_name, want_age in zip(completions, name, age, strict=True):
        try:
            obj = parse_strict(_text(completion))
        except (ValueError, RecursionError):
            scores.append(0.0)
            continue
        ok = (isinstance(obj, dict) and set(obj) == {"name", "age"} and obj["name"] == want_name
              and type(obj["age"]) is int and obj["age"] == int(want_age))
        scores.append(1.0 if ok else 0.0)
    return scores
