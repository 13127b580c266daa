"""Safe YAML loading for briefs.

A brief is small, hand-written configuration. The loader refuses anything that is not: files over
1 MiB, anchors and aliases (the billion-laughs bomb needs them), Python tags (SafeLoader), duplicate
keys, and non-mapping documents. Every refusal is an `UnusableInput` with a one-line reason.

Numbers read as YAML 1.2 reads them: PyYAML follows YAML 1.1, where a float needs a dot and a signed
exponent, so `5e-7` (how every TRL config writes a learning rate), `1E-5` and `1e5` would be strings.
`NumberLoader` adds the YAML 1.2 forms; `safe_load` reads any other brief-like YAML (a TRL config) with it.

A brief is returned as a `JsonObject`, the JSON the schema validates: the schema admits JSON's types only, so a
value PyYAML makes beyond them (a date, `!!binary`, a number as a mapping key) is refused in every typed field and reaches the brief only
inside a free-form object (`grpo.overrides`, `rewards[*].args`), as the value it is.
"""

from __future__ import annotations

import re
from collections.abc import Hashable
from pathlib import Path

import yaml

from llm_finetuning.errors import UnusableInput
from llm_finetuning.jsonvalue import JsonObject

MAX_BRIEF_BYTES = 1 << 20


# The exponent forms YAML 1.2 reads as floats and YAML 1.1 does not (1.1 wants a dot and a signed exponent):
# 5e-7, 1E-5, 1e5, 2.5e3. Plain integers and dotted floats keep their YAML 1.1 resolvers.
_EXPONENT_FLOAT = re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$")


class NumberLoader(yaml.SafeLoader):
    """SafeLoader that reads YAML 1.2 floats (`5e-7`, `1e5`) as numbers, as TRL users write them."""


NumberLoader.add_implicit_resolver("tag:yaml.org,2002:float", _EXPONENT_FLOAT, list("-+0123456789."))


def safe_load(text: str) -> object:
    """`yaml.safe_load` with YAML 1.2 floats: for brief-like YAML that is not a brief (a TRL config); the caller
    narrows what it reads."""
    return yaml.load(text, Loader=NumberLoader)  # noqa: S506 - NumberLoader is a SafeLoader


class _BriefLoader(NumberLoader):
    """NumberLoader without aliases and with duplicate keys as errors."""

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:  # noqa: D401
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]  # untyped in types-PyYAML
            raise yaml.MarkedYAMLError(
                None, None, "anchors and aliases (*name) are not allowed in a brief", event.start_mark
            )
        event = self.peek_event()  # type: ignore[no-untyped-call]  # untyped in types-PyYAML
        anchor = getattr(event, "anchor", None)
        if anchor is not None:
            raise yaml.MarkedYAMLError(
                None, None, f"anchors (&{anchor}) are not allowed in a brief", event.start_mark
            )
        return super().compose_node(parent, index)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Hashable, object]:
        if isinstance(node, yaml.MappingNode):
            seen: dict[object, yaml.Mark] = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                try:
                    hash(key)
                except TypeError as exc:
                    raise yaml.MarkedYAMLError(
                        None, None, "a mapping key must be a plain value", key_node.start_mark
                    ) from exc
                if key in seen:
                    raise yaml.MarkedYAMLError(
                        None, None, f"duplicate key '{key}' (first at line {seen[key].line + 1})", key_node.start_mark
                    )
                seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)


def _one_line(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or getattr(exc, "context", None) or str(exc)
    problem = " ".join(str(problem).split())
    if "found character '\\t'" in problem or "'\\t'" in problem:
        problem = "a tab character; YAML indents with spaces only"
    if isinstance(exc, yaml.constructor.ConstructorError) and "could not determine a constructor" in problem:
        problem = f"{problem} (tags such as !!python/object are refused)"
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return f"{where}{problem}"


def load_yaml_text(text: str, source: str = "<brief>") -> JsonObject:
    if len(text.encode("utf-8", errors="replace")) > MAX_BRIEF_BYTES:
        raise UnusableInput(f"{source} is larger than 1 MiB; a brief is a short YAML file",
                            "point data.train at the data instead of pasting it into the brief")
    try:
        docs = list(yaml.load_all(text, Loader=_BriefLoader))  # noqa: S506 - _BriefLoader is a SafeLoader
    except yaml.YAMLError as exc:
        raise UnusableInput(f"{source} is not valid YAML: {_one_line(exc)}", "fix the YAML at that line") from None
    except RecursionError:
        raise UnusableInput(f"{source} nests too deeply to be a brief", "flatten the YAML") from None
    if not docs:
        raise UnusableInput(f"{source} is empty", "start from examples/math-exact/brief.yaml")
    if len(docs) != 1:
        raise UnusableInput(f"{source} holds {len(docs)} YAML documents; a brief is exactly one",
                            "keep one document (remove the extra '---')")
    doc = docs[0]
    if not isinstance(doc, dict):
        kind = "empty" if doc is None else f"a {type(doc).__name__}"
        raise UnusableInput(f"{source} is {kind}, not a mapping of brief fields",
                            "start from examples/math-exact/brief.yaml")
    bad_keys = [k for k in doc if not isinstance(k, str)]
    if bad_keys:
        raise UnusableInput(f"{source} has a non-string top-level key {bad_keys[0]!r}", "use field names from the brief format")
    return doc


def load_yaml_file(path: Path) -> JsonObject:
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise UnusableInput(f"{path} does not exist", "give the path of a brief YAML file") from None
    except OSError as exc:
        raise UnusableInput(f"{path} cannot be read: {exc.strerror}",
                            "make the file readable by this user, or give another path") from None
    if path.is_dir():
        raise UnusableInput(f"{path} is a directory", "give the path of the brief YAML file inside it")
    if size > MAX_BRIEF_BYTES:
        raise UnusableInput(f"{path} is {size / 2**20:.1f} MiB; a brief is at most 1 MiB of YAML",
                            "point data.train at the data instead of pasting it into the brief")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise UnusableInput(f"{path} cannot be read: {exc.strerror}",
                            "make the file readable by this user, or give another path") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UnusableInput(f"{path} is not UTF-8 text (byte {exc.start})", "save the brief as UTF-8") from None
    return load_yaml_text(text, source=str(path))
