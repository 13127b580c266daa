"""The brief's JSON Schema (brief.schema.json) and the defaults it carries, applied in one place.

Imported by the package (`llm_finetuning.brief` re-exports these) and by the schema check (`brief.check`),
which the package's `load_brief` runs: both import this module, and it imports neither.
"""

from __future__ import annotations

import copy
import functools
import json
from importlib import resources

from llm_finetuning.jsonvalue import JsonObject, JsonValue


@functools.lru_cache(maxsize=1)
def schema() -> JsonObject:
    """The brief's JSON Schema, the single source of truth for types, defaults and descriptions."""
    text = resources.files("llm_finetuning.brief").joinpath("brief.schema.json").read_text(encoding="utf-8")
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("brief.schema.json does not hold a JSON object")
    return data


def object_at(node: JsonObject, key: str) -> JsonObject:
    """`node[key]` when it is a JSON object (a schema's `properties` or `items`, a brief's section), else an empty
    one: what a schema walk or a check of an unvalidated brief reads where a mapping may be missing or wrong."""
    value = node.get(key)
    return value if isinstance(value, dict) else {}


def list_at(node: JsonObject, key: str) -> list[JsonValue]:
    """`node[key]` when it is a JSON array (a schema's `required` or `enum`), else an empty one."""
    value = node.get(key)
    return value if isinstance(value, list) else []


def apply_defaults(data: JsonObject, node: JsonObject | None = None) -> JsonObject:
    """A copy of `data` with every schema default filled in (the one place defaults are applied)."""
    node = schema() if node is None else node
    out = copy.deepcopy(data)
    for key, sub in object_at(node, "properties").items():
        if not isinstance(sub, dict):
            continue
        if key not in out and "default" in sub:
            out[key] = copy.deepcopy(sub["default"])
        value = out.get(key)
        items = object_at(sub, "items")
        if isinstance(value, dict) and sub.get("type") == "object":
            out[key] = apply_defaults(value, sub)
        elif isinstance(value, list) and items.get("type") == "object":
            out[key] = [apply_defaults(v, items) if isinstance(v, dict) else v for v in value]
    return out


def _wants_integer(node: JsonObject) -> bool:
    t = node.get("type")
    return "integer" in t if isinstance(t, list) else t == "integer"


def whole_numbers(data: JsonObject, node: JsonObject | None = None) -> JsonObject:
    """A copy of `data` in which an integer field's float with no fraction is an int (`max_steps: 1e5` ->
    100000): YAML 1.2, which the brief loader follows, reads `1e5` as a float, and TRL wants an int there."""
    node = schema() if node is None else node
    props = object_at(node, "properties")
    out: JsonObject = {}
    for key, value in data.items():
        sub = props.get(key)
        out[key] = _whole_number(value, sub) if isinstance(sub, dict) else value
    return out


def _whole_number(value: JsonValue, node: JsonObject) -> JsonValue:
    """`whole_numbers` for one value of the schema node `node`, at any depth."""
    if isinstance(value, float) and value.is_integer() and _wants_integer(node):
        return int(value)
    if isinstance(value, dict):
        return whole_numbers(value, node)
    items = node.get("items")
    if isinstance(value, list) and isinstance(items, dict):
        return [_whole_number(v, items) for v in value]
    return value


def recipe_defaults() -> JsonObject:
    """The recipe's GRPO starting values as the schema states them (skills and renderer read these)."""
    grpo = object_at(object_at(object_at(schema(), "properties"), "grpo"), "properties")
    return {k: v["default"] for k, v in grpo.items() if isinstance(v, dict) and "default" in v}
