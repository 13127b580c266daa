"""The brief's JSON Schema (brief.schema.json) and the defaults it carries, applied in one place.

Imported by the package (`llm_finetuning.brief` re-exports these) and by the schema check (`brief.check`),
which the package's `load_brief` runs: both import this module, and it imports neither.
"""

from __future__ import annotations

import copy
import functools
import json
from importlib import resources
from typing import Any


@functools.lru_cache(maxsize=1)
def schema() -> dict[str, Any]:
    """The brief's JSON Schema, the single source of truth for types, defaults and descriptions."""
    text = resources.files("llm_finetuning.brief").joinpath("brief.schema.json").read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def apply_defaults(data: dict[str, Any], node: dict[str, Any] | None = None) -> dict[str, Any]:
    """A copy of `data` with every schema default filled in (the one place defaults are applied)."""
    node = schema() if node is None else node
    out = copy.deepcopy(data)
    for key, sub in node.get("properties", {}).items():
        if key not in out and "default" in sub:
            out[key] = copy.deepcopy(sub["default"])
        value = out.get(key)
        if isinstance(value, dict) and sub.get("type") == "object":
            out[key] = apply_defaults(value, sub)
        elif isinstance(value, list) and sub.get("items", {}).get("type") == "object":
            out[key] = [apply_defaults(v, sub["items"]) if isinstance(v, dict) else v for v in value]
    return out


def _wants_integer(node: dict[str, Any]) -> bool:
    t = node.get("type")
    return "integer" in t if isinstance(t, list) else t == "integer"


def whole_numbers(data: Any, node: dict[str, Any] | None = None) -> Any:
    """A copy of `data` in which an integer field's float with no fraction is an int (`max_steps: 1e5` ->
    100000): YAML 1.2, which the brief loader follows, reads `1e5` as a float, and TRL wants an int there."""
    node = schema() if node is None else node
    if isinstance(data, float) and data.is_integer() and _wants_integer(node):
        return int(data)
    if isinstance(data, dict):
        props = node.get("properties", {})
        return {k: whole_numbers(v, props[k]) if isinstance(props.get(k), dict) else v for k, v in data.items()}
    if isinstance(data, list) and isinstance(node.get("items"), dict):
        return [whole_numbers(v, node["items"]) for v in data]
    return data


def recipe_defaults() -> dict[str, Any]:
    """The recipe's GRPO starting values as the schema states them (skills and renderer read these)."""
    grpo = schema()["properties"]["grpo"]["properties"]
    return {k: v["default"] for k, v in grpo.items() if "default" in v}
