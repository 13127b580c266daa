"""Code outside `llm_finetuning.brief` reads a brief through its typed sections (`brief.grpo.learning_rate`,
`brief.rewards[0].fn`), never by string key; the whole mapping (`Brief.as_mapping`) is taken only where a
consumer needs all of it, in the modules named below. Checked from the source with `ast`.

The brief object is recognised by its name, as the package names it everywhere: `brief`, `loaded`, or an
attribute `.brief` (`ev.brief`, `self.brief`). mypy catches the rest: `Brief.data` is a `DataSpec`, which
cannot be indexed.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import llm_finetuning

PACKAGE = Path(llm_finetuning.__file__).resolve().parent
BRIEF_NAMES = {"brief", "loaded"}
STRING_KEY_ATTRS = {"data", "raw"}  # the mappings a Brief carried before its sections were typed
# Modules that take the whole mapping, and why. Keep this short: a new entry needs a consumer that really
# copies every field, and a reason here.
AS_MAPPING_ALLOWED = {
    "records/bindings.py": "records hash the defaulted episode section as it stands",
    "gate/fastload.py": "the gate's cache stores the parsed YAML and the defaulted mapping",
}


def is_brief(node: ast.expr) -> bool:
    """`brief`, `loaded`, or `<anything>.brief`."""
    return (isinstance(node, ast.Name) and node.id in BRIEF_NAMES) or \
        (isinstance(node, ast.Attribute) and node.attr == "brief")


def string_key_reads(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, what) of every read of a brief by string key: `brief.data[...]`, `brief.data.get(...)`,
    `brief.raw[...]`, `brief.raw.get(...)`, `brief.section(...)`, and `brief.as_mapping()` (any use)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript):
            target = node.value
            if isinstance(target, ast.Attribute) and target.attr in STRING_KEY_ATTRS and is_brief(target.value):
                yield node.lineno, f"{ast.unparse(target)}[...]"
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            func = node.func
            on_mapping = func.attr == "get" and isinstance(func.value, ast.Attribute) \
                and func.value.attr in STRING_KEY_ATTRS and is_brief(func.value.value)
            if on_mapping or (func.attr in ("section", "as_mapping") and is_brief(func.value)):
                yield node.lineno, f"{ast.unparse(func)}(...)"


def outside_brief() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if not rel.startswith("brief/"):
            yield rel, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def test_the_scan_finds_every_form() -> None:
    source = """
brief.data["grpo"]["learning_rate"]
loaded.data.get("rewards")
ev.brief.raw["hardware"]
self.brief.raw.get("grpo")
brief.section("model")
data = brief.as_mapping()
self.data[self.pos:]      # a byte buffer, not a brief
brief.data.prompt_field   # typed
spec.as_mapping()         # a reward spec, as rewards.build_reward takes it
"""
    found = [what for _, what in sorted(string_key_reads(ast.parse(source)))]
    assert found == ["brief.data[...]", "loaded.data.get(...)", "ev.brief.raw[...]", "self.brief.raw.get(...)",
                     "brief.section(...)", "brief.as_mapping(...)"]


def test_no_code_outside_the_brief_reads_it_by_string_key() -> None:
    found = [f"{rel}:{line}: {what}" for rel, tree in outside_brief() for line, what in string_key_reads(tree)
             if not (what.endswith("as_mapping(...)") and rel in AS_MAPPING_ALLOWED)]
    assert not found, ("read the brief through its typed sections (llm_finetuning.brief.sections), not by key:\n"
                       + "\n".join(found))


def test_every_allowed_whole_mapping_use_is_taken() -> None:
    used = {rel for rel, tree in outside_brief() for _, what in string_key_reads(tree) if what.endswith("as_mapping(...)")}
    assert used == set(AS_MAPPING_ALLOWED), f"AS_MAPPING_ALLOWED names modules that no longer use it: " \
                                            f"{sorted(set(AS_MAPPING_ALLOWED) - used)}"
