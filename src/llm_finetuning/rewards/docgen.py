"""Generate references/reward-functions.md: hand-written prose plus the rewards' argument tables and code.

The prose lives in `reward-functions.template.md` next to this module. Lines of the template that are
exactly a directive are replaced:

- `<!-- args: NAME -->`   the argument table of built-in NAME, from its schema in registry.py
- `<!-- code: PATH -->`   the whole file src/llm_finetuning/PATH in a fenced block

`python -m llm_finetuning.rewards.docgen` rewrites the page; `--check` exits 1 when the page differs from
what the template and the code give (CI), so the code shown can never drift from the code that runs.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from llm_finetuning import reward_registry as registry
from llm_finetuning.brief.docgen import field_row, write_or_check

PAGE = Path("references/reward-functions.md")
TEMPLATE = Path(__file__).with_name("reward-functions.template.md")
PACKAGE_DIR = Path(__file__).resolve().parents[1]  # src/llm_finetuning
_DIRECTIVE = re.compile(r"^<!-- (args|code): (\S+) -->$")


def args_table(fn: str) -> str:
    """A Markdown table of one built-in's arguments."""
    schema = registry.BUILTINS[fn][1]
    rows = ["| arg | type | default | meaning |", "| --- | --- | --- | --- |"]
    props = schema.get("properties", {})
    required = _required(schema)
    rows += [field_row(arg, sub, arg in required) for arg, sub in (props.items() if isinstance(props, dict) else [])
             if isinstance(sub, dict)]
    rules = []
    for key in ("oneOf", "anyOf"):
        options = schema.get(key)
        if isinstance(options, list):
            texts = [" + ".join(f"`{r}`" for r in _required(o)) for o in options]
            rules.append("Give exactly one of: " + ", ".join(texts) + ".")
    if "not" in schema:
        rules.append("Do not combine: " + ", ".join(f"`{r}`" for r in _required(schema["not"])) + ".")
    return "\n".join(rows + ([""] + rules if rules else []))


def _required(schema: object) -> list[str]:
    """The property names a (sub)schema lists as `required`."""
    names = schema.get("required", []) if isinstance(schema, dict) else []
    return [str(n) for n in names] if isinstance(names, list) else []


def code_block(rel: str, src_dir: Path) -> str:
    """The file src/llm_finetuning/REL as a fenced block, headed by its path."""
    path = src_dir / rel
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist (named in {TEMPLATE.name})")
    text = path.read_text(encoding="utf-8")
    fence = "````" if "```" in text else "```"
    return f"`src/llm_finetuning/{rel}`\n\n{fence}python\n{text.rstrip()}\n{fence}"


def render(src_dir: Path = PACKAGE_DIR, template: Path = TEMPLATE) -> str:
    out = []
    for line in template.read_text(encoding="utf-8").splitlines():
        m = _DIRECTIVE.match(line.strip())
        if not m:
            out.append(line)
        elif m.group(1) == "args":
            out.append(args_table(m.group(2)))
        else:
            out.append(code_block(m.group(2), src_dir))
    return "\n".join(out).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    return write_or_check(PAGE, render(), "llm_finetuning.rewards.docgen", argv)


if __name__ == "__main__":
    sys.exit(main())
