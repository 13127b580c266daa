"""A tool-use brief renders its turn limit for TRL and says in the header that `trl grpo` cannot run it."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import yaml

EXAMPLE = Path(__file__).resolve().parents[2] / "examples/calculator-tools"


def test_the_episode_renders_max_tool_calling_iterations_and_the_trl_cli_note(tmp_path: Path) -> None:
    from trl import GRPOConfig

    from llm_finetuning.brief import load_brief
    from llm_finetuning.render import render_run

    shutil.copytree(EXAMPLE, tmp_path / "calc")
    brief, errors = load_brief(tmp_path / "calc/brief.yaml")
    assert brief is not None, errors
    render_run(brief, tmp_path / "run", "test-fingerprint", {})
    text = (tmp_path / "run/grpo_config.yaml").read_text(encoding="utf-8")
    header = [line for line in text.splitlines() if line.startswith("# Note for `trl grpo`")]
    assert header[0] == ("# Note for `trl grpo`: `trl grpo` cannot run this file: it has no flag for tools or "
                         "environments, so it would train single-turn completions without the tools tools:multiply, "
                         "tools:add and the chat template chat_template.jinja; `finetune launch` builds "
                         "GRPOTrainer(tools=... or environment_factory=...) from the brief's episode")
    cfg = yaml.safe_load(text)
    assert cfg["max_tool_calling_iterations"] == 2
    fields = {f.name for f in dataclasses.fields(GRPOConfig)}
    args = GRPOConfig(**{**{k: v for k, v in cfg.items() if k in fields}, "use_cpu": True, "bf16": False})
    assert args.max_tool_calling_iterations == 2
