"""The plugin's Markdown (skills, agent, command, reference pages) parsed for the skill checks."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
SKILLS = ("finetuning-method-selection", "grpo-rlvr-training", "preference-optimization",
          "eval-harness-first", "lora-qlora-recipes")


@dataclass
class Doc:
    """One Markdown page: its path, frontmatter (empty when it has none) and body."""

    path: Path
    frontmatter: dict[str, Any] = field(default_factory=dict)
    body: str = ""

    @property
    def rel(self) -> str:
        return self.path.relative_to(REPO).as_posix()

    @property
    def name(self) -> str:
        return self.path.parent.name if self.path.name == "SKILL.md" else self.path.stem


def read_doc(path: Path) -> Doc:
    text = path.read_text(encoding="utf-8")
    match = re.match(r"---\n(.*?)\n---\n(.*)", text, re.S)
    if not match:
        return Doc(path, {}, text)
    data = yaml.safe_load(match.group(1))
    return Doc(path, data if isinstance(data, dict) else {"__invalid__": data}, match.group(2))


def skill_docs() -> list[Doc]:
    return [read_doc(REPO / "skills" / name / "SKILL.md") for name in SKILLS]


def bundle_docs() -> list[Doc]:
    refs = sorted((REPO / "references").glob("*.md"))
    paths = [*(REPO / "skills" / n / "SKILL.md" for n in SKILLS), *sorted((REPO / "agents").glob("*.md")),
             REPO / "commands/finetune.md", *refs, REPO / "evals/README.md", REPO / "docs/claude-code.md"]
    return [read_doc(p) for p in paths]
