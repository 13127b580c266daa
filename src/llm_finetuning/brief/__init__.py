"""The GRPO brief: schema (brief.schema.json), safe loading, defaults and consistency checks.

Pure: no torch, transformers, trl or vllm. Use `load_brief(path)` to get a checked `Brief` or the list
of every `Problem` with it at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llm_finetuning.brief.defaults import apply_defaults, recipe_defaults, schema, whole_numbers
from llm_finetuning.errors import Problem
from llm_finetuning.fileio import sha256_bytes

RECIPE_LEARNING_RATE = 5e-7
RECIPE_BETA = 0.01
MIN_NUM_GENERATIONS = 8


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


def _whole_numbers(raw: dict[str, Any]) -> dict[str, Any]:
    """`defaults.whole_numbers` on the brief and on each built-in reward's args (by that reward's schema)."""
    from llm_finetuning import reward_registry as registry

    out: dict[str, Any] = whole_numbers(raw)
    rewards = out.get("rewards")
    for spec in rewards if isinstance(rewards, list) else []:
        fn = spec.get("fn") if isinstance(spec, dict) else None
        if isinstance(fn, str) and fn in registry.BUILTINS and isinstance(spec.get("args"), dict):
            spec["args"] = whole_numbers(spec["args"], registry.BUILTINS[fn][1])
    return out


def load_brief(path: str | Path) -> tuple[Brief | None, list[Problem]]:
    """Load, validate and default a brief. Returns (brief, errors); brief is None when errors exist.

    Raises `UnusableInput` when the file cannot be read as YAML at all.
    """
    from llm_finetuning.brief.check import check_brief
    from llm_finetuning.brief.load import load_yaml_file

    p = Path(path)
    raw = _whole_numbers(load_yaml_file(p))
    text = p.read_text(encoding="utf-8")
    errors = check_brief(raw, p.resolve().parent)
    if errors:
        return None, errors
    brief = Brief(path=p.resolve(), data=apply_defaults(raw), raw=raw,
                  sha256=sha256_bytes(text.encode("utf-8")), text=text)
    return brief, []


__all__ = [
    "MIN_NUM_GENERATIONS",
    "RECIPE_BETA",
    "RECIPE_LEARNING_RATE",
    "Brief",
    "apply_defaults",
    "load_brief",
    "recipe_defaults",
    "schema",
]
