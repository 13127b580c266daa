"""The source bytes of project code (custom rewards, tools, environments) that a confined child runs.

Read once, hashed, and compared with what the records bind, so what runs is what was checked: `module_sources`
reads a ref's module and the modules beside the brief it imports (`rewards.sources`), `VerifiedCode` keeps the
bytes a run's verification read. The child itself is `sandbox.project_code` (docs/security.md, "What runs where").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeAlias

from llm_finetuning.errors import Problem, ProblemError

# One module's source as the confined child loads it: {"source": its text, "file": its path, "package": whether
# it is a package's __init__.py}.
ModuleSource: TypeAlias = dict[str, str | bool]


class CodeNotFound(ProblemError):
    """A module the brief names has no source file to read."""


class CodeChanged(ProblemError):
    """A module file's bytes differ from the sha256 the caller verified (it changed after the check)."""


def module_sources(ref: str, folder: Path, expected: Mapping[str, str] | None = None) -> dict[str, ModuleSource]:
    """The source of `ref`'s module and of the modules beside the brief it imports (the files a record binds,
    `rewards.sources`), read once each; with `expected` (file label -> sha256, as a record binds them) a file whose
    bytes differ raises CodeChanged, so what runs is what was verified."""
    from llm_finetuning.fileio import sha256_bytes
    from llm_finetuning.rewards.sources import file_label, reward_source_files

    folder = Path(folder).resolve()
    out: dict[str, ModuleSource] = {}
    changed = []
    module = ref.partition(":")[0]
    for file in reward_source_files(ref, folder):
        data = file.read_bytes()
        label = file_label(file, folder)
        if expected is not None and expected.get(label) != sha256_bytes(data):
            changed.append(label)
        name = _module_name(file, folder) if file.is_relative_to(folder) else module
        out[name] = {"source": data.decode("utf-8"), "file": str(file), "package": file.name == "__init__.py"}
    if changed:
        raise CodeChanged([Problem("code_changed", "", f"{', '.join(changed)} changed after the run was verified",
                                   "check what changed it, then run `finetune gate` and `finetune render` again")])
    if not out:
        raise CodeNotFound([Problem("code_not_found", "", f"module '{module}' was not found next to the brief "
                                    f"({folder}) nor on the Python path", "put the module next to the brief")])
    return out


@dataclass(frozen=True)
class VerifiedCode:
    """The project code a verified run may run: each file's sha256 as the records bind it (file label -> sha256),
    and the source bytes read and checked against it at verification (ref -> modules, as `module_sources` gives
    them). A ref read at verification runs from those bytes, whatever its files hold later."""

    sha256: dict[str, str] = field(default_factory=dict)
    sources: dict[str, dict[str, ModuleSource]] = field(default_factory=dict)

    @classmethod
    def read(cls, refs: list[str], folder: Path, sha256: dict[str, str]) -> VerifiedCode:
        return cls(dict(sha256), {ref: module_sources(ref, folder, sha256) for ref in refs})

    def modules(self, ref: str, folder: Path) -> dict[str, ModuleSource]:
        return self.sources[ref] if ref in self.sources else module_sources(ref, folder, self.sha256)


def _module_name(file: Path, folder: Path) -> str:
    parts = list(file.relative_to(folder).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
