"""Generate references/brief-fields.md from the brief's JSON Schema (the single source of truth).

`python -m llm_finetuning.brief.docgen` rewrites the page; `--check` exits 1 when it is stale (CI).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from llm_finetuning.brief import schema
from llm_finetuning.brief.defaults import list_at, object_at
from llm_finetuning.jsonvalue import JsonObject

PAGE = Path("references/brief-fields.md")


def _type(node: JsonObject) -> str:
    """A schema node's type as a table cell: its enum, const, alternatives or JSON type."""
    if "enum" in node:
        return " \\| ".join("null" if e is None else f"`{e}`" for e in list_at(node, "enum"))
    if "const" in node:
        return f"`{node['const']}`"
    if "anyOf" in node:
        return " or ".join(_type(n) for n in list_at(node, "anyOf") if isinstance(n, dict))
    t = node.get("type", "any")
    return " or ".join(str(name) for name in t) if isinstance(t, list) else str(t)


def _bounds(node: JsonObject) -> str:
    """A schema node's limits (minimum, maximum, pattern) in words, Markdown-escaped for a table cell."""
    parts = []
    for key, word in (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="), ("pattern", "matches")):
        if key in node:
            parts.append(f"{word} `{node[key]}`")
    return ", ".join(parts).replace("|", "\\|")


def field_row(name: str, node: JsonObject, required: bool) -> str:
    """One Markdown table row (name, type, default, meaning and limits) for a property of a JSON Schema.

    Shared by the brief's field page and the reward page's argument tables (`rewards.docgen`)."""
    default = "required" if required else (f"`{json.dumps(node['default'])}`" if "default" in node else "optional")
    desc = str(node.get("description", "")).replace("|", "\\|")
    bounds = _bounds(node)
    return f"| `{name}` | {_type(node)} | {default} | {desc}{' (' + bounds + ')' if bounds else ''} |"


def _rows(node: JsonObject, prefix: str, required: set[str]) -> list[str]:
    rows = []
    for key, sub in object_at(node, "properties").items():
        if not isinstance(sub, dict):
            continue
        path = f"{prefix}{key}"
        rows.append(field_row(path, sub, key in required))
        if sub.get("type") == "object" and "properties" in sub:
            rows += _rows(sub, f"{path}.", _names(sub, "required"))
        items = object_at(sub, "items")
        if sub.get("type") == "array" and "properties" in items:
            rows += _rows(items, f"{path}[].", _names(items, "required"))
    return rows


def _names(node: JsonObject, key: str) -> set[str]:
    return {str(name) for name in list_at(node, key)}


def render() -> str:
    s = schema()
    lines = [
        "# Brief fields (format version 1)",
        "",
        "<!-- Generated from src/llm_finetuning/brief/brief.schema.json by "
        "`python -m llm_finetuning.brief.docgen`. Do not edit by hand; CI fails when this page is stale. -->",
        "",
        str(s["description"]),
        "",
        "Paths are resolved relative to the brief's folder. Reward `args` are described in "
        "[reward-functions.md](reward-functions.md). Check a brief with `finetune check BRIEF`.",
        "",
        "| field | type | default | meaning |",
        "| --- | --- | --- | --- |",
        *_rows(s, "", _names(s, "required")),
        "",
    ]
    return "\n".join(lines)


def write_or_check(page_rel: Path, text: str, module: str, argv: list[str] | None = None) -> int:
    """The generated-page CLI shared by every docgen: write the page, or `--check` it (exit 1 when stale).

    `--root DIR` names the repository root (default: the working directory).
    """
    args = sys.argv[1:] if argv is None else argv
    root = Path(args[args.index("--root") + 1]) if "--root" in args else Path.cwd()
    page = root / page_rel
    if "--check" in args:
        if not page.is_file() or page.read_text(encoding="utf-8") != text:
            print(f"{page} is stale: run `python -m {module}`", file=sys.stderr)
            return 1
        return 0
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(text, encoding="utf-8")
    print(f"wrote {page}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return write_or_check(PAGE, render(), "llm_finetuning.brief.docgen", argv)


if __name__ == "__main__":
    sys.exit(main())
