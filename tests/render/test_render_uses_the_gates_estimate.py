"""`finetune render` takes the memory advice from the estimate the gate judged: the brief is estimated once."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import llm_finetuning.memory
from llm_finetuning.brief import load_brief
from llm_finetuning.cli import cli

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gate"))
from gate_fixtures import prepare_brief  # noqa: E402


def test_render_estimates_memory_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_FINETUNING_CACHE", str(tmp_path / "cache"))
    brief = prepare_brief(tmp_path / "b", "passing")
    estimate_brief = llm_finetuning.memory.estimate_brief
    calls: list[Path] = []

    def counted(loaded: Any) -> Any:
        calls.append(loaded.folder)
        return estimate_brief(loaded)

    monkeypatch.setattr(llm_finetuning.memory, "estimate_brief", counted)
    monkeypatch.chdir(brief.parent)
    result = CliRunner().invoke(cli, ["render", "brief.yaml", "-o", "runs/r1"])
    assert result.exit_code == 0, result.output
    assert len(calls) == 1, f"the brief was estimated {len(calls)} times"
    loaded, _ = load_brief(brief)
    assert loaded is not None
    share = (estimate_brief(loaded).recommend or {}).get("vllm_gpu_memory_utilization")
    rendered = (brief.parent / "runs/r1/grpo_config.yaml").read_text()
    assert share is not None and f"vllm_gpu_memory_utilization: {share}  # the memory estimate's advice" in rendered
