"""JSON as it comes off disk or a pipe, before it is parsed into a typed value: one name for it, no `Any`.

A record, a manifest or a child's reply is read as a `JsonObject`; the code that reads it narrows each field
(`isinstance`) or parses the whole into its dataclass once, where it is read. Writers take `object`: whatever
`json.dumps` accepts. Standard library only, so the plugin's guard may import it.
"""

from __future__ import annotations

from typing import TypeAlias, Union

JsonValue: TypeAlias = Union[str, int, float, bool, None, "list[JsonValue]", "dict[str, JsonValue]"]
JsonObject: TypeAlias = "dict[str, JsonValue]"
