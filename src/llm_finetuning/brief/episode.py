"""The brief's `episode` section (a tool-use task): what it names, and the checks that need no import.

Pure: the tools and the environment are found by reading their modules' source (as custom rewards are,
`reward_registry.locate_custom`), never imported here. What needs the modules and the model's
tokenizer imported (a JSON schema per tool, a chat template that renders tool calls, a response
parser) runs in a child process: `sampling.episode_probe`, called by `finetune check`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from llm_finetuning import reward_registry as registry
from llm_finetuning.errors import Problem
from llm_finetuning.jsonvalue import JsonObject, JsonValue

EPISODE_REWARDS = ("tool_call",)  # built-ins that only mean something on an episode


@dataclass(frozen=True)
class EpisodeSpec:
    """The defaulted `episode` section."""

    tools: tuple[str, ...]
    environment: str | None
    max_turns: int
    tool_timeout_s: float
    chat_template: str | None

    @classmethod
    def of(cls, data: JsonObject) -> EpisodeSpec | None:
        """The spec of a defaulted brief mapping, or None for a brief without an episode. Also read from a brief
        the schema refused (the checks below run on it): a field of the wrong type reads as absent, and the schema
        error names it."""
        ep = data.get("episode")
        if not isinstance(ep, dict):
            return None
        tools, max_turns, timeout = ep.get("tools"), ep.get("max_turns", 4), ep.get("tool_timeout_s", 10.0)
        return cls(tuple(str(t) for t in tools) if isinstance(tools, list) else (), _text(ep.get("environment")),
                   int(max_turns) if isinstance(max_turns, (int, float)) else 4,
                   float(timeout) if isinstance(timeout, (int, float)) else 10.0, _text(ep.get("chat_template")))

    def code_refs(self) -> list[tuple[str, str]]:
        """(YAML path, `module:name`) of every tool and the environment, in brief order."""
        refs = [(f"episode.tools[{i}]", ref) for i, ref in enumerate(self.tools)]
        return refs + ([("episode.environment", self.environment)] if self.environment else [])


def _text(value: JsonValue) -> str | None:
    return value if isinstance(value, str) else None


def environment_reward_name(spec: EpisodeSpec | None) -> str | None:
    """The name an environment's `get_reward()` is scored under: its class name, as TRL names it."""
    return spec.environment.partition(":")[2] if spec is not None and spec.environment else None


def template_path(spec: EpisodeSpec, folder: Path) -> Path | None:
    """The chat template file the brief names, resolved against its folder."""
    if not spec.chat_template:
        return None
    p = Path(spec.chat_template).expanduser()
    return p if p.is_absolute() else folder / p


def check_episode(data: JsonObject, folder: Path) -> list[Problem]:
    """Problems of the episode section and of rewards that need one, found without importing anything."""
    spec = EpisodeSpec.of(data)
    errors: list[Problem] = []
    found = data.get("rewards")
    rewards: Sequence[JsonValue] = found if isinstance(found, list) else []
    if spec is None:
        for i, r in enumerate(rewards):
            if isinstance(r, dict) and r.get("fn") in EPISODE_REWARDS:
                errors.append(Problem("inconsistent_fields", f"rewards[{i}].fn",
                                      f"{r['fn']} scores tool calls but the brief has no episode section",
                                      "add `episode: {tools: [module:function]}` or remove this reward"))
        return errors
    for path, ref in spec.code_refs():
        try:
            _, problem = registry.locate_custom(ref, folder)
        except (OSError, ValueError) as exc:
            problem = f"{ref!r} cannot be looked up as a module: {exc}"
        if problem:
            errors.append(Problem("tool_not_found", path, problem.replace("module:function", "module:name"),
                                  "put the module next to the brief (or on PYTHONPATH) and check the names"))
    template = template_path(spec, folder)
    if template is not None and not template.is_file():
        errors.append(Problem("missing_file", "episode.chat_template",
                              f"file {spec.chat_template!r} does not exist (looked at {template})",
                              "fix the path (relative to the brief's folder), or set it to null to keep the "
                              "model's own template"))
    return errors
