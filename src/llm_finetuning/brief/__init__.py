"""The GRPO brief: schema (brief.schema.json), safe loading, defaults and consistency checks.

Pure: no torch, transformers, trl or vllm. Use `load_brief(path)` to get a checked `Brief` or the list
of every `Problem` with it at once.
"""

from __future__ import annotations

import copy
import functools
import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from llm_finetuning.fileio import sha256_bytes

RECIPE_LEARNING_RATE = 5e-7
RECIPE_BETA = 0.01
MIN_NUM_GENERATIONS = 8


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


@dataclass
class Brief:
    """A loaded brief with defaults applied. `data` is the plain mapping; paths resolve against `folder`."""

    path: Path
    data: dict[str, Any]
    raw: dict[str, Any]
    sha256: str
    text: str = field(repr=False, default="")

    @property
    def folder(self) -> Path:
        return self.path.parent

    @property
    def name(self) -> str:
        return str(self.data["name"])

    def resolve(self, rel: str) -> Path:
        p = Path(rel).expanduser()
        return p if p.is_absolute() else (self.folder / p)

    def section(self, key: str) -> dict[str, Any]:
        value = self.data.get(key, {})
        return value if isinstance(value, dict) else {}

    @property
    def output_dir(self) -> Path:
        return self.resolve(self.data.get("output_dir") or f"runs/{self.name}")


def load_brief(path: str | Path) -> tuple[Brief | None, list[Any]]:
    """Load, validate and default a brief. Returns (brief, errors); brief is None when errors exist.

    Raises `UnusableInput` when the file cannot be read as YAML at all.
    """
    from llm_finetuning.brief.check import check_brief
    from llm_finetuning.brief.load import load_yaml_file

    p = Path(path)
    raw = load_yaml_file(p)
    text = p.read_text(encoding="utf-8")
    errors = check_brief(raw, p.resolve().parent)
    if errors:
        return None, errors
    brief = Brief(path=p.resolve(), data=apply_defaults(raw), raw=raw,
                  sha256=sha256_bytes(text.encode("utf-8")), text=text)
    return brief, []
