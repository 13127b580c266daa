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


def recipe_defaults() -> dict[str, Any]:
    """The recipe's GRPO starting values as the schema states them (skills and renderer read these)."""
    grpo = schema()["properties"]["grpo"]["properties"]
    return {k: v["default"] for k, v in grpo.items() if "default" in v}
